// Row-wise activations that heads apply on the device.
#pragma once

#include <cmath>
#include <cstdint>

#include <seqpool/config.hpp>

namespace seqpool::head {

/// x / max(‖x‖₂, 1e-12): a zero row stays zero instead of becoming NaN. On the
/// host the sum of squares may be reassociated into vector lanes (it is the hot
/// loop of token_embed); the scaling multiplies by the reciprocal, within an ulp
/// of dividing.
SEQPOOL_HOST_DEVICE inline void l2_normalize(float* row, std::int64_t width) {
  float squares = 0.0f;
  SEQPOOL_SIMD_REDUCTION(+ : squares)
  for (std::int64_t column = 0; column < width; ++column) squares += row[column] * row[column];
  const float scale = 1.0f / fmaxf(sqrtf(squares), 1e-12f);
  for (std::int64_t column = 0; column < width; ++column) row[column] *= scale;
}

SEQPOOL_HOST_DEVICE inline void sigmoid(float* row, std::int64_t width) {
  for (std::int64_t column = 0; column < width; ++column) row[column] = 1.0f / (1.0f + expf(-row[column]));
}

/// Subtracts the largest logit first, so large logits do not overflow.
SEQPOOL_HOST_DEVICE inline void softmax(float* row, std::int64_t width) {
  float largest = row[0];
  for (std::int64_t column = 1; column < width; ++column) largest = fmaxf(largest, row[column]);
  float total = 0.0f;
  for (std::int64_t column = 0; column < width; ++column) {
    row[column] = expf(row[column] - largest);
    total += row[column];
  }
  for (std::int64_t column = 0; column < width; ++column) row[column] /= total;
}

}  // namespace seqpool::head
