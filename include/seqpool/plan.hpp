// step_plan: what plan() fixed on the host about one step.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/detail/program.hpp>
#include <seqpool/result_slice.hpp>

namespace seqpool {

class step_plan;

namespace detail {

/// How poolers and dispatchers reach the part of a plan only they read.
struct plan_access {
  static step_plan make(step_program&& program);
  static const step_program& program(const step_plan& plan);
};

}  // namespace detail

/// Made by a pooler's or dispatcher's plan() on the host; its forward() runs
/// exactly this, once, after a reserve() for it. What a caller reads is public;
/// the records the step uploads are its own.
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

namespace detail {

inline step_plan plan_access::make(step_program&& program) {
  step_plan plan;
  plan.results = std::move(program.results);
  plan.groups = std::move(program.groups);
  plan.output_size = program.output_size;
  plan.num_rows = program.num_rows;
  plan.program_ = std::move(program);
  return plan;
}

inline const step_program& plan_access::program(const step_plan& plan) { return plan.program_; }

}  // namespace detail

}  // namespace seqpool
