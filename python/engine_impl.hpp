// The engine for one space and one result type: a dispatcher of the configurable
// table, its state store, and the layers its heads read, copied into the space.
// Each engine part (engine_part.cpp, engine_part.cu) instantiates it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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
  detail::fail(seqpool::name(pooling_task), "method \"", name, "\" cannot serve it (expected ", Runtime::listed_names(),
               ")");
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

template <class Space, class Result>
class engine_of final : public engine {
  using table = configurable_table<Space, Result>;
  using runner = dispatcher<table>;

 public:
  template <class... SpaceArgs>
  explicit engine_of(const engine_config& config, std::int32_t device_id, SpaceArgs&&... space_args)
      : config_(config),
        device_id_(device_id),
        space_(std::forward<SpaceArgs>(space_args)...),
        state_(space_),
        dispatcher_(make()) {
    // The weights and ranges are in the space now: the host copies are not kept.
    config_.projector.clear();
    config_.classifier.clear();
    config_.ranges.clear();
  }

  std::int64_t hidden_size() const override { return config_.hidden_size; }
  DLDataType result_type() const override {
    if constexpr (sparse_element<Result>)
      return {kDLInt, 32, 1};
    else
      return dlpack::detail::dtype_of<Result>();
  }
  bool sparse() const override { return sparse_element<Result>; }
  DLDeviceType device_type() const override { return dlpack::memory<Space>::devices[0]; }
  std::int32_t device_id() const override { return device_id_; }
  bool serves(task pooling_task) const override {
    return config_.methods[static_cast<std::size_t>(pooling_task)].has_value();
  }

  step_plan plan(const batch& step) const override { return dispatcher_.plan(step, state_); }

  std::unique_ptr<output_memory> reserve(const step_plan& plan) override {
    dispatcher_.reserve(plan, state_);
    return std::make_unique<output_buffer<Space, Result>>(space_, plan.output_size);
  }

  void forward(const DLTensor& hidden, const step_plan& plan, DLTensor& output) override {
    const cuda::std::span<Result> out = dlpack::output<Space, Result>(output);
    dlpack::visit_hidden<Space>(hidden, [&](auto view) { dispatcher_.forward(view, plan, state_, out); });
  }

  void reserve_capacity(const capacity& limits) override { dispatcher_.reserve_capacity(limits); }
  std::int64_t output_capacity() const override { return dispatcher_.output_capacity(); }

  std::unique_ptr<graph_upload_handle> reserve_graph() override {
    if constexpr (Space::family == algorithm_family::device)
      return std::make_unique<graph_upload_handle_of<Space>>(dispatcher_.reserve_graph());
    else
      detail::fail("capture", "a captured step runs on a CUDA stream: make the pooler with device=\"cuda\"");
  }

  void capture(const DLTensor& hidden, const step_plan& plan, DLTensor& output, graph_upload_handle& home) override {
    if constexpr (Space::family == algorithm_family::device) {
      const cuda::std::span<Result> out = dlpack::output<Space, Result>(output);
      dlpack::visit_hidden<Space>(
          hidden, [&](auto view) { dispatcher_.capture(view, plan, state_, out, home_of(home)); });
    } else {
      detail::fail("capture", "a captured step runs on a CUDA stream: make the pooler with device=\"cuda\"");
    }
  }

  void restage(const step_plan& plan, graph_upload_handle& home) override {
    if constexpr (Space::family == algorithm_family::device)
      dispatcher_.restage(plan, state_, home_of(home));
    else
      detail::fail("restage", "a captured step runs on a CUDA stream: make the pooler with device=\"cuda\"");
  }

  void synchronize() override {
    if constexpr (Space::family == algorithm_family::device) space_.synchronize();
  }

  audit_counts audit() const override { return space_.audit().counts(); }
  void release(std::string_view id) override { state_.release(id); }
  std::int64_t num_computed(std::string_view id) const override { return state_.num_computed(id); }

 private:
  auto& home_of(graph_upload_handle& home) { return dynamic_cast<graph_upload_handle_of<Space>&>(home).home(); }

  runner make() {
    projector_.emplace(space_, config_.projector);
    classifier_.emplace(space_, config_.classifier);
    const head::embed embed_head(projector_->stack());
    const head::classify classify_head(classifier_->stack(), config_.problem, config_.platt);
    return runner(space_, entry<method::any_sequence>(task::embed, embed_head),
                  entry<method::any_sequence>(task::classify, classify_head),
                  entry<method::any_token>(task::token_embed, embed_head),
                  entry<method::any_token>(task::token_classify, classify_head));
  }

  /// The task's pooler, where the config names its method; what seqpool refuses
  /// in making it is named by the task.
  template <class Method, class Head>
  std::optional<pooler<Method, Head, Space, Result>> entry(task pooling_task, const Head& pooling_head) {
    const std::optional<std::string>& name = config_.methods[static_cast<std::size_t>(pooling_task)];
    if (!name) return std::nullopt;
    const Method method = method_named<Method>(*name, pooling_task);
    std::optional<pooler<Method, Head, Space, Result>> made;
    try {
      made.emplace(space_, config_.hidden_size, method, pooling_head);
    } catch (const error& refused) {
      detail::fail(seqpool::name(pooling_task), refused.what());
    }
    if constexpr (sparse_element<Result>) made->set_weight_floor(config_.weight_floor);
    if constexpr (ranged_element<Result>) {
      const std::span<const float> bounds(config_.ranges);
      made->set_ranges({bounds.first(bounds.size() / 2), bounds.last(bounds.size() / 2)});
    }
    return made;
  }

  engine_config config_;  ///< without the layers' weights, once made
  std::int32_t device_id_;
  Space space_;
  std::optional<stack_memory<Space>> projector_;  ///< made with the dispatcher, which reads them
  std::optional<stack_memory<Space>> classifier_;
  state_store<Space> state_;
  runner dispatcher_;
};

}  // namespace seqpool::python
