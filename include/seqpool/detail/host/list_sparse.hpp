// Host pass: a finishing request's sparse weights listed by id.
#pragma once

#include <cstdint>

#include <seqpool/detail/records.hpp>
#include <seqpool/detail/top_weights.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool::detail::host {

/// One item a list: its slots (list_slots) in ascending order of id — a
/// token list's weighed first, each its rows' largest weight, a float a slot —
/// each listed with its weight where that is above the floor — and, where the
/// list keeps its top ids only and has more, among the top (top_select) — then
/// the count before them and {-1, 0} in the entries left.
struct list_sparse {
  const sparse_list* lists;
  const sparse_slot* slot_table;
  const std::int32_t* order;
  float* workspace;
  sparse_entry* output;

  void operator()(std::int64_t item) const {
    const sparse_list list = lists[item];
    const list_slots slots(list, slot_table, order, workspace);
    if (slots.weighed_by_rows())
      for (std::int32_t s = 0; s < list.ids; ++s) slots.weights[s] = slots.weigh(s);
    const auto weight_of = [&](std::int32_t s) { return slots.weight(s); };
    std::int64_t candidates = 0;
    for (std::int32_t s = 0; s < list.ids; ++s) candidates += weight_of(s) > list.floor ? 1 : 0;
    // Every candidate's key is above 0 (a key of 0 is a NaN's).
    std::uint32_t threshold = 0;
    std::int64_t ties = 0;
    if (list.top >= 0 && candidates > list.top) {
      top_select select = top_select::of(list.top);
      for (int round = 0; round < top_select::rounds; ++round) {
        std::int32_t counts[top_select::bins] = {};
        for (std::int32_t s = 0; s < list.ids; ++s) {
          const float weight = weight_of(s);
          if (!(weight > list.floor)) continue;
          const std::uint32_t key = weight_key(weight);
          if (select.counted(key)) ++counts[select.bin(key)];
        }
        select.take(counts);
      }
      threshold = select.threshold;
      ties = select.wanted;
    }
    sparse_entry* entries = output + list.offset;
    std::int32_t listed = 0;
    for (std::int32_t s = 0; s < list.ids; ++s) {
      const float weight = weight_of(s);
      if (!(weight > list.floor)) continue;
      const std::uint32_t key = weight_key(weight);
      if (key > threshold || (key == threshold && ties-- > 0)) entries[1 + listed++] = {slots.id(s), weight};
    }
    entries[0] = {listed, 0.0f};
    for (std::int64_t e = std::int64_t{1} + listed; e <= list.most(); ++e)
      entries[e] = {-1, 0.0f};  // most() may be 2^31 − 1
  }
};

}  // namespace seqpool::detail::host
