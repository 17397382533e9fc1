// SPLADE-style pooling: a method seqpool does not ship, written by its user.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

#include <seqpool/seqpool.hpp>

/// Column-wise maximum over the prompt's rows of log1p(relu(x)): the sparse
/// lexical weights of SPLADE retrievers, as sentence-transformers' SpladePooling
/// computes them (SPEC section 3). A sequence method is a column
/// reduction, so four device functions and a window are all it takes; chunked
/// prefill comes with keeps_state, the running maximum carried in the state.
struct splade {
  static constexpr seqpool::method_kind kind = seqpool::method_kind::sequence;
  static constexpr std::string_view name = "splade";
  static constexpr bool keeps_state = true;

  seqpool::row_window window(const seqpool::chunk& part) const { return {part.first_row(), part.num_scheduled}; }

  SEQPOOL_HOST_DEVICE float identity() const { return 0.0f; }  // log1p(relu(x)) is never below 0
  SEQPOOL_HOST_DEVICE float accumulate(float largest, float x) const { return fmaxf(largest, log1pf(fmaxf(x, 0.0f))); }
  SEQPOOL_HOST_DEVICE float merge(float largest, float partial_largest) const {
    return fmaxf(largest, partial_largest);
  }
  SEQPOOL_HOST_DEVICE float finish(float largest, std::int64_t) const { return largest; }
};
