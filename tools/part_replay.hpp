// One part of seqpool-run's replay of a batch with parts, behind an interface
// that names no result type, so that the replay of the parts (replay_parts.cpp)
// compiles none of their kernels: each part is made by the part of seqpool-run
// built for its space and result type (replay_part.cpp, typed_part_replay.hpp).
#pragma once

#include <cstdint>
#include <memory>

#include <seqpool/part_output.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/runtime_multi_pooler.hpp>

#include "batch_file.hpp"
#include "replay_batch.hpp"
#include "result_files.hpp"
#include "step_input.hpp"

namespace seqpool::tool {

template <class Space>
class part_replay {
 public:
  virtual ~part_replay() = default;
  /// The part's pooler, taken once by the runtime_multi_pooler.
  virtual seqpool::runtime_part<Space> take() = 0;
  /// A step's output of the part, of `values` values of its result type.
  virtual seqpool::part_output output(std::int64_t values) = 0;
  /// The last output's results, at `results`, written by `files` into the part's folder.
  virtual void write(const step_input& step, const part_results& results, result_files& files) = 0;
};

/// The replay of `part`, whose results are of type Result.
template <class Space, class Result>
std::unique_ptr<part_replay<Space>> make_part_replay(Space& space, const batch_file& batch, const part_file& part,
                                                     const options& chosen);

}  // namespace seqpool::tool
