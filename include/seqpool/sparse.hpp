// Sparse lexical weights: a request's result as (token id, weight) pairs, as
// BGE-M3's lexical matching scores its prompt's tokens.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

namespace seqpool {

/// One pair of a sparse result: a token id of the prompt and its weight, the
/// largest its tokens were given. A request's sparse result is a list of them
/// (SPEC section 3): its first entry's id counts the pairs that follow, in
/// ascending order of id; the entries past them, to the list's bound, are
/// {-1, 0}.
struct sparse_entry {
  std::int32_t id;
  float weight;

  friend bool operator==(const sparse_entry&, const sparse_entry&) = default;
};

static_assert(sizeof(sparse_entry) == 8 && std::is_trivially_copyable_v<sparse_entry>);

/// The result of a token pooler whose head gives a token one weight, listed by token id.
template <class T>
concept sparse_element = std::same_as<T, sparse_entry>;

}  // namespace seqpool
