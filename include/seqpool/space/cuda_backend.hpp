// cuda_backend: device_space on a CUDA stream (nvcc translation units only).
#pragma once

#if !defined(__CUDACC__)
#error "seqpool/space/cuda_backend.hpp is for nvcc translation units: its device work is CUDA code"
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include <cuda_runtime.h>

#include <seqpool/detail/device/team.hpp>
#include <seqpool/error.hpp>

namespace seqpool {

namespace detail::device {

/// The kernel every device launch runs, for `blocks` block indices of
/// Kernel::threads threads each. A Kernel::one_wave launch has a grid of at
/// most one wave, whose blocks take the indices in turn (blockIdx.x, then a
/// grid further on), so that no block waits for a slot on an SM and each pays
/// its prologue once; between two indices the block meets at a barrier, after
/// which the last one's shared memory is read no more. Any other has a block
/// an index. (The indices count in 32 bits, as a grid's do: in 64 bits they
/// cost the linear layer's kernel the registers of one block an SM.)
template <class Kernel>
__global__ void __launch_bounds__(Kernel::threads) run_blocks(const Kernel kernel, const unsigned blocks) {
  __shared__ typename Kernel::shared_storage shared;
  if constexpr (Kernel::one_wave) {
    for (unsigned index = blockIdx.x; index < blocks; index += gridDim.x) {
      if (index != blockIdx.x) __syncthreads();
      kernel(cuda_block<Kernel::threads / warp_lanes>{}, index, shared);
    }
  } else {
    kernel(cuda_block<Kernel::threads / warp_lanes>{}, blockIdx.x, shared);
  }
}

}  // namespace detail::device

/// Everything runs on the caller's stream: allocation is stream-ordered
/// (cudaMallocAsync), copies are asynchronous, and kernels are launched with
/// their shapes fixed on the host (SPEC section 6).
class cuda_backend {
 public:
  using event = cudaEvent_t;

  /// The stream must not be the legacy default stream if steps are to be
  /// captured. Its device is the current one, whose SMs size every launch's
  /// wave; `most_blocks`, when positive, cuts waves to that many blocks (tests
  /// use it to make blocks take several indices under the sanitizers).
  explicit cuda_backend(cudaStream_t stream = nullptr, std::int64_t most_blocks = 0)
      : stream_(stream), most_blocks_(most_blocks) {
    int device = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  }

  cudaStream_t stream() const { return stream_; }

  void* allocate(std::size_t bytes) {
    void* memory = nullptr;
    check(cudaMallocAsync(&memory, bytes, stream_), "cudaMallocAsync");
    return memory;
  }
  void deallocate(void* memory, std::size_t) noexcept { cudaFreeAsync(memory, stream_); }

  /// Pinned staging: only reserve_upload() and reserve_graph() ask for it, outside
  /// any step and refused during capture (device_space checks capturing()).
  void* allocate_pinned(std::size_t bytes) {
    void* memory = nullptr;
    check(cudaMallocHost(&memory, bytes), "cudaMallocHost");
    return memory;
  }
  /// cudaFreeHost waits for the device: device_space counts it as a wait.
  void deallocate_pinned(void* memory, std::size_t) noexcept { cudaFreeHost(memory); }

  void zero(void* memory, std::size_t bytes) { check(cudaMemsetAsync(memory, 0, bytes, stream_), "cudaMemsetAsync"); }
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
  /// is_complete() and wait() serve reserve_upload() and restage(), between steps
  /// (a wait counted in the audit); neither runs inside forward() or capture().
  bool is_complete(const event& marker) const {
    const cudaError_t status = cudaEventQuery(marker);
    if (status == cudaErrorNotReady) {
      (void)cudaGetLastError();  // not an error: leave nothing for the next launch to report
      return false;
    }
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

  /// Launches `kernel` for `blocks` block indices, a Kernel::one_wave kernel on
  /// a grid of at most one wave: the SMs times the blocks of it an SM holds.
  template <class Kernel>
  void launch(std::int64_t blocks, const Kernel& kernel) {
    if (blocks > std::numeric_limits<int>::max())
      throw device_error(detail::concat("kernel launch: ", blocks, " blocks are more than a grid holds"));
    const std::int64_t grid = Kernel::one_wave ? std::min(blocks, wave<Kernel>()) : blocks;
    detail::device::run_blocks<<<static_cast<unsigned>(grid), Kernel::threads, 0, stream_>>>(
        kernel, static_cast<unsigned>(blocks));
    check(cudaGetLastError(), "kernel launch");
  }

  /// The blocks of Kernel all SMs hold at once. The occupancy is asked once a
  /// process (a device of another architecture only gets a grid sized for the
  /// first; every grid size gives the same results).
  template <class Kernel>
  std::int64_t wave() const {
    static const int resident = [] {
      int blocks = 0;
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, detail::device::run_blocks<Kernel>, Kernel::threads, 0),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      return std::max(blocks, 1);
    }();
    const std::int64_t all = static_cast<std::int64_t>(resident) * multiprocessors_;
    return most_blocks_ > 0 ? std::min(all, most_blocks_) : all;
  }

 private:
  /// Throws device_error for a failed call, after clearing CUDA's last error so
  /// that the next good call does not report it again (a sticky error, which
  /// ends the context, cannot be cleared).
  static void check(cudaError_t status, const char* call) {
    if (status == cudaSuccess) return;
    (void)cudaGetLastError();
    throw device_error(detail::concat(call, ": ", cudaGetErrorString(status)));
  }

  cudaStream_t stream_;
  std::int64_t most_blocks_;
  int multiprocessors_ = 0;
};

}  // namespace seqpool
