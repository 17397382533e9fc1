// omp_backend: the device stand-in that plain g++ builds run device_space on.
#pragma once

#include <algorithm>
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

/// Runs the device kernels on the CPU as the GPU runs them: each block on an
/// OpenMP thread (for a one-wave kernel, a wave of blocks taking the launch's
/// block indices in turn), a block's threads in turn between barriers, so CPU
/// tests run the GPU's code, tiles and merge order. Copies finish at once, so
/// every event is complete when recorded.
///
/// It also models stream capture in cudaStreamCaptureModeGlobal: between
/// begin_capture() and end_capture(), copies and launches are recorded, not
/// run, into a graph that launch() replays, and every call CUDA refuses during
/// such a capture (an event query or wait, a synchronisation, an allocation or a
/// free of device or pinned memory, making a stream) throws device_error
/// instead, as does ending a capture with a branch of the stream not joined. A
/// step that breaks the capture rules fails on the CPU as it would on a GPU.
///
/// And branches of the stream (fork_branches()): it holds each branch's work
/// until the join, then runs (or records) the branches last to first, so that
/// work relying on an earlier branch's, or writing where another branch
/// writes, gives other results here than in order, as it might on a GPU.
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

  /// A wave of `wave` blocks, as many as a GPU's SMs hold at once: what a
  /// one-wave kernel's grid is cut to (by default, fewer than most steps'
  /// blocks, so that blocks take several indices; every wave gives the same
  /// results).
  explicit omp_backend(std::int64_t wave) : wave_(wave) {
    if (wave < 1) throw device_error(detail::concat("omp_backend: a wave of ", wave, " blocks; it needs at least one"));
  }
  omp_backend() : omp_backend(16) {}
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
    if (!branches_.empty()) {  // CUDA ends the capture, and its graph is lost
      capture_.reset();
      branches_.clear();
      refused_free_.clear();
      throw device_error(
          "cudaStreamEndCapture: a branch forked from the stream was not joined into it "
          "(cudaErrorStreamCaptureUnjoined)");
    }
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

  /// Outside a capture: room for work on `count` branches of the stream (CUDA
  /// makes a stream and an event a branch, which it refuses during a capture).
  void reserve_branches(int count) {
    refuse_in_capture("cudaStreamCreate");
    reserved_branches_ = std::max(reserved_branches_, count);
  }
  /// Work queued from here on goes on branch 0, the stream itself, or on
  /// another of `count` branches, as select_branch() says, each after all
  /// that was queued before; join_branches() orders the stream after them all.
  void fork_branches(int count) {
    if (!branches_.empty()) throw device_error("fork: the stream's last branches were not joined");
    if (count > reserved_branches_)
      throw device_error(detail::concat("fork: ", count, " branches, but room for ", reserved_branches_,
                                        " was reserved (reserve_branches)"));
    branches_.resize(static_cast<std::size_t>(count));
    branch_ = 0;
  }
  void select_branch(int branch) {
    if (branch < 0 || static_cast<std::size_t>(branch) >= branches_.size())
      throw device_error(detail::concat("select_branch: no branch ", branch, " of ", branches_.size(), " forked"));
    branch_ = static_cast<std::size_t>(branch);
  }
  void join_branches() {
    std::vector<std::vector<std::function<void()>>> held = std::exchange(branches_, {});
    const auto given_work = std::count_if(held.begin(), held.end(), [](const auto& work) { return !work.empty(); });
    busiest_fork_ = std::max(busiest_fork_, static_cast<int>(given_work));
    for (auto branch = held.rbegin(); branch != held.rend(); ++branch)
      for (std::function<void()>& work : *branch) run_or_record(std::move(work));
  }

  /// Runs `kernel` for `blocks` block indices, a Kernel::one_wave kernel on a
  /// grid of at most one wave, as cuda_backend launches it on the GPU.
  template <class Kernel>
  void launch(std::int64_t blocks, const Kernel& kernel) {
    const std::int64_t grid = Kernel::one_wave ? std::min(blocks, wave_) : blocks;
    largest_grid_ = std::max(largest_grid_, grid);
    run_or_record([blocks, grid, kernel] { run_blocks(blocks, grid, kernel); });
  }

  /// The most blocks a grid launched or captured on this backend has had: what
  /// the tests read to see a launch cut to a wave.
  std::int64_t largest_grid() const { return largest_grid_; }
  /// The most branches of one fork on this backend that were given work (0:
  /// none forked): what the tests read to see a step's entries each put on a
  /// branch of its own.
  int busiest_fork() const { return busiest_fork_; }

 private:
  static constexpr std::align_val_t alignment{64};

  static void* checked(void* memory) {
    if (memory == nullptr) throw std::bad_alloc();
    return memory;
  }

  /// Block b of the grid takes indices b, b + grid, …: a block's threads run in
  /// turn, so one index is done before its next begins.
  template <class Kernel>
  static void run_blocks(std::int64_t blocks, std::int64_t grid, const Kernel& kernel) {
    constexpr int warps = Kernel::threads / detail::device::warp_lanes;
#pragma omp parallel for schedule(dynamic)
    for (std::int64_t block = 0; block < grid; ++block) {
      auto shared = std::make_unique<typename Kernel::shared_storage>();
      for (std::int64_t index = block; index < blocks; index += grid)
        kernel(detail::device::host_block<warps>{}, index, *shared);
    }
  }

  template <class Work>
  void run_or_record(Work work) {
    if (!branches_.empty())
      branches_[branch_].push_back(std::move(work));
    else if (capture_)
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

  std::int64_t wave_;
  std::int64_t largest_grid_ = 0;
  std::unique_ptr<graph> capture_;  ///< the graph being recorded, during a capture
  std::string refused_free_;        ///< a free attempted during the capture, reported at its end
  int reserved_branches_ = 1;
  std::vector<std::vector<std::function<void()>>> branches_;  ///< each branch's work, while forked
  std::size_t branch_ = 0;                                    ///< the branch work goes on
  int busiest_fork_ = 0;
};

}  // namespace seqpool
