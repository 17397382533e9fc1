// Sparse lexical weights: a request's result as (id, weight) pairs — BGE-M3's
// token weights by token id, SPLADE's vocabulary row by column.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace seqpool {

/// One pair of a sparse result: an id — a token id of the prompt, or a column
/// of the pooled row — and its weight. A request's sparse result is a list of
/// them (SPEC section 3): its first entry's id counts the pairs that follow, in
/// ascending order of id; the entries past them, to the list's bound, are
/// {-1, 0}.
struct sparse_entry {
  std::int32_t id;
  float weight;

  friend bool operator==(const sparse_entry&, const sparse_entry&) = default;
};

static_assert(sizeof(sparse_entry) == 8 && std::is_trivially_copyable_v<sparse_entry>);

/// The result type of a pooler whose results are lists of weights by id.
template <class T>
concept sparse_element = std::same_as<T, sparse_entry>;

}  // namespace seqpool
