// The family of algorithms a memory space runs.
#pragma once

#include <type_traits>

#include <seqpool/detail/device/algorithms.hpp>
#include <seqpool/detail/host/algorithms.hpp>
#include <seqpool/space/memory_space.hpp>

namespace seqpool::detail {

/// Chosen once, from the space: the host algorithms for host_space, the device
/// kernels for both device spaces (on the GPU, or block by block on the CPU).
template <class Space>
using algorithms_of = std::conditional_t<Space::family == algorithm_family::host, host::algorithms<>,
                                         device::algorithms<>>;

}  // namespace seqpool::detail
