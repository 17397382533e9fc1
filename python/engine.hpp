// The Python module's engines: a dispatcher of runtime-chosen methods, or a
// multi-pooler of parts chosen at run time, each with its state store and its
// space, behind interfaces that name no template, so that the bindings
// (compiled once, by the host compiler) reach engines built for each result type
// and space in translation units of their own (nvcc's for CUDA).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <dlpack/dlpack.h>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/float16.hpp>
#include <seqpool/head/classify.hpp>
#include <seqpool/head/layers.hpp>
#include <seqpool/part.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/quantized.hpp>
#include <seqpool/space/audit.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool::python {

/// A dense layer's weights, [rows, cols] row-major, as the caller handed them
/// over, and the function applied to each of its outputs.
struct layer_weights {
  std::vector<float> weight;
  std::vector<float> bias;  ///< empty: none
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  activation_function activation = activation_function::identity;
};

/// What a dispatcher is made of: a method name per task (none: the task is not
/// served), the heads' layers and knobs, and the type of its results.
struct engine_config {
  std::int64_t hidden_size = 0;
  std::array<std::optional<std::string>, 4> methods;  ///< by seqpool::task
  std::vector<layer_weights> projector;   ///< the embed head's layers, one after another (none: empty)
  std::vector<layer_weights> classifier;  ///< the classify head's
  head::problem_type problem = head::problem_type::single_label;
  std::optional<head::platt_scaling> platt;
  float weight_floor = 0.0f;  ///< sparse results: the weight an id's must be above to be listed
  /// int8 and uint8 results: the calibration ranges, every lower bound then every upper one.
  std::vector<float> ranges;
};

/// Memory a step's output lives in, in the engine's space: whoever holds it
/// must keep the engine alive until it is freed (the bindings hold both).
class output_memory {
 public:
  virtual ~output_memory() = default;
  virtual void* data() = 0;
};

/// A graph_upload behind an interface (CUDA engines only); like an output, it
/// must not outlive its engine.
class graph_upload_handle {
 public:
  virtual ~graph_upload_handle() = default;
  virtual std::size_t bytes() const = 0;
  virtual void mark_launched() = 0;
};

/// What every engine is: a step runner, its state store and its space; every
/// call may throw seqpool::error (bad input) or seqpool::device_error.
class engine_base {
 public:
  virtual ~engine_base() = default;

  virtual std::int64_t hidden_size() const = 0;
  virtual DLDeviceType device_type() const = 0;
  /// The device the engine's memory and stream are on (0 on the host).
  virtual std::int32_t device_id() const = 0;

  virtual void reserve_capacity(const capacity& limits) = 0;
  virtual std::unique_ptr<graph_upload_handle> reserve_graph() = 0;
  virtual void synchronize() = 0;

  /// What the space counted since the engine was made.
  virtual audit_counts audit() const = 0;
  virtual void release(const request_id& id) = 0;
  virtual std::int64_t num_computed(const request_id& id) const = 0;
};

/// One dispatcher: each request pooled by its task's method.
class engine : public engine_base {
 public:
  virtual DLDataType result_type() const = 0;
  /// Whether its results are sparse entries: two int32 an entry, an id and a weight's bits.
  virtual bool sparse() const = 0;
  virtual bool serves(task pooling_task) const = 0;

  using plan_type = step_plan;

  /// The step's plan, into `into` (reusing its storage).
  virtual void plan(const batch& step, step_plan& into) const = 0;
  /// reserve() for the plan, and an output of plan.output_size values in the space.
  virtual std::unique_ptr<output_memory> reserve(const step_plan& plan) = 0;
  virtual void forward(const DLTensor& hidden, const step_plan& plan, DLTensor& output) = 0;

  /// Values a captured step's output holds: what reserve_capacity() sized.
  virtual std::int64_t output_capacity() const = 0;
  virtual void capture(const DLTensor& hidden, const step_plan& plan, DLTensor& output, graph_upload_handle& home) = 0;
  virtual void restage(const step_plan& plan, graph_upload_handle& home) = 0;
};

/// Every task, in seqpool::task's order.
inline constexpr std::array<task, 4> every_task = {task::embed, task::classify, task::token_embed,
                                                   task::token_classify};

/// Results of each type: float32, float16, bfloat16, sparse entries, and the quantized ones.
enum class result_kind : std::uint8_t { float32, float16, bfloat16, sparse, int8, uint8, binary, ubinary };

/// f.template operator()<Result>() for the type of `result`'s values.
template <class Choose>
decltype(auto) with_result(result_kind result, Choose&& choose) {
  switch (result) {
    case result_kind::float32:
      return choose.template operator()<float>();
    case result_kind::float16:
      return choose.template operator()<half>();
    case result_kind::bfloat16:
      return choose.template operator()<bfloat16>();
    case result_kind::sparse:
      return choose.template operator()<sparse_entry>();
    case result_kind::int8:
      return choose.template operator()<std::int8_t>();
    case result_kind::uint8:
      return choose.template operator()<std::uint8_t>();
    case result_kind::binary:
      return choose.template operator()<binary>();
    case result_kind::ubinary:
      return choose.template operator()<ubinary>();
  }
  return choose.template operator()<float>();  // not reached: every result_kind is listed
}

/// One part of a multi-pooler: a pooler (its config names a method for the
/// task it serves only), the type of its results, and the token filters it adds.
struct part_config {
  task served = task::embed;
  engine_config pooler;
  result_kind result = result_kind::float32;
  part_filters filters;
};

/// A multi-pooler: every request pooled by every part, each part's results in
/// an output of their own (SPEC section 5, runtime_multi_pooler).
class multi_pooler_engine : public engine_base {
 public:
  virtual std::size_t parts() const = 0;
  virtual DLDataType result_type(std::size_t part) const = 0;
  virtual bool sparse(std::size_t part) const = 0;

  using plan_type = parts_plan;

  /// The step's plan, into `into` (reusing its storage).
  virtual void plan(const batch& step, parts_plan& into) const = 0;
  /// reserve() for the plan, and each part's output (plan.parts[k].output_size values) in the space.
  virtual std::vector<std::unique_ptr<output_memory>> reserve(const parts_plan& plan) = 0;
  /// The step into `outputs`, one a part, in the parts' order.
  virtual void forward(const DLTensor& hidden, const parts_plan& plan, std::span<DLTensor> outputs) = 0;

  /// Values part k's output of a captured step holds.
  virtual std::int64_t output_capacity(std::size_t part) const = 0;
  virtual void capture(const DLTensor& hidden, const parts_plan& plan, std::span<DLTensor> outputs,
                       graph_upload_handle& home) = 0;
  virtual void restage(const parts_plan& plan, graph_upload_handle& home) = 0;
};

std::unique_ptr<engine> make_host_engine(const engine_config& config, result_kind result);
/// Each made in engine_part.cpp (host) or engine_part.cu (CUDA), explicitly
/// instantiated there for each result_kind's type.
template <class Result>
std::unique_ptr<engine> make_host_engine_of(const engine_config& config);
template <class Result>
std::unique_ptr<engine> make_cuda_engine_of(const engine_config& config, std::uintptr_t stream);
/// Work queued on `stream` (a cudaStream_t); null where the module was built without CUDA.
std::unique_ptr<engine> make_cuda_engine(const engine_config& config, result_kind result, std::uintptr_t stream);
/// The multi-pooler of `parts` (each config's hidden_size the same), on the host
/// (multi_pooler_engine.cpp) or queued on `stream` (multi_pooler_engine.cu; null without CUDA).
std::unique_ptr<multi_pooler_engine> make_host_multi_pooler_engine(const std::vector<part_config>& parts);
std::unique_ptr<multi_pooler_engine> make_cuda_multi_pooler_engine(const std::vector<part_config>& parts,
                                                                   std::uintptr_t stream);
/// Whether `method` names a token method (its part's task is then token_embed unless named).
bool is_token_method(const std::string& method);
/// Whether this build of the module has CUDA engines.
bool has_cuda();

}  // namespace seqpool::python
