// cuda_backend: device_space on a CUDA stream (nvcc translation units only).
#pragma once

#if !defined(__CUDACC__)
#error "seqpool/space/cuda_backend.hpp is for nvcc translation units: its device work is CUDA code"
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

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
/// their shapes fixed on the host (SPEC section 6). Where a launch policy puts
/// a step's entries on branches, each branch but the first is a stream of the
/// backend's own (at the caller's stream's priority), forked from the caller's
/// by an event and joined back into it by another: an edge of the graph when
/// the step is captured. A copy of a backend makes branches of its own, so that
/// no two spaces share a stream or an event; events are recorded, allocations
/// made and freed and waits made on the caller's stream, forked or not.
class cuda_backend {
 public:
  using event = cudaEvent_t;

  /// The stream must not be the legacy default stream if steps are to be
  /// captured. Its device must be the current one, here and whenever the
  /// space is used: CUDA launches a kernel on a stream only with the stream's
  /// device current, so a stream of another device is refused here rather
  /// than failing at the first step; its SMs size every launch's wave.
  /// `most_blocks`, when positive, cuts waves to that many blocks (tests use
  /// it to make blocks take several indices under the sanitizers).
  explicit cuda_backend(cudaStream_t stream = nullptr, std::int64_t most_blocks = 0)
      : stream_(stream), current_(stream), most_blocks_(most_blocks) {
    const int current = current_device();
    check(cudaStreamGetDevice(stream, &device_), "cudaStreamGetDevice");  // a default stream's: the current one
    if (device_ != current)
      throw device_error(detail::concat("cuda_backend: the stream is on device ", device_, ", the current device is ",
                                        current, ": make the stream's device current (cudaSetDevice) to use it"));
    check(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute");
  }
  cuda_backend(const cuda_backend& other)
      : stream_(other.stream_),
        current_(other.stream_),
        most_blocks_(other.most_blocks_),
        device_(other.device_),
        multiprocessors_(other.multiprocessors_) {}
  cuda_backend& operator=(const cuda_backend& other) {
    if (this != &other) *this = cuda_backend(other);
    return *this;
  }
  cuda_backend(cuda_backend&&) noexcept = default;
  cuda_backend& operator=(cuda_backend&&) noexcept = default;

  cudaStream_t stream() const { return stream_; }
  /// The device the stream is on.
  int device() const { return device_; }
  /// The calling thread's current device, which must be the stream's whenever the space is used.
  static int current_device() {
    int current = 0;
    check(cudaGetDevice(&current), "cudaGetDevice");
    return current;
  }

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

  void zero(void* memory, std::size_t bytes) { check(cudaMemsetAsync(memory, 0, bytes, current_), "cudaMemsetAsync"); }
  void copy_to_device(void* to, const void* from, std::size_t bytes) {
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyHostToDevice, current_), "cudaMemcpyAsync");
  }
  void copy_to_host(void* to, const void* from, std::size_t bytes) {
    check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToHost, current_), "cudaMemcpyAsync");
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

  /// Outside a capture: a stream and an event for each of `count` branches but
  /// the first, the caller's stream (made once).
  void reserve_branches(int count) {
    if (count <= 1) return;
    if (!branches_) branches_ = std::make_unique<branch_streams>();
    while (static_cast<int>(branches_->streams.size()) + 1 < count) branches_->add(stream_);
  }
  /// Work queued from here on goes on branch 0, the caller's stream, or on
  /// another of `count` branches, as select_branch() says, each after all that
  /// was queued before; join_branches() orders the stream after them all.
  void fork_branches(int count) {
    if (forked_ > 0) throw device_error("fork: the stream's last branches were not joined");
    if (count > 1 && (!branches_ || static_cast<int>(branches_->streams.size()) + 1 < count))
      throw device_error(
          detail::concat("fork: ", count, " branches, but room for fewer was reserved (reserve_branches)"));
    if (count > 1) {
      check(cudaEventRecord(branches_->forked, stream_), "cudaEventRecord");
      for (int k = 1; k < count; ++k)
        check(cudaStreamWaitEvent(branches_->streams[k - 1], branches_->forked, 0), "cudaStreamWaitEvent");
    }
    forked_ = count;
    current_ = stream_;
  }
  void select_branch(int branch) {
    if (branch < 0 || branch >= forked_)
      throw device_error(detail::concat("select_branch: no branch ", branch, " of ", forked_, " forked"));
    current_ = branch == 0 ? stream_ : branches_->streams[branch - 1];
  }
  void join_branches() {
    const int forked = std::exchange(forked_, 0);
    current_ = stream_;
    for (int k = 1; k < forked; ++k) {
      check(cudaEventRecord(branches_->joined[k - 1], branches_->streams[k - 1]), "cudaEventRecord");
      check(cudaStreamWaitEvent(stream_, branches_->joined[k - 1], 0), "cudaStreamWaitEvent");
    }
  }

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
    detail::device::run_blocks<<<static_cast<unsigned>(grid), Kernel::threads, 0, current_>>>(
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

  /// The branches' own streams, each with the event that joins it back, and
  /// the event they are forked from.
  struct branch_streams {
    std::vector<cudaStream_t> streams;
    std::vector<cudaEvent_t> joined;
    cudaEvent_t forked = nullptr;

    branch_streams() { check(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming), "cudaEventCreate"); }
    branch_streams(const branch_streams&) = delete;
    branch_streams& operator=(const branch_streams&) = delete;
    ~branch_streams() {
      for (cudaStream_t stream : streams) cudaStreamDestroy(stream);
      for (cudaEvent_t event : joined) cudaEventDestroy(event);
      cudaEventDestroy(forked);
    }
    /// A branch of `origin`, at its priority.
    void add(cudaStream_t origin) {
      streams.reserve(streams.size() + 1);
      joined.reserve(joined.size() + 1);
      int priority = 0;
      check(cudaStreamGetPriority(origin, &priority), "cudaStreamGetPriority");
      cudaEvent_t event = nullptr;
      check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
      cudaStream_t stream = nullptr;
      if (const cudaError_t status = cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority);
          status != cudaSuccess) {
        cudaEventDestroy(event);
        check(status, "cudaStreamCreateWithPriority");
      }
      streams.push_back(stream);
      joined.push_back(event);
    }
  };

  cudaStream_t stream_;
  cudaStream_t current_;  ///< where work goes: the stream, or a branch of it while forked
  std::int64_t most_blocks_;
  int device_ = 0;
  int multiprocessors_ = 0;
  std::unique_ptr<branch_streams> branches_;
  int forked_ = 0;  ///< the branches forked and not yet joined
};

}  // namespace seqpool
