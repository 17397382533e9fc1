// The head's linear layer (projector or classifier) over pooled rows.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/head/concepts.hpp>

namespace seqpool::detail {

/// One item computes a result row's leading outputs (all of them, or one) as
/// bias + W · pooled, and on whole rows runs the head's epilogue after them. On
/// the host each dot product may be reassociated into vector lanes.
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
    const float* __restrict__ pooled = memory.workspace + row.input;
    float* out = memory.output + row.offset;
    for (std::int64_t o = outputs.begin; o < outputs.end; ++o) {
      const float* __restrict__ weights = layer.weight + o * layer.in_features;
      float total = 0.0f;
      SEQPOOL_SIMD_REDUCTION(+ : total)
      for (std::int64_t k = 0; k < layer.in_features; ++k) total += weights[k] * pooled[k];
      out[o] = layer.bias != nullptr ? total + layer.bias[o] : total;
    }
    if constexpr (WholeRows) head.finish_row(out, row.width, requests[row.request].use_activation != 0);
  }
};

}  // namespace seqpool::detail
