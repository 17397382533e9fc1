// The checks a forward makes of what it is given before it launches anything:
// the shapes of its views, and that its outputs lie apart from its rows and
// from each other.
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

/// What a message calls an output: `per_part`, part `part`'s of a multi_pooler.
inline std::string output_name(bool per_part, std::size_t part) {
  return per_part ? concat("output of part ", part) : std::string("output");
}

/// Throws seqpool::error unless an output of `values` values holds the `needed`
/// a step writes: a plan's output_size, or, `captured`, output_capacity(),
/// which a captured step writes at every replay. `per_part`: the output is
/// part `part`'s of a multi_pooler.
inline void check_output(std::size_t values, std::int64_t needed, bool captured, bool per_part, std::size_t part) {
  if (std::cmp_greater_equal(values, needed)) return;
  const std::string output = output_name(per_part, part);
  if (captured)
    fail(output, "a captured step writes the same buffer at every replay: it must hold output_capacity() = ", needed,
         " values, not ", values);
  fail(output, "holds ", values, " values but the step writes ", needed);
}

/// The bytes a view spans, [begin, end): what a step reads of the hidden
/// states or writes of an output. Empty where it holds no element.
struct byte_range {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;

  bool overlaps(const byte_range& other) const {
    return begin < end && other.begin < other.end && begin < other.end && other.begin < end;
  }
};

/// The hidden states' rows, from the first's first column to the last's last.
template <hidden_element T>
byte_range bytes_of(hidden_view<T> hidden) {
  if (hidden.extent(0) == 0 || hidden.extent(1) == 0) return {};
  const auto begin = reinterpret_cast<std::uintptr_t>(hidden.data_handle());
  const auto elements = static_cast<std::uintptr_t>((hidden.extent(0) - 1) * hidden.stride(0) + hidden.extent(1));
  return {begin, begin + elements * sizeof(T)};
}

/// An output's values.
inline byte_range bytes_of(const void* data, std::size_t bytes) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  return {begin, begin + bytes};
}

/// Throws seqpool::error if output `part`'s bytes overlap the hidden states a
/// step reads: its launches read the rows while they write every output, so
/// results written over rows would be computed from what they overwrote.
inline void check_apart_from_rows(byte_range output, bool per_part, std::size_t part, byte_range hidden) {
  if (output.overlaps(hidden))
    fail(output_name(per_part, part),
         "overlaps the hidden states, which the step reads while it writes: give it "
         "memory of its own");
}

/// Throws seqpool::error if part `part`'s output overlaps part `other_part`'s:
/// each would overwrite the other's results.
inline void check_apart_from_output(byte_range output, std::size_t part, byte_range other, std::size_t other_part) {
  if (output.overlaps(other))
    fail(output_name(true, part), "overlaps the output of part ", other_part, ": give each part an output of its own");
}

}  // namespace seqpool::detail
