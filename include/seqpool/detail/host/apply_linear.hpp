// Host algorithms: the head's linear layer (projector or classifier) over pooled rows.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/head/concepts.hpp>
#include <seqpool/head/row.hpp>

namespace seqpool::detail::host {

/// Writes bias + W · pooled for the layer's first `outputs` outputs; each dot
/// product may be reassociated into vector lanes.
inline void linear_outputs(const linear_layer& layer, const float* __restrict__ pooled, float* out,
                           std::int64_t outputs) {
  for (std::int64_t o = 0; o < outputs; ++o) {
    const float* __restrict__ weights = layer.weight + o * layer.in_features;
    float total = 0.0f;
    SEQPOOL_SIMD_REDUCTION(+ : total)
    for (std::int64_t k = 0; k < layer.in_features; ++k) total += weights[k] * pooled[k];
    out[o] = layer.bias != nullptr ? total + layer.bias[o] : total;
  }
}

/// The result row of a request flagged through_linear, from the pooled row the
/// item holds in its scratch row: through the layer and the head's epilogue. The
/// pooled row never leaves the core's caches, and no second pass reads it.
template <class Head>
void linear_then_epilogue(const Head& head, const linear_layer& layer, const float* pooled, float* out,
                          const request_record& owner) {
  linear_outputs(layer, pooled, out, owner.kept);
  head::plain_row row{out, owner.kept};
  head.epilogue(row, owner.use_activation != 0);
}

/// One item computes a result row from a pooled row in the workspace, then runs
/// the head's epilogue on it: rows wider than an item's scratch row.
template <class Head>
struct apply_linear {
  Head head;
  linear_layer layer;
  const linear_record* rows;
  const request_record* requests;
  step_memory memory;

  void operator()(std::int64_t item) const {
    const linear_record row = rows[item];
    float* out = memory.output + row.offset;
    linear_outputs(layer, memory.workspace + row.input, out, row.width);
    head::plain_row result{out, row.width};
    head.epilogue(result, requests[row.request].use_activation != 0);
  }
};

}  // namespace seqpool::detail::host
