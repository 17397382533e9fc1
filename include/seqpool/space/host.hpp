// host_space: pooling on the CPU, for CPU inference and for tests without a GPU.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <span>
#include <vector>

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif

#include <thrust/system/omp/execution_policy.h>
#include <cuda/std/span>

#include <seqpool/space/audit.hpp>
#include <seqpool/space/memory_space.hpp>

namespace seqpool {

/// Memory is host memory and work runs on Thrust's OpenMP system. Work finishes
/// before the call that launched it returns, so staging needs one buffer, not a
/// ring, and the uploaded block is read where it was staged.
class host_space {
 public:
  /// Tiles of 128 rows: a long request's partial rows, read back by a second pass,
  /// cost a float per column for every 128 rows read, and bf16 MEAN on 65536 rows
  /// went from 0.87 to 0.92 of the read ceiling against tiles of 64 (fp32 within
  /// noise). A prompt still splits into a tile for every 128 of its rows to share
  /// among the threads.
  static constexpr launch_shape shape{.tile_rows = 128, .whole_rows = true};

  host_space() = default;
  host_space(const host_space&) = delete;
  host_space& operator=(const host_space&) = delete;

  auto policy() const { return thrust::omp::par; }

  /// Blocks of 2 MiB and more start on a huge-page boundary and ask for huge
  /// pages (a hint; ignored where transparent huge pages are off). Pooling reads
  /// rows scattered over hundreds of MB: on 4 KiB pages each row costs a page
  /// walk, and on the VM in docs/PERFORMANCE.md CLS on 4096 prompts took 1.34 ms
  /// instead of 0.90.
  void* allocate_bytes(std::size_t bytes) {
    audit_.count_allocation();
    if (bytes < huge_page) return ::operator new(bytes, alignment);
    void* memory = ::operator new(bytes, huge_page_alignment);
#if defined(MADV_HUGEPAGE)
    madvise(memory, bytes, MADV_HUGEPAGE);
#endif
    return memory;
  }

  void deallocate_bytes(void* memory, std::size_t bytes) noexcept {
    audit_.count_allocation();
    ::operator delete(memory, bytes < huge_page ? alignment : huge_page_alignment);
  }

  /// Grows the staging buffer outside a step so that stage() does not allocate.
  void reserve_upload(std::size_t bytes) {
    if (staging_.size() >= bytes) return;
    audit_.count_allocation();
    staging_.resize(bytes);
  }

  std::span<std::byte> stage(std::size_t bytes) {
    reserve_upload(bytes);
    return {staging_.data(), bytes};
  }

  /// The step's one upload: host work reads the staged block in place.
  const std::byte* upload(std::span<const std::byte> staged) {
    audit_.count_upload();
    return staged.data();
  }

  /// Copies host data (weights, hidden states) into space memory: never part of a step.
  template <class T>
  void copy_in(std::span<const T> from, cuda::std::span<T> to) {
    audit_.count_upload();
    std::memcpy(to.data(), from.data(), from.size_bytes());
  }

  /// Copies space memory (results) to the host: never part of a step.
  template <class T>
  void copy_out(cuda::std::span<const T> from, std::span<T> to) {
    audit_.count_download();
    std::memcpy(to.data(), from.data(), from.size_bytes());
  }

  /// Nothing is ever pending on the host: there is no wait to count.
  void synchronize() {}

  const seqpool::audit& audit() const { return audit_; }

 private:
  static constexpr std::align_val_t alignment{64};
  static constexpr std::size_t huge_page = std::size_t{2} << 20;
  static constexpr std::align_val_t huge_page_alignment{huge_page};

  std::vector<std::byte> staging_;
  seqpool::audit audit_;
};

}  // namespace seqpool
