// The compile-time table from task to pooler, and the dispatcher that walks a
// step's requests through it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda/std/span>

#include <seqpool/batch.hpp>
#include <seqpool/detail/check_forward.hpp>
#include <seqpool/error.hpp>
#include <seqpool/hidden.hpp>
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
    std::int64_t output_offset = 0;
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
/// from the start of the step, so a step launches each pooler's passes once
/// however often the tasks alternate, and the whole step is one upload. Poolers
/// are reached through the table only, without virtual calls. A table entry may
/// be left empty (std::nullopt) where a deployment serves fewer tasks; its task
/// is then refused like one the table lacks.
template <class... Entries>
class dispatcher<dispatch_table<Entries...>> {
 public:
  using table = dispatch_table<Entries...>;
  using space_type = typename table::space_type;

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
    for (const task_group& group : layout.groups)
      if (!entry_of(group.task))
        detail::fail_request(group.first_request, step.requests[group.first_request].id, "task", name(group.task),
                             " has no pooler in the dispatch table");

    dispatch_plan whole;
    whole.num_rows = layout.num_rows;
    whole.groups = layout.groups;
    whole.results.resize(step.requests.size());
    std::vector<chunk> chunks = layout.chunks;  // rows counted from the start of the step
    for (const task_group& group : layout.groups)
      for (std::size_t i = group.first_request; i < group.first_request + group.num_requests; ++i)
        chunks[i].row_begin += group.row_begin;

    for (std::size_t entry = 0; entry < table::tasks.size(); ++entry) {
      dispatch_plan::launch launch;
      launch.entry = entry;
      for (std::size_t i = 0; i < step.requests.size(); ++i)
        if (step.requests[i].task == table::tasks[entry]) launch.requests.push_back(i);
      if (launch.requests.empty()) continue;
      with_pooler(poolers_, entry,
                  [&](const auto& pooler) { launch.plan = pooler.plan(step, chunks, launch.requests, state); });
      launch.block_offset = (whole.block_bytes + block_alignment - 1) / block_alignment * block_alignment;
      launch.output_offset = whole.output_size;
      whole.block_bytes = launch.block_offset + launch.plan.block.bytes;
      whole.output_size += launch.plan.output_size;
      for (std::size_t k = 0; k < launch.requests.size(); ++k)
        if (const auto& result = launch.plan.results[k])
          whole.results[launch.requests[k]] =
              result_slice{result->offset + launch.output_offset, result->rows, result->cols};
      whole.launches.push_back(std::move(launch));
    }
    return whole;
  }

  /// Outside the step: room for the one upload, every pooler's workspace and the
  /// state slots of chunked requests. The audit counts what it allocates.
  void reserve(const dispatch_plan& plan, state_store<space_type>& state) {
    space_->reserve_upload(plan.block_bytes);
    for (const dispatch_plan::launch& launch : plan.launches)
      with_pooler(poolers_, launch.entry, [&](auto& pooler) { pooler.reserve(launch.plan, state); });
  }

  /// The step: one upload of every pooler's records, then each pooler's passes
  /// over the hidden states. `output` must hold plan.output_size floats.
  template <hidden_element T>
  void forward(hidden_view<T> hidden, const dispatch_plan& plan, state_store<space_type>& state,
               cuda::std::span<float> output) {
    detail::check_forward(hidden, hidden_size_, plan.num_rows, plan.output_size, output);
    reserve(plan, state);

    if (plan.block_bytes > 0) {
      const std::span<std::byte> staged = space_->stage(plan.block_bytes);
      for (const dispatch_plan::launch& launch : plan.launches)
        with_pooler(poolers_, launch.entry, [&](const auto& pooler) {
          pooler.encode(launch.plan, state, staged.subspan(launch.block_offset, launch.plan.block.bytes));
        });
      const std::byte* uploaded = space_->upload(staged);
      for (const dispatch_plan::launch& launch : plan.launches)
        with_pooler(poolers_, launch.entry, [&](auto& pooler) {
          pooler.launch(hidden, launch.plan, uploaded + launch.block_offset,
                        output.subspan(launch.output_offset, launch.plan.output_size));
        });
    }
    for (const dispatch_plan::launch& launch : plan.launches)
      with_pooler(poolers_, launch.entry, [&](const auto& pooler) { pooler.advance(launch.plan, state); });
  }

 private:
  static constexpr std::size_t block_alignment = 16;

  std::optional<std::size_t> entry_of(task wanted) const {
    const auto present = std::apply(
        [](const auto&... poolers) { return std::array<bool, sizeof...(Entries)>{poolers.has_value()...}; }, poolers_);
    for (std::size_t entry = 0; entry < present.size(); ++entry)
      if (table::tasks[entry] == wanted && present[entry]) return entry;
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

  space_type* space_;
  std::tuple<std::optional<typename Entries::pooler_type>...> poolers_;
  std::int64_t hidden_size_ = 0;
};

}  // namespace seqpool
