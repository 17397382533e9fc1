// The calls each case's ceilings are timed from, for the memory of the space under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <seqpool/space/device.hpp>

#include "bandwidth.hpp"

#if defined(__CUDACC__)
#include <thrust/fill.h>
#include <thrust/reduce.h>
#include <thrust/system/cuda/execution_policy.h>
#include <cuda/std/functional>
#endif

namespace bench {

/// What a case's ceilings are timed from, in the memory of the space under test:
/// a streaming read of its input, a streaming write of its output, and the cache
/// flush that precedes every timed call. Host memory (host_space, and
/// device_space<omp_backend>, whose "device" memory is host memory): OpenMP loops.
template <class Space>
struct ceilings {
  static void read(Space&, const std::byte* data, std::size_t bytes) {
    static volatile std::uint64_t sink = 0;
    sink = sink ^ stream_read(data, bytes);
  }
  static void write(Space&, std::byte* data, std::size_t bytes) { stream_write(data, bytes); }
  static void evict(Space&) { evict_host_caches(); }
};

#if defined(__CUDACC__)
/// Device memory: a reduction over every 8-byte word and a fill, on the space's
/// stream. Both synchronise, which a benchmark may.
template <>
struct ceilings<seqpool::device_space<seqpool::cuda_backend>> {
  using space = seqpool::device_space<seqpool::cuda_backend>;

  static void read(space& device, const std::byte* data, std::size_t bytes) {
    const auto* words = reinterpret_cast<const std::uint64_t*>(data);
    static volatile std::uint64_t sink = 0;
    sink = sink ^ thrust::reduce(thrust::cuda::par.on(device.backend().stream()), words,
                                 words + bytes / sizeof(std::uint64_t), std::uint64_t{0},
                                 cuda::std::bit_xor<std::uint64_t>{});
  }

  static void write(space& device, std::byte* data, std::size_t bytes) {
    auto* words = reinterpret_cast<std::uint64_t*>(data);
    thrust::fill(thrust::cuda::par.on(device.backend().stream()), words, words + bytes / sizeof(std::uint64_t),
                 std::uint64_t{1});
    device.synchronize();
  }
  /// Overwrites a buffer twice the size of the GPU's L2, as evict_host_caches()
  /// does on the host. Allocated on first use and kept for the run.
  static void evict(space& device) {
    static const auto [flush, words] = [] {
      const auto checked = [](cudaError_t status, const char* call) {
        if (status != cudaSuccess) throw seqpool::device_error(std::string(call) + ": " + cudaGetErrorString(status));
      };
      int device_id = 0, l2_bytes = 0;
      checked(cudaGetDevice(&device_id), "cudaGetDevice");
      checked(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device_id), "cudaDeviceGetAttribute");
      const std::size_t count = 2 * static_cast<std::size_t>(l2_bytes) / sizeof(std::uint64_t);
      void* memory = nullptr;
      checked(cudaMalloc(&memory, count * sizeof(std::uint64_t)), "cudaMalloc");
      return std::pair{static_cast<std::uint64_t*>(memory), count};
    }();
    thrust::fill(thrust::cuda::par.on(device.backend().stream()), flush, flush + words, std::uint64_t{0});
    device.synchronize();
  }
};
#endif

}  // namespace bench
