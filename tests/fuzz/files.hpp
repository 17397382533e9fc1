// A file for the readers under fuzzing: each input is written to one path in a
// folder of the process's own, since the readers take paths; the folder goes
// when the process exits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include <unistd.h>

namespace fuzz {

/// The process's folder, made on first use and removed at exit.
struct process_folder {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("seqpool-fuzz-" + std::to_string(getpid()));

  process_folder() { std::filesystem::create_directories(path); }
  ~process_folder() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  process_folder(const process_folder&) = delete;
  process_folder& operator=(const process_folder&) = delete;
};

inline std::filesystem::path input_file(const char* name, const std::uint8_t* data, std::size_t size) {
  static const process_folder folder;
  const std::filesystem::path path = folder.path / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  return path;
}

}  // namespace fuzz
