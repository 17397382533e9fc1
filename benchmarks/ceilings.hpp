// The calls each case's ceilings are timed from, for the memory of the space under test.
#pragma once

#include <atomic>
#include <concepts>
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
/// loops, timed on the host clock with the space's queue drained, so that a case's
/// time is also its latency.
template <class Space>
struct ceilings {
  static void read(Space&, const std::byte* data, std::size_t bytes) {
    static volatile std::uint64_t sink = 0;
    sink = sink ^ stream_read(data, bytes);
  }
  static void write(Space&, std::byte* data, std::size_t bytes) { stream_write(data, bytes); }
  static void evict(Space&) { evict_host_caches(); }

  using clock = synced_clock<Space>;
};

/// Whether every timed run starts with the caches flushed (the default: the
/// step reads memory no cache holds). pool_bench --warm leaves them as the runs
/// before left them (the read and write ceilings' runs, interleaved with the
/// step's, among them): nearer a step whose hidden states the model has just
/// written, whose pages the TLB still holds.
inline bool evict_before_runs = true;

#if defined(__CUDACC__)
/// Whether the device clock holds the stream until a call is queued (below).
/// A profiler that runs kernels one at a time (Nsight Compute) would wait on
/// the held stream: pool_bench --unheld queues calls as they come, and its
/// times then include the host's queuing.
inline bool hold_stream = true;

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

/// Holds the stream until the host sets `*released` (or `limit_ns` have passed,
/// which it records in `*expired`), so that the work queued behind it runs back
/// to back, and the events around that work time the GPU alone.
__global__ void hold(const volatile int* released, int* expired, long long limit_ns) {
  long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (*released == 0 && now - start < limit_ns);
  if (*released == 0) *expired = 1;
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
/// on the space's stream, held until the call is queued.
template <class Backend>
  requires std::derived_from<Backend, seqpool::cuda_backend>
struct ceilings<seqpool::device_space<Backend>> {
  using space = seqpool::device_space<Backend>;

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

  /// GPU time of the work queued on the space's stream between two events, the
  /// stream held (detail::hold) until all of it is queued: what the work costs the
  /// GPU when the host runs ahead of it, as it does behind a model's layers. The
  /// time the host takes to queue it is in the case's latency (synced_clock).
  struct clock {
    space* device;
    template <class Work>
    double operator()(Work& work) const {
      struct flags {
        int released, expired;
      };
      static flags* const host = [] {
        void* memory = nullptr;
        detail::check(cudaHostAlloc(&memory, sizeof(flags), cudaHostAllocMapped), "cudaHostAlloc");
        return static_cast<flags*>(memory);
      }();
      flags* on_device = nullptr;
      detail::check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&on_device), host, 0), "cudaHostGetDevicePointer");
      const cudaStream_t stream = device->backend().stream();
      cudaEvent_t start = nullptr, stop = nullptr;
      detail::check(cudaEventCreate(&start), "cudaEventCreate");
      detail::check(cudaEventCreate(&stop), "cudaEventCreate");
      std::atomic_ref<int>(host->released).store(0);
      std::atomic_ref<int>(host->expired).store(0);
      if (hold_stream) detail::hold<<<1, 1, 0, stream>>>(&on_device->released, &on_device->expired, 1'000'000'000);
      detail::check(cudaEventRecord(start, stream), "cudaEventRecord");
      work();
      detail::check(cudaEventRecord(stop, stream), "cudaEventRecord");
      std::atomic_ref<int>(host->released).store(1);
      device->synchronize();
      if (std::atomic_ref<int>(host->expired).load() != 0)
        throw seqpool::error("benchmark: the work waited for the stream it was queued on; its GPU time is unknown");
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
