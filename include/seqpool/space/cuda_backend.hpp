// cuda_backend: device_space on a CUDA stream (nvcc translation units only).
#pragma once

#if !defined(__CUDACC__)
#error "seqpool/space/cuda_backend.hpp is for nvcc translation units: its device work is CUDA code"
#endif

#include <cstddef>

#include <cuda_runtime.h>
#include <thrust/system/cuda/execution_policy.h>

#include <seqpool/error.hpp>
#include <seqpool/space/memory_space.hpp>

namespace seqpool {

/// Everything runs on the caller's stream: allocation is stream-ordered
/// (cudaMallocAsync), copies are asynchronous, and Thrust gets par_nosync so that
/// for_each returns without synchronising (SPEC section 6).
class cuda_backend {
 public:
  // 256-row tiles still give 65536 x 1024 rows about 260 thousand items in the first
  // pass, and leave a single long prompt's combine a quarter of the partials that
  // 64-row tiles would (its parallelism is only one item per column).
  static constexpr launch_shape shape{.tile_rows = 256, .whole_rows = false};

  using event = cudaEvent_t;

  /// The stream must not be the legacy default stream if steps are to be captured.
  explicit cuda_backend(cudaStream_t stream = nullptr) : stream_(stream) {}

  cudaStream_t stream() const { return stream_; }

  auto policy() const { return thrust::cuda::par_nosync.on(stream_); }

  void* allocate(std::size_t bytes) {
    void* memory = nullptr;
    check(cudaMallocAsync(&memory, bytes, stream_), "cudaMallocAsync");
    return memory;
  }
  void deallocate(void* memory, std::size_t) noexcept { cudaFreeAsync(memory, stream_); }

  void* allocate_pinned(std::size_t bytes) {
    void* memory = nullptr;
    check(cudaMallocHost(&memory, bytes), "cudaMallocHost");
    return memory;
  }
  void deallocate_pinned(void* memory, std::size_t) noexcept { cudaFreeHost(memory); }

  void copy_to_device(void* to, const void* from, std::size_t bytes) {
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
  }
  void copy_to_host(void* to, const void* from, std::size_t bytes) {
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
  }

  event create_event() {
    event created = nullptr;
    check(cudaEventCreateWithFlags(&created, cudaEventDisableTiming), "cudaEventCreate");
    return created;
  }
  void destroy_event(event done) noexcept { cudaEventDestroy(done); }
  void record(event& marker) { check(cudaEventRecord(marker, stream_), "cudaEventRecord"); }
  bool is_complete(const event& marker) const {
    const cudaError_t status = cudaEventQuery(marker);
    if (status == cudaErrorNotReady) return false;
    check(status, "cudaEventQuery");
    return true;
  }
  void wait(const event& marker) { check(cudaEventSynchronize(marker), "cudaEventSynchronize"); }
  /// Only device_space::synchronize() calls this: an explicit, counted wait for
  /// copies, timing and teardown, never part of a step.
  void synchronize() { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  bool is_capturing() const {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(stream_, &status), "cudaStreamIsCapturing");
    return status == cudaStreamCaptureStatusActive;
  }

 private:
  static void check(cudaError_t status, const char* call) {
    if (status != cudaSuccess) throw device_error(detail::concat(call, ": ", cudaGetErrorString(status)));
  }

  cudaStream_t stream_;
};

}  // namespace seqpool
