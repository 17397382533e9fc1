// How a result row, finished in float, becomes the output's values: kept or
// rounded to 16 bits column by column, quantized on calibration ranges column
// by column, packed into sign bits 8 columns a value, or listed by id as sparse
// weights. The host's passes and the device's kernels store through the
// same encoding.
#pragma once

#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/to_float.hpp>
#include <seqpool/quantized.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool::detail {

/// Columns of a result row that one output value holds: 8 for packed sign bits, 1 otherwise.
template <class Result>
inline constexpr int columns_per_value = std::is_same_v<Result, binary> || std::is_same_v<Result, ubinary> ? 8 : 1;

/// The output values a result row of `width` columns takes, `per_value` columns a value.
SEQPOOL_HOST_DEVICE constexpr std::int64_t values_of(std::int64_t width, std::int64_t per_value) {
  return per_value == 1 ? width : (width + per_value - 1) / per_value;  // no division for most result types
}

/// The same for results of type Result.
template <class Result>
SEQPOOL_HOST_DEVICE constexpr std::int64_t values_of(std::int64_t width) {
  return values_of(width, columns_per_value<Result>);
}

enum class encoding_kind : std::uint8_t { rounded, ranged, packed, listed };

template <class Result>
inline constexpr encoding_kind encoding_kind_of = ranged_element<Result>          ? encoding_kind::ranged
                                                  : sparse_element<Result>        ? encoding_kind::listed
                                                  : columns_per_value<Result> > 1 ? encoding_kind::packed
                                                                                  : encoding_kind::rounded;

template <class Result, encoding_kind Kind = encoding_kind_of<Result>>
struct result_encoding;

/// float results kept, 16-bit ones rounded to nearest even, a column at a time.
template <class Result>
struct result_encoding<Result, encoding_kind::rounded> {
  SEQPOOL_HOST_DEVICE Result encode(float value, std::int64_t) const { return round_to<Result>(value); }
};

/// The step of a calibration range, as sentence-transformers computes it in float.
SEQPOOL_HOST_DEVICE constexpr float step_of(float lower, float upper) { return (upper - lower) / 255.0f; }

/// int8 and uint8, as sentence-transformers' quantize_embeddings computes them
/// in float: level = (value − lower[c]) / step[c] (less 128 for int8), step[c]
/// being step_of(lower[c], upper[c]), truncated toward zero. Values outside the
/// range saturate at the type's ends, and NaN is 0. Written without branches,
/// so that a host loop over a row vectorises.
template <class Result>
struct result_encoding<Result, encoding_kind::ranged> {
  const float* lower;  ///< per result column, in the space's memory
  const float* step;

  SEQPOOL_HOST_DEVICE Result encode(float value, std::int64_t column) const {
    constexpr bool is_signed = std::is_same_v<Result, std::int8_t>;
    constexpr float lowest = is_signed ? -128.0f : 0.0f;
    constexpr float highest = is_signed ? 127.0f : 255.0f;
    float level = (value - lower[column]) / step[column];
    if constexpr (is_signed) level -= 128.0f;
    level = level > lowest ? level : lowest;  // NaN takes the lowest here, and 0 below
    level = level < highest ? level : highest;
    return value == value ? static_cast<Result>(level) : Result{0};
  }
};

/// binary and ubinary: a value holds the sign bits of 8 columns, the first in
/// its high bit; a bit is set where the column is above 0 (NaN is not). A row
/// whose width is no multiple of 8 ends in a value padded with clear bits.
template <class Result>
struct result_encoding<Result, encoding_kind::packed> {
  /// The value of the first `count` (at most 8) of the floats at `columns`.
  /// Branch-free, so that a host loop of whole values (count 8) vectorises.
  SEQPOOL_HOST_DEVICE Result pack(const float* columns, int count) const {
    unsigned byte = 0;
    for (int e = 0; e < 8; ++e) byte = byte << 1 | static_cast<unsigned>(e < count && columns[e] > 0.0f);
    if constexpr (std::is_same_v<Result, binary>)
      return binary{static_cast<std::int8_t>(static_cast<int>(byte) - 128)};
    else
      return ubinary{static_cast<std::uint8_t>(byte)};
  }
};

/// Sparse results: a request's weights, finished in float in the workspace,
/// become the list of its ids whose weight is above the floor (list_sparse):
/// its sparse_list says all that takes, so the launch carries nothing.
template <class Result>
struct result_encoding<Result, encoding_kind::listed> {};

}  // namespace seqpool::detail
