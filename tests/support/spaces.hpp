// The spaces a test binary runs its templated cases on, named in doctest's reports.
#pragma once

#include <tuple>

#include <doctest/doctest.h>

#include <seqpool/space/device.hpp>
#include <seqpool/space/host.hpp>

TYPE_TO_STRING(seqpool::host_space);
TYPE_TO_STRING(seqpool::device_space<seqpool::omp_backend>);
#if defined(__CUDACC__)
TYPE_TO_STRING(seqpool::device_space<seqpool::cuda_backend>);
#endif

namespace test {

/// What a g++ build runs: the host algorithms, and the device kernels on the OpenMP stand-in.
using cpu_spaces = std::tuple<seqpool::host_space, seqpool::device_space<seqpool::omp_backend>>;

#if defined(__CUDACC__)
/// What the CUDA twins run: the device kernels on the GPU.
using cuda_spaces = std::tuple<seqpool::device_space<seqpool::cuda_backend>>;
#endif

}  // namespace test
