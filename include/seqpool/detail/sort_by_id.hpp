// Planning sparse results: a list's returned rows sorted by token id.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

namespace seqpool::detail {

/// Sorts `entries` by their `id`, each in [0, 2^31), keeping the order of
/// entries of one id (stable): a least-significant-digit radix sort, 8 bits a
/// pass, whose one counting pass counts every digit at once, and which skips a
/// pass whose digit every entry shares — token ids below 2^16 take two passes,
/// a vocabulary of 250,002 (BGE-M3's) three. It moves entries between
/// `entries` and `scratch`, which keeps its storage for the next sort. A few
/// entries are sorted in place by insertion.
template <class Entry>
void sort_by_id(std::span<Entry> entries, std::vector<Entry>& scratch) {
  constexpr std::size_t inserted_most = 32;
  constexpr int digits = 4;
  const std::size_t size = entries.size();
  if (size <= inserted_most) {
    for (std::size_t k = 1; k < size; ++k) {
      const Entry moved = entries[k];
      std::size_t at = k;
      for (; at > 0 && entries[at - 1].id > moved.id; --at) entries[at] = entries[at - 1];
      entries[at] = moved;
    }
    return;
  }
  const auto digit = [](const Entry& entry, int d) { return static_cast<std::size_t>(entry.id >> (8 * d)) & 0xffu; };
  std::array<std::array<std::size_t, 256>, digits> starts{};
  for (std::size_t k = 0; k < size; ++k)
    for (int d = 0; d < digits; ++d) ++starts[d][digit(entries[k], d)];
  scratch.resize(size);
  Entry* from = entries.data();
  Entry* to = scratch.data();
  for (int d = 0; d < digits; ++d) {
    std::array<std::size_t, 256>& bins = starts[d];
    if (bins[digit(from[0], d)] == size) continue;  // one digit for all: the order stays
    std::size_t start = 0;
    for (std::size_t& bin : bins) start += std::exchange(bin, start);
    for (std::size_t k = 0; k < size; ++k) to[bins[digit(from[k], d)]++] = from[k];
    std::swap(from, to);
  }
  if (from != entries.data()) std::copy(from, from + size, entries.data());
}

}  // namespace seqpool::detail
