// The Python-facing Dispatcher (seqpool.Dispatcher): a dispatcher engine, its
// plans (seqpool.Plan), and what each call reads from Python.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <seqpool/error.hpp>

#include "arguments.hpp"
#include "engine.hpp"
#include "engine_binding.hpp"

namespace seqpool::python {

/// A plan (seqpool.Plan) and what it needs until its step has run: the shape
/// its hidden states must have, and the output reserve() made for it.
struct plan_object : owned_plan<step_plan> {
  std::vector<bool> matrices;  ///< per request: a result of rows (token tasks, spans) or one vector
  bool sparse = false;         ///< results are sparse lists, an int32 pair an entry
  std::optional<dlpack::padded_extents> padded;  ///< for a padded batch
  std::unique_ptr<output_memory> output;
  bool reserved = false;
};

/// The Python-facing dispatcher: a dispatcher engine and the GIL rules around it.
class dispatcher_object : public engine_binding<engine> {
 public:
  dispatcher_object(nb::handle hidden_size, std::optional<std::string> embed, std::optional<std::string> classify,
                    std::optional<std::string> token_embed, std::optional<std::string> token_classify,
                    nb::handle projector, nb::handle projector_bias, nb::handle classifier, nb::handle classifier_bias,
                    const std::string& problem, std::optional<double> logit_mean, std::optional<double> logit_sigma,
                    const std::string& result_dtype, nb::handle ranges, std::optional<double> weight_floor,
                    const std::string& device, nb::handle stream)
      : result_dtype_(result_dtype) {
    engine_config config;
    config.hidden_size = integer_argument(hidden_size, "hidden_size");
    config.methods = {std::move(embed), std::move(classify), std::move(token_embed), std::move(token_classify)};
    const result_kind result = read_heads(config, projector, projector_bias, classifier, classifier_bias, problem,
                                          logit_mean, logit_sigma, result_dtype, ranges, weight_floor);
    const std::uintptr_t cuda_stream = stream_of(stream);
    engine_ = made_on(
        device, [&] { return make_host_engine(config, result); },
        [&] { return make_cuda_engine(config, result, cuda_stream); });
    for (const task t : every_task)
      if (engine_->serves(t)) served_.push_back(t);
  }

  std::unique_ptr<plan_object> plan(nb::handle prompt_lens, nb::handle num_scheduled, nb::handle num_computed,
                                    nb::handle ids, nb::handle tasks, nb::handle token_ids, nb::handle params,
                                    nb::handle sequence_length, const std::string& padding) {
    const held_engine held = hold();
    auto made = std::make_unique<plan_object>();
    step_inputs read;
    batch& step =
        steps_.read(prompt_lens, num_scheduled, num_computed, ids, token_ids, params, sequence_length, padding, read);
    read_tasks(tasks, step);
    plan_into(*made, step);
    made->padded = read.padded;
    made->sparse = engine_->sparse();
    made->matrices.resize(step.requests.size());
    for (std::size_t i = 0; i < step.requests.size(); ++i)
      made->matrices[i] = is_token_task(step.requests[i].task) || !step.requests[i].params.spans.empty();
    return made;
  }

  /// What the same step costs through the C++ API alone: seconds per plan,
  /// reserve and forward of the batch these arguments make, averaged over
  /// `repeats` (the binding's own cost is the rest of a Python call's).
  double native_step_seconds(nb::handle hidden, nb::handle prompt_lens, nb::handle ids, nb::handle tasks,
                             std::int64_t repeats) {
    if (repeats < 1) detail::fail("repeats", "must be at least 1, got ", repeats);
    const held_engine held = hold();
    step_inputs read;
    batch& step =
        steps_.read(prompt_lens, nb::none(), nb::none(), ids, nb::none(), nb::none(), nb::none(), "right", read);
    read_tasks(tasks, step);
    const hidden_tensor rows = hidden_of(hidden, read.padded);
    nb::gil_scoped_release unlocked;
    step_plan planned;  // as an engine plans: into the last step's plan
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < repeats; ++i) {
      engine_->plan(step, planned);
      const std::unique_ptr<output_memory> output = engine_->reserve(planned);
      std::array<std::int64_t, 2> shape = {planned.output_size, 2};
      DLTensor written = output_view(output->data(), shape, layout());
      engine_->forward(rows.view, planned, written);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
           static_cast<double>(repeats);
  }

  void reserve(nb::handle given_plan) {
    const held_engine held = hold();
    plan_object& planned = plan_of<plan_object>(given_plan);
    planned.output = without_gil([&] { return engine_->reserve(planned.plan); });
    planned.reserved = true;
  }

  /// The step, into `out`, or into the output reserve() made (returned, owning it).
  nb::object forward(nb::handle hidden, nb::handle given_plan, nb::handle out) {
    const held_engine held = hold();
    plan_object& planned = plan_of<plan_object>(given_plan);
    if (!planned.reserved) detail::fail("reserve", "call reserve(plan) before forward(hidden, plan)");
    const hidden_tensor rows = hidden_of(hidden, planned.padded);
    DLTensor written{};
    std::array<std::int64_t, 2> shape = {planned.plan.output_size, 2};
    nb::ndarray<> given;
    if (!out.is_none()) {
      given = writable_tensor_of(out, "output");
      written = on_this_device(describe(given), "output");
    } else {
      if (!planned.output)
        detail::fail("plan", "it ran already (a plan runs once; its output was handed out then): plan the step again");
      written = output_view(planned.output->data(), shape, layout());
    }
    without_gil([&] { engine_->forward(rows.view, planned.plan, written); });
    if (!out.is_none()) return nb::borrow(out);
    return hand_out(std::move(planned.output), shape[0], layout());
  }

  std::int64_t output_capacity() {
    const held_engine held = hold();
    return engine_->output_capacity();
  }

  void capture(nb::handle hidden, nb::handle given_plan, nb::handle out, graph_upload_object& home) {
    const held_engine held = hold();
    plan_object& planned = plan_of<plan_object>(given_plan);
    const hidden_tensor rows = hidden_of(hidden, planned.padded);
    const nb::ndarray<> written_to = writable_tensor_of(out, "output");
    DLTensor written = on_this_device(describe(written_to), "output");
    engine_->capture(rows.view, planned.plan, written, *home.home);
  }

  void restage(nb::handle given_plan, graph_upload_object& home) {
    const held_engine held = hold();
    plan_object& planned = plan_of<plan_object>(given_plan);
    without_gil([&] { engine_->restage(planned.plan, *home.home); });
  }

  const std::string& result_dtype() const { return result_dtype_; }

 private:
  output_layout layout() const { return {engine_->result_type(), engine_->sparse()}; }

  void read_tasks(nb::handle tasks, batch& step) const {
    if (tasks.is_none()) {
      if (served_.size() != 1)
        detail::fail("tasks",
                     "say each request's task: this dispatcher serves " + std::to_string(served_.size()) + " tasks");
      for (request& r : step.requests) r.task = served_[0];
      return;
    }
    if (nb::isinstance<nb::str>(tasks)) {
      const task all = read_task(tasks);
      for (request& r : step.requests) r.task = all;
      return;
    }
    const nb::tuple entries = entries_of(tasks, step.requests.size(), "tasks", "a task name or a sequence of them");
    for (std::size_t i = 0; i < step.requests.size(); ++i) step.requests[i].task = read_task(entries[i]);
  }

  std::string result_dtype_;  ///< as the caller named it: "binary" results are int8 tensors
  std::vector<task> served_;
};

}  // namespace seqpool::python
