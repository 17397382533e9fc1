// The family of algorithms a memory space runs.
#pragma once

#include <seqpool/detail/device/algorithms.hpp>
#include <seqpool/detail/host/algorithms.hpp>
#include <seqpool/space/memory_space.hpp>

namespace seqpool::detail {

/// Chosen once, from the space: the host algorithms for host_space, the device
/// kernels for both device spaces (on the GPU, or block by block on the CPU),
/// cut by the launch policy their backend names.
template <class Space, bool = Space::family == algorithm_family::host>
struct family_of {
  using type = host::algorithms<>;
};
template <class Space>
struct family_of<Space, false> {
  using type = device::algorithms<typename device::policy_of<typename Space::backend_type>::type>;
};

template <class Space>
using algorithms_of = typename family_of<Space>::type;

}  // namespace seqpool::detail
