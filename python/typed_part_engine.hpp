// A multi-pooler's part of one result type, which the engine part of that type
// (engine_part.cpp, engine_part.cu) instantiates, and the multi-pooler engine
// (multi_pooler_engine.cpp) reaches through part_engine.hpp only.
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
  typed_part_engine(Space& space, const part_config& config) : space_(&space), heads_(space, config.pooler) {
    switch (config.served) {
      case task::embed:
        take_pooler(pooler_for<task::embed, Result>(space, config.pooler, heads_), config);
        break;
      case task::classify:
        take_pooler(pooler_for<task::classify, Result>(space, config.pooler, heads_), config);
        break;
      case task::token_embed:
        take_pooler(pooler_for<task::token_embed, Result>(space, config.pooler, heads_), config);
        break;
      case task::token_classify:
        take_pooler(pooler_for<task::token_classify, Result>(space, config.pooler, heads_), config);
        break;
    }
  }

  runtime_part<Space> take() override {
    if (!taken_) throw std::logic_error("a part's pooler is taken once");
    return std::move(*std::exchange(taken_, std::nullopt));
  }
  DLDataType result_type() const override { return dlpack_type<Result>(); }
  bool sparse() const override { return sparse_element<Result>; }
  std::unique_ptr<output_memory> output(std::int64_t values) override {
    return std::make_unique<output_buffer<Space, Result>>(*space_, values);
  }
  part_output as_output(DLTensor& tensor) const override { return dlpack::output<Space, Result>(tensor); }

 private:
  template <class Pooler>
  void take_pooler(Pooler made, const part_config& config) {
    taken_.emplace(std::move(made), config.filters);
  }

  Space* space_;
  head_memory<Space> heads_;
  std::optional<runtime_part<Space>> taken_;
};

template <class Space, class Result>
std::unique_ptr<part_engine<Space>> make_part_engine(Space& space, const part_config& config) {
  return std::make_unique<typed_part_engine<Space, Result>>(space, config);
}

}  // namespace seqpool::python
