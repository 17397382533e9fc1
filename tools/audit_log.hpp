// seqpool-run --audit: what the space counted during each step's forward, one
// JSON object a line in DIR/audit.jsonl (SPEC section 9).
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <seqpool/space/audit.hpp>

#include "npy.hpp"

namespace seqpool::tool {

/// Throws input_error (status 2) where the file cannot be made or written.
class audit_log {
 public:
  /// Writes nothing unless `wanted`.
  audit_log(bool wanted, const std::filesystem::path& out) : path_(out / "audit.jsonl") {
    if (!wanted) return;
    file_.open(path_, std::ios::trunc);
    if (!file_) throw input_error(path_.string() + ": cannot write");
  }

  /// Step `step`'s line; `where` ("step N") begins the message of a line that cannot be written.
  void record(const std::string& where, std::size_t step, const seqpool::audit_counts& counts) {
    if (!file_.is_open()) return;
    file_ << nlohmann::ordered_json{{"step", step},
                                    {"uploads", counts.uploads},
                                    {"upload_bytes", counts.upload_bytes},
                                    {"downloads", counts.downloads},
                                    {"waits", counts.waits},
                                    {"allocations", counts.allocations}}
                 .dump()
          << std::endl;
    if (!file_) throw input_error(where + ": " + path_.string() + ": cannot write");
  }

 private:
  std::filesystem::path path_;
  std::ofstream file_;
};

}  // namespace seqpool::tool
