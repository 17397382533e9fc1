// Host algorithms, pass 2 of sequence methods: merge a request's tile partials and its state.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/host/apply_linear.hpp>
#include <seqpool/detail/host/finish_row.hpp>
#include <seqpool/detail/host/store_row.hpp>
#include <seqpool/detail/records.hpp>

namespace seqpool::detail::host {

/// One item merges, over all columns, the state a chunked request brings (or
/// identity()) with the partials its tiles wrote this step, then writes the state
/// back or finishes the request: the method's finish, then the head's linear
/// layer or epilogue as flagged. A result row other than float it merges in
/// scratch (or, wider, where the plan drafted it) and encodes into place.
template <class Method, class Head, class Result, class Policy>
struct combine_partials {
  Method method;
  Head head;
  dense_layer layer;  ///< the head's one dense layer, where an item passes rows through it
  std::int64_t hidden_size;  ///< columns of a hidden row: the width of each of a concat's modes' results
  const std::int32_t* combines;
  request_table requests;
  step_memory<Result> memory;

  void operator()(std::int64_t item) const {
    const std::int32_t request = combines[item];
    const request_record owner = requests[request];
    const std::int32_t state_index = requests.state_index(request);
    const float* init = (owner.flags & from_state) != 0 ? memory.state[state_index] : nullptr;
    const float* partials = memory.workspace + owner.partials;
    const std::int64_t loaded = owner.width < hidden_size ? owner.width : hidden_size;
    const bool through = (owner.flags & through_linear) != 0;
    if (through || (owner.where == target::output && stored_from_scratch<Policy, Result>(false, owner.width))) {
      alignas(64) float pooled[Policy::scratch_row_floats];
      merge_row(owner, loaded, init, partials, pooled);
      finish_row(method, head, owner, loaded, owner.flags, pooled);
      if (through)
        linear_into<Policy>(head, layer, pooled, memory.output + owner.offset, owner.linear_width, owner.knobs,
                            memory.encoding);
      else
        store_row(memory.output + owner.offset, pooled, owner.width, false, memory.encoding);
      return;
    }
    float* out = memory.at(owner.where, owner.offset, state_index);
    merge_row(owner, loaded, init, partials, out);
    finish_row(method, head, owner, loaded, owner.flags, out);
    if ((owner.flags & drafted) != 0) store_row(memory.output + owner.result, out, owner.width, false, memory.encoding);
  }

 private:
  /// Merges the request's state (or identity()) and its tiles' partials into
  /// `out`, a concat's modes' columns (`loaded` each) each by its method.
  void merge_row(const request_record& owner, std::int64_t loaded, const float* init, const float* partials,
                 float* out) const {
    // Partial after partial, each read front to back while the result row stays in cache.
    const std::int64_t width = owner.width;
    for_mode_columns<modes_of<Method>>(loaded, width, [&]<int S>(std::int64_t begin, std::int64_t end) {
      with_mode_of<S>(method, [&](const auto& merging) {
        for (std::int64_t c = begin; c < end; ++c) out[c] = init != nullptr ? init[c] : merging.identity();
        for (std::int32_t p = 0; p < owner.num_tiles; ++p) {
          const float* __restrict__ partial = partials + p * width;
          for (std::int64_t c = begin; c < end; ++c) out[c] = merging.merge(out[c], partial[c]);
        }
      });
    });
  }
};

}  // namespace seqpool::detail::host
