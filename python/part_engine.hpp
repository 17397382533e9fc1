// One part of a multi-pooler engine, behind an interface that names no result
// type, so that the multi-pooler (multi_pooler_engine.cpp) compiles none of the parts'
// kernels: each part is made by the engine part built for its result type
// (engine_part.cpp, typed_part_engine.hpp).
#pragma once

#include <cstdint>
#include <memory>

#include <dlpack/dlpack.h>

#include <seqpool/part_output.hpp>
#include <seqpool/runtime_multi_pooler.hpp>

#include "engine.hpp"

namespace seqpool::python {

template <class Space>
class part_engine {
 public:
  virtual ~part_engine() = default;
  /// The part's pooler and filters, taken once by the runtime_multi_pooler.
  virtual runtime_part<Space> take() = 0;
  virtual DLDataType result_type() const = 0;
  virtual bool sparse() const = 0;
  /// An output of `values` values of its result type, in the space.
  virtual std::unique_ptr<output_memory> output(std::int64_t values) = 0;
  /// `tensor` as its output, checked as a dispatcher's output is (its type, device, layout).
  virtual part_output as_output(DLTensor& tensor) const = 0;
};

/// The part `config` describes, its results of type Result.
template <class Space, class Result>
std::unique_ptr<part_engine<Space>> make_part_engine(Space& space, const part_config& config);

}  // namespace seqpool::python
