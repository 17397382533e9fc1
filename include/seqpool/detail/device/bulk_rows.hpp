// Device kernels: rows read through a ring in shared memory that bulk copies fill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/device/vector.hpp>

namespace seqpool::detail::device {

/// Whether this pass of the compiler can copy in bulk: sm_90's Tensor Memory
/// Accelerator (cp.async.bulk into shared memory, completing on an mbarrier),
/// or the stand-in, which copies at once. Below sm_90 a kernel reads its rows
/// through registers, and the functions here are never called (they trap).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
inline constexpr bool copies_in_bulk = true;
#else
inline constexpr bool copies_in_bulk = false;
#endif
/// sm_90 and later, where the functions below are the GPU's instructions.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SEQPOOL_BULK_DEVICE 1
#else
#define SEQPOOL_BULK_DEVICE 0
#endif

/// The barrier of a ring slot: on the GPU an mbarrier of one arrival (the
/// lane that issues the slot's copy, which tells it the bytes to expect), whose
/// phase completes when those bytes have landed. The stand-in copies at once
/// and counts the phases completed, and stops where a warp would wait for a
/// phase that no copy completes, or that a second copy into the slot already
/// passed: a wait that would hang the GPU, or read a slot being overwritten.
struct alignas(8) slot_barrier {
  std::uint64_t word;
};

/// One warp's ring: `Slots` slots of `SlotBytes` (a row's bytes at most), each
/// on a 128-byte boundary, and their barriers.
template <int Slots, int SlotBytes>
struct bulk_ring {
  static_assert(Slots >= 2 && SlotBytes % 128 == 0, "two slots at least, of whole 128-byte lines");
  static constexpr int slots = Slots;
  alignas(128) std::byte slot[Slots][SlotBytes];
  slot_barrier barrier[Slots];
};

/// The rings of a block's `Warps` warps (none for a kernel that reads through registers).
template <int Warps, class Ring>
struct bulk_rings {
  Ring of_warp[Warps];
};
template <class Ring>
struct bulk_rings<0, Ring> {};

#if defined(__CUDA_ARCH__)
__device__ inline std::uint32_t shared_address(const void* address) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(address));
}
#endif

/// Makes a slot's barrier, for one arrival a phase.
SEQPOOL_HOST_DEVICE inline void make_barrier(slot_barrier& barrier) {
#if SEQPOOL_BULK_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&barrier)) : "memory");
#elif defined(__CUDA_ARCH__)
  __trap();
#else
  barrier.word = 0;
#endif
}

/// Makes the barriers just made visible to the copies that will complete them.
SEQPOOL_HOST_DEVICE inline void publish_barriers() {
#if SEQPOOL_BULK_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#elif defined(__CUDA_ARCH__)
  __trap();
#endif
}

/// Ends a barrier, whose phases all completed, before its memory serves again.
SEQPOOL_HOST_DEVICE inline void end_barrier(slot_barrier& barrier) {
#if SEQPOOL_BULK_DEVICE
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(shared_address(&barrier)) : "memory");
#elif defined(__CUDA_ARCH__)
  __trap();
#else
  barrier.word = 0;
#endif
}

/// Copies `bytes` (a multiple of 16, from and to 16-byte boundaries) from
/// global memory into a slot, completing its barrier's phase when they land.
/// The slot's last reads must be ordered before it by the warp (its sync);
/// the proxy fence orders them before the copy, which writes through another
/// path than the loads read.
SEQPOOL_HOST_DEVICE inline void copy_into_slot(std::byte* slot, const std::byte* from, std::uint32_t bytes,
                                               slot_barrier& barrier) {
#if SEQPOOL_BULK_DEVICE
  const std::uint32_t done = shared_address(&barrier);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(done), "r"(bytes) : "memory");
  // Hidden states are read once: the copy leaves L2 to what is read again, as
  // the register loop's streaming loads do.
  std::uint64_t read_once = 0;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(read_once));
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
          "r"(shared_address(slot)),
      "l"(from), "r"(bytes), "r"(done), "l"(read_once)
      : "memory");
#elif defined(__CUDA_ARCH__)
  __trap();
#else
  if (bytes % vector_bytes != 0)
    throw std::logic_error("seqpool: a bulk copy of " + std::to_string(bytes) + " bytes is not whole 16-byte pieces");
  check_aligned<vector_bytes>(slot);
  check_aligned<vector_bytes>(from);
  std::memcpy(slot, from, bytes);
  ++barrier.word;
#endif
}

/// Waits until the phase of `parity` of a slot's barrier has completed: until
/// the copy of that turn of the ring has landed.
SEQPOOL_HOST_DEVICE inline void wait_for_slot(slot_barrier& barrier, std::uint32_t parity) {
#if SEQPOOL_BULK_DEVICE
  const std::uint32_t done = shared_address(&barrier);
  std::uint32_t landed = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(landed)
                 : "r"(done), "r"(parity)
                 : "memory");
  } while (landed == 0);
#elif defined(__CUDA_ARCH__)
  __trap();
#else
  // Phase k (parity k % 2) has completed once k + 1 copies have landed, and
  // phase k + 1 not yet: the count of copies differs from the parity.
  if (barrier.word % 2 == parity)
    throw std::logic_error("seqpool: a warp waits for a ring slot's turn (parity " + std::to_string(parity) +
                           ") that no copy has completed, or that a later copy into the slot passed, after " +
                           std::to_string(barrier.word) + " copies");
#endif
}

/// Reads rows [begin, end) through a warp's ring: row r's `bytes` from
/// `rows + r * row_stride` (bytes). Lane 0 copies the first rows into every
/// slot, then, as the warp has taken a slot's row, the row a turn of the ring
/// later into it, so that `Ring::slots` rows stay in flight while the lanes
/// take them; each lane takes each row in order (`take(lane, r, slot)`), after
/// waiting for its slot. The barriers are made and ended here: the ring's
/// memory holds nothing between calls.
template <class Warp, class Ring, class Take>
SEQPOOL_HOST_DEVICE void bulk_rows(const Warp& warp, Ring& ring, const std::byte* rows, std::int64_t row_stride,
                                   std::uint32_t bytes, std::int64_t begin, std::int64_t end, Take&& take) {
  constexpr int slots = Ring::slots;
  const std::int64_t count = end - begin;
  if (count <= 0) return;
  const int used = count < slots ? static_cast<int>(count) : slots;
  warp.lanes([&](int lane) {
    if (lane != 0) return;
    for (int s = 0; s < used; ++s) make_barrier(ring.barrier[s]);
    publish_barriers();
    for (int s = 0; s < used; ++s)
      copy_into_slot(ring.slot[s], rows + (begin + s) * row_stride, bytes, ring.barrier[s]);
  });
  warp.sync();
  for (std::int64_t k = 0; k < count; ++k) {
    const int s = static_cast<int>(k % slots);
    const auto parity = static_cast<std::uint32_t>(k / slots % 2);
    warp.lanes([&](int lane) {
      wait_for_slot(ring.barrier[s], parity);
      take(lane, begin + k, ring.slot[s]);
    });
    warp.sync();  // every lane has read the slot: it may be copied into again
    if (k + slots < count)
      warp.lanes([&](int lane) {
        if (lane == 0) copy_into_slot(ring.slot[s], rows + (begin + k + slots) * row_stride, bytes, ring.barrier[s]);
      });
  }
  warp.lanes([&](int lane) {
    if (lane != 0) return;
    for (int s = 0; s < used; ++s) end_barrier(ring.barrier[s]);
  });
  warp.sync();
}

/// The 16-byte vector at `address` in shared memory (a ring slot).
SEQPOOL_HOST_DEVICE inline raw_vector load_shared(const std::byte* address) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const raw_vector*>(address);
#else
  return copied<vector_bytes>(address);
#endif
}

}  // namespace seqpool::detail::device

#undef SEQPOOL_BULK_DEVICE
