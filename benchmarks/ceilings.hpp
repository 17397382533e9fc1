// The read and write ceilings of a space's memory, for the space under test.
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

/// Host memory (host_space, and device_space<omp_backend>, whose "device" memory
/// is host memory): OpenMP streaming loops.
template <class Space>
struct ceilings {
  static double read(Space&, const std::byte* data, std::size_t bytes, int repeats) {
    return read_ceiling(data, bytes, repeats);
  }
  static double write(Space&, std::byte* data, std::size_t bytes, int repeats) {
    return write_ceiling(data, bytes, repeats);
  }
  static void evict(Space&) { evict_host_caches(); }
};

#if defined(__CUDACC__)
/// Device memory: a reduction over every 8-byte word and a fill, on the space's
/// stream. Both synchronise, which a benchmark may.
template <>
struct ceilings<seqpool::device_space<seqpool::cuda_backend>> {
  using space = seqpool::device_space<seqpool::cuda_backend>;

  static double read(space& device, const std::byte* data, std::size_t bytes, int repeats) {
    const auto* words = reinterpret_cast<const std::uint64_t*>(data);
    const std::size_t count = bytes / sizeof(std::uint64_t);
    volatile std::uint64_t sink = 0;
    const double seconds = median_seconds(
        repeats,
        [&] {
          sink = sink ^ thrust::reduce(thrust::cuda::par.on(device.backend().stream()), words, words + count,
                                       std::uint64_t{0}, cuda::std::bit_xor<std::uint64_t>{});
        },
        [&] { evict(device); });
    return static_cast<double>(bytes) / seconds / 1e9;
  }

  static double write(space& device, std::byte* data, std::size_t bytes, int repeats) {
    auto* words = reinterpret_cast<std::uint64_t*>(data);
    const double seconds = median_seconds(
        repeats,
        [&] {
          thrust::fill(thrust::cuda::par.on(device.backend().stream()), words, words + bytes / sizeof(std::uint64_t),
                       std::uint64_t{1});
          device.synchronize();
        },
        [&] { evict(device); });
    return static_cast<double>(bytes) / seconds / 1e9;
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
