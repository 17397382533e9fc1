// seqpool-run's replay of a batch with parts (SPEC section 9): one
// runtime_multi_pooler of the parts and one state store in a space, every
// request pooled by every part, stepping through the file.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <seqpool/runtime_multi_pooler.hpp>
#include <seqpool/seqpool.hpp>

#include "audit_log.hpp"
#include "batch_file.hpp"
#include "npy.hpp"
#include "part_replay.hpp"
#include "replay_batch.hpp"
#include "result_files.hpp"
#include "step_input.hpp"

namespace seqpool::tool {

template <class Space>
class parts_replay {
 public:
  parts_replay(const batch_file& batch, const options& chosen)
      : batch_(batch),
        options_(chosen),
        parts_(make_parts()),
        poolers_(make_poolers()),
        audit_(chosen.audit, chosen.out) {}

  void run() {
    for_each_step(batch_, [&](std::size_t step) { run_step(step); });
    audit_.finish();
  }

 private:
  /// Each part's replay, made by the part of seqpool-run built for its result type.
  std::vector<std::unique_ptr<part_replay<Space>>> make_parts() {
    std::vector<std::unique_ptr<part_replay<Space>>> made;
    for (const part_file& part : batch_.parts) made.push_back(replay_of(part));
    return made;
  }

  std::unique_ptr<part_replay<Space>> replay_of(const part_file& part) {
    return with_result_type(part.results.result_dtype, [&]<class Result>() {
      return make_part_replay<Space, Result>(space_, batch_, part, options_);
    });
  }

  /// The parts' poolers as one; what seqpool refuses of them is refused as the parts'.
  seqpool::runtime_multi_pooler<Space> make_poolers() {
    std::vector<seqpool::runtime_part<Space>> taken;
    for (const auto& part : parts_) taken.push_back(part->take());
    try {
      return seqpool::runtime_multi_pooler<Space>(space_, std::move(taken));
    } catch (const seqpool::error& refused) {
      throw input_error(std::string("parts: ") + refused.what());
    }
  }

  void run_step(std::size_t index) {
    const step_input step = read_step_input(batch_, index);
    check_restarts(step, state_);
    poolers_.plan(step.requests, state_, plan_);
    poolers_.reserve(plan_, state_);
    std::vector<seqpool::part_output> outputs;
    for (std::size_t k = 0; k < parts_.size(); ++k) outputs.push_back(parts_[k]->output(plan_.parts[k].output_size));
    const seqpool::audit_counts counts =
        with_element(step.element, [&]<class T>() { return forward<T>(step, outputs); });
    result_files files;
    for (std::size_t k = 0; k < parts_.size(); ++k) parts_[k]->write(step, plan_.parts[k], files);
    audit_.record(step.where, index, counts, [&] { files.publish(step.where); });
  }

  /// The step itself, with what the space counted while it ran.
  template <class T>
  seqpool::audit_counts forward(const step_input& step, std::span<const seqpool::part_output> outputs) {
    const seqpool::buffer<T, Space> rows = copied_in<T>(space_, step.hidden);
    const seqpool::audit_scope scope(space_.audit());
    poolers_.forward(seqpool::make_hidden_view<T>(rows.data(), step.rows, batch_.hidden_size), plan_, state_, outputs);
    return scope.counts();
  }

  const batch_file& batch_;
  const options& options_;
  Space space_;
  /// Before the poolers, which outlive none of them: their heads read the layers each part keeps.
  std::vector<std::unique_ptr<part_replay<Space>>> parts_;
  seqpool::runtime_multi_pooler<Space> poolers_;
  seqpool::state_store<Space> state_{space_};
  seqpool::parts_plan plan_;  ///< every step's, planned into the last one's storage as an engine plans
  audit_log audit_;
};

template <class Space>
void replay_parts(const batch_file& batch, const options& chosen) {
  parts_replay<Space>(batch, chosen).run();
}

}  // namespace seqpool::tool
