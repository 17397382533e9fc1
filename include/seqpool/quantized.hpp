// The quantized result types of embeddings for vector databases: int8 and
// uint8 values on per-dimension calibration ranges, and binary and ubinary
// sign bits packed 8 dimensions a byte, as sentence-transformers'
// quantize_embeddings defines them.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>

namespace seqpool {

/// Sign bits packed 8 dimensions a byte, the first dimension in the high bit
/// (numpy.packbits), each row padded to whole bytes with clear bits
/// (numpy.packbits(x > 0, axis=-1)), stored as the byte minus 128:
/// sentence-transformers' "binary" precision, an int8 tensor.
struct binary {
  std::int8_t bits;
};

/// The same sign bits as the unsigned byte itself: sentence-transformers'
/// "ubinary" precision, a uint8 tensor.
struct ubinary {
  std::uint8_t bits;
};

static_assert(sizeof(binary) == 1 && std::is_trivially_copyable_v<binary>);
static_assert(sizeof(ubinary) == 1 && std::is_trivially_copyable_v<ubinary>);

/// Results quantized as they are stored: int8 and uint8 on calibration ranges,
/// binary and ubinary sign bits.
template <class T>
concept quantized_element = std::same_as<T, std::int8_t> || std::same_as<T, std::uint8_t> ||
                            std::same_as<T, binary> || std::same_as<T, ubinary>;

/// Results that need calibration ranges: int8 and uint8.
template <class T>
concept ranged_element = std::same_as<T, std::int8_t> || std::same_as<T, std::uint8_t>;

/// Per-dimension calibration ranges of int8 and uint8 results, host arrays of
/// one float a result column: dimension c of a result maps [lower[c], upper[c]]
/// onto the type's 256 values (sentence-transformers' `ranges`, rows 0 and 1).
struct quantization_ranges {
  std::span<const float> lower;
  std::span<const float> upper;
};

}  // namespace seqpool
