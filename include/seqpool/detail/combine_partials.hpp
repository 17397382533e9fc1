// Pass 2 of sequence methods: merge a request's tile partials and its state.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/apply_linear.hpp>
#include <seqpool/detail/records.hpp>

namespace seqpool::detail {

/// One item merges, over all columns or one, the state a chunked request brings
/// (or identity()) with the partials its tiles wrote this step, then writes the
/// state back or finishes the request. A request with no rows to read this step
/// (CLS after its first chunk) finishes here from its state alone.
template <class Method, class Head, bool WholeRows>
struct combine_partials {
  Method method;
  Head head;
  linear_layer layer;
  const combine_record* combines;
  const request_record* requests;
  step_memory memory;
  std::int64_t items_per_combine;

  SEQPOOL_HOST_DEVICE void operator()(std::int64_t item) const {
    const combine_record combine = combines[item / items_per_combine];
    const column_range columns = columns_of<WholeRows>(item % items_per_combine, combine.width);
    if (columns.begin == columns.end) return;
    float* out = memory.at(combine.where, combine.offset, combine.request);
    const float* init = (combine.flags & from_state) != 0 ? memory.state[combine.request] : nullptr;
    const float* partials = memory.workspace + combine.partials;
    const std::int64_t prompt_len = requests[combine.request].prompt_len;

    if constexpr (WholeRows) {
      if ((combine.flags & through_linear) != 0) {
        alignas(64) float pooled[scratch_row_floats];
        merge_row(combine, init, partials, prompt_len, pooled);
        finish_through_linear(head, layer, pooled, out, requests[combine.request]);
      } else {
        merge_row(combine, init, partials, prompt_len, out);
      }
    } else {
      const std::int64_t c = columns.begin;
      float value = init != nullptr ? init[c] : method.identity();
      for (std::int32_t p = 0; p < combine.num_partials; ++p)
        value = method.merge(value, partials[p * combine.width + c]);
      out[c] = (combine.flags & finish) != 0 ? method.finish(value, prompt_len) : value;
    }
  }

 private:
  /// Whole rows: merges into `out` and, when flagged, finishes it and runs the epilogue.
  SEQPOOL_HOST_DEVICE void merge_row(combine_record combine, const float* init, const float* partials,
                                     std::int64_t prompt_len, float* out) const {
    // Partial after partial, each read front to back while the result row stays in cache.
    for (std::int64_t c = 0; c < combine.width; ++c) out[c] = init != nullptr ? init[c] : method.identity();
    for (std::int32_t p = 0; p < combine.num_partials; ++p) {
      const float* __restrict__ partial = partials + p * combine.width;
      for (std::int64_t c = 0; c < combine.width; ++c) out[c] = method.merge(out[c], partial[c]);
    }
    if ((combine.flags & finish) == 0) return;
    for (std::int64_t c = 0; c < combine.width; ++c) out[c] = method.finish(out[c], prompt_len);
    if ((combine.flags & epilogue) != 0)
      head.finish_row(out, combine.width, requests[combine.request].use_activation != 0);
  }
};

}  // namespace seqpool::detail
