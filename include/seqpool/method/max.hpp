// MAX pooling: the column-wise maximum of the prompt's rows.
#pragma once

#include <cstdint>
#include <string_view>

#include <cuda/std/limits>

#include <seqpool/method/concepts.hpp>

namespace seqpool::method {

/// A chunked request keeps its running maximum. The comparison is written so
/// that it vectorises; a NaN in a column is not guaranteed to propagate.
struct max {
  static constexpr method_kind kind = method_kind::sequence;
  static constexpr std::string_view name = "max";
  static constexpr bool keeps_state = true;
  static constexpr instruction_rule instruction = instruction_rule::excluded;

  row_window window(const chunk& part) const { return {part.first_row(), part.num_scheduled}; }

  SEQPOOL_HOST_DEVICE float identity() const { return -cuda::std::numeric_limits<float>::infinity(); }
  SEQPOOL_HOST_DEVICE float accumulate(float largest, float row_value) const {
    return row_value > largest ? row_value : largest;
  }
  SEQPOOL_HOST_DEVICE float merge(float largest, float partial_largest) const {
    return accumulate(largest, partial_largest);
  }
  SEQPOOL_HOST_DEVICE float finish(float largest, std::int64_t) const { return largest; }
};

}  // namespace seqpool::method
