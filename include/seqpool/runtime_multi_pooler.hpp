// runtime_multi_pooler<Space>: a multi_pooler whose parts are chosen at run time.
#pragma once

#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include <seqpool/detail/any_unit.hpp>
#include <seqpool/part.hpp>
#include <seqpool/part_output.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/pooler.hpp>
#include <seqpool/step_runner.hpp>

namespace seqpool {

/// One part of a runtime_multi_pooler: any pooler of the space, with the token
/// filters it adds, its type known at run time only.
template <class Space>
class runtime_part {
 public:
  template <class Method, class Head, class Result>
  runtime_part(part<pooler<Method, Head, Space, Result>> chosen)  // NOLINT: a part of any pooler is one
      : unit_(std::move(chosen.pooler).take_unit()), filters_(std::move(chosen.filters)) {}

  template <class Method, class Head, class Result>
  runtime_part(pooler<Method, Head, Space, Result> chosen, part_filters filters = {})  // NOLINT: as a part
      : unit_(std::move(chosen).take_unit()), filters_(std::move(filters)) {}

 private:
  template <class S>
  friend class runtime_multi_pooler;

  detail::any_unit<Space> unit_;
  part_filters filters_;
};

/// A multi_pooler (SPEC section 5) whose parts a program chooses at run time,
/// as many as it likes, each any pooler of the space: the multi_pooler of a
/// server or tool that reads which outputs to give from its configuration.
/// It plans, stages and checks a step as multi_pooler does and gives the same
/// results bit for bit; what it adds is one virtual call a part a phase, and
/// the compile time of every part's launches for every hidden type.
///
///     std::vector<seqpool::runtime_part<Space>> parts;
///     parts.emplace_back(dense(...));
///     parts.emplace_back(sparse(...), seqpool::part_filters{.drop_token_ids = {0, 1, 2, 3}});
///     seqpool::runtime_multi_pooler<Space> m3(space, std::move(parts));
///     auto plan = m3.plan(batch, state);
///     m3.reserve(plan, state);
///     const seqpool::part_output outputs[] = {dense_out, sparse_out};  // spans of each part's result type
///     m3.forward(hidden, plan, state, outputs);
template <class Space>
class runtime_multi_pooler : public step_runner<Space, detail::output_per_part, detail::any_unit<Space>> {
  using runner = step_runner<Space, detail::output_per_part, detail::any_unit<Space>>;

 public:
  runtime_multi_pooler(Space& memory, std::vector<runtime_part<Space>> parts)
      : runner(memory, filters_of(parts), units_of(parts)) {}

  /// How many parts it has, each an output; result_type_name(k) says of what.
  std::size_t parts() const { return this->entry_count(); }

 private:
  static std::vector<part_filters> filters_of(const std::vector<runtime_part<Space>>& parts) {
    std::vector<part_filters> filters;
    filters.reserve(parts.size());
    for (const runtime_part<Space>& chosen : parts) filters.push_back(chosen.filters_);
    return filters;
  }
  /// Moves each part's unit out, leaving its filters: the constructor's
  /// arguments are made in either order. A part moved from holds none.
  static std::vector<detail::any_unit<Space>> units_of(std::vector<runtime_part<Space>>& parts) {
    std::vector<detail::any_unit<Space>> units;
    units.reserve(parts.size());
    for (runtime_part<Space>& chosen : parts) {
      if (!chosen.unit_.holds())
        detail::fail("parts", "part ", units.size(),
                     " holds no pooler: it was moved from (into another list, or a "
                     "runtime_multi_pooler)");
      units.push_back(std::move(chosen.unit_));
    }
    return units;
  }
};

}  // namespace seqpool
