// The Python-facing MultiPooler (seqpool.MultiPooler): every request pooled by
// every part (seqpool.Part), each part's results in an output of their own,
// the step planned and uploaded once; its plans (seqpool.PartsPlan).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <seqpool/error.hpp>
#include <seqpool/plan.hpp>

#include "arguments.hpp"
#include "engine.hpp"
#include "engine_binding.hpp"

namespace seqpool::python {

/// One output of a MultiPooler as Python describes it: a pooler (a method for
/// one task, its head and result type, as a Dispatcher takes them) and the
/// token filters it adds. Its hidden size is the MultiPooler's.
struct part_object {
  part_config config;
  std::string result_dtype;  ///< as the caller named it
};

/// The part these arguments describe; `pooling_task` (None, or a name read as
/// a Dispatcher reads `tasks`) defaults to token_embed for a token method,
/// embed otherwise.
inline part_object read_part(const std::string& method, nb::handle pooling_task, nb::handle projector,
                             nb::handle projector_bias, nb::handle classifier, nb::handle classifier_bias,
                             const std::string& problem, std::optional<double> logit_mean,
                             std::optional<double> logit_sigma, const std::string& result_dtype, nb::handle ranges,
                             std::optional<double> weight_floor, part_filters filters) {
  part_object made;
  made.config.served = !pooling_task.is_none() ? read_task(pooling_task, "task")
                                               : (is_token_method(method) ? task::token_embed : task::embed);
  made.config.pooler.methods[static_cast<std::size_t>(made.config.served)] = method;
  made.config.result = read_heads(made.config.pooler, projector, projector_bias, classifier, classifier_bias, problem,
                                  logit_mean, logit_sigma, result_dtype, ranges, weight_floor);
  made.config.filters = std::move(filters);
  made.result_dtype = result_dtype;
  return made;
}

/// A MultiPooler's plan (seqpool.PartsPlan) and what it needs until its step
/// has run, as a Dispatcher's plan_object: the shape its hidden states must
/// have, and the outputs reserve() made (one a part).
struct parts_plan_object : owned_plan<parts_plan> {
  std::vector<std::vector<bool>> matrices;  ///< per part, per request: a result of rows rather than one vector
  std::vector<bool> sparse;                 ///< per part: its results are sparse lists
  std::optional<dlpack::padded_extents> padded;  ///< for a padded batch
  std::vector<std::unique_ptr<output_memory>> outputs;
  bool reserved = false;
};

/// One part's share of a PartsPlan, copied out (seqpool.PartPlan): what
/// seqpool.split() reads of a Plan.
struct part_plan_view {
  std::int64_t output_size = 0;
  std::vector<std::optional<result_slice>> results;
  std::vector<bool> matrices;
  bool sparse = false;
};

inline std::vector<part_plan_view> part_views(const parts_plan_object& planned) {
  std::vector<part_plan_view> views;
  for (std::size_t k = 0; k < planned.plan.parts.size(); ++k)
    views.push_back(
        {planned.plan.parts[k].output_size, planned.plan.parts[k].results, planned.matrices[k], planned.sparse[k]});
  return views;
}

class multi_pooler_object : public engine_binding<multi_pooler_engine> {
 public:
  multi_pooler_object(nb::handle hidden_size, const std::vector<part_object>& parts, const std::string& device,
                      nb::handle stream) {
    const std::int64_t width = integer_argument(hidden_size, "hidden_size");
    const std::uintptr_t cuda_stream = stream_of(stream);
    std::vector<part_config> configs;
    for (const part_object& part : parts) {
      configs.push_back(part.config);
      configs.back().pooler.hidden_size = width;
      result_dtypes_.push_back(part.result_dtype);
      tasks_.push_back(part.config.served);
    }
    engine_ = made_on(
        device, [&] { return make_host_multi_pooler_engine(configs); },
        [&] { return make_cuda_multi_pooler_engine(configs, cuda_stream); });
  }

  std::unique_ptr<parts_plan_object> plan(nb::handle prompt_lens, nb::handle num_scheduled, nb::handle num_computed,
                                          nb::handle ids, nb::handle token_ids, nb::handle params,
                                          nb::handle sequence_length, const std::string& padding) {
    const held_engine held = hold();
    auto made = std::make_unique<parts_plan_object>();
    step_inputs read;
    const batch& step =
        steps_.read(prompt_lens, num_scheduled, num_computed, ids, token_ids, params, sequence_length, padding, read);
    plan_into(*made, step);
    made->padded = read.padded;
    for (std::size_t k = 0; k < tasks_.size(); ++k) {
      std::vector<bool>& matrices = made->matrices.emplace_back(step.requests.size());
      for (std::size_t i = 0; i < step.requests.size(); ++i)
        matrices[i] = is_token_task(tasks_[k]) || !step.requests[i].params.spans.empty();
      made->sparse.push_back(engine_->sparse(k));
    }
    return made;
  }

  void reserve(nb::handle given_plan) {
    const held_engine held = hold();
    parts_plan_object& planned = plan_of<parts_plan_object>(given_plan);
    planned.outputs = without_gil([&] { return engine_->reserve(planned.plan); });
    planned.reserved = true;
  }

  /// The step, into `out` (a tensor a part), or into the outputs reserve()
  /// made (returned as a list, owning them).
  nb::object forward(nb::handle hidden, nb::handle given_plan, nb::handle out) {
    const held_engine held = hold();
    parts_plan_object& planned = plan_of<parts_plan_object>(given_plan);
    if (!planned.reserved) detail::fail("reserve", "call reserve(plan) before forward(hidden, plan)");
    const hidden_tensor rows = hidden_of(hidden, planned.padded);
    const std::size_t parts = tasks_.size();
    std::vector<DLTensor> views;
    std::vector<std::array<std::int64_t, 2>> shapes(parts);  // sized once: the views point into it
    std::vector<nb::ndarray<>> given;
    if (!out.is_none()) {
      given = read_outputs(out);
      for (const nb::ndarray<>& tensor : given) views.push_back(on_this_device(describe(tensor), "out"));
    } else {
      if (planned.outputs.empty())
        detail::fail("plan",
                     "it ran already (a plan runs once; its outputs were handed out then): plan the step again");
      for (std::size_t k = 0; k < parts; ++k) {
        shapes[k] = {planned.plan.parts[k].output_size, 2};
        views.push_back(output_view(planned.outputs[k]->data(), shapes[k], layout(k)));
      }
    }
    without_gil([&] { engine_->forward(rows.view, planned.plan, views); });
    if (!out.is_none()) return nb::borrow(out);
    std::vector<std::unique_ptr<output_memory>> outputs = std::move(planned.outputs);
    planned.outputs.clear();  // handed out, whatever happens below
    nb::list handed;
    for (std::size_t k = 0; k < parts; ++k) handed.append(hand_out(std::move(outputs[k]), shapes[k][0], layout(k)));
    return handed;
  }

  std::vector<std::int64_t> output_capacity() {
    const held_engine held = hold();
    std::vector<std::int64_t> values;
    for (std::size_t k = 0; k < tasks_.size(); ++k) values.push_back(engine_->output_capacity(k));
    return values;
  }

  void capture(nb::handle hidden, nb::handle given_plan, nb::handle out, graph_upload_object& home) {
    const held_engine held = hold();
    parts_plan_object& planned = plan_of<parts_plan_object>(given_plan);
    const hidden_tensor rows = hidden_of(hidden, planned.padded);
    const std::vector<nb::ndarray<>> given = read_outputs(out);
    std::vector<DLTensor> views;
    for (const nb::ndarray<>& tensor : given) views.push_back(on_this_device(describe(tensor), "out"));
    engine_->capture(rows.view, planned.plan, views, *home.home);
  }

  void restage(nb::handle given_plan, graph_upload_object& home) {
    const held_engine held = hold();
    parts_plan_object& planned = plan_of<parts_plan_object>(given_plan);
    without_gil([&] { engine_->restage(planned.plan, *home.home); });
  }

  const std::vector<std::string>& result_dtypes() const { return result_dtypes_; }
  std::vector<std::string> tasks() const {
    std::vector<std::string> names;
    for (const task t : tasks_) names.emplace_back(name(t));
    return names;
  }

 private:
  output_layout layout(std::size_t part) const { return {engine_->result_type(part), engine_->sparse(part)}; }

  /// `out` as writable tensors, iterated one entry past the parts at most, so
  /// that one whose iteration never ends is refused (the engine checks that
  /// there is one a part).
  std::vector<nb::ndarray<>> read_outputs(nb::handle out) const {
    any_tensor one;  // a tensor is a sequence too, of its rows
    std::string refused;
    if (!is_entries(out) || try_import(out, one, refused))
      detail::fail("out", "must be a sequence of tensors, one a part");
    const nb::sequence items = nb::borrow<nb::sequence>(out);
    std::vector<nb::ndarray<>> tensors;
    for (nb::handle item : items) {
      nb::ndarray<> tensor;
      if (!try_tensor(item, tensor, "out")) detail::fail("out", "entry ", tensors.size(), " is not a writable tensor");
      tensors.push_back(std::move(tensor));
      if (tensors.size() > tasks_.size()) break;
    }
    return tensors;
  }

  std::vector<std::string> result_dtypes_;  ///< per part, as the caller named it
  std::vector<task> tasks_;                 ///< per part, the task it pools every request for
};

}  // namespace seqpool::python
