// Host algorithms: the head's dense layers (projector or classifier, or a stack) over pooled rows.
#pragma once

#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/host/store_row.hpp>
#include <seqpool/detail/host/wide_vectors.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/head/concepts.hpp>
#include <seqpool/head/row.hpp>

namespace seqpool::detail::host {

/// Output `o` of a dense layer from the dot product of its weight row with the input.
inline float dense_output(const dense_layer& layer, std::int64_t o, float total) {
  return activate(layer.activation, layer.linear.bias != nullptr ? total + layer.linear.bias[o] : total);
}

/// The dense layers' loops, each compiled where it is inlined: into the
/// baseline's entry point and, on x86-64, into the one for AVX2
/// (has_wide_vectors).
namespace dense_loops {

/// linear_outputs(): each weight row once against the input.
[[gnu::always_inline]] inline void outputs(const dense_layer& dense, const float* __restrict__ pooled, float* out,
                                           std::int64_t width) {
  const linear_layer& layer = dense.linear;
  for (std::int64_t o = 0; o < width; ++o) {
    const float* __restrict__ weights = layer.weight + o * layer.in_features;
    float total = 0.0f;
    SEQPOOL_SIMD_REDUCTION(+ : total)
    for (std::int64_t k = 0; k < layer.in_features; ++k) total += weights[k] * pooled[k];
    out[o] = dense_output(dense, o, total);
  }
}

/// linear_outputs_of_rows(): two weight rows at a time against the rows, eight
/// sums in registers, so that each input loaded serves two outputs and each
/// weight four rows.
[[gnu::always_inline]] inline void outputs_of_rows(const dense_layer& dense, const float* const* pooled,
                                                   float* const* out, const std::int64_t* widths, int count) {
  const linear_layer& layer = dense.linear;
  const float* __restrict__ p0 = pooled[0];
  const float* __restrict__ p1 = pooled[count > 1 ? 1 : 0];
  const float* __restrict__ p2 = pooled[count > 2 ? 2 : 0];
  const float* __restrict__ p3 = pooled[count > 3 ? 3 : 0];
  std::int64_t most = 0;
  for (int b = 0; b < count; ++b) most = widths[b] > most ? widths[b] : most;
  const auto store = [&](std::int64_t o, const float(&totals)[4]) {
    for (int b = 0; b < count; ++b)
      if (o < widths[b]) out[b][o] = dense_output(dense, o, totals[b]);
  };
  std::int64_t o = 0;
  for (; o + 2 <= most; o += 2) {
    const float* __restrict__ first = layer.weight + o * layer.in_features;
    const float* __restrict__ second = first + layer.in_features;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f;
    SEQPOOL_SIMD_REDUCTION(+ : a0, a1, a2, a3, b0, b1, b2, b3)
    for (std::int64_t k = 0; k < layer.in_features; ++k) {
      const float x0 = p0[k], x1 = p1[k], x2 = p2[k], x3 = p3[k];
      a0 += first[k] * x0;
      a1 += first[k] * x1;
      a2 += first[k] * x2;
      a3 += first[k] * x3;
      b0 += second[k] * x0;
      b1 += second[k] * x1;
      b2 += second[k] * x2;
      b3 += second[k] * x3;
    }
    store(o, {a0, a1, a2, a3});
    store(o + 1, {b0, b1, b2, b3});
  }
  if (o < most) {
    const float* __restrict__ weights = layer.weight + o * layer.in_features;
    float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
    SEQPOOL_SIMD_REDUCTION(+ : t0, t1, t2, t3)
    for (std::int64_t k = 0; k < layer.in_features; ++k) {
      const float weight = weights[k];
      t0 += weight * p0[k];
      t1 += weight * p1[k];
      t2 += weight * p2[k];
      t3 += weight * p3[k];
    }
    store(o, {t0, t1, t2, t3});
  }
}

#if SEQPOOL_WIDE_VECTORS
SEQPOOL_WIDE_TARGET inline void wide_outputs(const dense_layer& dense, const float* pooled, float* out,
                                             std::int64_t width) {
  outputs(dense, pooled, out, width);
}

SEQPOOL_WIDE_TARGET inline void wide_outputs_of_rows(const dense_layer& dense, const float* const* pooled,
                                                     float* const* out, const std::int64_t* widths, int count) {
  outputs_of_rows(dense, pooled, out, widths, count);
}
#endif

}  // namespace dense_loops

/// Writes f(bias + W · pooled) for the layer's first `width` outputs, f its
/// activation function; each dot product may be reassociated into vector lanes.
inline void linear_outputs(const dense_layer& dense, const float* pooled, float* out, std::int64_t width) {
#if SEQPOOL_WIDE_VECTORS
  if (has_wide_vectors()) return dense_loops::wide_outputs(dense, pooled, out, width);
#endif
  dense_loops::outputs(dense, pooled, out, width);
}

/// linear_outputs() for `count` ≤ 4 rows at once, row b's first widths[b]
/// outputs into out[b]: each weight row is read once for all of them.
inline void linear_outputs_of_rows(const dense_layer& dense, const float* const* pooled, float* const* out,
                                   const std::int64_t* widths, int count) {
#if SEQPOOL_WIDE_VECTORS
  if (has_wide_vectors()) return dense_loops::wide_outputs_of_rows(dense, pooled, out, widths, count);
#endif
  dense_loops::outputs_of_rows(dense, pooled, out, widths, count);
}

/// Finishes a result row from a pooled row: the layer's first `width` outputs
/// into `out`, then the head's epilogue on them.
template <class Head>
void linear_row(const Head& head, const dense_layer& layer, const float* pooled, float* out, std::int64_t width,
                const request_knobs& knobs) {
  linear_outputs(layer, pooled, out, width);
  head::plain_row row{out, width};
  head.epilogue(row, knobs);
}

/// The same into the output: in place for float results, and for others in a
/// scratch row of the item's (a plan sends it no wider row) that is then
/// encoded into place. The pooled row of a request flagged through_linear is
/// the item's own scratch row: it never leaves the core's caches, and no second
/// pass reads it.
template <class Policy, class Head, class Result>
void linear_into(const Head& head, const dense_layer& layer, const float* pooled, Result* out, std::int64_t width,
                 const request_knobs& knobs, const result_encoding<Result>& encoding) {
  if constexpr (std::is_same_v<Result, float>) {
    linear_row(head, layer, pooled, out, width, knobs);
  } else {
    alignas(64) float row[Policy::scratch_row_floats];
    linear_row(head, layer, pooled, row, width, knobs);
    store_row(out, row, width, false, encoding);
  }
}

/// One item computes a result row from a pooled row in the workspace through
/// every dense layer, then runs the head's epilogue on it: rows wider than an
/// item's scratch row, and every row of a stack, whose outputs of each layer
/// but the last the plan gave rows of the workspace. A result row other than
/// float wider than the scratch row is finished in the draft row the plan gave it.
template <class Head, class Result, class Policy>
struct apply_linear {
  Head head;
  dense_stack layers;
  const linear_record* rows;
  request_table requests;
  step_memory<Result> memory;

  void operator()(std::int64_t item) const {
    const linear_record row = rows[item];
    const request_knobs knobs = requests[row.request].knobs;
    const float* pooled = memory.workspace + row.input;
    for (int k = 0; k + 1 < layers.size(); ++k) {
      float* outputs = memory.workspace + row.between + layers.between_offset(k);
      linear_outputs(layers[k], pooled, outputs, layers[k].linear.out_features);
      pooled = outputs;
    }
    if (row.draft < 0) {
      linear_into<Policy>(head, layers.last(), pooled, memory.output + row.offset, row.width, knobs, memory.encoding);
      return;
    }
    float* draft = memory.workspace + row.draft;
    linear_row(head, layers.last(), pooled, draft, row.width, knobs);
    store_row(memory.output + row.offset, draft, row.width, false, memory.encoding);
  }
};

}  // namespace seqpool::detail::host
