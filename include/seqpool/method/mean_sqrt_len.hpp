// MEAN_SQRT_LEN pooling: the column-wise sum of the prompt's rows over the
// square root of its length (sentence-transformers' pooling_mode_mean_sqrt_len_tokens).
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include <seqpool/method/mean.hpp>

namespace seqpool::method {

/// MEAN's sum, kept as MEAN keeps it, divided at the end by √prompt_len
/// instead of prompt_len: a long prompt's row grows as √n, as
/// sentence-transformers defines the mode.
struct mean_sqrt_len : mean {
  static constexpr std::string_view name = "mean_sqrt_len";

  SEQPOOL_HOST_DEVICE float finish(float sum, std::int64_t prompt_len) const {
    return sum / sqrtf(static_cast<float>(prompt_len));
  }
};

}  // namespace seqpool::method
