// What every memory space offers: the concept poolers are written against.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include <seqpool/space/audit.hpp>

namespace seqpool {

/// How device work splits a step into items. A GPU wants one column per item so
/// that neighbouring threads read neighbouring addresses; a CPU thread wants whole
/// rows so that its inner loop vectorises and a row's epilogue (normalise, softmax)
/// runs while the row is still in cache.
struct launch_shape {
  std::int64_t tile_rows;  ///< rows one item reduces before handing on a partial result
  bool whole_rows;         ///< one item covers every column of its rows
};

/// A place where device work runs and device memory lives, plus the counting
/// that the sync contract is checked with (SPEC section 6).
template <class Space>
concept memory_space = requires(Space& space, const Space& view, std::size_t bytes, void* memory,
                                std::span<const std::byte> staged) {
  { Space::shape } -> std::convertible_to<launch_shape>;
  space.policy();
  { space.allocate_bytes(bytes) } -> std::same_as<void*>;
  space.deallocate_bytes(memory, bytes);
  space.reserve_upload(bytes);
  { space.stage(bytes) } -> std::same_as<std::span<std::byte>>;
  { space.upload(staged) } -> std::same_as<const std::byte*>;
  space.synchronize();
  { view.audit() } -> std::same_as<const audit&>;
};

}  // namespace seqpool
