// A cache of space memory in power-of-two size classes.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <iterator>
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
    size_class_list& list = classes_[size];
    if (list.spare.empty()) {
      // Room for every allocation of the class to come back, made before it is taken: give_back() cannot fail.
      list.spare.reserve(list.taken + 1);
      void* memory = space_->allocate_bytes(size);
      ++list.taken;
      return memory;
    }
    void* memory = list.spare.back();
    list.spare.pop_back();
    ++list.taken;
    return memory;
  }

  /// Takes back an allocation take() gave, into room take() made.
  void give_back(void* memory, std::size_t bytes) noexcept {
    size_class_list& list = classes_.find(size_class(bytes))->second;
    list.spare.push_back(memory);
    --list.taken;
  }

  /// Whether it takes its allocations from `space`.
  bool belongs_to(const Space& space) const { return space_ == &space; }

  /// Returns every cached allocation to the space.
  void trim() {
    for (auto list = classes_.begin(); list != classes_.end();) {
      for (void* memory : list->second.spare) space_->deallocate_bytes(memory, list->first);
      list->second.spare.clear();
      list = list->second.taken == 0 ? classes_.erase(list) : std::next(list);
    }
  }

  std::size_t cached_allocations() const {
    std::size_t count = 0;
    for (const auto& entry : classes_) count += entry.second.spare.size();
    return count;
  }

 private:
  static constexpr std::size_t smallest = 256;
  static constexpr std::size_t largest = std::size_t{1} << 40;

  static std::size_t size_class(std::size_t bytes) { return std::bit_ceil(std::max(bytes, smallest)); }

  /// A size class's allocations: those cached, in room for all it has taken out.
  struct size_class_list {
    std::vector<void*> spare;
    std::size_t taken = 0;  ///< given by take() and not given back
  };

  Space* space_;
  std::map<std::size_t, size_class_list> classes_;
};

}  // namespace seqpool::detail
