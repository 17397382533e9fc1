// step_plan: what plan() fixed on the host about one step.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/detail/program.hpp>
#include <seqpool/result_slice.hpp>

namespace seqpool {

class step_plan;
class parts_plan;

namespace detail {

/// How poolers, dispatchers and multi_poolers reach the part of a plan only they read.
struct plan_access {
  static const step_program& program(const step_plan& plan);
  static step_program& program(step_plan& plan);
  static const step_program& program(const parts_plan& plan);
  static step_program& program(parts_plan& plan);
};

}  // namespace detail

/// Made by a pooler's or dispatcher's plan() on the host; its forward() runs
/// exactly this, once, after a reserve() for it. What a caller reads is public;
/// the records the step uploads are its own. Planning into a plan
/// (plan(step, state, into)) reuses its storage: an engine that plans every
/// step into the same plan allocates nothing once the plan has held steps as
/// large (SPEC section 10). A plan moved from holds none.
class step_plan {
 public:
  /// Per request, in batch order: where its result lies in the step's output,
  /// or nothing when it does not finish this step.
  std::vector<std::optional<result_slice>> results;
  std::int64_t output_size = 0;  ///< values the step's output must hold
  std::int64_t num_rows = 0;     ///< rows the step's hidden states must have
  /// Runs of consecutive requests that share a task (SPEC section 5), each
  /// pooled with the rest of its task.
  std::vector<task_group> groups;

 private:
  friend struct detail::plan_access;
  detail::step_program program_;
};

/// One part's results in a multi_pooler's step: per request, in batch order,
/// where its result lies in the part's output, or nothing when it does not
/// finish this step; and the values that output must hold.
struct part_results {
  std::vector<std::optional<result_slice>> results;
  std::int64_t output_size = 0;
};

/// Made by a multi_pooler's plan() on the host: a step_plan whose every request
/// has a result from each part, each part's in an output of its own. Planning
/// into it reuses its storage, as into a step_plan.
class parts_plan {
 public:
  std::vector<part_results> parts;  ///< one a part, in the multi_pooler's order
  std::int64_t num_rows = 0;        ///< rows the step's hidden states must have

 private:
  friend struct detail::plan_access;
  detail::step_program program_;
};

namespace detail {

inline const step_program& plan_access::program(const step_plan& plan) { return plan.program_; }
inline step_program& plan_access::program(step_plan& plan) { return plan.program_; }
inline const step_program& plan_access::program(const parts_plan& plan) { return plan.program_; }
inline step_program& plan_access::program(parts_plan& plan) { return plan.program_; }

}  // namespace detail

}  // namespace seqpool
