// MEAN_SQRT_LEN pooling: the column-wise sum of the prompt's rows over the
// square root of its length (sentence-transformers' pooling_mode_mean_sqrt_len_tokens).
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include <seqpool/method/concepts.hpp>

namespace seqpool::method {

/// MEAN's sum, kept as MEAN keeps it (in float per request, a chunked request
/// keeping its running sum), divided at the end by √prompt_len instead of
/// prompt_len: a long prompt's row grows as √n, as sentence-transformers
/// defines the mode.
struct mean_sqrt_len {
  static constexpr method_kind kind = method_kind::sequence;
  static constexpr std::string_view name = "mean_sqrt_len";
  static constexpr bool keeps_state = true;

  row_window window(const chunk& part) const { return {part.first_row(), part.num_scheduled}; }

  SEQPOOL_HOST_DEVICE float identity() const { return 0.0f; }
  SEQPOOL_HOST_DEVICE float accumulate(float sum, float row_value) const { return sum + row_value; }
  SEQPOOL_HOST_DEVICE float merge(float sum, float partial_sum) const { return sum + partial_sum; }
  SEQPOOL_HOST_DEVICE float finish(float sum, std::int64_t prompt_len) const {
    return sum / sqrtf(static_cast<float>(prompt_len));
  }
};

}  // namespace seqpool::method
