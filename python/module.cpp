// seqpool._seqpool: the bindings. Tensors cross as DLPack (nanobind's ndarray
// takes anything with __dlpack__ or the buffer protocol), a step is given as an
// engine holds it (arrays of lengths, ids, params), and seqpool's errors become
// ValueError (bad input) and seqpool.DeviceError. The Python layer
// (seqpool/__init__.py) adds the conveniences.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
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

#include <seqpool/error.hpp>

#include "arguments.hpp"
#include "dispatcher_binding.hpp"
#include "engine.hpp"
#include "multi_pooler_binding.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace seqpool::python {
namespace {

/// Per request: (offset, rows, cols) of its result in the step's output, or None.
nb::list slices_of(const std::vector<std::optional<result_slice>>& results) {
  nb::list found;
  for (const auto& slice : results) {
    if (slice)
      found.append(nb::make_tuple(slice->offset, slice->rows, slice->cols));
    else
      found.append(nb::none());
  }
  return found;
}

constexpr const char* results_doc = "Per request: (offset, rows, cols) of its result in the step's output, or None.";
constexpr const char* matrices_doc =
    "Per request: whether its result is a matrix (token task, or spans) rather than one vector.";
constexpr const char* sparse_doc =
    "Whether its results are sparse lists: the output is int32 [entries, 2], an id and a weight's bits an entry.";

/// What a Dispatcher and a MultiPooler share of their bindings.
template <class Object>
void bind_engine_calls(nb::class_<Object>& bound) {
  bound.def_prop_ro("hidden_size", &Object::hidden_size)
      .def_prop_ro("device", &Object::device)
      .def("reserve_capacity", &Object::reserve_capacity, nb::kw_only(), "requests"_a.none(), "rows"_a.none(),
           "result_rows"_a.none() = 0, "columns"_a.none() = 0)
      .def("reserve_graph", &Object::reserve_graph)
      .def("synchronize", &Object::synchronize)
      .def("audit", &Object::audit)
      .def("release", &Object::release, "id"_a.none())
      .def("num_computed", &Object::num_computed, "id"_a.none())
      .def_prop_ro("_spare_plans", &Object::spare_plan_count,
                   "Dropped plans whose storage the next plan() plans into (two at most).");
}

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
          [](layer_weights* made, nb::handle weight, nb::handle bias, const std::string& activation) {
            // Everything that may throw before the object is made: nanobind frees none that throws after.
            const any_tensor weights = tensor_of(weight, "weight", when_refused::copy);  // refused first, then the bias
            const std::optional<any_tensor> biases = optional_copied_tensor_of(bias, "bias");
            layer_weights layer = read_layer(weights, biases, "weight", "bias");
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

  // Ints are read as seqpool reads them (integer_of(): not a bool), so that a knob given True (a JSON
  // request's true, say) is refused rather than taken as 1.
  nb::class_<seqpool::pooling_params>(m, "PoolingParams")
      .def(
          "__init__",
          [](seqpool::pooling_params* made, bool use_activation, nb::handle dimensions, nb::handle step_tag_id,
             nb::handle returned_token_ids, nb::handle spans, nb::handle instruction_len, bool drop_first,
             bool drop_last, nb::handle drop_token_ids, nb::handle top_k) {
            // Everything that may throw before the object is made: nanobind frees none that throws after.
            seqpool::pooling_params params{
                .use_activation = use_activation,
                .dimensions = optional_integer(dimensions, "dimensions"),
                .step_tag_id = optional_integer(step_tag_id, "step_tag_id"),
                .returned_token_ids = read_integers(returned_token_ids, "returned_token_ids", {}, listed::token_ids),
                .spans = read_spans(spans, "spans"),
                .instruction_len = integer_argument(instruction_len, "instruction_len"),
                .drop_first = drop_first,
                .drop_last = drop_last,
                .drop_token_ids = read_integers(drop_token_ids, "drop_token_ids", {}, listed::token_ids),
                .top_k = optional_integer(top_k, "top_k")};
            new (made) seqpool::pooling_params(std::move(params));
          },
          nb::kw_only(), "use_activation"_a = true, "dimensions"_a = nb::none(), "step_tag_id"_a = nb::none(),
          "returned_token_ids"_a = nb::tuple(), "spans"_a = nb::tuple(), "instruction_len"_a = 0,
          "drop_first"_a = false, "drop_last"_a = false, "drop_token_ids"_a = nb::tuple(), "top_k"_a = nb::none())
      .def_rw("use_activation", &seqpool::pooling_params::use_activation)
      .def_prop_rw(
          "dimensions", [](const seqpool::pooling_params& params) { return params.dimensions; },
          [](seqpool::pooling_params& params, nb::handle given) {
            params.dimensions = optional_integer(given, "dimensions");
          },
          nb::for_setter(nb::arg("value").none()))
      .def_prop_rw(
          "step_tag_id", [](const seqpool::pooling_params& params) { return params.step_tag_id; },
          [](seqpool::pooling_params& params, nb::handle given) {
            params.step_tag_id = optional_integer(given, "step_tag_id");
          },
          nb::for_setter(nb::arg("value").none()))
      .def_prop_rw(
          "returned_token_ids", [](const seqpool::pooling_params& params) { return params.returned_token_ids; },
          [](seqpool::pooling_params& params, nb::handle given) {
            params.returned_token_ids = read_integers(given, "returned_token_ids", {}, listed::token_ids);
          })
      .def_prop_ro("spans", &spans_of)
      .def_prop_rw(
          "instruction_len", [](const seqpool::pooling_params& params) { return params.instruction_len; },
          [](seqpool::pooling_params& params, nb::handle given) {
            params.instruction_len = integer_argument(given, "instruction_len");
          })
      .def_rw("drop_first", &seqpool::pooling_params::drop_first)
      .def_rw("drop_last", &seqpool::pooling_params::drop_last)
      .def_prop_rw(
          "drop_token_ids", [](const seqpool::pooling_params& params) { return params.drop_token_ids; },
          [](seqpool::pooling_params& params, nb::handle given) {
            params.drop_token_ids = read_integers(given, "drop_token_ids", {}, listed::token_ids);
          })
      .def_prop_rw(
          "top_k", [](const seqpool::pooling_params& params) { return params.top_k; },
          [](seqpool::pooling_params& params, nb::handle given) { params.top_k = optional_integer(given, "top_k"); },
          nb::for_setter(nb::arg("value").none()))
      // An operator: against another type nanobind returns NotImplemented, and Python finds them unequal.
      .def(
          "__eq__", [](const seqpool::pooling_params& a, const seqpool::pooling_params& b) { return a == b; },
          nb::is_operator())
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
  // Equal by value, and mutable: unhashable, as a list is.
  m.attr("PoolingParams").attr("__hash__") = nb::none();

  nb::class_<plan_object>(m, "Plan")
      .def_prop_ro("output_size", [](const plan_object& p) { return p.plan.output_size; })
      .def_prop_ro("num_rows", [](const plan_object& p) { return p.plan.num_rows; })
      .def_prop_ro(
          "results", [](const plan_object& p) { return slices_of(p.plan.results); }, results_doc)
      .def_prop_ro(
          "matrices", [](const plan_object& p) { return std::vector<bool>(p.matrices); }, matrices_doc)
      .def_prop_ro(
          "sparse", [](const plan_object& p) { return p.sparse; }, sparse_doc);

  nb::class_<part_plan_view>(m, "PartPlan", "One part's share of a PartsPlan: what seqpool.split() reads of it.")
      .def_ro("output_size", &part_plan_view::output_size)
      .def_prop_ro(
          "results", [](const part_plan_view& p) { return slices_of(p.results); }, results_doc)
      .def_ro("matrices", &part_plan_view::matrices, matrices_doc)
      .def_ro("sparse", &part_plan_view::sparse, sparse_doc);

  nb::class_<parts_plan_object>(m, "PartsPlan")
      .def_prop_ro("num_rows", [](const parts_plan_object& p) { return p.plan.num_rows; })
      .def_prop_ro("parts", &part_views, "Per part, in the MultiPooler's order: its PartPlan.");

  nb::class_<graph_upload_object>(m, "GraphUpload")
      .def_prop_ro("bytes", [](const graph_upload_object& g) { return g.home->bytes(); })
      .def("mark_launched", [](graph_upload_object& g) {
        const engine_lock::held held = g.lock->hold();
        g.home->mark_launched();
      });

  auto dispatcher =
      nb::class_<dispatcher_object>(m, "Dispatcher")
          .def(nb::init<nb::handle, std::optional<std::string>, std::optional<std::string>, std::optional<std::string>,
                        std::optional<std::string>, nb::handle, nb::handle, nb::handle, nb::handle, const std::string&,
                        std::optional<double>, std::optional<double>, const std::string&, nb::handle,
                        std::optional<double>, const std::string&, nb::handle>(),
               "hidden_size"_a, nb::kw_only(), "embed"_a = nb::none(), "classify"_a = nb::none(),
               "token_embed"_a = nb::none(), "token_classify"_a = nb::none(), "projector"_a = nb::none(),
               "projector_bias"_a = nb::none(), "classifier"_a = nb::none(), "classifier_bias"_a = nb::none(),
               "problem"_a = "single_label", "logit_mean"_a = nb::none(), "logit_sigma"_a = nb::none(),
               "result_dtype"_a = "float32", "ranges"_a = nb::none(), "weight_floor"_a = nb::none(), "device"_a = "cpu",
               "stream"_a = 0)
          .def_prop_ro("result_dtype", &dispatcher_object::result_dtype)
          .def("plan", &dispatcher_object::plan, "prompt_lens"_a, "num_scheduled"_a = nb::none(),
               "num_computed"_a = nb::none(), nb::kw_only(), "ids"_a = nb::none(), "tasks"_a = nb::none(),
               "token_ids"_a = nb::none(), "params"_a = nb::none(), "sequence_length"_a = nb::none(),
               "padding"_a = "right")
          .def("reserve", &dispatcher_object::reserve, "plan"_a.none())
          .def("forward", &dispatcher_object::forward, "hidden"_a.none(), "plan"_a.none(), "out"_a = nb::none())
          .def_prop_ro("output_capacity", &dispatcher_object::output_capacity)
          .def("capture", &dispatcher_object::capture, "hidden"_a.none(), "plan"_a.none(), "out"_a.none(), "home"_a)
          .def("restage", &dispatcher_object::restage, "plan"_a.none(), "home"_a)
          .def("_native_step_seconds", &dispatcher_object::native_step_seconds, "hidden"_a, "prompt_lens"_a,
               "ids"_a = nb::none(), "tasks"_a = nb::none(), "repeats"_a = 100);
  bind_engine_calls(dispatcher);

  nb::class_<part_object>(m, "Part")
      .def(
          "__init__",
          [](part_object* made, const std::string& method, nb::handle pooling_task, nb::handle projector,
             nb::handle projector_bias, nb::handle classifier, nb::handle classifier_bias, const std::string& problem,
             std::optional<double> logit_mean, std::optional<double> logit_sigma, const std::string& result_dtype,
             nb::handle ranges, std::optional<double> weight_floor, bool drop_first, bool drop_last,
             nb::handle drop_token_ids) {
            // Everything that may throw before the object is made: nanobind frees none that throws after.
            part_object part = read_part(
                method, pooling_task, projector, projector_bias, classifier, classifier_bias, problem, logit_mean,
                logit_sigma, result_dtype, ranges, weight_floor,
                {drop_first, drop_last, read_integers(drop_token_ids, "drop_token_ids", {}, listed::token_ids)});
            new (made) part_object(std::move(part));
          },
          "method"_a, nb::kw_only(), "task"_a = nb::none(), "projector"_a = nb::none(), "projector_bias"_a = nb::none(),
          "classifier"_a = nb::none(), "classifier_bias"_a = nb::none(), "problem"_a = "single_label",
          "logit_mean"_a = nb::none(), "logit_sigma"_a = nb::none(), "result_dtype"_a = "float32",
          "ranges"_a = nb::none(), "weight_floor"_a = nb::none(), "drop_first"_a = false, "drop_last"_a = false,
          "drop_token_ids"_a = nb::tuple(),
          "One output of a MultiPooler: `method` for `task` (token_embed for a token method, embed otherwise), "
          "with a Dispatcher's head keywords, and the token filters a token part adds to each request's.")
      .def_prop_ro("task", [](const part_object& part) { return std::string(seqpool::name(part.config.served)); })
      .def_prop_ro("method",
                   [](const part_object& part) {
                     return *part.config.pooler.methods[static_cast<std::size_t>(part.config.served)];
                   })
      .def_ro("result_dtype", &part_object::result_dtype)
      .def("__repr__", [](const part_object& part) {
        const seqpool::task served = part.config.served;
        return "Part(\"" + *part.config.pooler.methods[static_cast<std::size_t>(served)] + "\", task=\"" +
               std::string(seqpool::name(served)) + "\", result_dtype=\"" + part.result_dtype + "\")";
      });

  auto multi =
      nb::class_<multi_pooler_object>(m, "MultiPooler")
          .def(nb::init<nb::handle, const std::vector<part_object>&, const std::string&, nb::handle>(), "hidden_size"_a,
               "parts"_a, nb::kw_only(), "device"_a = "cpu", "stream"_a = 0)
          .def_prop_ro("result_dtypes", &multi_pooler_object::result_dtypes)
          .def_prop_ro("tasks", &multi_pooler_object::tasks)
          .def("plan", &multi_pooler_object::plan, "prompt_lens"_a, "num_scheduled"_a = nb::none(),
               "num_computed"_a = nb::none(), nb::kw_only(), "ids"_a = nb::none(), "token_ids"_a = nb::none(),
               "params"_a = nb::none(), "sequence_length"_a = nb::none(), "padding"_a = "right")
          .def("reserve", &multi_pooler_object::reserve, "plan"_a.none())
          .def("forward", &multi_pooler_object::forward, "hidden"_a.none(), "plan"_a.none(), "out"_a = nb::none())
          .def_prop_ro("output_capacity", &multi_pooler_object::output_capacity)
          .def("capture", &multi_pooler_object::capture, "hidden"_a.none(), "plan"_a.none(), "out"_a.none(), "home"_a)
          .def("restage", &multi_pooler_object::restage, "plan"_a.none(), "home"_a);
  bind_engine_calls(multi);

  m.def("has_cuda", &has_cuda);
  // seqpool.pooler()'s task, read and refused as a Dispatcher reads `tasks`.
  m.def("_task_named", [](nb::handle given) { return std::string(seqpool::name(read_task(given, "task"))); });
}
