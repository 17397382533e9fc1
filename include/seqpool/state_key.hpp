// state_key: what a chunked request's state is begun with.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string_view>

#include <seqpool/batch.hpp>

namespace seqpool {

/// What a request's state was begun with, which every later chunk must repeat:
/// the method and the width that shape the state, the request's knobs, and the
/// prompt's token ids where the method reads them or the request drops rows
/// by id. A pooler makes it.
struct state_key {
  const void* method = nullptr;  ///< one address per method type (detail::method_tag)
  std::string_view method_name;
  std::int64_t hidden_size = 0;
  pooling_params params;
  std::uint64_t token_ids = 0;  ///< a hash of prompt_token_ids where they choose rows, else 0
  /// Token methods: the rows the whole prompt returns, which its first chunk
  /// counts and the state is sized by; later chunks take it from the store
  /// (held_rows) instead of counting the prompt's other positions again. 0 for
  /// sequence methods.
  std::int64_t rows_total = 0;
};

/// Token methods: what a state_store keeps of a request in progress between
/// its chunks, so that planning a later chunk counts the rows of no other: the
/// rows its chunks so far returned or stashed, and those its whole prompt
/// returns (its key's `rows_total`).
struct held_rows {
  std::int64_t before = 0;
  std::int64_t total = 0;
};

namespace detail {

/// One address per method type: what a state_key names a method by.
template <class Method>
inline constexpr char method_tag = 0;

/// The address a state_key names `method` by: its type's, or one per choice
/// where its modes are chosen at run time (its method_tag() says which).
template <class Method>
const void* method_tag_of(const Method& method) {
  if constexpr (requires {
                  { method.method_tag() } -> std::same_as<const void*>;
                })
    return method.method_tag();
  else
    return &method_tag<Method>;
}

/// 64-bit FNV-1a of the ids.
inline std::uint64_t hash_ids(const token_ids& ids) {
  std::uint64_t hash = 14695981039346656037ull;
  for (std::size_t position = 0; position < ids.size(); ++position) {
    auto bits = static_cast<std::uint64_t>(ids[position]);
    for (int byte = 0; byte < 8; ++byte, bits >>= 8) hash = (hash ^ (bits & 0xffu)) * 1099511628211ull;
  }
  return hash;
}

}  // namespace detail

}  // namespace seqpool
