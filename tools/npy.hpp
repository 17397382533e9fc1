// Reading and writing NumPy .npy files: the arrays seqpool-run exchanges.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <seqpool/error.hpp>
#include <seqpool/float16.hpp>
#include <seqpool/quantized.hpp>
#include <seqpool/sparse.hpp>

#include "input_error.hpp"
#include "new_file.hpp"

namespace seqpool::tool {

/// A C-order array: its dtype as NumPy writes it ("<f4", "<f2", "<u2", "<i2"), shape and bytes.
struct npy_array {
  std::string descr;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;

  std::int64_t count() const {
    std::int64_t total = 1;
    for (const std::int64_t extent : shape) total *= extent;
    return total;
  }
};

namespace detail {

/// `text` without the whitespace Python's tokenizer skips around it (a header
/// written on Windows ends in "\r\n").
inline std::string_view trim(std::string_view text) {
  constexpr std::string_view blank = " \t\f\r\n";
  const auto first = text.find_first_not_of(blank);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(blank) - first + 1);
}

/// A shape as Python writes a tuple of ints: `()`, `(3,)`, `(2, 3)` or `(2, 3,)`
/// — a tuple of one needs its comma (`(3)` is an int) — each a decimal whose
/// digits do not start with a zero, or zeros alone, as Python's literals are.
/// With `python2_longs` (format 1.0 and 2.0, which Python 2 wrote) an extent
/// may end in Python 2's `L`, `(2L, 3L)`, which NumPy drops there.
inline std::vector<std::int64_t> parse_shape(std::string_view text, const std::string& file, bool python2_longs) {
  const auto malformed = [&] { return input_error(file + ": malformed shape in the .npy header"); };
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') throw malformed();
  std::vector<std::int64_t> shape;
  std::string_view inside = text.substr(1, text.size() - 2);
  bool ends_in_comma = false;
  while (!trim(inside).empty()) {
    const auto comma = inside.find(',');
    std::string_view item = trim(inside.substr(0, comma));
    if (python2_longs && item.size() > 1 && item.back() == 'L') item.remove_suffix(1);
    std::int64_t extent = 0;
    if (item.empty() || item.find_first_not_of("0123456789") != std::string_view::npos ||
        (item.front() == '0' && item.find_first_not_of('0') != std::string_view::npos))
      throw malformed();
    // Past int64 no array has the extent (whether the file's bytes hold the shape is read_npy's to check).
    for (const char digit : item)
      if (__builtin_mul_overflow(extent, 10, &extent) || __builtin_add_overflow(extent, digit - '0', &extent))
        throw input_error(file + ": the .npy header's shape has an extent past int64: " + std::string(item));
    shape.push_back(extent);
    ends_in_comma = comma != std::string_view::npos;
    if (!ends_in_comma) break;
    inside = inside.substr(comma + 1);
  }
  if (shape.size() == 1 && !ends_in_comma) throw malformed();
  return shape;
}

/// What a .npy header's dict says, as NumPy writes it — `{'descr': '<f4',
/// 'fortran_order': False, 'shape': (2, 3), }` and spaces — read as NumPy reads
/// it: a dict of exactly these three keys, each once, in any order, and nothing
/// after it.
struct npy_header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

/// Takes a string quoted alike at both ends ('…' or "…") off the front of `text`.
inline std::string_view take_quoted(std::string_view& text, const std::string& malformed) {
  if (text.empty() || (text.front() != '\'' && text.front() != '"')) throw input_error(malformed);
  const auto end = text.find(text.front(), 1);
  if (end == std::string_view::npos) throw input_error(malformed);
  const std::string_view quoted = text.substr(1, end - 1);
  text = trim(text.substr(end + 1));
  return quoted;
}

/// `python2_longs`: as parse_shape() takes it.
inline npy_header parse_header(std::string_view text, const std::string& file, bool python2_longs) {
  const std::string malformed = file + ": malformed .npy header";
  text = trim(text);
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') throw input_error(malformed);
  text = trim(text.substr(1, text.size() - 2));
  npy_header header;
  constexpr std::string_view keys[] = {"descr", "fortran_order", "shape"};
  bool seen[std::size(keys)] = {};
  while (!text.empty()) {
    const std::string_view key = take_quoted(text, malformed);
    if (text.empty() || text.front() != ':') throw input_error(malformed);
    text = trim(text.substr(1));
    const auto which = static_cast<std::size_t>(std::ranges::find(keys, key) - std::begin(keys));
    if (which == std::size(keys))
      throw input_error(file + ": the .npy header has a key " + seqpool::detail::quoted(key) + " NumPy does not write");
    if (which == 0) {
      header.descr = take_quoted(text, file + ": malformed descr in the .npy header");
    } else if (which == 1) {
      const std::string_view value = text.substr(0, text.find_first_of(",} \t\n"));
      if (value != "True" && value != "False") throw input_error(file + ": malformed fortran_order in the .npy header");
      header.fortran_order = value == "True";
      text = trim(text.substr(value.size()));
    } else {
      const auto end = text.find(')');
      if (end == std::string_view::npos) throw input_error(file + ": malformed shape in the .npy header");
      header.shape = parse_shape(text.substr(0, end + 1), file, python2_longs);
      text = trim(text.substr(end + 1));
    }
    if (seen[which]) throw input_error(file + ": the .npy header has '" + std::string(key) + "' twice");
    seen[which] = true;
    if (text.empty()) break;
    if (text.front() != ',') throw input_error(malformed);
    text = trim(text.substr(1));
  }
  for (std::size_t k = 0; k < std::size(keys); ++k)
    if (!seen[k]) throw input_error(file + ": the .npy header has no '" + std::string(keys[k]) + "'");
  return header;
}

}  // namespace detail

/// The dtypes a reader of .npy files takes, and how its error names them.
struct npy_dtypes {
  std::vector<std::string_view> accepted;  ///< each "<f4", "<f2", "<u2" or "<i2"
  std::string_view described;              ///< e.g. "weights are <f4"
};

inline const npy_dtypes hidden_dtypes{{"<f4", "<f2", "<u2", "<i2"},
                                      "hidden states are <f4, <f2, or bfloat16 bits as <u2 or <i2"};
inline const npy_dtypes weight_dtypes{{"<f4"}, "weights are <f4"};
inline const npy_dtypes range_dtypes{{"<f4"}, "calibration ranges are <f4"};

/// Reads an .npy file (format 1.0, 2.0 or 3.0, any header length). Rejects
/// Fortran order, dtypes other than `dtypes` accepts, and data shorter or longer
/// than the shape says, before allocating anything the file does not back.
inline npy_array read_npy(const std::filesystem::path& path, const npy_dtypes& dtypes) {
  const std::string file = path.string();
  if (std::error_code ignored; std::filesystem::is_directory(path, ignored))
    throw input_error(file + ": is a folder, not an .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(file + ": cannot open");
  char magic[8];
  if (!in.read(magic, sizeof magic) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw input_error(file + ": not an .npy file");
  const int major = static_cast<unsigned char>(magic[6]);
  const int minor = static_cast<unsigned char>(magic[7]);
  if (major < 1 || major > 3 || minor != 0)
    throw input_error(file + ": unsupported .npy format version " + std::to_string(major) + "." +
                      std::to_string(minor) + " (1.0, 2.0 and 3.0 are read)");
  unsigned char length_bytes[4] = {};
  const int length_size = major == 1 ? 2 : 4;
  if (!in.read(reinterpret_cast<char*>(length_bytes), length_size)) throw input_error(file + ": truncated .npy header");
  std::uint32_t header_length = 0;
  for (int i = length_size - 1; i >= 0; --i) header_length = header_length << 8 | length_bytes[i];
  const auto file_size = static_cast<std::uint64_t>(std::filesystem::file_size(path));
  const std::uint64_t data_begin = 8 + length_size + static_cast<std::uint64_t>(header_length);
  if (data_begin > file_size) throw input_error(file + ": truncated .npy header");
  std::string header(header_length, '\0');
  in.read(header.data(), header_length);

  detail::npy_header said = detail::parse_header(header, file, major <= 2);
  npy_array array;
  array.descr = std::move(said.descr);
  if (std::find(dtypes.accepted.begin(), dtypes.accepted.end(), array.descr) == dtypes.accepted.end())
    throw input_error(file + ": dtype " + seqpool::detail::quoted(array.descr) + " is not supported (" +
                      std::string(dtypes.described) + ")");
  if (said.fortran_order) throw input_error(file + ": Fortran-order arrays are not supported; save in C order");
  array.shape = std::move(said.shape);

  const std::uint64_t item_size = static_cast<std::uint64_t>(array.descr.back() - '0');
  std::uint64_t bytes = item_size;
  for (const std::int64_t extent : array.shape) {
    if (extent != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(extent))
      throw input_error(file + ": the shape is too large");
    bytes *= static_cast<std::uint64_t>(extent);
  }
  if (file_size - data_begin != bytes) {
    std::ostringstream message;
    message << file << ": the shape needs " << bytes << " bytes of data, the file has " << file_size - data_begin;
    throw input_error(message.str());
  }
  array.data.resize(bytes);
  if (!in.read(reinterpret_cast<char*>(array.data.data()), static_cast<std::streamsize>(bytes)))
    throw input_error(file + ": truncated data");
  return array;
}

/// The NumPy dtype of a result type, as a .npy header writes it: float32 as
/// <f4, float16 as <f2, bfloat16, which NumPy lacks, as its bits in <u2 (as
/// hidden states may be read); int8 and binary as |i1, uint8 and ubinary as |u1
/// (sentence-transformers' dtypes); a sparse entry as a record of an <i4 id and
/// an <f4 weight.
template <class T>
constexpr const char* npy_descr() {
  if constexpr (std::is_same_v<T, float>)
    return "'<f4'";
  else if constexpr (std::is_same_v<T, seqpool::half>)
    return "'<f2'";
  else if constexpr (std::is_same_v<T, seqpool::bfloat16>)
    return "'<u2'";
  else if constexpr (std::is_same_v<T, std::int8_t> || std::is_same_v<T, seqpool::binary>)
    return "'|i1'";
  else if constexpr (std::is_same_v<T, seqpool::sparse_entry>)
    return "[('id', '<i4'), ('weight', '<f4')]";
  else
    return "'|u1'";
}

/// Writes `values` as an array of `shape`, of npy_descr<T>(), in format 1.0,
/// into a new file at `path` (new_file: never through what the name held).
/// Where the write fails, what it wrote is removed.
template <class T>
void write_npy(const std::filesystem::path& path, std::span<const T> values, const std::vector<std::int64_t>& shape) {
  std::string dims;
  for (const std::int64_t extent : shape) dims += std::to_string(extent) + (shape.size() == 1 ? "," : ", ");
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header =
      "{'descr': " + std::string(npy_descr<T>()) + ", 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic, version, length and header together are a multiple of 64 bytes, ending in a newline.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string preamble("\x93NUMPY\x01\x00", 8);
  preamble += static_cast<char>(header.size() & 0xff);
  preamble += static_cast<char>(header.size() >> 8);
  preamble += header;

  new_file file(path);
  int failure = 0;
  if (!file.write(preamble.data(), preamble.size()) || !file.write(values.data(), values.size_bytes())) failure = errno;
  if (!file.close() && failure == 0) failure = errno;
  if (failure != 0) {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    throw input_error(path.string() + ": cannot write: " + std::strerror(failure));
  }
}

}  // namespace seqpool::tool
