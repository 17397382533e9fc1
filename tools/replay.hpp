// seqpool-run's replay of a batch file: one dispatcher and one state store in a
// space, with results of one type, stepping through the file (SPEC section 9).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <seqpool/seqpool.hpp>

#include "audit_log.hpp"
#include "batch_file.hpp"
#include "npy.hpp"
#include "pooler_factory.hpp"
#include "replay_batch.hpp"
#include "result_files.hpp"
#include "step_input.hpp"

namespace seqpool::tool {

/// Replays every step through one dispatcher and one state store, so that
/// chunked requests continue across steps; results are of type Result.
template <class Space, class Result>
class replay {
 public:
  replay(const batch_file& batch, const options& chosen)
      : batch_(batch),
        options_(chosen),
        poolers_(space_, batch.hidden_size, batch.results),
        dispatcher_(make_dispatcher()),
        audit_(chosen.audit, chosen.out) {}

  void run() {
    for_each_step(batch_, [&](std::size_t step) { run_step(step); });
    audit_.finish();
  }

 private:
  seqpool::dispatcher<seqpool::configurable_table<Space, Result>> make_dispatcher() {
    const pooler_methods& methods = batch_.poolers;
    return seqpool::dispatcher<seqpool::configurable_table<Space, Result>>(
        space_, poolers_.template make<task::embed>(methods, "poolers.embed"),
        poolers_.template make<task::classify>(methods, "poolers.classify"),
        poolers_.template make<task::token_embed>(methods, "poolers.token_embed"),
        poolers_.template make<task::token_classify>(methods, "poolers.token_classify"));
  }

  void run_step(std::size_t index) {
    const step_input step = read_step_input(batch_, index);
    check_restarts(step, state_);
    seqpool::step_plan& plan = plan_;
    dispatcher_.plan(step.requests, state_, plan);
    dispatcher_.reserve(plan, state_);
    seqpool::buffer<Result, Space> output(space_, static_cast<std::size_t>(plan.output_size));
    const seqpool::audit_counts counts =
        with_element(step.element, [&]<class T>() { return forward<T>(step.hidden, plan, output); });

    std::vector<Result> results(output.size());
    space_.copy_out(cuda::std::span<const Result>(output.data(), output.size()), std::span<Result>(results));
    result_files files;
    files.write(step.where, step.requests, plan.results, std::span<const Result>(results), options_.out);
    audit_.record(step.where, index, counts, [&] { files.publish(step.where); });
  }

  /// The step itself, with what the space counted while it ran: defined in
  /// replay_forward.hpp and instantiated once per hidden type (replay_part.cpp).
  template <class T>
  seqpool::audit_counts forward(const npy_array& hidden, const seqpool::step_plan& plan,
                                seqpool::buffer<Result, Space>& output);

  const batch_file& batch_;
  const options& options_;
  Space space_;
  pooler_factory<Space, Result> poolers_;
  seqpool::dispatcher<seqpool::configurable_table<Space, Result>> dispatcher_;
  seqpool::state_store<Space> state_{space_};
  seqpool::step_plan plan_;  ///< every step's, planned into the last one's storage as an engine plans
  audit_log audit_;
};

template <class Space, class Result>
void replay_batch(const batch_file& batch, const options& chosen) {
  replay<Space, Result>(batch, chosen).run();
}

}  // namespace seqpool::tool
