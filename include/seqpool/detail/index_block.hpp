// The layout of the one block of indices a step uploads.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>

namespace seqpool::detail {

/// `count` records of T at `offset` bytes into the block.
template <class T>
struct section {
  std::size_t offset = 0;
  std::size_t count = 0;

  /// The section inside a block that starts at `base`, on the host or on the device.
  T* in(std::byte* base) const { return reinterpret_cast<T*>(base + offset); }
  const T* in(const std::byte* base) const { return reinterpret_cast<const T*>(base + offset); }
  std::span<T> span_in(std::byte* base) const { return {in(base), count}; }
};

/// Sections are laid out at plan time, filled on the host into a staging slot at
/// forward time, and read by device work at the same offsets after the upload.
class index_block_layout {
 public:
  template <class T>
  section<T> add(std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T>, "uploaded records must be plain bytes");
    const std::size_t offset = (bytes_ + alignment - 1) / alignment * alignment;
    bytes_ = offset + count * sizeof(T);
    return {offset, count};
  }

  std::size_t bytes() const { return bytes_; }

 private:
  static constexpr std::size_t alignment = 16;

  std::size_t bytes_ = 0;
};

}  // namespace seqpool::detail
