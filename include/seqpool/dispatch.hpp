// The compile-time table from task to pooler, and the dispatcher that walks a
// step's requests through it.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include <seqpool/batch.hpp>
#include <seqpool/pooler.hpp>
#include <seqpool/step_runner.hpp>

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
/// batch order: a step runner (plan, reserve, forward; capture, restage) of a
/// table's poolers. The groups of one task are planned together, so a step
/// launches each pooler's work once however often the tasks alternate, and the
/// whole step is one upload. Poolers are reached through the table only,
/// without virtual calls. A table entry may be left empty (std::nullopt) where
/// a deployment serves fewer tasks; its task is then refused like one the table
/// lacks.
template <class... Entries>
class dispatcher<dispatch_table<Entries...>>
    : public step_runner<typename dispatch_table<Entries...>::space_type,
                         typename dispatch_table<Entries...>::result_type,
                         typename Entries::pooler_type::unit_type...> {
  using runner = step_runner<typename dispatch_table<Entries...>::space_type,
                             typename dispatch_table<Entries...>::result_type,
                             typename Entries::pooler_type::unit_type...>;

 public:
  using table = dispatch_table<Entries...>;
  using result_type = typename table::result_type;

  /// One argument per entry, in the table's order: its pooler, or std::nullopt
  /// for an entry left empty (a std::optional of the pooler is either).
  template <class... Poolers>
    requires(sizeof...(Poolers) == sizeof...(Entries))
  explicit dispatcher(typename table::space_type& space, Poolers&&... poolers)
      : runner(space, " in the dispatch table",
               unit_of<typename Entries::pooler_type>(std::forward<Poolers>(poolers))...) {}

 private:
  template <class Pooler>
  static std::optional<typename Pooler::unit_type> unit_of(Pooler&& pooler) {
    return std::move(pooler).take_unit();
  }
  template <class Pooler>
  static std::optional<typename Pooler::unit_type> unit_of(std::nullopt_t) {
    return std::nullopt;
  }
  template <class Pooler>
  static std::optional<typename Pooler::unit_type> unit_of(std::optional<Pooler>&& pooler) {
    if (!pooler) return std::nullopt;
    return std::move(*pooler).take_unit();
  }
};

}  // namespace seqpool
