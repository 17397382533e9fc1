// Row-wise activations that heads apply in their epilogue.
#pragma once

#include <cmath>

#include <seqpool/config.hpp>

namespace seqpool::head {

// Each takes a row as plain_row describes one: contiguous on the host, spread
// over a warp's lanes or a block's threads on the device.

/// x / max(‖x‖₂, 1e-12): a zero row stays zero instead of becoming NaN, and a
/// row holding NaN becomes all NaN, as PyTorch's F.normalize makes it (its
/// max keeps a NaN norm, where fmaxf would drop it and scale the row by 1e12).
/// The scaling multiplies by the reciprocal, within an ulp of dividing.
template <class Row>
SEQPOOL_HOST_DEVICE void l2_normalize(Row& row) {
  const float norm = sqrtf(row.sum([](float x) { return x * x; }));
  row.scale(1.0f / (norm < 1e-12f ? 1e-12f : norm));
}

template <class Row>
SEQPOOL_HOST_DEVICE void sigmoid(Row& row) {
  row.transform([](float x) { return 1.0f / (1.0f + expf(-x)); });
}

/// Subtracts the largest logit first, so large logits do not overflow.
template <class Row>
SEQPOOL_HOST_DEVICE void softmax(Row& row) {
  const float largest = row.max([](float x) { return x; });
  row.transform([largest](float x) { return expf(x - largest); });
  const float total = row.sum([](float x) { return x; });
  row.transform([total](float x) { return x / total; });
}

}  // namespace seqpool::head
