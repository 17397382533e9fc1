// The head's linear layer (projector or classifier) over pooled rows.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/head/concepts.hpp>

namespace seqpool::detail {

/// Writes bias + W · pooled for the layer's `outputs`. On the host each dot
/// product may be reassociated into vector lanes.
SEQPOOL_HOST_DEVICE inline void linear_outputs(const linear_layer& layer, const float* __restrict__ pooled, float* out,
                                               column_range outputs) {
  for (std::int64_t o = outputs.begin; o < outputs.end; ++o) {
    const float* __restrict__ weights = layer.weight + o * layer.in_features;
    float total = 0.0f;
    SEQPOOL_SIMD_REDUCTION(+ : total)
    for (std::int64_t k = 0; k < layer.in_features; ++k) total += weights[k] * pooled[k];
    out[o] = layer.bias != nullptr ? total + layer.bias[o] : total;
  }
}

/// Whole rows, in the item that pooled the row (through_linear): the result row
/// from the pooled row in its scratch, through the layer and the head's epilogue.
/// The pooled row never leaves the core's caches, and no second pass reads it.
template <class Head>
SEQPOOL_HOST_DEVICE void finish_through_linear(const Head& head, const linear_layer& layer, const float* pooled,
                                               float* out, const request_record& owner) {
  linear_outputs(layer, pooled, out, {0, owner.linear_width});
  head.finish_row(out, owner.linear_width, owner.use_activation != 0);
}

/// One item computes a result row's leading outputs (all of them, or one) from
/// a pooled row in the workspace, and on whole rows runs the head's epilogue
/// after them: the device's path, and the host's for rows wider than its scratch.
template <class Head, bool WholeRows>
struct apply_linear {
  Head head;
  linear_layer layer;
  const linear_record* rows;
  const request_record* requests;
  step_memory memory;
  std::int64_t items_per_row;

  SEQPOOL_HOST_DEVICE void operator()(std::int64_t item) const {
    const linear_record row = rows[item / items_per_row];
    const column_range outputs = columns_of<WholeRows>(item % items_per_row, row.width);
    if (outputs.begin == outputs.end) return;
    float* out = memory.output + row.offset;
    linear_outputs(layer, memory.workspace + row.input, out, outputs);
    if constexpr (WholeRows) head.finish_row(out, row.width, requests[row.request].use_activation != 0);
  }
};

}  // namespace seqpool::detail
