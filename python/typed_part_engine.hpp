// A multi-pooler's part of one result type, which the engine part of that type
// (engine_part.cpp, engine_part.cu) instantiates, and the multi-pooler engine
// (engine_parts.cpp) reaches through part_engine.hpp only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include "engine_impl.hpp"
#include "part_engine.hpp"

namespace seqpool::python {

/// A multi-pooler's part of result type Result: its pooler until the
/// runtime_multi_pooler takes it, and the layers its head reads, which the
/// part keeps (it outlives the multi-pooler).
template <class Space, class Result>
class typed_part_engine final : public part_engine<Space> {
 public:
  typed_part_engine(Space& space, const part_config& config)
      : space_(&space), heads_(space, config.pooler), served_(served_by(config.pooler)) {
    switch (served_) {
      case task::embed:
        taken_.emplace(pooler_of<method::any_sequence, Result>(space, config.pooler, served_, heads_.embed()),
                       config.filters);
        break;
      case task::classify:
        taken_.emplace(pooler_of<method::any_sequence, Result>(space, config.pooler, served_, heads_.classify()),
                       config.filters);
        break;
      case task::token_embed:
        taken_.emplace(pooler_of<method::any_token, Result>(space, config.pooler, served_, heads_.embed()),
                       config.filters);
        break;
      case task::token_classify:
        taken_.emplace(pooler_of<method::any_token, Result>(space, config.pooler, served_, heads_.classify()),
                       config.filters);
        break;
    }
  }

  runtime_part<Space> take() override {
    if (!taken_) throw std::logic_error("a part's pooler is taken once");
    return std::move(*std::exchange(taken_, std::nullopt));
  }
  DLDataType result_type() const override { return dlpack_type<Result>(); }
  bool sparse() const override { return sparse_element<Result>; }
  task served() const override { return served_; }
  std::unique_ptr<output_memory> output(std::int64_t values) override {
    return std::make_unique<output_buffer<Space, Result>>(*space_, values);
  }
  part_output output_of(DLTensor& tensor) const override { return dlpack::output<Space, Result>(tensor); }

 private:
  /// The one task the config names a method for.
  static task served_by(const engine_config& config) {
    for (const task t : {task::embed, task::classify, task::token_embed, task::token_classify})
      if (config.methods[static_cast<std::size_t>(t)]) return t;
    throw std::logic_error("a part's config names a method for one task");
  }

  Space* space_;
  head_memory<Space> heads_;
  task served_;
  std::optional<runtime_part<Space>> taken_;
};

template <class Space, class Result>
std::unique_ptr<part_engine<Space>> make_part_engine(Space& space, const part_config& config) {
  return std::make_unique<typed_part_engine<Space, Result>>(space, config);
}

}  // namespace seqpool::python
