// The engines' pieces for one space: what every engine holds (engine_core), the
// layers its heads read, copied into the space, its poolers as a config names
// them, and the dispatcher engine of one result type, a dispatcher of the
// configurable table, which each engine part (engine_part.cpp, engine_part.cu)
// instantiates for its type.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <seqpool/configurable.hpp>
#include <seqpool/dlpack.hpp>
#include <seqpool/seqpool.hpp>

#include "engine.hpp"

namespace seqpool::python {

/// The runtime method `name` names, or seqpool::error listing what the task takes.
template <class Runtime>
Runtime method_named(const std::string& name, task pooling_task) {
  if (std::optional<Runtime> found = Runtime::from_name(name)) return *found;
  detail::fail(seqpool::name(pooling_task), "method ", detail::quoted(name), " cannot serve it (expected ",
               Runtime::listed_names(), ")");
}

/// A dense layer's weights in the space's memory, and its activation function.
template <class Space>
class layer_memory {
 public:
  layer_memory(Space& space, const layer_weights& given)
      : weight_(copy_in(space, given.weight)), bias_(copy_in(space, given.bias)) {
    layer_ = {{weight_.data(), given.bias.empty() ? nullptr : bias_.data(), given.rows, given.cols},
              given.activation};
  }
  dense_layer layer() const { return layer_; }

 private:
  static buffer<float, Space> copy_in(Space& space, const std::vector<float>& values) {
    buffer<float, Space> copy(space, values.size());
    if (!values.empty()) space.copy_in(std::span<const float>(values), copy.span());
    return copy;
  }
  buffer<float, Space> weight_;
  buffer<float, Space> bias_;
  dense_layer layer_;
};

/// Layers copied into the space's memory, and the stack of them a head runs.
template <class Space>
class stack_memory {
 public:
  stack_memory(Space& space, const std::vector<layer_weights>& given) {
    layers_.reserve(given.size());
    for (const layer_weights& layer : given) layers_.emplace_back(space, layer);
  }

  dense_stack stack() const {
    std::vector<dense_layer> layers;
    for (const layer_memory<Space>& layer : layers_) layers.push_back(layer.layer());
    return dense_stack(std::span<const dense_layer>(layers));
  }

 private:
  std::vector<layer_memory<Space>> layers_;
};

/// The layers of both heads a config describes, in the space's memory, which
/// the heads made from them read: they must outlive every pooler given them.
template <class Space>
class head_memory {
 public:
  head_memory(Space& space, const engine_config& config)
      : projector_(space, config.projector),
        classifier_(space, config.classifier),
        problem_(config.problem),
        platt_(config.platt) {}

  head::embed embed() const { return head::embed(projector_.stack()); }
  head::classify classify() const { return head::classify(classifier_.stack(), problem_, platt_); }

 private:
  stack_memory<Space> projector_;
  stack_memory<Space> classifier_;
  head::problem_type problem_;
  std::optional<head::platt_scaling> platt_;
};

/// The pooler `config` names for `pooling_task` (its method, result type and
/// knobs); what seqpool refuses in making it is named by the task.
template <class Method, class Result, class Space, class Head>
pooler<Method, Head, Space, Result> pooler_of(Space& space, const engine_config& config, task pooling_task,
                                              const Head& pooling_head) {
  const Method method = method_named<Method>(*config.methods[static_cast<std::size_t>(pooling_task)], pooling_task);
  std::optional<pooler<Method, Head, Space, Result>> made;
  try {
    made.emplace(space, config.hidden_size, method, pooling_head);
  } catch (const error& refused) {
    detail::fail(seqpool::name(pooling_task), refused.what());
  }
  if constexpr (sparse_element<Result>) made->set_weight_floor(config.weight_floor);
  if constexpr (ranged_element<Result>) {
    const std::span<const float> bounds(config.ranges);
    made->set_ranges({bounds.first(bounds.size() / 2), bounds.last(bounds.size() / 2)});
  }
  return std::move(*made);
}

/// The pooler of task T: of a sequence or a token method, with the embed or the classify head.
template <task T, class Space, class Result>
using task_pooler =
    pooler<std::conditional_t<is_token_task(T), method::any_token, method::any_sequence>,
           std::conditional_t<T == task::embed || T == task::token_embed, head::embed, head::classify>, Space, Result>;

/// The pooler `config` names for task T, with the head `heads` hold.
template <task T, class Result, class Space>
task_pooler<T, Space, Result> pooler_for(Space& space, const engine_config& config, const head_memory<Space>& heads) {
  using made = task_pooler<T, Space, Result>;
  if constexpr (std::is_same_v<typename made::head_type, head::embed>)
    return pooler_of<typename made::method_type, Result>(space, config, T, heads.embed());
  else
    return pooler_of<typename made::method_type, Result>(space, config, T, heads.classify());
}

/// The DLPack type of Result's values (sparse entries: int32, two an entry).
template <class Result>
DLDataType dlpack_type() {
  if constexpr (sparse_element<Result>)
    return {kDLInt, 32, 1};
  else
    return dlpack::detail::dtype_of<Result>();
}

template <class Space, class Result>
class output_buffer final : public output_memory {
 public:
  output_buffer(Space& space, std::int64_t values) : values_(space, static_cast<std::size_t>(values)) {}
  void* data() override { return values_.data(); }

 private:
  buffer<Result, Space> values_;
};

template <class Space>
class graph_upload_handle_of final : public graph_upload_handle {
 public:
  explicit graph_upload_handle_of(graph_upload<typename Space::backend_type> home) : home_(std::move(home)) {}
  std::size_t bytes() const override { return home_.bytes(); }
  void mark_launched() override { home_.mark_launched(); }
  graph_upload<typename Space::backend_type>& home() { return home_; }

 private:
  graph_upload<typename Space::backend_type> home_;
};

/// What every engine holds, its space and its state store, and what it does
/// the same whatever its step runner (Runner, which runner() gives).
template <class Space, class Runner, class Interface>
class engine_core : public Interface {
 public:
  std::int64_t hidden_size() const override { return hidden_size_; }
  DLDeviceType device_type() const override { return dlpack::memory<Space>::devices[0]; }
  std::int32_t device_id() const override { return device_id_; }

  void reserve_capacity(const capacity& limits) override { runner().reserve_capacity(limits); }

  std::unique_ptr<graph_upload_handle> reserve_graph() override {
    if constexpr (Space::family == algorithm_family::device)
      return std::make_unique<graph_upload_handle_of<Space>>(runner().reserve_graph());
    else
      refuse_capture("capture");
  }

  void synchronize() override {
    if constexpr (Space::family == algorithm_family::device) space_.synchronize();
  }

  audit_counts audit() const override { return space_.audit().counts(); }
  void release(const request_id& id) override { state_.release(id); }
  std::int64_t num_computed(const request_id& id) const override { return state_.num_computed(id); }

 protected:
  template <class... SpaceArgs>
  engine_core(std::int64_t hidden_size, std::int32_t device_id, SpaceArgs&&... space_args)
      : hidden_size_(hidden_size), device_id_(device_id), space_(std::forward<SpaceArgs>(space_args)...) {}

  virtual Runner& runner() = 0;

  static auto& home_of(graph_upload_handle& home) { return dynamic_cast<graph_upload_handle_of<Space>&>(home).home(); }
  [[noreturn]] static void refuse_capture(const char* what) {
    detail::fail(what, "a captured step runs on a CUDA stream: make the pooler with device=\"cuda\"");
  }

  std::int64_t hidden_size_;
  std::int32_t device_id_;
  Space space_;
  state_store<Space> state_{space_};
};

template <class Space, class Result>
class engine_of final : public engine_core<Space, dispatcher<configurable_table<Space, Result>>, engine> {
  using runner_type = dispatcher<configurable_table<Space, Result>>;
  using core = engine_core<Space, runner_type, engine>;
  using core::space_;
  using core::state_;

 public:
  template <class... SpaceArgs>
  explicit engine_of(const engine_config& config, std::int32_t device_id, SpaceArgs&&... space_args)
      : core(config.hidden_size, device_id, std::forward<SpaceArgs>(space_args)...),
        heads_(space_, config),
        dispatcher_(make(config)) {
    for (const task t : every_task)
      served_[static_cast<std::size_t>(t)] = config.methods[static_cast<std::size_t>(t)].has_value();
  }

  DLDataType result_type() const override { return dlpack_type<Result>(); }
  bool sparse() const override { return sparse_element<Result>; }
  bool serves(task pooling_task) const override { return served_[static_cast<std::size_t>(pooling_task)]; }

  void plan(const batch& step, step_plan& into) const override { dispatcher_.plan(step, state_, into); }

  std::unique_ptr<output_memory> reserve(const step_plan& plan) override {
    dispatcher_.reserve(plan, state_);
    return std::make_unique<output_buffer<Space, Result>>(space_, plan.output_size);
  }

  void forward(const DLTensor& hidden, const step_plan& plan, DLTensor& output) override {
    const cuda::std::span<Result> out = dlpack::output<Space, Result>(output);
    dlpack::visit_hidden<Space>(hidden, [&](auto view) { dispatcher_.forward(view, plan, state_, out); });
  }

  std::int64_t output_capacity() const override { return dispatcher_.output_capacity(); }

  void capture(const DLTensor& hidden, const step_plan& plan, DLTensor& output, graph_upload_handle& home) override {
    if constexpr (Space::family == algorithm_family::device) {
      const cuda::std::span<Result> out = dlpack::output<Space, Result>(output);
      dlpack::visit_hidden<Space>(
          hidden, [&](auto view) { dispatcher_.capture(view, plan, state_, out, core::home_of(home)); });
    } else {
      core::refuse_capture("capture");
    }
  }

  void restage(const step_plan& plan, graph_upload_handle& home) override {
    if constexpr (Space::family == algorithm_family::device)
      dispatcher_.restage(plan, state_, core::home_of(home));
    else
      core::refuse_capture("restage");
  }

 private:
  runner_type& runner() override { return dispatcher_; }

  runner_type make(const engine_config& config) {
    return runner_type(space_, entry<task::embed>(config), entry<task::classify>(config),
                       entry<task::token_embed>(config), entry<task::token_classify>(config));
  }

  /// Task T's pooler, where the config names its method.
  template <task T>
  std::optional<task_pooler<T, Space, Result>> entry(const engine_config& config) {
    if (!config.methods[static_cast<std::size_t>(T)]) return std::nullopt;
    return pooler_for<T, Result>(space_, config, heads_);
  }

  head_memory<Space> heads_;  ///< made before the dispatcher, whose heads read them
  runner_type dispatcher_;
  std::array<bool, 4> served_{};  ///< by seqpool::task
};

}  // namespace seqpool::python
