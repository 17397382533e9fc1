// buffer<T, Space>: an owning array in a space's memory.
#pragma once

#include <cstddef>
#include <utility>

#include <cuda/std/span>

#include <seqpool/space/memory_space.hpp>

namespace seqpool {

/// Device memory for results and weights. Allocating and freeing go through the
/// space, so the audit sees them; make buffers before a step, not inside it.
template <class T, memory_space Space>
class buffer {
 public:
  buffer(Space& space, std::size_t count)
      : space_(&space),
        data_(count == 0 ? nullptr : static_cast<T*>(space.allocate_bytes(count * sizeof(T)))),
        count_(count) {}

  buffer(buffer&& other) noexcept
      : space_(other.space_), data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}

  buffer& operator=(buffer&& other) noexcept {
    if (this != &other) {
      free();
      space_ = other.space_;
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }

  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;

  ~buffer() { free(); }

  T* data() const { return data_; }
  std::size_t size() const { return count_; }
  cuda::std::span<T> span() const { return {data_, count_}; }

 private:
  void free() noexcept {
    if (data_ != nullptr) space_->deallocate_bytes(data_, count_ * sizeof(T));
    data_ = nullptr;
  }

  Space* space_;
  T* data_;
  std::size_t count_;
};

}  // namespace seqpool
