// A cache of space memory in power-of-two size classes.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <map>
#include <new>
#include <vector>

#include <seqpool/space/memory_space.hpp>

namespace seqpool::detail {

/// Requests' states come and go with requests; recycling their allocations
/// keeps the space's allocator (and the audit) out of steady-state steps. An
/// allocation given back while device work may still read it is safe to hand
/// out again: whoever takes it writes it only in later, stream-ordered work.
template <memory_space Space>
class allocation_cache {
 public:
  explicit allocation_cache(Space& space) : space_(&space) {}
  allocation_cache(const allocation_cache&) = delete;
  allocation_cache& operator=(const allocation_cache&) = delete;

  /// Every allocation must have been given back by now.
  ~allocation_cache() { trim(); }

  /// An allocation of at least `bytes`; throws std::bad_alloc for more than the
  /// largest one (1 TiB, more than any device holds) or than the space gives.
  void* take(std::size_t bytes) {
    if (bytes > largest) throw std::bad_alloc();
    const std::size_t size = size_class(bytes);
    std::vector<void*>& spare = free_[size];
    if (spare.empty()) return space_->allocate_bytes(size);
    void* memory = spare.back();
    spare.pop_back();
    return memory;
  }

  void give_back(void* memory, std::size_t bytes) { free_[size_class(bytes)].push_back(memory); }

  /// Returns every cached allocation to the space.
  void trim() {
    for (auto& [size, cached] : free_)
      for (void* memory : cached) space_->deallocate_bytes(memory, size);
    free_.clear();
  }

  std::size_t cached_allocations() const {
    std::size_t count = 0;
    for (const auto& entry : free_) count += entry.second.size();
    return count;
  }

 private:
  static constexpr std::size_t smallest = 256;
  static constexpr std::size_t largest = std::size_t{1} << 40;

  static std::size_t size_class(std::size_t bytes) { return std::bit_ceil(std::max(bytes, smallest)); }

  Space* space_;
  std::map<std::size_t, std::vector<void*>> free_;
};

}  // namespace seqpool::detail
