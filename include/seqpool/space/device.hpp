// device_space<Backend>: pooling in device memory, with one staged upload a step.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include <cuda/std/span>

#include <seqpool/error.hpp>
#include <seqpool/space/audit.hpp>
#include <seqpool/space/memory_space.hpp>
#include <seqpool/space/omp_backend.hpp>
#if defined(__CUDACC__)
#include <seqpool/space/cuda_backend.hpp>
#endif

namespace seqpool {

/// Device memory and device work through a Backend (cuda_backend under nvcc,
/// omp_backend as the stand-in under g++). The backend is part of the type, so
/// a CUDA and an OpenMP translation unit can link into one binary without
/// sharing a definition.
///
/// A step's indices go up as one copy from a ring of pinned staging slots. The
/// host rewrites a slot only once the event recorded behind its last copy has
/// completed; otherwise it would overwrite bytes a pending copy still reads. A
/// slot staged while the stream is being captured belongs to the graph from then
/// on (replays read it), so it leaves the ring and reserve_upload() replaces it.
template <class Backend>
class device_space {
 public:
  using backend_type = Backend;
  static constexpr launch_shape shape = Backend::shape;

  explicit device_space(Backend backend = Backend{}, std::size_t staging_slots = 4)
      : backend_(std::move(backend)), ring_(staging_slots) {
    if (staging_slots == 0) detail::fail("staging_slots", "the staging ring needs at least one slot");
    for (staging_slot& slot : ring_) slot.copied = backend_.create_event();
  }

  device_space(const device_space&) = delete;
  device_space& operator=(const device_space&) = delete;

  ~device_space() {
    for (staging_slot& slot : ring_) release(slot);
    for (staging_slot& slot : captured_) release(slot);
    if (device_block_ != nullptr) backend_.deallocate(device_block_, device_capacity_);
  }

  /// The backend, e.g. for the stream that work is queued on.
  const Backend& backend() const { return backend_; }

  auto policy() const { return backend_.policy(); }

  void* allocate_bytes(std::size_t bytes) {
    audit_.count_allocation();
    return backend_.allocate(bytes);
  }

  void deallocate_bytes(void* memory, std::size_t bytes) noexcept {
    audit_.count_allocation();
    backend_.deallocate(memory, bytes);
  }

  /// Grows every staging slot and the device block outside a step, so that
  /// stage() and upload() within it neither allocate nor wait for memory.
  void reserve_upload(std::size_t bytes) {
    for (staging_slot& slot : ring_) grow(slot, bytes);
    grow_device_block(bytes);
  }

  /// The next staging slot, for the host to write this step's block into. Waits
  /// (and counts the wait) only if the slot's previous copy is still in flight.
  std::span<std::byte> stage(std::size_t bytes) {
    staging_slot& slot = ring_[next_];
    settle(slot);
    grow(slot, bytes);
    return {slot.host, bytes};
  }

  /// The step's one upload: an asynchronous copy of the block just staged.
  const std::byte* upload(std::span<const std::byte> staged) {
    staging_slot& slot = ring_[next_];
    if (staged.data() != slot.host) detail::fail("upload", "the block was not staged by the last stage() call");
    grow_device_block(staged.size());
    audit_.count_upload();
    backend_.copy_to_device(device_block_, staged.data(), staged.size());
    if (backend_.is_capturing()) {
      captured_.push_back(std::exchange(slot, staging_slot{.copied = backend_.create_event()}));
    } else {
      backend_.record(slot.copied);
      slot.in_flight = true;
    }
    next_ = (next_ + 1) % ring_.size();
    return device_block_;
  }

  /// Copies host data (weights, hidden states) to the device and waits for the
  /// copy, so the host memory may change at once: never part of a step.
  template <class T>
  void copy_in(std::span<const T> from, cuda::std::span<T> to) {
    audit_.count_upload();
    backend_.copy_to_device(to.data(), from.data(), from.size_bytes());
    synchronize();
  }

  /// Copies device memory (results) to the host and waits for it: never part of a step.
  template <class T>
  void copy_out(cuda::std::span<const T> from, std::span<T> to) {
    audit_.count_download();
    backend_.copy_to_host(to.data(), from.data(), from.size_bytes());
    synchronize();
  }

  /// An explicit, counted wait for everything queued: for copies, timing and
  /// teardown. No step calls it; a step that did would show in its audit.
  void synchronize() {
    audit_.count_wait();
    backend_.synchronize();
  }

  const seqpool::audit& audit() const { return audit_; }

 private:
  struct staging_slot {
    std::byte* host = nullptr;
    std::size_t capacity = 0;
    typename Backend::event copied{};
    bool in_flight = false;
  };

  /// Makes sure no copy still reads the slot, waiting (and counting the wait)
  /// only if its last copy has not completed.
  void settle(staging_slot& slot) {
    if (slot.in_flight && !backend_.is_complete(slot.copied)) {
      audit_.count_wait();
      backend_.wait(slot.copied);
    }
    slot.in_flight = false;
  }

  void grow(staging_slot& slot, std::size_t bytes) {
    if (slot.capacity >= bytes) return;
    settle(slot);
    if (slot.host != nullptr) {
      audit_.count_allocation();
      backend_.deallocate_pinned(slot.host, slot.capacity);
    }
    audit_.count_allocation();
    slot.host = static_cast<std::byte*>(backend_.allocate_pinned(bytes));
    slot.capacity = bytes;
  }

  // Freeing is stream-ordered, so a block that earlier work still reads stays
  // valid until that work is done.
  void grow_device_block(std::size_t bytes) {
    if (device_capacity_ >= bytes) return;
    if (device_block_ != nullptr) deallocate_bytes(device_block_, device_capacity_);
    device_block_ = static_cast<std::byte*>(allocate_bytes(bytes));
    device_capacity_ = bytes;
  }

  void release(staging_slot& slot) noexcept {
    if (slot.host != nullptr) backend_.deallocate_pinned(slot.host, slot.capacity);
    backend_.destroy_event(slot.copied);
  }

  Backend backend_;
  std::vector<staging_slot> ring_;
  std::vector<staging_slot> captured_;  // slots that captured graphs replay from
  std::size_t next_ = 0;
  std::byte* device_block_ = nullptr;
  std::size_t device_capacity_ = 0;
  seqpool::audit audit_;
};

}  // namespace seqpool
