// seqpool._seqpool: the bindings. Tensors cross as DLPack (nanobind's ndarray
// takes anything with __dlpack__ or the buffer protocol), a step is given as an
// engine holds it (arrays of lengths, ids, params), and seqpool's errors become
// ValueError (bad input) and seqpool.DeviceError. The Python layer
// (seqpool/__init__.py) adds the conveniences.
#include <charconv>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <seqpool/dlpack.hpp>
#include <seqpool/error.hpp>

#include "engine.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqpool::python {
namespace {

/// Any tensor nanobind can import (DLPack or the buffer protocol), unconverted.
using any_tensor = nb::ndarray<nb::ro>;

/// The tensor as DLPack describes it; it points into `tensor`, which must outlive it.
template <class... Constraints>
DLTensor describe(const nb::ndarray<Constraints...>& tensor) {
  DLTensor view{};
  view.data = const_cast<void*>(tensor.data());
  view.device = {static_cast<DLDeviceType>(tensor.device_type()), static_cast<std::int32_t>(tensor.device_id())};
  view.ndim = static_cast<std::int32_t>(tensor.ndim());
  const nb::dlpack::dtype type = tensor.dtype();
  view.dtype = {type.code, type.bits, type.lanes};
  view.shape = const_cast<std::int64_t*>(tensor.shape_ptr());
  view.strides = const_cast<std::int64_t*>(tensor.stride_ptr());
  return view;
}

/// Integers from a 1-D int32/int64 host tensor or a sequence of Python ints.
std::vector<std::int64_t> read_integers(nb::handle given, const char* field) {
  std::vector<std::int64_t> values;
  any_tensor tensor;
  if (nb::try_cast(given, tensor, false)) {
    const DLTensor view = describe(tensor);
    if (view.device.device_type != kDLCPU && view.device.device_type != kDLCUDAHost)
      detail::fail(field, "must be in host memory (the plan is made on the host), not on " +
                        dlpack::detail::device_name(view.device.device_type));
    if (view.ndim != 1) detail::fail(field, "must be one-dimensional, got shape " + dlpack::detail::shape_name(view));
    const bool wide = dlpack::detail::holds<std::int64_t>(view.dtype);
    if (!wide && !dlpack::detail::holds<std::int32_t>(view.dtype))
      detail::fail(field, "must hold int64 or int32, got " + dlpack::detail::dtype_name(view.dtype));
    const std::int64_t stride = view.strides != nullptr ? view.strides[0] : 1;
    values.resize(static_cast<std::size_t>(view.shape[0]));
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto at = static_cast<std::int64_t>(i) * stride;
      values[i] = wide ? static_cast<const std::int64_t*>(view.data)[at] : static_cast<const std::int32_t*>(view.data)[at];
    }
    return values;
  }
  if (!nb::isinstance<nb::sequence>(given) || nb::isinstance<nb::str>(given))
    detail::fail(field, "must be a sequence of ints or a 1-D int tensor");
  const nb::sequence items = nb::borrow<nb::sequence>(given);
  values.reserve(nb::len(items));
  for (nb::handle item : items) {
    std::int64_t value = 0;
    if (!nb::try_cast(item, value)) detail::fail(field, "must hold ints, got " + nb::cast<std::string>(nb::repr(item)));
    values.push_back(value);
  }
  return values;
}

void check_count(std::size_t found, std::size_t expected, const char* field) {
  if (found != expected)
    detail::fail(field, "has " + std::to_string(found) + " entries for " + std::to_string(expected) + " requests");
}

std::optional<task> task_named(std::string_view text) {
  for (const task candidate : {task::embed, task::classify, task::token_embed, task::token_classify})
    if (name(candidate) == text) return candidate;
  return std::nullopt;
}

task read_task(nb::handle given) {
  std::string text;
  if (nb::try_cast(given, text))
    if (const std::optional<task> found = task_named(text)) return *found;
  detail::fail("tasks", "expected \"embed\", \"classify\", \"token_embed\" or \"token_classify\", got " +
                      nb::cast<std::string>(nb::repr(given)));
}

/// A plan and what it needs until its step has run: the token id tensors its
/// requests' ids were read from (the C++ contract keeps them alive as long as
/// the plan), and the output reserve() made for it, with the engine it lives in
/// (declared first, so freed last).
struct plan_object {
  std::shared_ptr<engine> owner;
  step_plan plan;
  std::vector<bool> matrices;  ///< per request: a result of rows (token tasks, spans) or one vector
  bool sparse = false;         ///< results are sparse lists, an int32 pair an entry
  nb::list kept;
  std::unique_ptr<output_memory> output;
  bool reserved = false;
};

/// A graph_upload as Python holds it (GraphUpload), with its engine.
struct graph_upload_object {
  std::shared_ptr<engine> owner;
  std::unique_ptr<graph_upload_handle> home;
};

/// An output handed to Python, with its engine: what the returned tensor's capsule owns.
struct handed_output {
  std::shared_ptr<engine> owner;
  std::unique_ptr<output_memory> memory;
};

/// A float32 host tensor of `ndim` dimensions, row-major, as its values; a
/// tensor of other dimensions is refused as not of shape `shape` (its words).
std::vector<float> read_floats(const any_tensor& tensor, std::int32_t ndim, const std::string& field,
                               std::string_view shape) {
  const DLTensor view = describe(tensor);
  if (view.device.device_type != kDLCPU && view.device.device_type != kDLCUDAHost)
    detail::fail(field, "must be in host memory (it is copied into the dispatcher's space), not on ",
                 dlpack::detail::device_name(view.device.device_type));
  if (!dlpack::detail::holds<float>(view.dtype)) detail::fail(field, "must hold float32, got ", dlpack::detail::dtype_name(view.dtype));
  if (view.ndim != ndim) detail::fail(field, "must have shape ", shape, ", got ", dlpack::detail::shape_name(view));
  const std::int64_t size = dlpack::detail::compact_size(view, field.c_str());
  std::int64_t stride = 1;
  for (std::int32_t d = view.ndim - 1; d >= 0; --d) {
    if (view.strides != nullptr && view.shape[d] > 1 && view.strides[d] != stride)
      detail::fail(field, "must be contiguous (row-major)");
    stride *= view.shape[d];
  }
  const auto* first = static_cast<const float*>(view.data);
  return std::vector<float>(first, first + size);
}

/// A dense layer from its weight, [rows, cols] float32, and bias, [rows]
/// float32 or none; errors name the fields as given.
layer_weights read_layer(const any_tensor& weight, const std::optional<any_tensor>& bias,
                         const std::string& weight_field, const std::string& bias_field) {
  layer_weights layer;
  layer.weight = read_floats(weight, 2, weight_field, "[out, in]");
  layer.rows = static_cast<std::int64_t>(weight.shape(0));
  layer.cols = static_cast<std::int64_t>(weight.shape(1));
  if (bias) {
    layer.bias = read_floats(*bias, 1, bias_field, "[out]");
    if (std::cmp_not_equal(layer.bias.size(), layer.rows))
      detail::fail(bias_field, "must have shape [", layer.rows, "] (the weight's rows), got [", layer.bias.size(), "]");
  }
  return layer;
}

/// A head's layers as a Dispatcher is given them: one weight (and its bias
/// beside it, as `what`_bias), or a seqpool.Dense or a list of 1 to 4, each
/// with its own bias and activation function.
using given_layers = std::variant<any_tensor, layer_weights, std::vector<layer_weights>>;

std::vector<layer_weights> read_stack(std::optional<given_layers> given, const std::optional<any_tensor>& bias,
                                      const std::string& what) {
  if (!given) {
    if (bias) detail::fail(what + "_bias", "is given without a ", what);
    return {};
  }
  if (const auto* weight = std::get_if<any_tensor>(&*given)) return {read_layer(*weight, bias, what, what + "_bias")};
  if (bias) detail::fail(what + "_bias", "goes with one weight; a Dense layer has its own bias");
  if (auto* layer = std::get_if<layer_weights>(&*given)) return {std::move(*layer)};
  auto& layers = std::get<std::vector<layer_weights>>(*given);
  if (layers.empty() || std::cmp_greater(layers.size(), dense_stack::most_layers))
    detail::fail(what, "a list of 1 to ", dense_stack::most_layers, " Dense layers, got ", layers.size());
  return std::move(layers);
}

activation_function activation_of(const std::string& name) {
  if (const std::optional<activation_function> found = activation_named(name)) return *found;
  detail::fail("activation", "expected " + activation_name_list() + ", got \"" + name + "\"");
}

result_kind result_named(const std::string& name) {
  if (name == "float32") return result_kind::float32;
  if (name == "float16") return result_kind::float16;
  if (name == "bfloat16") return result_kind::bfloat16;
  if (name == "sparse") return result_kind::sparse;
  if (name == "int8") return result_kind::int8;
  if (name == "uint8") return result_kind::uint8;
  if (name == "binary") return result_kind::binary;
  if (name == "ubinary") return result_kind::ubinary;
  detail::fail("result_dtype",
               "expected \"float32\", \"float16\", \"bfloat16\", \"int8\", \"uint8\", \"binary\", \"ubinary\" or "
               "\"sparse\", got \"" + name + "\"");
}

head::problem_type problem_named(const std::string& name) {
  if (name == "single_label") return head::problem_type::single_label;
  if (name == "multi_label") return head::problem_type::multi_label;
  if (name == "regression") return head::problem_type::regression;
  detail::fail("problem", "expected \"single_label\", \"multi_label\" or \"regression\", got \"" + name + "\"");
}

/// The Python-facing dispatcher: an engine and the GIL rules around it.
class dispatcher_object {
 public:
  dispatcher_object(std::int64_t hidden_size, std::optional<std::string> embed, std::optional<std::string> classify,
                    std::optional<std::string> token_embed, std::optional<std::string> token_classify,
                    std::optional<given_layers> projector, std::optional<any_tensor> projector_bias,
                    std::optional<given_layers> classifier, std::optional<any_tensor> classifier_bias,
                    const std::string& problem, std::optional<float> logit_mean, std::optional<float> logit_sigma,
                    const std::string& result_dtype, std::optional<any_tensor> ranges,
                    std::optional<float> weight_floor, const std::string& device, std::uintptr_t stream)
      : result_dtype_(result_dtype) {
    engine_config config;
    config.hidden_size = hidden_size;
    config.methods = {std::move(embed), std::move(classify), std::move(token_embed), std::move(token_classify)};
    config.projector = read_stack(std::move(projector), projector_bias, "projector");
    config.classifier = read_stack(std::move(classifier), classifier_bias, "classifier");
    config.problem = problem_named(problem);
    if (logit_mean.has_value() != logit_sigma.has_value())
      detail::fail("logit_mean", "and logit_sigma are given together (Platt scaling), or neither");
    if (logit_mean) config.platt = head::platt_scaling{*logit_mean, *logit_sigma};
    const result_kind result = result_named(result_dtype);
    if (weight_floor && result != result_kind::sparse)
      detail::fail("weight_floor", "only sparse results take a weight floor");
    config.weight_floor = weight_floor.value_or(0.0f);
    const bool ranged = result == result_kind::int8 || result == result_kind::uint8;
    if (ranges && !ranged) detail::fail("ranges", "only int8 and uint8 results take calibration ranges");
    if (!ranges && ranged)
      detail::fail("ranges", result_dtype, " results need calibration ranges: float32 [2, D], lower then upper bounds");
    if (ranges) {
      constexpr std::string_view bounds = "[2, D] (lower bounds, then upper bounds)";
      config.ranges = read_floats(*ranges, 2, "ranges", bounds);
      if (ranges->shape(0) != 2)
        detail::fail("ranges", "must have shape ", bounds, ", got ", ranges->shape(0), " rows");
    }
    if (device == "cpu") {
      engine_ = make_host_engine(config, result);
    } else if (device == "cuda") {
      if (!has_cuda())
        detail::fail("device", "this build of seqpool has no CUDA module (install it where nvcc is found)");
      engine_ = make_cuda_engine(config, result, stream);
    } else {
      detail::fail("device", "expected \"cpu\" or \"cuda\", got \"" + device + "\"");
    }
    for (const task t : {task::embed, task::classify, task::token_embed, task::token_classify})
      if (engine_->serves(t)) served_.push_back(t);
  }

  std::int64_t hidden_size() const { return engine_->hidden_size(); }

  std::unique_ptr<plan_object> plan(nb::handle prompt_lens, nb::handle num_scheduled, nb::handle num_computed,
                                    nb::handle ids, nb::handle tasks, nb::handle token_ids, nb::handle params,
                                    std::optional<std::int64_t> sequence_length, const std::string& padding) {
    const std::unique_lock<std::mutex> held = hold();
    auto made = std::make_unique<plan_object>();
    made->owner = engine_;
    const batch& step = read_batch(prompt_lens, num_scheduled, num_computed, ids, tasks, token_ids, params,
                                   sequence_length, padding, made->kept);
    made->plan = engine_->plan(step);
    made->sparse = engine_->sparse();
    made->matrices.resize(step.requests.size());
    for (std::size_t i = 0; i < step.requests.size(); ++i)
      made->matrices[i] = is_token_task(step.requests[i].task) || !step.requests[i].params.spans.empty();
    return made;
  }

  /// What the same step costs through the C++ API alone: seconds per plan,
  /// reserve and forward of the batch these arguments make, averaged over
  /// `repeats` (the binding's own cost is the rest of a Python call's).
  double native_step_seconds(const any_tensor& hidden, nb::handle prompt_lens, nb::handle ids, nb::handle tasks,
                             std::int64_t repeats) {
    if (repeats < 1) detail::fail("repeats", "must be at least 1, got ", repeats);
    const std::unique_lock<std::mutex> held = hold();
    nb::list kept;
    const batch& step = read_batch(prompt_lens, nb::none(), nb::none(), ids, tasks, nb::none(), nb::none(),
                                   std::nullopt, "right", kept);
    const DLTensor hidden_view = on_this_device(describe(hidden), "hidden states");
    nb::gil_scoped_release unlocked;
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < repeats; ++i) {
      const step_plan planned = engine_->plan(step);
      const std::unique_ptr<output_memory> output = engine_->reserve(planned);
      std::int64_t shape[2] = {planned.output_size, 2};
      DLTensor output_view = output_of(output->data(), shape);
      engine_->forward(hidden_view, planned, output_view);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(repeats);
  }

  void reserve(plan_object& planned) {
    const std::unique_lock<std::mutex> held = hold();
    planned.output = engine_->reserve(planned.plan);
    planned.reserved = true;
  }

  /// The step, into `out`, or into the output reserve() made (returned, owning it).
  nb::object forward(const any_tensor& hidden, plan_object& planned, nb::handle out) {
    const std::unique_lock<std::mutex> held = hold();
    if (!planned.reserved) detail::fail("reserve", "call reserve(plan) before forward(hidden, plan)");
    const DLTensor hidden_view = on_this_device(describe(hidden), "hidden states");
    DLTensor output_view{};
    std::int64_t shape[2] = {planned.plan.output_size, 2};
    nb::ndarray<> given;
    if (!out.is_none()) {
      if (!nb::try_cast(out, given, false)) detail::fail("output", "must be a writable tensor");
      output_view = on_this_device(describe(given), "output");
    } else {
      if (!planned.output) detail::fail("plan", "it ran already (a plan runs once; its output was handed out then): plan the step again");
      output_view = output_of(planned.output->data(), shape);
    }
    {
      nb::gil_scoped_release unlocked;
      engine_->forward(hidden_view, planned.plan, output_view);
    }
    if (!out.is_none()) return nb::borrow(out);
    return hand_out(std::move(planned.output), shape[0]);
  }

  void reserve_capacity(std::int64_t requests, std::int64_t rows, std::int64_t result_rows, std::int64_t columns) {
    const std::unique_lock<std::mutex> held = hold();
    engine_->reserve_capacity({.requests = requests, .rows = rows, .result_rows = result_rows, .columns = columns});
  }
  std::int64_t output_capacity() const { return engine_->output_capacity(); }

  std::unique_ptr<graph_upload_object> reserve_graph() {
    const std::unique_lock<std::mutex> held = hold();
    return std::make_unique<graph_upload_object>(graph_upload_object{engine_, engine_->reserve_graph()});
  }

  void capture(const any_tensor& hidden, plan_object& planned, const nb::ndarray<>& out, graph_upload_object& home) {
    const std::unique_lock<std::mutex> held = hold();
    const DLTensor hidden_view = on_this_device(describe(hidden), "hidden states");
    DLTensor output_view = on_this_device(describe(out), "output");
    engine_->capture(hidden_view, planned.plan, output_view, *home.home);
  }

  void restage(plan_object& planned, graph_upload_object& home) {
    const std::unique_lock<std::mutex> held = hold();
    engine_->restage(planned.plan, *home.home);
  }

  void synchronize() {
    const std::unique_lock<std::mutex> held = hold();
    nb::gil_scoped_release unlocked;
    engine_->synchronize();
  }

  nb::dict audit() {
    const audit_counts counts = [&] {
      const std::unique_lock<std::mutex> held = hold();
      return engine_->audit();
    }();
    nb::dict found;
    found["uploads"] = counts.uploads;
    found["upload_bytes"] = counts.upload_bytes;
    found["downloads"] = counts.downloads;
    found["waits"] = counts.waits;
    found["allocations"] = counts.allocations;
    found["launches"] = counts.launches;
    return found;
  }

  void release(nb::handle id) {
    std::string text;
    read_id(text, id);
    const std::unique_lock<std::mutex> held = hold();
    engine_->release(text);
  }

  std::int64_t num_computed(nb::handle id) {
    std::string text;
    read_id(text, id);
    const std::unique_lock<std::mutex> held = hold();
    return engine_->num_computed(text);
  }

  const std::string& result_dtype() const { return result_dtype_; }
  std::string device() const { return engine_->device_type() == kDLCUDA ? "cuda" : "cpu"; }

 private:
  /// The step these arguments describe, in a batch kept from call to call, so
  /// that its requests (their ids' storage, their knobs) are reused, not rebuilt.
  const batch& read_batch(nb::handle prompt_lens, nb::handle num_scheduled, nb::handle num_computed, nb::handle ids,
                          nb::handle tasks, nb::handle token_ids, nb::handle params,
                          std::optional<std::int64_t> sequence_length, const std::string& padding, nb::list& kept) {
    batch& step = step_;
    const std::vector<std::int64_t> lengths = read_integers(prompt_lens, "prompt_lens");
    const std::size_t count = lengths.size();
    step.requests.resize(count);
    step.padded.reset();
    if (padding != "right" && padding != "left")
      detail::fail("padding", "expected \"right\" or \"left\", got \"", padding, "\"");
    std::vector<std::int64_t> computed(count, 0);
    if (!num_computed.is_none()) {
      computed = read_integers(num_computed, "num_computed");
      check_count(computed.size(), count, "num_computed");
    }
    std::vector<std::int64_t> scheduled;
    if (!num_scheduled.is_none()) {
      scheduled = read_integers(num_scheduled, "num_scheduled");
      check_count(scheduled.size(), count, "num_scheduled");
    }
    for (std::size_t i = 0; i < count; ++i) {
      request& r = step.requests[i];
      r.prompt_len = lengths[i];
      r.num_computed = computed[i];
      r.num_scheduled = scheduled.empty() ? lengths[i] - computed[i] : scheduled[i];
      r.prompt_token_ids = {};
      if (!(r.params == pooling_params{})) r.params = {};
    }
    read_ids(ids, step);
    read_tasks(tasks, step);
    read_params(params, step);
    read_token_ids(token_ids, step, kept);
    if (sequence_length) {
      step.padded = padded_rows{.sequence_length = *sequence_length,
                                .padding = padding == "right" ? padding::right : padding::left};
    }
    return step;
  }

  /// A request id from a list entry, into the id's own storage.
  static void read_id(std::string& id, nb::handle given) {
    if (nb::isinstance<nb::str>(given)) {
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(given.ptr(), &size);
      if (text == nullptr) throw nb::python_error();
      id.assign(text, static_cast<std::size_t>(size));
      return;
    }
    std::int64_t number = 0;
    if (!nb::try_cast(given, number))
      detail::fail("ids", "a request id is a str or an int, got " + nb::cast<std::string>(nb::repr(given)));
    write_id(id, number);
  }

  /// Writes an integer id as its decimal text, into the id's own storage.
  static void write_id(std::string& id, std::int64_t number) {
    char text[24];
    const auto written = std::to_chars(text, text + sizeof text, number);
    id.assign(text, written.ptr);
  }

  static void read_ids(nb::handle ids, batch& step) {
    const std::size_t count = step.requests.size();
    if (ids.is_none()) {
      for (std::size_t i = 0; i < count; ++i) write_id(step.requests[i].id, static_cast<std::int64_t>(i));
      return;
    }
    any_tensor tensor;
    if (nb::try_cast(ids, tensor, false)) {
      const std::vector<std::int64_t> numbers = read_integers(ids, "ids");
      check_count(numbers.size(), count, "ids");
      for (std::size_t i = 0; i < count; ++i) write_id(step.requests[i].id, numbers[i]);
      return;
    }
    if (!nb::isinstance<nb::sequence>(ids) || nb::isinstance<nb::str>(ids))
      detail::fail("ids", "must be a sequence of str or int ids, or a 1-D int tensor");
    const nb::sequence items = nb::borrow<nb::sequence>(ids);
    check_count(nb::len(items), count, "ids");
    std::size_t i = 0;
    for (nb::handle item : items) read_id(step.requests[i++].id, item);
  }

  void read_tasks(nb::handle tasks, batch& step) const {
    if (tasks.is_none()) {
      if (served_.size() != 1)
        detail::fail("tasks", "say each request's task: this dispatcher serves " + std::to_string(served_.size()) + " tasks");
      for (request& r : step.requests) r.task = served_[0];
      return;
    }
    if (nb::isinstance<nb::str>(tasks)) {
      const task all = read_task(tasks);
      for (request& r : step.requests) r.task = all;
      return;
    }
    if (!nb::isinstance<nb::sequence>(tasks)) detail::fail("tasks", "must be a task name or a sequence of them");
    const nb::sequence items = nb::borrow<nb::sequence>(tasks);
    check_count(nb::len(items), step.requests.size(), "tasks");
    std::size_t i = 0;
    for (nb::handle item : items) step.requests[i++].task = read_task(item);
  }

  static void read_params(nb::handle params, batch& step) {
    if (params.is_none()) return;
    pooling_params one;
    if (nb::try_cast(params, one)) {
      for (request& r : step.requests) r.params = one;
      return;
    }
    for_each_given(params, step.requests.size(), "params", "a PoolingParams, or a sequence of them (None for the defaults)",
                   [&](std::size_t i, nb::handle item) {
                     const pooling_params* given = nullptr;
                     if (!nb::try_cast(item, given) || given == nullptr)
                       detail::fail("params", "entry ", i, " is not a PoolingParams or None");
                     step.requests[i].params = *given;
                   });
  }

  static void read_token_ids(nb::handle token_ids, batch& step, nb::list& kept) {
    if (token_ids.is_none()) return;
    for_each_given(token_ids, step.requests.size(), "token_ids",
                   "a sequence of 1-D int tensors (None where a request has none)", [&](std::size_t i, nb::handle item) {
                     any_tensor tensor;
                     if (!nb::try_cast(item, tensor, false))
                       detail::fail("token_ids", "entry ", i, " is not a tensor (an int32 or int64 array)");
                     kept.append(item);
                     step.requests[i].prompt_token_ids = dlpack::token_ids(describe(tensor));
                   });
  }

  /// Calls `read(i, entry)` for each entry of a per-request sequence that is not None.
  template <class Read>
  static void for_each_given(nb::handle given, std::size_t count, const char* field, const char* expected, Read read) {
    if (!nb::isinstance<nb::sequence>(given) || nb::isinstance<nb::str>(given)) detail::fail(field, "must be ", expected);
    const nb::sequence items = nb::borrow<nb::sequence>(given);
    check_count(nb::len(items), count, field);
    std::size_t i = 0;
    for (nb::handle item : items) {
      if (!item.is_none()) read(i, item);
      ++i;
    }
  }

  /// Waits for the dispatcher, with the GIL let go meanwhile: a thread that
  /// holds the dispatcher never waits for the GIL while another waits for it
  /// holding the GIL. One step at a time: the engine, its state store, staging
  /// and the kept batch are not for two threads at once.
  std::unique_lock<std::mutex> hold() {
    nb::gil_scoped_release unlocked;
    return std::unique_lock<std::mutex>(busy_);
  }

  /// A tensor on a CUDA device must be on the dispatcher's (the DLPack views check the device's kind).
  DLTensor on_this_device(const DLTensor& view, const char* what) const {
    if (view.device.device_type == kDLCUDA && view.device.device_id != engine_->device_id())
      detail::fail(what, "is on cuda:", view.device.device_id, "; this dispatcher runs on cuda:", engine_->device_id());
    return view;
  }

  /// An output of shape[0] values: a vector, or for sparse results [entries, 2] (shape[1] is 2).
  DLTensor output_of(void* data, std::int64_t (&shape)[2]) const {
    DLTensor view{};
    view.data = data;
    view.device = {engine_->device_type(), engine_->device_id()};
    view.ndim = engine_->sparse() ? 2 : 1;
    view.dtype = engine_->result_type();
    view.shape = shape;
    return view;
  }

  /// The reserved output as a tensor that owns it: an object with __dlpack__ and
  /// __dlpack_device__ (numpy.from_dlpack, torch.from_dlpack, …).
  nb::object hand_out(std::unique_ptr<output_memory> memory, std::int64_t size) const {
    void* data = memory->data();
    auto held = std::make_unique<handed_output>(handed_output{engine_, std::move(memory)});
    nb::capsule owner(held.get(), [](void* given) noexcept { delete static_cast<handed_output*>(given); });
    held.release();  // the capsule owns it now
    const DLDataType type = engine_->result_type();
    const std::size_t shape[2] = {static_cast<std::size_t>(size), 2};
    return nb::cast(nb::ndarray<nb::array_api>(data, engine_->sparse() ? 2 : 1, shape, owner, nullptr,
                                               nb::dlpack::dtype{type.code, type.bits, type.lanes},
                                               engine_->device_type(), engine_->device_id()));
  }

  std::string result_dtype_;  ///< as the caller named it: "binary" results are int8 tensors
  std::shared_ptr<engine> engine_;
  std::mutex busy_;
  std::vector<task> served_;
  batch step_;
};

std::vector<std::pair<std::int64_t, std::int64_t>> spans_of(const pooling_params& params) {
  std::vector<std::pair<std::int64_t, std::int64_t>> spans;
  for (const token_span& span : params.spans) spans.emplace_back(span.begin, span.end);
  return spans;
}

}  // namespace
}  // namespace seqpool::python

NB_MODULE(_seqpool, m) {
  using namespace seqpool::python;
  m.doc() = "seqpool's bindings; use the seqpool package.";

  static nb::exception<seqpool::device_error> device_error(m, "DeviceError", PyExc_RuntimeError);
  nb::register_exception_translator([](const std::exception_ptr& thrown, void*) {
    try {
      std::rethrow_exception(thrown);
    } catch (const seqpool::error& bad_input) {
      PyErr_SetString(PyExc_ValueError, bad_input.what());
    }
  });

  nb::class_<layer_weights>(m, "Dense")
      .def(
          "__init__",
          [](layer_weights* made, const any_tensor& weight, const std::optional<any_tensor>& bias,
             const std::string& activation) {
            // Everything that may throw before the object is made: nanobind frees none that throws after.
            layer_weights layer = read_layer(weight, bias, "weight", "bias");
            layer.activation = activation_of(activation);
            new (made) layer_weights(std::move(layer));
          },
          "weight"_a, "bias"_a = nb::none(), nb::kw_only(), "activation"_a = "identity",
          "A dense layer of a head: f(x @ weight.T + bias), weight float32 [out, in] and bias [out] (copied), f "
          "the activation function (identity, tanh, gelu, relu).")
      .def_prop_ro("out_features", [](const layer_weights& layer) { return layer.rows; })
      .def_prop_ro("in_features", [](const layer_weights& layer) { return layer.cols; })
      .def_prop_ro("activation",
                   [](const layer_weights& layer) {
                     return std::string(seqpool::activation_names[static_cast<std::size_t>(layer.activation)]);
                   })
      .def("__repr__", [](const layer_weights& layer) {
        return "Dense(" + std::to_string(layer.cols) + " -> " + std::to_string(layer.rows) +
               (layer.bias.empty() ? "" : ", bias") + ", activation=\"" +
               std::string(seqpool::activation_names[static_cast<std::size_t>(layer.activation)]) + "\")";
      });

  nb::class_<seqpool::pooling_params>(m, "PoolingParams")
      .def(
          "__init__",
          [](seqpool::pooling_params* made, bool use_activation, std::optional<std::int64_t> dimensions,
             std::optional<std::int64_t> step_tag_id, std::vector<std::int64_t> returned_token_ids,
             std::vector<std::pair<std::int64_t, std::int64_t>> spans, std::int64_t instruction_len, bool drop_first,
             bool drop_last, std::vector<std::int64_t> drop_token_ids, std::optional<std::int64_t> top_k) {
            new (made) seqpool::pooling_params{};
            made->use_activation = use_activation;
            made->dimensions = dimensions;
            made->step_tag_id = step_tag_id;
            made->returned_token_ids = std::move(returned_token_ids);
            for (const auto& [begin, end] : spans) made->spans.push_back({begin, end});
            made->instruction_len = instruction_len;
            made->drop_first = drop_first;
            made->drop_last = drop_last;
            made->drop_token_ids = std::move(drop_token_ids);
            made->top_k = top_k;
          },
          nb::kw_only(), "use_activation"_a = true, "dimensions"_a = nb::none(), "step_tag_id"_a = nb::none(),
          "returned_token_ids"_a = std::vector<std::int64_t>{},
          "spans"_a = std::vector<std::pair<std::int64_t, std::int64_t>>{}, "instruction_len"_a = 0, "drop_first"_a = false,
          "drop_last"_a = false, "drop_token_ids"_a = std::vector<std::int64_t>{}, "top_k"_a = nb::none())
      .def_rw("use_activation", &seqpool::pooling_params::use_activation)
      .def_rw("dimensions", &seqpool::pooling_params::dimensions)
      .def_rw("step_tag_id", &seqpool::pooling_params::step_tag_id)
      .def_rw("returned_token_ids", &seqpool::pooling_params::returned_token_ids)
      .def_prop_ro("spans", &spans_of)
      .def_rw("instruction_len", &seqpool::pooling_params::instruction_len)
      .def_rw("drop_first", &seqpool::pooling_params::drop_first)
      .def_rw("drop_last", &seqpool::pooling_params::drop_last)
      .def_rw("drop_token_ids", &seqpool::pooling_params::drop_token_ids)
      .def_rw("top_k", &seqpool::pooling_params::top_k)
      .def("__eq__", [](const seqpool::pooling_params& a, const seqpool::pooling_params& b) { return a == b; })
      .def("__repr__", [](const seqpool::pooling_params& params) {
        std::string text = "PoolingParams(use_activation=" + std::string(params.use_activation ? "True" : "False");
        if (params.dimensions) text += ", dimensions=" + std::to_string(*params.dimensions);
        if (params.step_tag_id) text += ", step_tag_id=" + std::to_string(*params.step_tag_id);
        if (!params.returned_token_ids.empty())
          text += ", returned_token_ids=[" + std::to_string(params.returned_token_ids.size()) + " ids]";
        if (!params.spans.empty()) text += ", spans=[" + std::to_string(params.spans.size()) + " spans]";
        if (params.instruction_len != 0) text += ", instruction_len=" + std::to_string(params.instruction_len);
        if (params.drop_first) text += ", drop_first=True";
        if (params.drop_last) text += ", drop_last=True";
        if (!params.drop_token_ids.empty())
          text += ", drop_token_ids=[" + std::to_string(params.drop_token_ids.size()) + " ids]";
        if (params.top_k) text += ", top_k=" + std::to_string(*params.top_k);
        return text + ")";
      });

  nb::class_<plan_object>(m, "Plan")
      .def_prop_ro("output_size", [](const plan_object& p) { return p.plan.output_size; })
      .def_prop_ro("num_rows", [](const plan_object& p) { return p.plan.num_rows; })
      .def_prop_ro("results",
                   [](const plan_object& p) {
                     nb::list found;
                     for (const auto& slice : p.plan.results) {
                       if (slice)
                         found.append(nb::make_tuple(slice->offset, slice->rows, slice->cols));
                       else
                         found.append(nb::none());
                     }
                     return found;
                   },
                   "Per request: (offset, rows, cols) of its result in the step's output, or None.")
      .def_prop_ro("matrices", [](const plan_object& p) { return std::vector<bool>(p.matrices); },
                   "Per request: whether its result is a matrix (token task, or spans) rather than one vector.")
      .def_prop_ro("sparse", [](const plan_object& p) { return p.sparse; },
                   "Whether its results are sparse lists: the output is int32 [entries, 2], an id and a weight's "
                   "bits an entry.");

  nb::class_<graph_upload_object>(m, "GraphUpload")
      .def_prop_ro("bytes", [](const graph_upload_object& g) { return g.home->bytes(); })
      .def("mark_launched", [](graph_upload_object& g) { g.home->mark_launched(); });

  nb::class_<dispatcher_object>(m, "Dispatcher")
      .def(nb::init<std::int64_t, std::optional<std::string>, std::optional<std::string>, std::optional<std::string>,
                    std::optional<std::string>, std::optional<given_layers>, std::optional<any_tensor>,
                    std::optional<given_layers>, std::optional<any_tensor>, const std::string&,
                    std::optional<float>, std::optional<float>, const std::string&, std::optional<any_tensor>,
                    std::optional<float>, const std::string&, std::uintptr_t>(),
           "hidden_size"_a, nb::kw_only(), "embed"_a = nb::none(), "classify"_a = nb::none(),
           "token_embed"_a = nb::none(), "token_classify"_a = nb::none(), "projector"_a = nb::none(),
           "projector_bias"_a = nb::none(), "classifier"_a = nb::none(), "classifier_bias"_a = nb::none(),
           "problem"_a = "single_label", "logit_mean"_a = nb::none(), "logit_sigma"_a = nb::none(),
           "result_dtype"_a = "float32", "ranges"_a = nb::none(), "weight_floor"_a = nb::none(), "device"_a = "cpu",
           "stream"_a = 0)
      .def_prop_ro("hidden_size", &dispatcher_object::hidden_size)
      .def_prop_ro("result_dtype", &dispatcher_object::result_dtype)
      .def_prop_ro("device", &dispatcher_object::device)
      .def("plan", &dispatcher_object::plan, "prompt_lens"_a, "num_scheduled"_a = nb::none(),
           "num_computed"_a = nb::none(), nb::kw_only(), "ids"_a = nb::none(), "tasks"_a = nb::none(),
           "token_ids"_a = nb::none(), "params"_a = nb::none(), "sequence_length"_a = nb::none(),
           "padding"_a = "right")
      .def("reserve", &dispatcher_object::reserve, "plan"_a)
      .def("forward", &dispatcher_object::forward, "hidden"_a, "plan"_a, "out"_a = nb::none())
      .def("reserve_capacity", &dispatcher_object::reserve_capacity, nb::kw_only(), "requests"_a, "rows"_a,
           "result_rows"_a = 0, "columns"_a = 0)
      .def_prop_ro("output_capacity", &dispatcher_object::output_capacity)
      .def("reserve_graph", &dispatcher_object::reserve_graph)
      .def("capture", &dispatcher_object::capture, "hidden"_a, "plan"_a, "out"_a, "home"_a)
      .def("restage", &dispatcher_object::restage, "plan"_a, "home"_a)
      .def("synchronize", &dispatcher_object::synchronize)
      .def("audit", &dispatcher_object::audit)
      .def("release", &dispatcher_object::release, "id"_a)
      .def("num_computed", &dispatcher_object::num_computed, "id"_a)
      .def("_native_step_seconds", &dispatcher_object::native_step_seconds, "hidden"_a, "prompt_lens"_a,
           "ids"_a = nb::none(), "tasks"_a = nb::none(), "repeats"_a = 100);

  m.def("has_cuda", &has_cuda);
}
