// omp_backend: the device stand-in that plain g++ builds run device_space on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <seqpool/detail/device/team.hpp>
#include <seqpool/error.hpp>

namespace seqpool {

/// Runs the device kernels on the CPU: each block on an OpenMP thread, its
/// threads in turn between barriers, so CPU tests run the GPU's code, tiles and
/// merge order. Copies finish at once, so every event is complete when recorded.
///
/// It also models stream capture in cudaStreamCaptureModeGlobal: between
/// begin_capture() and end_capture(), copies and launches are recorded, not
/// run, into a graph that launch() replays, and every call CUDA refuses during
/// such a capture (an event query or wait, a synchronisation, an allocation or a
/// free of device or pinned memory) throws device_error instead. A step that
/// breaks the capture rules fails on the CPU as it would on a GPU.
class omp_backend {
 public:
  struct event {};

  /// Copies and launches recorded during a capture, replayed in order.
  class graph {
   public:
    void launch() const {
      for (const auto& step : steps_) step();
    }
    std::size_t size() const { return steps_.size(); }

   private:
    friend class omp_backend;
    std::vector<std::function<void()>> steps_;
  };

  omp_backend() = default;
  omp_backend(omp_backend&&) noexcept = default;
  omp_backend& operator=(omp_backend&&) noexcept = default;

  void begin_capture() {
    if (capture_) throw device_error("cudaStreamBeginCapture: the stream is already capturing");
    capture_ = std::make_unique<graph>();
  }
  /// Ends the capture; throws if a free was attempted during it (frees cannot
  /// throw where they happen).
  graph end_capture() {
    if (!capture_) throw device_error("cudaStreamEndCapture: the stream is not capturing");
    graph captured = std::move(*capture_);
    capture_.reset();
    if (!refused_free_.empty()) throw device_error(std::exchange(refused_free_, {}));
    return captured;
  }
  bool is_capturing() const { return capture_ != nullptr; }

  /// Allocation fails as cudaMallocAsync does, with std::bad_alloc standing in
  /// for an out-of-memory error (nothrow allocation, which sanitizers let fail).
  void* allocate(std::size_t bytes) {
    refuse_in_capture("cudaMallocAsync");
    return checked(::operator new(bytes, alignment, std::nothrow));
  }
  void deallocate(void* memory, std::size_t) noexcept {
    note_free_in_capture("cudaFreeAsync");
    ::operator delete(memory, alignment);
  }
  void* allocate_pinned(std::size_t bytes) {
    refuse_in_capture("cudaMallocHost");
    return checked(::operator new(bytes, alignment, std::nothrow));
  }
  void deallocate_pinned(void* memory, std::size_t) noexcept {
    note_free_in_capture("cudaFreeHost");
    ::operator delete(memory, alignment);
  }

  // Copies of nothing may name null pointers, which memset and memcpy must not see.
  void zero(void* memory, std::size_t bytes) {
    if (bytes > 0) run_or_record([=] { std::memset(memory, 0, bytes); });
  }
  void copy_to_device(void* to, const void* from, std::size_t bytes) {
    if (bytes > 0) run_or_record([=] { std::memcpy(to, from, bytes); });
  }
  void copy_to_host(void* to, const void* from, std::size_t bytes) {
    if (bytes > 0) run_or_record([=] { std::memcpy(to, from, bytes); });
  }

  event create_event() { return {}; }
  void destroy_event(event) noexcept {}
  void record(event&) {}
  bool is_complete(const event&) const {
    refuse_in_capture("cudaEventQuery");
    return true;
  }
  void wait(const event&) { refuse_in_capture("cudaEventSynchronize"); }
  void synchronize() { refuse_in_capture("cudaStreamSynchronize"); }

  /// Runs `kernel` on `blocks` blocks, as cuda_backend launches it on the GPU.
  template <class Kernel>
  void launch(std::int64_t blocks, const Kernel& kernel) {
    run_or_record([blocks, kernel] { run_blocks(blocks, kernel); });
  }

 private:
  static constexpr std::align_val_t alignment{64};

  static void* checked(void* memory) {
    if (memory == nullptr) throw std::bad_alloc();
    return memory;
  }

  template <class Kernel>
  static void run_blocks(std::int64_t blocks, const Kernel& kernel) {
    constexpr int warps = Kernel::threads / detail::device::warp_lanes;
#pragma omp parallel for schedule(dynamic)
    for (std::int64_t index = 0; index < blocks; ++index) {
      auto shared = std::make_unique<typename Kernel::shared_storage>();
      kernel(detail::device::host_block<warps>{}, index, *shared);
    }
  }

  template <class Work>
  void run_or_record(Work work) {
    if (capture_)
      capture_->steps_.push_back(std::move(work));
    else
      work();
  }

  void refuse_in_capture(std::string_view call) const {
    if (capture_)
      throw device_error(detail::concat(call, ": operation not permitted when stream is capturing (the stand-in ",
                                        "models cudaStreamCaptureModeGlobal)"));
  }

  void note_free_in_capture(std::string_view call) noexcept {
    if (capture_ && refused_free_.empty())
      refused_free_ = detail::concat(call, ": operation not permitted when stream is capturing");
  }

  std::unique_ptr<graph> capture_;  ///< the graph being recorded, during a capture
  std::string refused_free_;        ///< a free attempted during the capture, reported at its end
};

}  // namespace seqpool
