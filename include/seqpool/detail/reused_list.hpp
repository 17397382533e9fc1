// reused_list: a list whose elements outlive clear(), so that refilling it reuses their storage.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace seqpool::detail {

/// A list of T that keeps its elements, and the storage they own, across
/// clear(): next() hands back the first element past the end as the last fill
/// left it, or a new one, so that a list refilled with as many elements as
/// before, each owning no more than before, allocates nothing. The caller of
/// next() assigns every member it reads (copy-assignment into a string or
/// vector keeps its storage). Like std::vector's, references do not survive a
/// next() that grows the list; a list moved from is empty.
template <class T>
class reused_list {
 public:
  reused_list() = default;
  reused_list(const reused_list&) = default;
  reused_list& operator=(const reused_list&) = default;
  reused_list(reused_list&& from) noexcept : items_(std::move(from.items_)), used_(std::exchange(from.used_, 0)) {}
  reused_list& operator=(reused_list&& from) noexcept {
    if (this != &from) {
      items_ = std::move(from.items_);
      used_ = std::exchange(from.used_, 0);
    }
    return *this;
  }

  T& next() {
    if (used_ == items_.size()) items_.emplace_back();
    return items_[used_++];
  }
  void clear() { used_ = 0; }

  std::size_t size() const { return used_; }
  bool empty() const { return used_ == 0; }
  T& operator[](std::size_t k) { return items_[k]; }
  const T& operator[](std::size_t k) const { return items_[k]; }
  T* begin() { return items_.data(); }
  T* end() { return items_.data() + used_; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + used_; }

 private:
  std::vector<T> items_;
  std::size_t used_ = 0;
};

}  // namespace seqpool::detail
