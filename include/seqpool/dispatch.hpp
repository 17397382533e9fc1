// The compile-time table from task to pooler, and the dispatcher that walks a
// step's requests through it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include <cuda/std/span>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/detail/step_runner.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/pooler.hpp>
#include <seqpool/space/memory_space.hpp>
#include <seqpool/state.hpp>

namespace seqpool {

/// One row of a dispatch table: `Task` is served by `Pooler`.
template <task Task, class Pooler>
struct task_entry {
  static_assert(Pooler::task == Task,
                "task_entry: this pooler serves another task (its method's kind picks token_* or not, its head "
                "picks embed or classify)");
  static constexpr seqpool::task task = Task;
  using pooler_type = Pooler;
};

/// Which pooler serves which task, fixed at compile time.
template <class... Entries>
struct dispatch_table {
  static_assert(sizeof...(Entries) > 0, "dispatch_table: name at least one task_entry");

  static constexpr std::array<task, sizeof...(Entries)> tasks{Entries::task...};

  static constexpr bool tasks_are_unique() {
    for (std::size_t i = 0; i < tasks.size(); ++i)
      for (std::size_t j = i + 1; j < tasks.size(); ++j)
        if (tasks[i] == tasks[j]) return false;
    return true;
  }
  static_assert(tasks_are_unique(), "dispatch_table: a task may have one entry only");

  using space_type = typename std::tuple_element_t<0, std::tuple<Entries...>>::pooler_type::space_type;
  static_assert((std::is_same_v<typename Entries::pooler_type::space_type, space_type> && ...),
                "dispatch_table: every pooler must work in the same memory space");
  using result_type = typename std::tuple_element_t<0, std::tuple<Entries...>>::pooler_type::result_type;
  static_assert((std::is_same_v<typename Entries::pooler_type::result_type, result_type> && ...),
                "dispatch_table: every pooler writes the step's one output, so all must have the same Result type");
};

template <class Table>
class dispatcher;

/// Walks a step's requests in order, groups consecutive requests that share a
/// task, gives each group its rows of the hidden states, and returns results in
/// batch order. The groups of one task are planned together, with rows counted
/// from the start of the step, so a step launches each pooler's work once
/// however often the tasks alternate, and the whole step is one upload. Poolers
/// are reached through the table only, without virtual calls. A table entry may
/// be left empty (std::nullopt) where a deployment serves fewer tasks; its task
/// is then refused like one the table lacks.
///
/// Given a capacity (reserve_capacity()), every entry's records get a region of
/// the image of their own, so that a step captured once (capture()) replays
/// for every batch that fits (restage()), whichever tasks it holds.
template <class... Entries>
class dispatcher<dispatch_table<Entries...>> {
 public:
  using table = dispatch_table<Entries...>;
  using space_type = typename table::space_type;
  using result_type = typename table::result_type;

  explicit dispatcher(space_type& space, std::optional<typename Entries::pooler_type>... poolers)
      : runner_(space, " in the dispatch table", unit_of(std::move(poolers))...) {}

  std::int64_t hidden_size() const { return runner_.hidden_size(); }

  /// Host only: checks the whole batch and plans every pooler's share. Throws
  /// before planning anything if a task has no pooler.
  step_plan plan(const batch& step, const state_store<space_type>& state) const {
    return detail::plan_access::make(runner_.plan(step, state));
  }

  /// Outside the step: room for the one upload, every pooler's workspace and the
  /// state of chunked requests. The audit counts what it allocates.
  void reserve(const step_plan& plan, state_store<space_type>& state) {
    runner_.reserve(detail::plan_access::program(plan), state);
  }

  /// The step: one upload of every pooler's records, then each pooler's work
  /// over the hidden states. `output` must hold plan.output_size values. Inside
  /// a stream capture, use capture().
  template <hidden_element T>
  void forward(hidden_view<T> hidden, const step_plan& plan, state_store<space_type>& state,
               cuda::std::span<result_type> output) {
    runner_.forward(hidden, detail::plan_access::program(plan), state, output);
  }

  // Capacity and capture.

  /// Fixes the largest step the dispatcher takes (every task's pooler may get
  /// all of it), once, and makes room for it outside any step.
  void reserve_capacity(const capacity& limits) { runner_.reserve_capacity(limits); }

  /// The values an output must hold for any step within the capacity.
  std::int64_t output_capacity() const { return runner_.output_capacity(); }

  /// Outside any capture: the staging one captured step needs (device spaces).
  auto reserve_graph() requires(space_type::family == algorithm_family::device) { return runner_.reserve_graph(); }

  /// Records the step into the stream capture in progress: the upload of the
  /// whole capacity's image from `home`, and every pooler's launches sized by
  /// the capacity (a task absent from this step included, so that later
  /// batches may hold it). The graph reads `hidden` (capacity.rows rows) and
  /// writes `output` (output_capacity() values) at every replay: they, `home`,
  /// the dispatcher and the state store must outlive it. Launch the graph, then
  /// call home.mark_launched(); each later step is restage() and the same.
  template <hidden_element T, class Upload>
  void capture(hidden_view<T> hidden, const step_plan& plan, state_store<space_type>& state,
               cuda::std::span<result_type> output, Upload& home) {
    runner_.capture(hidden, detail::plan_access::program(plan), state, output, home);
  }

  /// Between replays of a captured step: writes the next step's plan into the
  /// graph's slot (once the last replay has read it) and moves chunked requests
  /// on. Then launch the graph and call home.mark_launched(). The step's hidden
  /// states go into the first plan.num_rows rows of the captured buffer.
  template <class Upload>
  void restage(const step_plan& plan, state_store<space_type>& state, Upload& home) {
    runner_.restage(detail::plan_access::program(plan), state, home);
  }

 private:
  template <class Pooler>
  static std::optional<typename Pooler::unit_type> unit_of(std::optional<Pooler>&& pooler) {
    if (!pooler) return std::nullopt;
    return std::move(*pooler).unit();
  }

  detail::step_runner<space_type, result_type, typename Entries::pooler_type::unit_type...> runner_;
};

}  // namespace seqpool
