// What every memory space offers: the concept poolers are written against.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>

#include <seqpool/space/audit.hpp>

namespace seqpool {

/// Which family of algorithms a space runs (detail/host/algorithms.hpp,
/// detail/device/algorithms.hpp). The host's are written for CPU caches, the
/// device kernels for the GPU; the OpenMP stand-in runs the device kernels, a
/// block's threads in turn.
enum class algorithm_family : std::uint8_t { host, device };

/// A place where pooling runs and its memory lives, plus the counting that the
/// sync contract is checked with (SPEC section 6), and the refusal of what
/// may wait during a stream capture. Room for a step's image is
/// made by reserve_upload() outside it, into the pooler's or dispatcher's
/// upload_reservation; stage() and upload() use it inside the step.
template <class Space>
concept memory_space = requires(Space& space, const Space& view, std::size_t bytes, void* memory,
                                std::span<const std::byte> staged, typename Space::upload_reservation& reservation,
                                const char* call) {
  { Space::family } -> std::convertible_to<algorithm_family>;
  { space.allocate_bytes(bytes) } -> std::same_as<void*>;
  space.deallocate_bytes(memory, bytes);
  space.zero(memory, bytes);
  space.reserve_upload(bytes, reservation);
  { space.stage(reservation, bytes) } -> std::same_as<std::span<std::byte>>;
  { space.upload(reservation, staged) } -> std::same_as<const std::byte*>;
  { view.capturing() } -> std::same_as<bool>;
  view.refuse_in_capture(call);
  space.synchronize();
  { view.audit() } -> std::same_as<const audit&>;
};

}  // namespace seqpool
