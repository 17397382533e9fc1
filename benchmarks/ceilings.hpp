// The calls each case's ceilings are timed from, for the memory of the space under test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include <seqpool/space/device.hpp>

#include "bandwidth.hpp"

namespace bench {

/// What a case's ceilings are timed from, in the memory of the space under test:
/// a streaming read of its input, a streaming write of its output, the cache
/// flush that precedes every timed call, and the clock. Host memory (host_space,
/// and device_space<omp_backend>, whose "device" memory is host memory): OpenMP
/// loops, timed on the host clock with the space's queue drained.
template <class Space>
struct ceilings {
  static void read(Space&, const std::byte* data, std::size_t bytes) {
    static volatile std::uint64_t sink = 0;
    sink = sink ^ stream_read(data, bytes);
  }
  static void write(Space&, std::byte* data, std::size_t bytes) { stream_write(data, bytes); }
  static void evict(Space&) { evict_host_caches(); }

  struct clock {
    Space* space;
    template <class Work>
    double operator()(Work& work) const {
      return host_clock{}([&] {
        work();
        space->synchronize();
      });
    }
  };
};

#if defined(__CUDACC__)
namespace detail {

inline void check(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw seqpool::device_error(std::string(call) + ": " + cudaGetErrorString(status));
}

/// Reads `count` 16-byte vectors, four in flight per thread, each once (evict-first).
__global__ void __launch_bounds__(256) stream_read(const uint4* data, std::size_t count, unsigned* sink) {
  uint4 seen{0, 0, 0, 0};
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const uint4 a = __ldcs(data + i), b = __ldcs(data + i + stride), c = __ldcs(data + i + 2 * stride),
                d = __ldcs(data + i + 3 * stride);
    seen.x ^= a.x ^ b.x ^ c.x ^ d.x;
    seen.y ^= a.y ^ b.y ^ c.y ^ d.y;
    seen.z ^= a.z ^ b.z ^ c.z ^ d.z;
    seen.w ^= a.w ^ b.w ^ c.w ^ d.w;
  }
  for (; i < count; i += stride) {
    const uint4 a = __ldcs(data + i);
    seen.x ^= a.x;
    seen.y ^= a.y;
    seen.z ^= a.z;
    seen.w ^= a.w;
  }
  if ((seen.x ^ seen.y ^ seen.z ^ seen.w) == 0x9e3779b9u) *sink = 1;  // keeps the loads; almost never stores
}

/// Writes `count` 16-byte vectors of zeros.
__global__ void __launch_bounds__(256) stream_write(uint4* data, std::size_t count) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    __stcs(data + i, uint4{0, 0, 0, 0});
}

/// Blocks that fill the GPU: eight of 256 threads for every SM.
inline unsigned filling_blocks() {
  int device = 0, multiprocessors = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return 8u * static_cast<unsigned>(multiprocessors);
}

}  // namespace detail

/// Device memory: a streaming-read kernel of 16-byte loads and a streaming-write
/// kernel, enough blocks to fill the GPU, and every call timed with CUDA events
/// on the space's stream.
template <>
struct ceilings<seqpool::device_space<seqpool::cuda_backend>> {
  using space = seqpool::device_space<seqpool::cuda_backend>;

  static void read(space& device, const std::byte* data, std::size_t bytes) {
    static unsigned* sink = [] {
      void* memory = nullptr;
      detail::check(cudaMalloc(&memory, sizeof(unsigned)), "cudaMalloc");
      return static_cast<unsigned*>(memory);
    }();
    detail::stream_read<<<detail::filling_blocks(), 256, 0, device.backend().stream()>>>(
        reinterpret_cast<const uint4*>(data), bytes / sizeof(uint4), sink);
    detail::check(cudaGetLastError(), "stream_read");
  }

  static void write(space& device, std::byte* data, std::size_t bytes) {
    detail::stream_write<<<detail::filling_blocks(), 256, 0, device.backend().stream()>>>(
        reinterpret_cast<uint4*>(data), bytes / sizeof(uint4));
    detail::check(cudaGetLastError(), "stream_write");
  }

  /// Overwrites a buffer twice the size of the GPU's L2, as evict_host_caches()
  /// does on the host. Allocated on first use and kept for the run.
  static void evict(space& device) {
    static const auto [flush, bytes] = [] {
      int device_id = 0, l2_bytes = 0;
      detail::check(cudaGetDevice(&device_id), "cudaGetDevice");
      detail::check(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device_id), "cudaDeviceGetAttribute");
      const std::size_t size = 2 * static_cast<std::size_t>(l2_bytes);
      void* memory = nullptr;
      detail::check(cudaMalloc(&memory, size), "cudaMalloc");
      return std::pair{static_cast<std::byte*>(memory), size};
    }();
    write(device, flush, bytes);
    device.synchronize();
  }

  /// GPU time of the work queued on the space's stream between two events.
  struct clock {
    space* device;
    template <class Work>
    double operator()(Work& work) const {
      cudaEvent_t start = nullptr, stop = nullptr;
      detail::check(cudaEventCreate(&start), "cudaEventCreate");
      detail::check(cudaEventCreate(&stop), "cudaEventCreate");
      detail::check(cudaEventRecord(start, device->backend().stream()), "cudaEventRecord");
      work();
      detail::check(cudaEventRecord(stop, device->backend().stream()), "cudaEventRecord");
      device->synchronize();
      float milliseconds = 0;
      detail::check(cudaEventElapsedTime(&milliseconds, start, stop), "cudaEventElapsedTime");
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      return milliseconds / 1e3;
    }
  };
};
#endif

}  // namespace bench
