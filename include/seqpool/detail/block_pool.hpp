// A caching pool of space memory in power-of-two size classes.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <map>
#include <new>
#include <vector>

#include <seqpool/space/memory_space.hpp>

namespace seqpool::detail {

/// State blocks come and go with requests; recycling their blocks keeps the space's
/// allocator (and the audit) out of steady-state steps. A block given back while
/// device work may still read it is safe to hand out again: whoever takes it
/// writes it only in later, stream-ordered work.
template <memory_space Space>
class block_pool {
 public:
  explicit block_pool(Space& space) : space_(&space) {}
  block_pool(const block_pool&) = delete;
  block_pool& operator=(const block_pool&) = delete;

  /// Every block must have been given back by now.
  ~block_pool() { trim(); }

  /// A block of at least `bytes`; throws std::bad_alloc for more than the
  /// largest block (1 TiB, more than any device holds) or than the space gives.
  void* take(std::size_t bytes) {
    if (bytes > largest_block) throw std::bad_alloc();
    const std::size_t size = size_class(bytes);
    std::vector<void*>& spare = free_[size];
    if (spare.empty()) return space_->allocate_bytes(size);
    void* block = spare.back();
    spare.pop_back();
    return block;
  }

  void give_back(void* block, std::size_t bytes) { free_[size_class(bytes)].push_back(block); }

  /// Returns every cached block to the space.
  void trim() {
    for (auto& [size, blocks] : free_)
      for (void* block : blocks) space_->deallocate_bytes(block, size);
    free_.clear();
  }

  std::size_t cached_blocks() const {
    std::size_t count = 0;
    for (const auto& entry : free_) count += entry.second.size();
    return count;
  }

 private:
  static constexpr std::size_t smallest_block = 256;
  static constexpr std::size_t largest_block = std::size_t{1} << 40;

  static std::size_t size_class(std::size_t bytes) { return std::bit_ceil(std::max(bytes, smallest_block)); }

  Space* space_;
  std::map<std::size_t, std::vector<void*>> free_;
};

}  // namespace seqpool::detail
