// host_space: pooling on the CPU, for CPU inference and for tests without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <vector>

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif

// Thrust reads the headers of its default device system, CUDA, which need the CUDA
// runtime's. A host compiler without them gets OpenMP as that default instead:
// every Thrust call in seqpool names its system, so the default only decides
// which headers are read.
#if !defined(__CUDACC__) && !defined(THRUST_DEVICE_SYSTEM) && !__has_include(<cuda_runtime_api.h>)
#define THRUST_DEVICE_SYSTEM THRUST_DEVICE_SYSTEM_OMP
#endif

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/omp/execution_policy.h>
#include <cuda/std/span>

#include <seqpool/detail/host/held_passes.hpp>
#include <seqpool/detail/host/wide_vectors.hpp>
#include <seqpool/error.hpp>
#include <seqpool/space/audit.hpp>
#include <seqpool/space/memory_space.hpp>

namespace seqpool {

/// Memory is host memory and the host algorithms run on Thrust's OpenMP system.
/// Work finishes before the call that launched it returns (a step's entries'
/// work, on branches, before the join returns), so staging needs one buffer,
/// not a ring, and the uploaded image is read where it was staged.
class host_space {
 public:
  static constexpr algorithm_family family = algorithm_family::host;

  /// What reserve_upload() sets aside for a step: nothing here, since every
  /// step's work is done before the next one stages.
  struct upload_reservation {};

  /// Decides here which of the dense layers' loops the process runs
  /// (detail::host::has_wide_vectors), reading the environment before any
  /// pass runs on a thread of its own.
  host_space() { (void)detail::host::has_wide_vectors(); }
  host_space(const host_space&) = delete;
  host_space& operator=(const host_space&) = delete;

  /// Blocks of 2 MiB and more start on a huge-page boundary and ask for huge
  /// pages (a hint; ignored where transparent huge pages are off): pooling reads
  /// rows scattered over hundreds of MB, and on 4 KiB pages each row costs a page
  /// walk (docs/PERFORMANCE.md has what that cost).
  void* allocate_bytes(std::size_t bytes) {
    audit_.count_allocation();
    if (bytes < huge_page) return checked(::operator new(bytes, alignment, std::nothrow));
    void* memory = checked(::operator new(bytes, huge_page_alignment, std::nothrow));
#if defined(MADV_HUGEPAGE)
    madvise(memory, bytes, MADV_HUGEPAGE);
#endif
    return memory;
  }

  void deallocate_bytes(void* memory, std::size_t bytes) noexcept {
    audit_.count_allocation();
    ::operator delete(memory, bytes < huge_page ? alignment : huge_page_alignment);
  }

  void zero(void* memory, std::size_t bytes) {
    if (bytes > 0) std::memset(memory, 0, bytes);
  }

  /// Grows the staging buffer outside a step so that stage() does not allocate.
  void reserve_upload(std::size_t bytes, upload_reservation&) {
    if (staging_.size() >= bytes) return;
    audit_.count_allocation();
    staging_.resize(bytes);
  }

  /// The buffer reserve_upload() made room in; a step that finds too little room
  /// throws before it writes anything.
  std::span<std::byte> stage(const upload_reservation&, std::size_t bytes) {
    if (staging_.size() < bytes)
      detail::fail("reserve", "the step needs ", bytes, " bytes of staging but ", staging_.size(),
                   " were reserved: call reserve() with this step's plan before forward()");
    return {staging_.data(), bytes};
  }

  /// The step's one upload: host work reads the staged image in place.
  const std::byte* upload(upload_reservation&, std::span<const std::byte> staged) {
    audit_.count_upload(staged.size());
    return staged.data();
  }

  /// A step's entries go on branches (step_runner): each entry's passes are
  /// held until the step's last is given, then the entries' passes run
  /// together, so that a multi_pooler's parts read each row from memory about
  /// once (detail::host::held_passes says how).
  static constexpr bool entries_on_branches = true;

  /// Outside a step: room to hold `count` branches' passes.
  void reserve_branches(int count) { held_.reserve(count); }
  /// Passes from here on are held, a branch each as select_branch() says, until join_branches() runs them.
  void fork_branches(int count) { held_.fork(count); }
  void select_branch(int branch) { held_.select(branch); }
  void join_branches() { held_.run(); }
  /// Joins the branches with nothing held run: a step whose launch threw changes no output or state.
  void drop_branches() { held_.forget(); }

  /// Runs `work(item)` for every item in [0, items) on the OpenMP threads: one
  /// parallel pass, which the audit counts as a launch; while branches are
  /// forked, a pass held to run with the other branches' at the join.
  template <class Work>
  void launch(std::int64_t items, const Work& work) {
    audit_.count_launch();
    if (held_.forked()) {
      held_.hold(items, work);
      return;
    }
    thrust::for_each(thrust::omp::par, thrust::counting_iterator<std::int64_t>(0),
                     thrust::counting_iterator<std::int64_t>(items), work);
  }

  /// The host has no stream to capture, so it refuses nothing.
  bool capturing() const { return false; }
  void refuse_in_capture(const char*) const {}

  /// Copies host data (weights, hidden states) into space memory: never part of a step.
  template <class T>
  void copy_in(std::span<const T> from, cuda::std::span<T> to) {
    audit_.count_upload(from.size_bytes());
    if (!from.empty()) std::memcpy(to.data(), from.data(), from.size_bytes());
  }

  /// Copies space memory (results) to the host: never part of a step.
  template <class T>
  void copy_out(cuda::std::span<const T> from, std::span<T> to) {
    audit_.count_download();
    if (!from.empty()) std::memcpy(to.data(), from.data(), from.size_bytes());
  }

  /// Nothing is ever pending on the host: there is no wait to count.
  void synchronize() {}

  const seqpool::audit& audit() const { return audit_; }

 private:
  /// The nothrow allocations return null where a sanitizer's allocator would
  /// otherwise abort the process; this throws std::bad_alloc, which callers turn
  /// into errors.
  static void* checked(void* memory) {
    if (memory == nullptr) throw std::bad_alloc();
    return memory;
  }

  static constexpr std::align_val_t alignment{64};
  static constexpr std::size_t huge_page = std::size_t{2} << 20;
  static constexpr std::align_val_t huge_page_alignment{huge_page};

  std::vector<std::byte> staging_;
  detail::host::held_passes held_;
  seqpool::audit audit_;
};

}  // namespace seqpool
