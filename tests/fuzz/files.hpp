// A file for the readers under fuzzing: each input is written to one path in a
// folder of the process's own, since the readers take paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

namespace fuzz {

inline std::filesystem::path input_file(const char* name, const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path folder = [] {
    auto made = std::filesystem::temp_directory_path() / ("seqpool-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(made);
    return made;
  }();
  const std::filesystem::path path = folder / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  return path;
}

}  // namespace fuzz
