// What seqpool-run makes in its output folder: folders, and files each made
// new, never through whatever the name held before.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include "input_error.hpp"

namespace seqpool::tool {

/// A file made at `path` for writing. What the name held — a file, a FIFO
/// (whose open would wait for a reader) or a symbolic link (which a write would
/// follow out of the folder) — is removed first, and the file is made only
/// where nothing holds the name then (O_EXCL, O_NOFOLLOW), so that a link made
/// there after the removal is refused, not followed; a folder is refused.
class new_file {
 public:
  /// Appending where `append` (each write at the end, after a truncation too).
  explicit new_file(const std::filesystem::path& path, bool append = false) {
    if (std::filesystem::is_directory(std::filesystem::symlink_status(path)))
      throw input_error(path.string() + " is a folder");
    std::filesystem::remove(path);
    descriptor_ =
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : 0), 0666);
    if (descriptor_ < 0) throw input_error(path.string() + ": cannot make it: " + std::strerror(errno));
  }
  new_file(const new_file&) = delete;
  new_file& operator=(const new_file&) = delete;
  ~new_file() {
    if (descriptor_ >= 0) ::close(descriptor_);
  }

  /// Writes all `size` bytes, through interrupted and partial writes; false,
  /// errno saying why, where it cannot.
  bool write(const void* bytes, std::size_t size) {
    const auto* next = static_cast<const char*>(bytes);
    while (size > 0) {
      const ::ssize_t written = ::write(descriptor_, next, size);
      if (written < 0 && errno == EINTR) continue;
      if (written == 0) errno = EIO;  // no progress and no reason given
      if (written <= 0) return false;
      next += written;
      size -= static_cast<std::size_t>(written);
    }
    return true;
  }

  /// Cuts the file to its first `size` bytes; false, errno saying why, where it cannot.
  bool truncate(std::size_t size) { return ::ftruncate(descriptor_, static_cast<::off_t>(size)) == 0; }

  /// Closes the file; false, errno saying why, where the close fails: a failed
  /// write too (NFS reports some only there).
  bool close() {
    const int closed = ::close(descriptor_);
    descriptor_ = -1;
    return closed == 0;
  }

 private:
  int descriptor_ = -1;
};

/// Makes the folder `path`, and those above it, where they are missing; an
/// error begins with `what`, which says whose folder it is (`--out`, a part's).
inline void make_folder(const std::filesystem::path& path, const std::string& what) {
  if (path.empty()) throw input_error(what + ": names no folder");
  std::error_code failed;
  std::filesystem::create_directories(path, failed);
  if (failed) throw input_error(what + ": cannot make the folder " + path.string() + ": " + failed.message());
}

}  // namespace seqpool::tool
