// One part of seqpool-run's replay of a batch with parts, of its result type:
// its pooler, its output and its result files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <seqpool/runtime_multi_pooler.hpp>
#include <seqpool/seqpool.hpp>

#include "batch_file.hpp"
#include "new_file.hpp"
#include "part_replay.hpp"
#include "pooler_factory.hpp"
#include "replay_batch.hpp"
#include "result_files.hpp"
#include "step_input.hpp"

namespace seqpool::tool {

/// A part of Result: its pooler until the runtime_multi_pooler takes it, the
/// layers its heads read (which the part keeps: it must outlive the pooler),
/// and the output of the last step.
template <class Space, class Result>
class typed_part_replay final : public part_replay<Space> {
 public:
  typed_part_replay(Space& space, const batch_file& batch, const part_file& part, const std::filesystem::path& out)
      : space_(&space),
        part_(&part),
        folder_(out / part.name),
        factory_(space, batch.hidden_size, part.results),
        output_(space, 0) {
    switch (part.served) {
      case task::embed:
        taken_ = made(factory_.template make<task::embed>(part.method, part.field));
        break;
      case task::classify:
        taken_ = made(factory_.template make<task::classify>(part.method, part.field));
        break;
      case task::token_embed:
        taken_ = made(factory_.template make<task::token_embed>(part.method, part.field));
        break;
      case task::token_classify:
        taken_ = made(factory_.template make<task::token_classify>(part.method, part.field));
        break;
    }
  }

  seqpool::runtime_part<Space> take() override {
    if (!taken_) throw std::logic_error("a part's pooler is taken once");
    return std::move(*std::exchange(taken_, std::nullopt));
  }

  seqpool::part_output output(std::int64_t values) override {
    output_ = seqpool::buffer<Result, Space>(*space_, static_cast<std::size_t>(values));
    return output_.span();
  }

  void write(const step_input& step, const part_results& results, result_files& files) override {
    std::vector<Result> values(output_.size());
    space_->copy_out(cuda::std::span<const Result>(output_.data(), output_.size()), std::span<Result>(values));
    make_folder(folder_, step.where + ": part " + seqpool::detail::quoted(part_->name));
    files.write(step.where, step.requests, results.results, std::span<const Result>(values), folder_, part_->served);
  }

 private:
  template <class Pooler>
  seqpool::runtime_part<Space> made(std::optional<Pooler> pooler) const {
    return seqpool::runtime_part<Space>(std::move(*pooler), part_->filters);
  }

  Space* space_;
  const part_file* part_;
  std::filesystem::path folder_;
  pooler_factory<Space, Result> factory_;
  std::optional<seqpool::runtime_part<Space>> taken_;
  seqpool::buffer<Result, Space> output_;
};

template <class Space, class Result>
std::unique_ptr<part_replay<Space>> make_part_replay(Space& space, const batch_file& batch, const part_file& part,
                                                     const options& chosen) {
  return std::make_unique<typed_part_replay<Space, Result>>(space, batch, part, chosen.out);
}

}  // namespace seqpool::tool
