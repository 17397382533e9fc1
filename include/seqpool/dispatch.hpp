// The compile-time table from task to pooler, and the dispatcher that walks a
// step's requests through it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda/std/span>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/detail/check_forward.hpp>
#include <seqpool/error.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/detail/index_block.hpp>
#include <seqpool/plan.hpp>
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

/// A whole step as the dispatcher planned it: one plan per table entry that has
/// requests this step, their records packed into one upload and their results
/// into one output.
struct dispatch_plan {
  /// One pooler's share of the step: every request of its task, from every group.
  struct launch {
    std::size_t entry = 0;              ///< the table entry
    std::vector<std::size_t> requests;  ///< batch indices, in batch order
    step_plan plan;
    std::size_t block_offset = 0;  ///< where its records start in the step's upload
  };

  /// Per request in batch order: where its result lies in the step's output, or nothing.
  std::vector<std::optional<result_slice>> results;
  std::int64_t output_size = 0;
  std::int64_t num_rows = 0;
  std::size_t block_bytes = 0;
  std::vector<task_group> groups;  ///< runs of consecutive requests that share a task (SPEC section 5)
  std::vector<launch> launches;
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
/// the upload of their own, so that a step captured once (capture()) replays for
/// every batch that fits (restage()), whichever tasks it holds.
template <class... Entries>
class dispatcher<dispatch_table<Entries...>> {
 public:
  using table = dispatch_table<Entries...>;
  using space_type = typename table::space_type;
  using result_type = typename table::result_type;

  explicit dispatcher(space_type& space, std::optional<typename Entries::pooler_type>... poolers)
      : space_(&space), poolers_(std::move(poolers)...) {
    for_each_pooler([&](const auto& pooler) {
      if (hidden_size_ == 0) hidden_size_ = pooler.hidden_size();
      if (pooler.hidden_size() != hidden_size_)
        detail::fail("hidden_size", "the poolers of one dispatcher read the same hidden states, but one has ",
                     pooler.hidden_size(), " columns and another ", hidden_size_);
    });
    if (hidden_size_ == 0) detail::fail("dispatcher", "needs at least one pooler");
  }

  std::int64_t hidden_size() const { return hidden_size_; }

  /// Host only: checks the whole batch and plans every pooler's share. Throws
  /// before planning anything if a task has no pooler.
  dispatch_plan plan(const batch& step, const state_store<space_type>& state) const {
    const step_layout layout = lay_out(step);
    detail::check_served(
        step, layout, [&](seqpool::task wanted) { return entry_of(wanted).has_value(); }, " in the dispatch table");
    if (capacity_) {
      detail::check_limit("requests", static_cast<std::int64_t>(step.requests.size()), capacity_->requests);
      detail::check_rows_fit(*capacity_, layout.num_rows);
    }

    dispatch_plan whole;
    whole.num_rows = layout.num_rows;
    whole.groups = layout.groups;
    whole.results.resize(step.requests.size());
    const std::vector<chunk> chunks = chunks_in_step(layout);

    std::int64_t result_rows = 0;
    std::int64_t columns = 0;
    for (std::size_t entry = 0; entry < table::tasks.size(); ++entry) {
      dispatch_plan::launch launch;
      launch.entry = entry;
      for (std::size_t i = 0; i < step.requests.size(); ++i)
        if (step.requests[i].task == table::tasks[entry]) launch.requests.push_back(i);
      if (launch.requests.empty()) continue;
      const std::int64_t output_begin = detail::align_results(whole.output_size, sizeof(result_type));
      with_pooler(poolers_, entry, [&](const auto& pooler) {
        launch.plan = pooler.plan(step, chunks, launch.requests, state, output_begin, detail::ids_checked);
        if constexpr (std::remove_cvref_t<decltype(pooler)>::token_wise) result_rows += launch.plan.result_rows;
      });
      columns += static_cast<std::int64_t>(launch.plan.block.records.column_table.size());
      launch.block_offset = capacity_ ? regions_[entry] : detail::align_bytes(whole.block_bytes);
      whole.block_bytes = std::max(whole.block_bytes, launch.block_offset + launch.plan.block.bytes);
      whole.output_size = output_begin + launch.plan.output_size;
      for (std::size_t k = 0; k < launch.requests.size(); ++k) whole.results[launch.requests[k]] = launch.plan.results[k];
      whole.launches.push_back(std::move(launch));
    }
    if (capacity_) {
      detail::check_limit("result_rows", result_rows, capacity_->result_rows);
      detail::check_limit("columns", columns, capacity_->columns);
      whole.block_bytes = capacity_bytes_;  // every entry's region, each with a header to write
    }
    return whole;
  }

  /// Outside the step: room for the one upload, every pooler's workspace and the
  /// state blocks of chunked requests. The audit counts what it allocates.
  void reserve(const dispatch_plan& plan, state_store<space_type>& state) {
    for (const dispatch_plan::launch& launch : plan.launches)
      with_pooler(poolers_, launch.entry, [&](auto& pooler) { pooler.reserve(launch.plan, state); });
    space_->reserve_upload(plan.block_bytes);
  }

  /// The step: one upload of every pooler's records, then each pooler's work
  /// over the hidden states. `output` must hold plan.output_size values. Inside
  /// a stream capture, use capture().
  template <hidden_element T>
  void forward(hidden_view<T> hidden, const dispatch_plan& plan, state_store<space_type>& state,
               cuda::std::span<result_type> output) {
    detail::check_forward(hidden, hidden_size_, plan.num_rows, plan.output_size, output);
    if (space_->capturing())
      detail::fail("forward", "the stream is being captured: a captured step goes through capture() and a graph_upload");
    check_reserved(plan, state);
    if (!plan.launches.empty()) {
      const std::span<std::byte> staged = space_->stage(plan.block_bytes);
      encode(plan, state, staged);
      const std::byte* uploaded = space_->upload(staged);
      for (const dispatch_plan::launch& launch : plan.launches)
        with_pooler(poolers_, launch.entry, [&](auto& pooler) {
          pooler.launch(hidden, &launch.plan, uploaded + launch.block_offset, output);
        });
    }
    advance(plan, state);
  }

  // Capacity and capture.

  /// Fixes the largest step the dispatcher takes (every task's pooler may get
  /// all of it) and makes room for it outside any step.
  void reserve_capacity(const capacity& limits) {
    std::size_t bytes = 0;
    std::int64_t per_request = 0;
    std::int64_t per_result_row = 0;
    for_each_entry([&](std::size_t entry, auto& pooler) {
      pooler.reserve_capacity(limits);
      regions_[entry] = detail::align_bytes(bytes);
      bytes = regions_[entry] + pooler.bounds().block_bytes;
      per_request = std::max(per_request, pooler.bounds().output_per_request);
      per_result_row = std::max(per_result_row, pooler.bounds().output_per_result_row);
    });
    capacity_ = limits;
    capacity_bytes_ = bytes;
    // Each task's results start on a 16-byte boundary: up to 3 floats (7 16-bit values) more per entry.
    output_capacity_ =
        per_request * limits.requests + per_result_row * limits.result_rows +
        (16 / static_cast<std::int64_t>(sizeof(result_type)) - 1) * static_cast<std::int64_t>(sizeof...(Entries));
  }

  /// The values an output must hold for any step within the capacity.
  std::int64_t output_capacity() const {
    require_capacity("output_capacity");
    return output_capacity_;
  }

  /// Outside any capture: the staging one captured step needs (device spaces).
  auto reserve_graph() requires(space_type::layer == layer::device) {
    require_capacity("reserve_graph");
    return space_->reserve_graph(capacity_bytes_);
  }

  /// Records the step into the stream capture in progress: the upload of the
  /// whole capacity block from `home`, and every pooler's launches sized by the
  /// capacity (a task absent from this step included, so that later batches may
  /// hold it). The graph reads `hidden` (capacity.rows rows) and writes `output`
  /// (output_capacity() values) at every replay: they, `home`, the dispatcher
  /// and the state store must outlive it. Launch the graph, then call
  /// home.mark_launched(); each later step is restage() and the same.
  template <hidden_element T, class Upload>
  void capture(hidden_view<T> hidden, const dispatch_plan& plan, state_store<space_type>& state,
               cuda::std::span<result_type> output, Upload& home) {
    require_capacity("capture");
    detail::check_captured_views(hidden, hidden_size_, capacity_->rows, output_capacity_, output);
    check_planned_for_capacity(plan);
    check_reserved(plan, state);
    encode(plan, state, space_->stage(home));
    const std::byte* uploaded = space_->upload(home);
    for_each_entry([&](std::size_t entry, auto& pooler) {
      pooler.launch(hidden, nullptr, uploaded + regions_[entry], output);
    });
    advance(plan, state);
  }

  /// Between replays of a captured step: writes the next step's plan into the
  /// graph's slot (once the last replay has read it) and moves chunked requests
  /// on. Then launch the graph and call home.mark_launched(). The step's hidden
  /// states go into the first plan.num_rows rows of the captured buffer.
  template <class Upload>
  void restage(const dispatch_plan& plan, state_store<space_type>& state, Upload& home) {
    require_capacity("restage");
    check_planned_for_capacity(plan);
    check_reserved(plan, state);
    encode(plan, state, space_->restage(home));
    advance(plan, state);
  }

 private:
  void require_capacity(const char* call) const {
    if (!capacity_) detail::fail(call, "needs a capacity: call reserve_capacity() first");
  }

  /// A plan made before reserve_capacity() packs its records where the capacity's
  /// regions are not.
  void check_planned_for_capacity(const dispatch_plan& plan) const {
    if (plan.block_bytes != capacity_bytes_)
      detail::fail("capacity", "the plan was made before reserve_capacity(): plan the step again");
  }

  void check_reserved(const dispatch_plan& plan, const state_store<space_type>& state) const {
    for (const dispatch_plan::launch& launch : plan.launches)
      with_pooler(poolers_, launch.entry, [&](const auto& pooler) { pooler.check_reserved(launch.plan, state); });
  }

  /// Writes every pooler's records at its offset; with a capacity, an entry
  /// without requests gets an empty header, which its launches read as nothing to do.
  void encode(const dispatch_plan& plan, const state_store<space_type>& state, std::span<std::byte> staged) const {
    if (capacity_)
      for (std::size_t entry = 0; entry < table::tasks.size(); ++entry)
        if (present(entry)) std::memset(staged.data() + regions_[entry], 0, sizeof(detail::plan_sections));
    for (const dispatch_plan::launch& launch : plan.launches)
      with_pooler(poolers_, launch.entry, [&](const auto& pooler) {
        pooler.encode(launch.plan, state, staged.subspan(launch.block_offset, launch.plan.block.bytes));
      });
  }

  void advance(const dispatch_plan& plan, state_store<space_type>& state) const {
    for (const dispatch_plan::launch& launch : plan.launches)
      with_pooler(poolers_, launch.entry, [&](const auto& pooler) { pooler.advance(launch.plan, state); });
  }

  bool present(std::size_t entry) const {
    const auto filled = std::apply(
        [](const auto&... poolers) { return std::array<bool, sizeof...(Entries)>{poolers.has_value()...}; }, poolers_);
    return filled[entry];
  }

  std::optional<std::size_t> entry_of(task wanted) const {
    for (std::size_t entry = 0; entry < table::tasks.size(); ++entry)
      if (table::tasks[entry] == wanted && present(entry)) return entry;
    return std::nullopt;
  }

  /// Calls `work` with the pooler of a present entry, as its own type.
  template <class Poolers, class Work>
  static void with_pooler(Poolers& poolers, std::size_t entry, Work&& work) {
    std::size_t index = 0;
    std::apply([&](auto&... each) { ((index++ == entry ? work(*each) : void()), ...); }, poolers);
  }

  template <class Work>
  void for_each_pooler(Work&& work) const {
    std::apply([&](const auto&... poolers) { ((poolers ? work(*poolers) : void()), ...); }, poolers_);
  }

  /// Calls `work(entry, pooler)` for every present entry.
  template <class Work>
  void for_each_entry(Work&& work) {
    std::size_t entry = 0;
    std::apply([&](auto&... poolers) { ((poolers ? work(entry++, *poolers) : void(entry++)), ...); }, poolers_);
  }

  space_type* space_;
  std::tuple<std::optional<typename Entries::pooler_type>...> poolers_;
  std::int64_t hidden_size_ = 0;
  std::optional<capacity> capacity_;
  std::array<std::size_t, sizeof...(Entries)> regions_{};  ///< each entry's offset in the capacity block
  std::size_t capacity_bytes_ = 0;
  std::int64_t output_capacity_ = 0;
};

}  // namespace seqpool
