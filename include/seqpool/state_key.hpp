// state_key: what a chunked request's state is begun with.
#pragma once

#include <bit>
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

  /// The same key: what a plan of a later chunk was planned against, or a
  /// first chunk's reserved for. The method is its address (its name may be a
  /// view of an instance's, and follows from it).
  friend bool operator==(const state_key& a, const state_key& b) {
    return a.method == b.method && a.hidden_size == b.hidden_size && a.params == b.params &&
           a.token_ids == b.token_ids && a.rows_total == b.rows_total;
  }
};

/// Token methods: rows that chunks of a request chose — how many, and for
/// sparse results of a method that lists its positions the digest of their
/// positions (detail::position_digest, summed), which the last chunk's listing
/// of them by id must repeat (0 elsewhere).
struct chosen_rows {
  std::int64_t count = 0;
  std::uint64_t digest = 0;

  friend bool operator==(const chosen_rows&, const chosen_rows&) = default;
};

/// Token methods: what a state_store keeps of a request in progress between
/// its chunks, so that planning a later chunk counts the rows of no other: the
/// rows its chunks so far returned or stashed, and how many its whole prompt
/// returns (its key's `rows_total`).
struct held_rows {
  chosen_rows before;
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

/// What one chosen prompt position adds to the digest of a request's chosen
/// rows (chosen_rows::digest): a 64-bit mix of it (SplitMix64's finalizer), so that
/// a sum of them over a set of positions is the same whatever ranges chose them
/// and differs, but for a 2^-64 chance, for another set of the same size.
inline std::uint64_t position_digest(std::int64_t position) {
  auto bits = static_cast<std::uint64_t>(position) + 0x9e3779b97f4a7c15ull;
  bits = (bits ^ (bits >> 30)) * 0xbf58476d1ce4e5b9ull;
  bits = (bits ^ (bits >> 27)) * 0x94d049bb133111ebull;
  return bits ^ (bits >> 31);
}

/// A 64-bit hash of the ids, which a chunked request's key holds so that its
/// later chunks show they were given the same (a check of the caller's
/// mistakes, not a defence against ids chosen to collide): four lanes of
/// multiply and rotate over the ids' 64-bit values, a lane an id in turn, mixed
/// at the end.
/// The lanes' chains are independent, so that a multiply an id, not one a byte
/// in a single chain, is what every chunk pays for hashing its whole prompt's
/// ids (PERFORMANCE.md, Planning, has the figures).
inline std::uint64_t hash_ids(const token_ids& ids) {
  constexpr std::uint64_t multiplier = 0x9e3779b97f4a7c15ull;
  std::uint64_t lanes[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull};
  const auto mix = [](std::uint64_t lane, std::uint64_t value) { return std::rotl((lane ^ value) * multiplier, 31); };
  const std::size_t count = ids.size();
  std::size_t position = 0;
  for (; position + 4 <= count; position += 4)
    for (std::size_t lane = 0; lane < 4; ++lane)
      lanes[lane] = mix(lanes[lane], static_cast<std::uint64_t>(ids[position + lane]));
  for (; position < count; ++position) lanes[0] = mix(lanes[0], static_cast<std::uint64_t>(ids[position]));
  std::uint64_t hash = count;
  for (const std::uint64_t lane : lanes) hash = mix(hash, lane);
  return hash ^ (hash >> 29);
}

}  // namespace detail

}  // namespace seqpool
