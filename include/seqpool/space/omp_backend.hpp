// omp_backend: the device stand-in that plain g++ builds run device_space on.
#pragma once

#include <cstddef>
#include <cstring>
#include <new>

#include <thrust/system/omp/execution_policy.h>

#include <seqpool/space/memory_space.hpp>

namespace seqpool {

/// Runs the device code path on Thrust's OpenMP system, with the GPU's launch
/// shape, so CPU tests exercise the same items and passes a GPU runs. Copies
/// finish at once, so every event is complete when recorded.
class omp_backend {
 public:
  static constexpr launch_shape shape{.tile_rows = 64, .whole_rows = false};

  struct event {};

  auto policy() const { return thrust::omp::par; }

  void* allocate(std::size_t bytes) { return ::operator new(bytes, alignment); }
  void deallocate(void* memory, std::size_t) noexcept { ::operator delete(memory, alignment); }
  void* allocate_pinned(std::size_t bytes) { return allocate(bytes); }
  void deallocate_pinned(void* memory, std::size_t bytes) noexcept { deallocate(memory, bytes); }

  void copy_to_device(void* to, const void* from, std::size_t bytes) { std::memcpy(to, from, bytes); }
  void copy_to_host(void* to, const void* from, std::size_t bytes) { std::memcpy(to, from, bytes); }

  event create_event() { return {}; }
  void destroy_event(event) noexcept {}
  void record(event&) {}
  bool is_complete(const event&) const { return true; }
  void wait(const event&) {}
  void synchronize() {}
  bool is_capturing() const { return false; }

 private:
  static constexpr std::align_val_t alignment{64};
};

}  // namespace seqpool
