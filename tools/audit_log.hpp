// seqpool-run --audit: what the space counted during each step's forward, one
// JSON object a line in DIR/audit.jsonl (SPEC section 9).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include <seqpool/space/audit.hpp>

#include "input_error.hpp"
#include "new_file.hpp"

namespace seqpool::tool {

/// Throws input_error (status 2) where the file cannot be made or written.
class audit_log {
 public:
  /// Writes nothing unless `wanted`; the file is made new (new_file).
  audit_log(bool wanted, const std::filesystem::path& out) : path_(out / "audit.jsonl") {
    if (!wanted) return;
    try {
      file_.emplace(path_, true);
    } catch (const std::exception& unmade) {
      throw input_error(std::string("--audit: ") + unmade.what());
    }
  }

  /// Step `step`'s line, and its results published by `publish()`, all or
  /// none: the line is written first, so that a step that cannot be audited
  /// publishes nothing, and cut off again where `publish()` throws, so that a
  /// step whose results are not published leaves no line. `where` ("step N")
  /// begins the message of a line that cannot be written or cut off.
  template <class Publish>
  void record(const std::string& where, std::size_t step, const seqpool::audit_counts& counts, Publish&& publish) {
    if (!file_) {
      publish();
      return;
    }
    const std::string line = nlohmann::ordered_json{{"step", step},
                                                    {"uploads", counts.uploads},
                                                    {"upload_bytes", counts.upload_bytes},
                                                    {"downloads", counts.downloads},
                                                    {"waits", counts.waits},
                                                    {"allocations", counts.allocations}}
                                 .dump() +
                             '\n';
    if (!file_->write(line.data(), line.size())) {
      const int why = errno;
      file_->truncate(size_);  // a part of the line written, cut off where it can be
      errno = why;
      fail(where, "cannot write");
    }
    try {
      publish();
    } catch (const std::exception& unpublished) {
      // What publish() says (the request, where an earlier run's file is left) is kept either way.
      if (!file_->truncate(size_))
        throw input_error(unpublished.what() + std::string("; and ") + path_.string() +
                          ": cannot take back the step's line: " + std::strerror(errno));
      throw;
    }
    size_ += line.size();
  }

  /// Closes the file after the last step: a failing close is a failed write
  /// (NFS reports some only there).
  void finish() {
    if (file_ && !file_->close()) fail("--audit", "cannot write");
  }

 private:
  [[noreturn]] void fail(const std::string& where, const char* what) const {
    throw input_error(where + ": " + path_.string() + ": " + what + ": " + std::strerror(errno));
  }

  std::filesystem::path path_;
  std::optional<new_file> file_;
  std::size_t size_ = 0;  ///< the bytes of the lines of steps published
};

}  // namespace seqpool::tool
