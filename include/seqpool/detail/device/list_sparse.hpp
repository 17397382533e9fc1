// Device kernel: each finishing request's sparse weights listed by token id.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/result_encoding.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool::detail::device {

/// A block a list, on one wave of blocks. Each thread takes a run of
/// consecutive slots (ids ascending) and counts those whose weight is above
/// the floor; after a barrier it lists them after the pairs of the threads
/// before it, so the list is in order of id without a sort. The first thread
/// writes the count, and the threads fill the entries past the pairs with
/// {-1, 0}. The weights are a few floats a token that the layers' launch just
/// wrote: the lists read none of the hidden states.
template <class Policy>
struct list_sparse {
  static constexpr int threads = Policy::threads;
  static constexpr bool one_wave = true;

  struct shared_storage {
    std::int32_t listed[Policy::threads];  ///< pairs each thread lists
  };

  const std::byte* image;
  sparse_entry* output;
  const float* workspace;
  result_encoding<sparse_entry> encoding;

  template <class Block>
  SEQPOOL_HOST_DEVICE void operator()(const Block& block, std::int64_t index, shared_storage& shared) const {
    const image_header& header = *reinterpret_cast<const image_header*>(image);
    if (index >= static_cast<std::int64_t>(header.sparse_lists.count)) return;
    const sparse_list list = header.sparse_lists.in(image)[index];
    const sparse_slot* slot = header.sparse_slots.in(image) + list.first_slot;
    const std::int32_t* order = header.sparse_order.in(image);
    const float* weights = workspace + list.weights;
    sparse_entry* entries = output + list.offset;
    const std::int32_t per_thread = (list.slots + threads - 1) / threads;
    const auto run_of = [&](int thread, std::int32_t& begin, std::int32_t& end) {
      begin = thread * per_thread < list.slots ? thread * per_thread : list.slots;
      end = begin + per_thread < list.slots ? begin + per_thread : list.slots;
    };
    block.threads([&](int warp, int lane) {
      const int thread = warp * warp_lanes + lane;
      std::int32_t begin, end;
      run_of(thread, begin, end);
      std::int32_t listed = 0;
      for (std::int32_t s = begin; s < end; ++s) listed += slot_weight(slot + s, order, weights) > encoding.floor ? 1 : 0;
      shared.listed[thread] = listed;
    });
    block.sync();
    block.threads([&](int warp, int lane) {
      const int thread = warp * warp_lanes + lane;
      std::int32_t before = 0;
      std::int32_t total = 0;
      for (int other = 0; other < threads; ++other) {
        before += other < thread ? shared.listed[other] : 0;
        total += shared.listed[other];
      }
      std::int32_t begin, end;
      run_of(thread, begin, end);
      sparse_entry* next = entries + 1 + before;
      for (std::int32_t s = begin; s < end; ++s) {
        const float weight = slot_weight(slot + s, order, weights);
        if (weight > encoding.floor) *next++ = {slot[s].id, weight};
      }
      if (thread == 0) entries[0] = {total, 0.0f};
      for (std::int32_t e = 1 + total + thread; e <= list.slots; e += threads) entries[e] = {-1, 0.0f};
    });
  }
};

}  // namespace seqpool::detail::device
