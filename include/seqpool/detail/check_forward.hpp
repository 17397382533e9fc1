// The shape checks a forward makes before it launches anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

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
/// plan was made for.
template <hidden_element T>
void check_hidden(hidden_view<T> hidden, std::int64_t hidden_size, std::int64_t num_rows) {
  if (hidden.extent(1) != hidden_size)
    fail("hidden_states", "width ", hidden.extent(1), " differs from hidden_size ", hidden_size);
  if (hidden.extent(0) != num_rows)
    fail("num_scheduled", "the requests schedule ", num_rows, " rows but hidden_states has ", hidden.extent(0));
  check_layout(hidden);
}

/// Throws seqpool::error unless the hidden states a captured step is given
/// span the whole buffer every replay reads: `rows` rows of the pooler's width.
template <hidden_element T>
void check_captured_hidden(hidden_view<T> hidden, std::int64_t hidden_size, std::int64_t rows) {
  if (hidden.extent(1) != hidden_size)
    fail("hidden_states", "width ", hidden.extent(1), " differs from hidden_size ", hidden_size);
  check_layout(hidden);
  if (hidden.extent(0) != rows)
    fail("hidden_states", "a captured step reads the same buffer at every replay: give it all ", rows,
         " rows of the capacity, not ", hidden.extent(0));
}

/// Throws seqpool::error unless an output of `values` values holds the `needed`
/// a step writes: a plan's output_size, or, `captured`, output_capacity(),
/// which a captured step writes at every replay. `per_part`: the output is
/// part `part`'s of a multi_pooler.
inline void check_output(std::size_t values, std::int64_t needed, bool captured, bool per_part, std::size_t part) {
  if (std::cmp_greater_equal(values, needed)) return;
  const std::string output = per_part ? concat("output of part ", part) : std::string("output");
  if (captured)
    fail(output, "a captured step writes the same buffer at every replay: it must hold output_capacity() = ", needed,
         " values, not ", values);
  fail(output, "holds ", values, " values but the step writes ", needed);
}

}  // namespace seqpool::detail
