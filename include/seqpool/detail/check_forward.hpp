// The shape checks a forward makes before it launches anything.
#pragma once

#include <cstdint>
#include <utility>

#include <cuda/std/span>

#include <seqpool/error.hpp>
#include <seqpool/hidden.hpp>

namespace seqpool::detail {

/// Throws seqpool::error unless the hidden states' columns are contiguous and
/// their rows do not overlap.
template <hidden_element T>
void check_layout(hidden_view<T> hidden) {
  if (hidden.stride(1) != 1) fail("hidden_states", "columns must be contiguous");
  if (hidden.extent(0) > 1 && hidden.stride(0) < hidden.extent(1))
    fail("hidden_states", "rows are ", hidden.stride(0), " elements apart, fewer than their ", hidden.extent(1),
         " columns");
}

/// Throws seqpool::error unless the hidden states have the width and the rows a
/// plan was made for, and the output holds what it writes.
template <hidden_element T, class Result>
void check_forward(hidden_view<T> hidden, std::int64_t hidden_size, std::int64_t num_rows, std::int64_t output_size,
                   cuda::std::span<Result> output) {
  if (hidden.extent(1) != hidden_size)
    fail("hidden_states", "width ", hidden.extent(1), " differs from hidden_size ", hidden_size);
  if (hidden.extent(0) != num_rows)
    fail("num_scheduled", "the requests schedule ", num_rows, " rows but hidden_states has ", hidden.extent(0));
  check_layout(hidden);
  if (std::cmp_less(output.size(), output_size))
    fail("output", "holds ", output.size(), " values but the step writes ", output_size);
}

/// Throws seqpool::error unless the views a captured step is given span the
/// whole buffers every replay reads and writes: `rows` rows of hidden states of
/// the pooler's width, and an output of `output_size` values.
template <hidden_element T, class Result>
void check_captured_views(hidden_view<T> hidden, std::int64_t hidden_size, std::int64_t rows, std::int64_t output_size,
                          cuda::std::span<Result> output) {
  if (hidden.extent(1) != hidden_size)
    fail("hidden_states", "width ", hidden.extent(1), " differs from hidden_size ", hidden_size);
  check_layout(hidden);
  if (hidden.extent(0) != rows)
    fail("hidden_states", "a captured step reads the same buffer at every replay: give it all ", rows,
         " rows of the capacity, not ", hidden.extent(0));
  if (std::cmp_less(output.size(), output_size))
    fail("output",
         "a captured step writes the same buffer at every replay: it must hold output_capacity() = ", output_size,
         " values, not ", output.size());
}

}  // namespace seqpool::detail
