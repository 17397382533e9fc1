// Host pass: a finishing request's sparse weights listed by token id.
#pragma once

#include <cstdint>

#include <seqpool/detail/records.hpp>
#include <seqpool/detail/result_encoding.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool::detail::host {

/// One item a list: its slots in ascending order of id, each listed with its
/// weight where that is above the floor, then the count before them and
/// {-1, 0} in the entries left.
struct list_sparse {
  const sparse_list* lists;
  const sparse_slot* slots;
  const std::int32_t* order;
  const float* workspace;
  sparse_entry* output;
  result_encoding<sparse_entry> encoding;

  void operator()(std::int64_t item) const {
    const sparse_list list = lists[item];
    const sparse_slot* slot = slots + list.first_slot;
    sparse_entry* entries = output + list.offset;
    std::int32_t listed = 0;
    for (std::int32_t s = 0; s < list.slots; ++s) {
      const float weight = slot_weight(slot + s, order, workspace + list.weights);
      if (weight > encoding.floor) entries[1 + listed++] = {slot[s].id, weight};
    }
    entries[0] = {listed, 0.0f};
    for (std::int32_t e = 1 + listed; e <= list.slots; ++e) entries[e] = {-1, 0.0f};
  }
};

}  // namespace seqpool::detail::host
