// Device kernel: each finishing request's sparse weights listed by id.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/top_weights.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool::detail::device {

/// The slots [begin, end) of a list of `ids` that one of `threads` threads
/// takes: a run of ids / threads rounded up, the last runs short or empty.
/// Counted in 64 bits: a list may have nearly 2^31 ids (most_counted), past
/// which a thread's run's end would wrap in 32.
struct slot_run {
  std::int64_t begin;
  std::int64_t end;

  SEQPOOL_HOST_DEVICE static slot_run of(std::int32_t ids, int threads, int thread) {
    const std::int64_t per_thread = (std::int64_t{ids} + threads - 1) / threads;
    const std::int64_t begin = thread * per_thread < ids ? thread * per_thread : ids;
    return {begin, begin + per_thread < ids ? begin + per_thread : ids};
  }
};

/// A block a list, on one wave of blocks. A token list's slots are weighed
/// first, each its rows' largest weight, into a float a slot: consecutive
/// threads take consecutive slots, each `list_slots_in_flight` of them at
/// once, so that a list of many ids waits a few round trips a thread for them
/// where each pass below would otherwise walk every slot's rows again, a chain
/// of dependent loads a slot. Then each thread takes a run of consecutive
/// slots (ids ascending) and counts its candidates, the slots whose weight is
/// above the floor. Where the list keeps its top ids and has more candidates,
/// the block finds the threshold of the top (top_select: four rounds of
/// counting into 256 bins of shared memory), and each thread counts the
/// candidates of its run that are kept — above the threshold, or equal to it
/// and among the first ties in order of id, as the threads before it leave
/// them. Then each thread lists its kept slots after the pairs of the threads
/// before it, so the list is in order of id without a sort; the first thread
/// writes the count, and the threads fill the entries past the pairs with
/// {-1, 0}.
template <class Policy>
struct list_sparse {
  static constexpr int threads = Policy::threads;
  static constexpr bool one_wave = true;
  static constexpr int in_flight = Policy::list_slots_in_flight;

  struct shared_storage {
    std::int32_t kept[Policy::threads];  ///< per thread: its candidates, then the pairs it lists
    std::int32_t tied[Policy::threads];  ///< per thread: its candidates whose key is the threshold
    std::int32_t counts[top_select::bins];
    top_select select;
  };

  const std::byte* image;
  sparse_entry* output;
  float* workspace;

  template <class Block>
  SEQPOOL_HOST_DEVICE void operator()(const Block& block, std::int64_t index, shared_storage& shared) const {
    const image_header& header = *reinterpret_cast<const image_header*>(image);
    if (index >= static_cast<std::int64_t>(header.sparse_lists.count)) return;
    const sparse_list list = header.sparse_lists.in(image)[index];
    const list_slots slots(list, header.sparse_slots.in(image), header.sparse_order.in(image), workspace);
    if (slots.weighed_by_rows()) {
      block.threads([&](int warp, int lane) { weigh(slots, list.ids, warp * warp_lanes + lane); });
      block.sync();  // a block's writes to memory before a barrier are seen by its threads after it
    }
    const auto each_candidate = [&](int thread, auto&& take) {
      const slot_run run = slot_run::of(list.ids, threads, thread);
      for (auto s = static_cast<std::int32_t>(run.begin); s < run.end; ++s) {
        const float weight = slots.weight(s);
        if (weight > list.floor) take(s, weight);
      }
    };
    block.threads([&](int warp, int lane) {
      const int thread = warp * warp_lanes + lane;
      std::int32_t candidates = 0;
      each_candidate(thread, [&](std::int32_t, float) { ++candidates; });
      shared.kept[thread] = candidates;
    });
    block.sync();
    const bool chooses = list.top >= 0 && total(shared.kept) > list.top;  // every thread reads the same
    if (chooses) choose(block, shared, list.top, each_candidate);
    block.threads([&](int warp, int lane) {
      const int thread = warp * warp_lanes + lane;
      const std::int32_t before = sum_before(shared.kept, thread);
      const std::int32_t listed = total(shared.kept);
      // Every candidate's key is above 0 (a key of 0 is a NaN's): without a choice, every one is kept.
      const std::uint32_t threshold = chooses ? shared.select.threshold : 0;
      std::int64_t ties = chooses ? shared.select.wanted - sum_before(shared.tied, thread) : 0;
      sparse_entry* next = output + list.offset + 1 + before;
      each_candidate(thread, [&](std::int32_t s, float weight) {
        const std::uint32_t key = weight_key(weight);
        if (key > threshold || (key == threshold && ties-- > 0)) *next++ = {slots.id(s), weight};
      });
      sparse_entry* entries = output + list.offset;
      if (thread == 0) entries[0] = {listed, 0.0f};
      for (std::int64_t e = std::int64_t{1} + listed + thread; e <= list.most(); e += threads) entries[e] = {-1, 0.0f};
    });
  }

 private:
  /// Weighs the token slots `thread`, `thread` + threads, … of a list of
  /// `ids`, `in_flight` at a time: their rows' bounds, then each one's first
  /// row's weight, loaded together before the rest of their rows are. Slots
  /// are counted in 64 bits, where those past a list of nearly 2^31 would wrap.
  SEQPOOL_HOST_DEVICE static void weigh(const list_slots& slots, std::int32_t ids, int thread) {
    for (std::int64_t first = thread; first < ids; first += threads * in_flight) {
      std::int32_t begin[in_flight];
      std::int32_t end[in_flight];
      float largest[in_flight];
      SEQPOOL_UNROLL
      for (int u = 0; u < in_flight; ++u) {
        const std::int64_t s = first + u * threads;
        begin[u] = s < ids ? slots.first_row(static_cast<std::int32_t>(s)) : 0;
        end[u] = s < ids ? slots.end_row(static_cast<std::int32_t>(s)) : 0;
      }
      SEQPOOL_UNROLL
      for (int u = 0; u < in_flight; ++u) largest[u] = begin[u] < end[u] ? slots.row_weight(begin[u]) : 0.0f;
      SEQPOOL_UNROLL
      for (int u = 0; u < in_flight; ++u) {
        for (std::int32_t t = begin[u] + 1; t < end[u]; ++t) largest[u] = fmaxf(largest[u], slots.row_weight(t));
        const std::int64_t s = first + u * threads;
        if (s < ids) slots.weights[s] = largest[u];
      }
    }
  }

  /// The rounds of top_select, then each thread's kept candidates (into
  /// `kept`) and ties (into `tied`), ties kept in order of id.
  template <class Block, class EachCandidate>
  SEQPOOL_HOST_DEVICE static void choose(const Block& block, shared_storage& shared, std::int32_t top,
                                         const EachCandidate& each_candidate) {
    block.threads([&](int warp, int lane) {
      if (warp == 0 && lane == 0) shared.select = top_select::of(top);
    });
    for (int round = 0; round < top_select::rounds; ++round) {
      block.threads([&](int warp, int lane) {
        for (int bin = warp * warp_lanes + lane; bin < top_select::bins; bin += threads) shared.counts[bin] = 0;
      });
      block.sync();
      block.threads([&](int warp, int lane) {
        const top_select select = shared.select;
        each_candidate(warp * warp_lanes + lane, [&](std::int32_t, float weight) {
          const std::uint32_t key = weight_key(weight);
          if (select.counted(key)) count_in(&shared.counts[select.bin(key)]);
        });
      });
      block.sync();
      block.threads([&](int warp, int lane) {
        if (warp == 0 && lane == 0) shared.select.take(shared.counts);
      });
      block.sync();
    }
    block.threads([&](int warp, int lane) {
      const int thread = warp * warp_lanes + lane;
      const std::uint32_t threshold = shared.select.threshold;
      std::int32_t above = 0;
      std::int32_t tied = 0;
      each_candidate(thread, [&](std::int32_t, float weight) {
        const std::uint32_t key = weight_key(weight);
        above += key > threshold ? 1 : 0;
        tied += key == threshold ? 1 : 0;
      });
      shared.kept[thread] = above;
      shared.tied[thread] = tied;
    });
    block.sync();
    block.threads([&](int warp, int lane) {
      const int thread = warp * warp_lanes + lane;
      const std::int64_t left = shared.select.wanted - sum_before(shared.tied, thread);
      const std::int32_t mine = shared.tied[thread];
      shared.kept[thread] += left <= 0 ? 0 : left < mine ? static_cast<std::int32_t>(left) : mine;
    });
    block.sync();
  }

  /// The counts of the threads before `thread`, and of them all. (A block
  /// lists a request's few ids; a scan would save each thread a pass over 256
  /// counts in shared memory.)
  SEQPOOL_HOST_DEVICE static std::int32_t sum_before(const std::int32_t* counts, int thread) {
    std::int32_t sum = 0;
    for (int other = 0; other < thread; ++other) sum += counts[other];
    return sum;
  }
  SEQPOOL_HOST_DEVICE static std::int32_t total(const std::int32_t* counts) { return sum_before(counts, threads); }
};

}  // namespace seqpool::detail::device
