// pooler<Method, Head, Space, Result>: one pooling method and one head in one memory space.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <cuda/std/span>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/detail/pooling_unit.hpp>
#include <seqpool/detail/step_runner.hpp>
#include <seqpool/head/concepts.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/space/memory_space.hpp>
#include <seqpool/state.hpp>

namespace seqpool {

template <class Table>
class dispatcher;

/// Pools a group of requests that share one task in two phases. plan() runs on
/// the host, checks every request and fixes every size, offset and index of the
/// step. forward() uploads the plan's one image and launches work whose shapes
/// the plan fixed: it never reads the device back, never waits and never
/// allocates; reserve() makes the room it needs beforehand.
///
///     auto plan = pooler.plan(batch, state);
///     pooler.reserve(plan, state);               // outside the step: may allocate or wait
///     pooler.forward(hidden, plan, state, out);  // the step
///     // plan.results[i]: where request i's result lies in `out`, if it finished
///
/// Given a capacity, a step on a device space can also be captured into a CUDA
/// graph once and replayed for every batch that fits (capture(), restage()).
///
/// Results are float, or, with Result = half or bfloat16 (seqpool's or CUDA's),
/// 16-bit: methods and heads still work in float, and each value is rounded to
/// nearest even once, as it is stored.
template <class Method, pooling_head Head, memory_space Space, result_element Result = float>
class pooler {
  static_assert(detail::method_is_complete<Method>());

 public:
  using method_type = Method;
  using head_type = Head;
  using space_type = Space;
  using result_type = Result;
  using unit_type = detail::pooling_unit<Method, Head, Space, Result>;

  static constexpr bool token_wise = unit_type::token_wise;
  static constexpr seqpool::task task = unit_type::task;

  pooler(Space& space, std::int64_t hidden_size, Method method = {}, Head head = {})
      : runner_(space, std::string(" here (this one serves ") + std::string(name(task)) + ")",
                unit_type(space, hidden_size, std::move(method), head)) {}

  std::int64_t hidden_size() const { return runner_.hidden_size(); }
  const Method& method() const { return runner_.template unit<0>().method(); }
  const Head& head() const { return runner_.template unit<0>().head(); }

  /// Plans a batch whose requests all have this pooler's task.
  step_plan plan(const batch& step, const state_store<Space>& state) const {
    return detail::plan_access::make(runner_.plan(step, state));
  }

  /// Outside the step: the state of chunked requests, room for the upload, the
  /// workspace and the arrival counters. Everything it allocates, and any wait
  /// for a staging slot still being copied from, the audit counts.
  void reserve(const step_plan& plan, state_store<Space>& state) {
    runner_.reserve(detail::plan_access::program(plan), state);
  }

  /// The step: checks the shapes and that reserve() made room for this plan,
  /// uploads the image, launches, and moves chunked requests on in the state.
  /// `output` must hold plan.output_size values. Inside a stream capture, use
  /// capture().
  template <hidden_element T>
  void forward(hidden_view<T> hidden, const step_plan& plan, state_store<Space>& state,
               cuda::std::span<Result> output) {
    runner_.forward(hidden, detail::plan_access::program(plan), state, output);
  }

  // Capacity and capture.

  /// Fixes the largest step this pooler takes, once, and makes room for it
  /// outside any step, so that a captured step's memory never moves. plan()
  /// then refuses a batch that does not fit.
  void reserve_capacity(const capacity& limits) { runner_.reserve_capacity(limits); }

  /// The values an output must hold for any step within the capacity.
  std::int64_t output_capacity() const { return runner_.output_capacity(); }

  /// Outside any capture: the staging one captured step needs (device spaces).
  auto reserve_graph() requires(Space::family == algorithm_family::device) { return runner_.reserve_graph(); }

  /// Records the step into the stream capture in progress, sized by the
  /// capacity, its image uploaded from `home`. The graph reads `hidden`
  /// (capacity.rows rows) and writes `output` (output_capacity() values) at every
  /// replay: they, `home`, this pooler and the state store must outlive it.
  /// Launch the graph, then call home.mark_launched(); each later step is
  /// restage() and the same.
  template <hidden_element T, class Upload>
  void capture(hidden_view<T> hidden, const step_plan& plan, state_store<Space>& state, cuda::std::span<Result> output,
               Upload& home) {
    runner_.capture(hidden, detail::plan_access::program(plan), state, output, home);
  }

  /// Between replays of a captured step: writes the next step's plan into the
  /// graph's slot (once the last replay has read it) and moves chunked requests
  /// on. Then launch the graph and call home.mark_launched(). The hidden states
  /// of the step go into the first plan.num_rows rows of the captured buffer.
  template <class Upload>
  void restage(const step_plan& plan, state_store<Space>& state, Upload& home) {
    runner_.restage(detail::plan_access::program(plan), state, home);
  }

 private:
  template <class Table>
  friend class dispatcher;

  /// What a dispatcher takes from the pooler it is given.
  unit_type&& unit() && { return std::move(runner_.template unit<0>()); }

  detail::step_runner<Space, Result, unit_type> runner_;
};

}  // namespace seqpool
