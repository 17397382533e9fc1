// What every memory space offers: the concept poolers are written against.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include <seqpool/space/audit.hpp>

namespace seqpool {

/// Which algorithms a space runs. The host's are written for CPU caches: an item
/// covers whole rows, so its inner loop vectorises and a row's epilogue runs
/// while the row is in cache. The device kernels are written for the GPU: warps
/// read whole lines with 16-byte loads and cooperate on a row; the OpenMP
/// stand-in runs the same kernels, a block's threads in turn.
enum class layer : std::uint8_t { host, device };

/// A place where pooling runs and its memory lives, plus the counting that the
/// sync contract is checked with (SPEC section 6). Room for a step is made by
/// reserve_upload() outside it; stage() and upload() inside it.
template <class Space>
concept memory_space = requires(Space& space, const Space& view, std::size_t bytes, void* memory,
                                std::span<const std::byte> staged) {
  { Space::layer } -> std::convertible_to<seqpool::layer>;
  { space.allocate_bytes(bytes) } -> std::same_as<void*>;
  space.deallocate_bytes(memory, bytes);
  space.zero(memory, bytes);
  space.reserve_upload(bytes);
  { space.stage(bytes) } -> std::same_as<std::span<std::byte>>;
  { space.upload(staged) } -> std::same_as<const std::byte*>;
  { view.capturing() } -> std::same_as<bool>;
  space.synchronize();
  { view.audit() } -> std::same_as<const audit&>;
};

}  // namespace seqpool
