// Capturing a step from a device space's stream into a graph and replaying it:
// the capture-checking stand-in on the CPU, CUDA's stream capture on the GPU.
#pragma once

#include <concepts>
#include <optional>
#include <utility>

#include <doctest/doctest.h>

#include <seqpool/plan.hpp>
#include <seqpool/space/device.hpp>
#include <seqpool/state.hpp>

namespace test {

template <class Space>
class captured_graph;

/// The stand-in's capture, which refuses what CUDA refuses in
/// cudaStreamCaptureModeGlobal (for the stand-in under any launch policy).
template <class Backend>
  requires std::derived_from<Backend, seqpool::omp_backend>
class captured_graph<seqpool::device_space<Backend>> {
 public:
  using space = seqpool::device_space<Backend>;

  static Backend backend() { return {}; }
  /// A backend whose grids are cut to `wave` blocks.
  static Backend backend(std::int64_t wave) { return Backend(wave); }
  static void begin(space& device) { device.backend().begin_capture(); }

  /// Ends the capture begun on `device`.
  explicit captured_graph(space& device) : graph_(device.backend().end_capture()) {}

  void launch() const { graph_.launch(); }

 private:
  seqpool::omp_backend::graph graph_;
};

#if defined(__CUDACC__)
/// CUDA's stream capture in cudaStreamCaptureModeGlobal, on a stream of its own
/// (the legacy default stream cannot be captured), under any launch policy.
template <class Backend>
  requires std::derived_from<Backend, seqpool::cuda_backend>
class captured_graph<seqpool::device_space<Backend>> {
 public:
  using space = seqpool::device_space<Backend>;

  /// A backend whose grids are cut to `wave` blocks (0: one wave of the GPU).
  static Backend backend(std::int64_t wave = 0) {
    static const cudaStream_t stream = [] {
      cudaStream_t created = nullptr;
      REQUIRE(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking) == cudaSuccess);
      return created;
    }();
    return Backend(stream, wave);
  }

  static void begin(space& device) {
    REQUIRE(cudaStreamBeginCapture(device.backend().stream(), cudaStreamCaptureModeGlobal) == cudaSuccess);
  }

  explicit captured_graph(space& device) : stream_(device.backend().stream()) {
    REQUIRE(cudaStreamEndCapture(stream_, &graph_) == cudaSuccess);
    REQUIRE(cudaGraphInstantiate(&replay_, graph_, 0) == cudaSuccess);
  }
  captured_graph(const captured_graph&) = delete;
  captured_graph& operator=(const captured_graph&) = delete;
  ~captured_graph() {
    cudaGraphExecDestroy(replay_);
    cudaGraphDestroy(graph_);
  }

  void launch() const { REQUIRE(cudaGraphLaunch(replay_, stream_) == cudaSuccess); }

 private:
  cudaStream_t stream_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t replay_ = nullptr;
};
#endif

/// A runner's steps on one graph (a pooler or dispatcher sized by its capacity
/// first): the first step is captured, each later one restaged into the same
/// upload, and each replayed.
template <class Space, class Runner>
class graph_replay {
 public:
  explicit graph_replay(Runner& runner) : runner_(runner), home_(runner.reserve_graph()) {}

  /// Reserves for `plan` and runs its step, whose rows are in `hidden` (the
  /// capacity's, which the capture reads) and results go to `outputs` (one,
  /// or a multi_pooler's one a part). The launch moves the pieces of the image
  /// the batch uses, at most the whole image, or the whole image, as the
  /// space's launch policy says.
  template <class Hidden, class Plan, class... Outputs>
  void run(Space& space, const Hidden& hidden, const Plan& plan, seqpool::state_store<Space>& state,
           Outputs... outputs) {
    runner_.reserve(plan, state);
    {
      const seqpool::audit_scope scope(space.audit());
      if (!graph_) {
        captured_graph<Space>::begin(space);
        runner_.capture(hidden, plan, state, outputs..., home_);
        graph_.emplace(space);
      } else {
        runner_.restage(plan, state, home_);
      }
      const auto moved = static_cast<std::size_t>(scope.counts().upload_bytes);
      if constexpr (Space::uploads_in_pieces)
        CHECK(moved <= home_.bytes());
      else
        CHECK(moved == home_.bytes());
    }
    graph_->launch();
    home_.mark_launched();
  }

 private:
  Runner& runner_;
  decltype(std::declval<Runner&>().reserve_graph()) home_;
  std::optional<captured_graph<Space>> graph_;
};

}  // namespace test
