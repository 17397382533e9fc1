// MEAN pooling: the column-wise mean of the prompt's rows.
#pragma once

#include <cstdint>
#include <string_view>

#include <seqpool/method/concepts.hpp>

namespace seqpool::method {

/// Each request's rows are summed on their own in float (never as differences of
/// a prefix sum over the batch, whose cancellation loses precision late in large
/// batches); a chunked request keeps its running sum.
struct mean {
  static constexpr method_kind kind = method_kind::sequence;
  static constexpr std::string_view name = "mean";
  static constexpr bool keeps_state = true;
  static constexpr instruction_rule instruction = instruction_rule::excluded;  ///< and so mean_sqrt_len

  row_window window(const chunk& part) const { return {part.first_row(), part.num_scheduled}; }

  SEQPOOL_HOST_DEVICE float identity() const { return 0.0f; }
  SEQPOOL_HOST_DEVICE float accumulate(float sum, float row_value) const { return sum + row_value; }
  SEQPOOL_HOST_DEVICE float merge(float sum, float partial_sum) const { return sum + partial_sum; }
  SEQPOOL_HOST_DEVICE float finish(float sum, std::int64_t prompt_len) const {
    return sum / static_cast<float>(prompt_len);
  }
};

}  // namespace seqpool::method
