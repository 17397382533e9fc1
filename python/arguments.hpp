// What the bindings read from Python's arguments: tensors as DLPack describes
// them, integer lists, tasks, dense layers, and the head arguments a Dispatcher
// and a Part take; what they refuse is refused with seqpool's messages.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <seqpool/detail/records.hpp>
#include <seqpool/dlpack.hpp>
#include <seqpool/error.hpp>

#include "engine.hpp"

namespace seqpool::python {

namespace nb = nanobind;

/// Any tensor nanobind can import (DLPack or the buffer protocol), unconverted.
using any_tensor = nb::ndarray<nb::ro>;

/// The tensor as DLPack describes it; it points into `tensor`, which must outlive it.
template <class... Constraints>
inline DLTensor describe(const nb::ndarray<Constraints...>& tensor) {
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

/// What `given`'s __dlpack__ exports, asked as nanobind asks it — a
/// versioned capsule first where `versioned_first` (a writable tensor's
/// read-only flag is in it), a plain one first otherwise (which every
/// producer gives), and the other where the first raises BufferError or
/// TypeError — with what it raises kept: nanobind clears that and imports
/// another way, through the buffer protocol or a framework's obsolete
/// to_dlpack(), which skips the checks __dlpack__ makes (PyTorch's of a
/// tensor that requires grad), and a KeyboardInterrupt would be lost. An
/// Exception — DLPack's BufferError, or what a producer raises in its place
/// (PyTorch's RuntimeError) — is the producer's refusal, returned in
/// `refused` as "type: reason" (the first call's where the second's is a
/// TypeError for max_version, which a producer that predates it raises); what
/// is no Exception (a KeyboardInterrupt, a SystemExit) propagates. None where
/// `given` has no __dlpack__ or refused.
inline nb::object export_capsule(nb::handle given, bool versioned_first, std::string& refused) {
  if (!nb::hasattr(given, "__dlpack__")) return {};
  const nb::object dlpack = given.attr("__dlpack__");
  const auto call = [&](bool versioned) {
    return versioned
               ? dlpack(nb::arg("max_version") = nb::make_tuple(nb::dlpack::major_version, nb::dlpack::minor_version))
               : dlpack();
  };
  const auto reason = [](const nb::python_error& error) {
    return nb::cast<std::string>(nb::type_name(error.type())) + ": " + nb::str(error.value()).c_str();
  };
  try {
    return call(versioned_first);
  } catch (const nb::python_error& first) {
    if (!first.matches(PyExc_Exception)) throw;
    if (!first.matches(PyExc_BufferError) && !first.matches(PyExc_TypeError)) {
      refused = reason(first);
      return {};
    }
    try {
      return call(!versioned_first);
    } catch (const nb::python_error& second) {
      if (!second.matches(PyExc_Exception)) throw;
      refused = reason(!versioned_first && second.matches(PyExc_TypeError) ? first : second);
      return {};
    }
  }
}

/// Refuses `given` as `field` where its producer refused to export it
/// (`refused`, as export_capsule() gives it; nothing where empty).
inline void refuse_export(std::string_view field, const std::string& refused) {
  if (!refused.empty()) detail::fail(field, "its producer refused to export it (__dlpack__ raised ", refused, ")");
}

/// The name of `given`'s type, for messages.
inline std::string type_name_of(nb::handle given) { return nb::cast<std::string>(nb::type_name(given.type())); }

/// Whether `given` is read entry by entry: a sequence, but not a str (one id
/// or name, not its characters), nor bytes or a bytearray (bytes, not the
/// small ints they iterate as).
inline bool is_entries(nb::handle given) {
  return nb::isinstance<nb::sequence>(given) && !nb::isinstance<nb::str>(given) && !nb::isinstance<nb::bytes>(given) &&
         PyByteArray_Check(given.ptr()) == 0;
}

/// What try_import() takes of an object whose producer refuses to export it.
enum class when_refused {
  /// What its buffer protocol gives, tried as nanobind would (NumPy before 2.1
  /// refuses a plain export of a read-only array); nothing without one.
  buffer_only,
  /// What nanobind imports of it any other way: for a tensor whose values are
  /// copied once, where an object is made (a layer's weight or bias,
  /// calibration ranges). A PyTorch module's Parameter requires grad, which
  /// torch's __dlpack__ refuses, and a copy of its values is what it would
  /// give detached.
  copy,
};

/// `given` as a tensor: what its __dlpack__ exports (export_capsule()), or
/// what nanobind imports of an object without one (the buffer protocol). A
/// producer's refusal is left in `refused` for the caller (a sequence may be
/// read instead), but where `given` is imported another way (`otherwise`). A
/// tensor asked for writable that is exported read-only is not taken, and not
/// refused here: the caller says it must be writable.
template <class Tensor>
bool try_import(nb::handle given, Tensor& tensor, std::string& refused,
                when_refused otherwise = when_refused::buffer_only) {
  constexpr bool writable = !std::is_same_v<Tensor, any_tensor>;
  const nb::object capsule = export_capsule(given, writable, refused);
  if (!refused.empty() && otherwise == when_refused::buffer_only && PyObject_CheckBuffer(given.ptr()) == 0)
    return false;
  const nb::handle source = capsule.is_valid() ? nb::handle(capsule) : given;
  if (nb::try_cast(source, tensor, false)) {
    refused.clear();
    return true;
  }
  if constexpr (writable)
    if (any_tensor readable; nb::try_cast(source, readable, false)) refused.clear();
  return false;
}

/// try_import(), a producer's refusal refused as `field`.
template <class Tensor>
bool try_tensor(nb::handle given, Tensor& tensor, std::string_view field,
                when_refused otherwise = when_refused::buffer_only) {
  std::string refused;
  if (try_import(given, tensor, refused, otherwise)) return true;
  refuse_export(field, refused);
  return false;
}

/// Whether `given` is Python's bool or NumPy's (whose __index__ gives 0 or 1 as well): no count and no id.
inline bool is_bool(nb::handle given) {
  const std::string_view type = Py_TYPE(given.ptr())->tp_name;
  return PyBool_Check(given.ptr()) || type == "numpy.bool_" || type == "numpy.bool";
}

inline void check_count(std::size_t found, std::size_t expected, const char* field) {
  if (found != expected)
    detail::fail(field, "has " + std::to_string(found) + " entries for " + std::to_string(expected) + " requests");
}

/// Clears the error Python raised converting an argument where it is one
/// seqpool refuses with its own message — a TypeError (no __index__) or an
/// OverflowError (past the integer's range) — and throws any other (an
/// argument's __index__ interrupted, or raising what it raises) as it is.
inline void clear_conversion_error() {
  if (PyErr_ExceptionMatches(PyExc_TypeError) == 0 && PyErr_ExceptionMatches(PyExc_OverflowError) == 0)
    throw nb::python_error();
  PyErr_Clear();
}

/// `given` as an int64 through its __index__ (Python's and NumPy's ints, not
/// their bools); none where it has none or its value is past int64's range.
inline std::optional<std::int64_t> integer_of(nb::handle given) {
  if (is_bool(given)) return std::nullopt;
  const nb::object number = nb::steal(PyNumber_Index(given.ptr()));
  if (number.is_valid()) {
    const long long value = PyLong_AsLongLong(number.ptr());
    if (value != -1 || PyErr_Occurred() == nullptr) return value;
  }
  clear_conversion_error();
  return std::nullopt;
}

/// An int argument (`field`), read as integer_of() reads one.
inline std::int64_t integer_argument(nb::handle given, const char* field) {
  const std::optional<std::int64_t> value = integer_of(given);
  if (!value) detail::fail(field, "must be an int in [-2^63, 2^63), got " + nb::cast<std::string>(nb::repr(given)));
  return *value;
}

/// An optional int argument (`field`): None, or an int as integer_of() reads one.
inline std::optional<std::int64_t> optional_integer(nb::handle given, const char* field) {
  if (given.is_none()) return std::nullopt;
  return integer_argument(given, field);
}

/// What a list of integers read without a count holds: a step's requests
/// (prompt_lens), or token ids (a knob's list).
enum class listed { requests, token_ids };

/// A CUDA stream's handle (`stream`, as torch's `cuda_stream` gives it; 0 the
/// default stream), an int as integer_of() reads one.
inline std::uintptr_t stream_of(nb::handle given) {
  const std::int64_t handle = integer_argument(given, "stream");
  if (handle < 0) detail::fail("stream", "must be a CUDA stream's handle, at least 0, got ", handle);
  return static_cast<std::uintptr_t>(handle);
}

/// The integers of a tensor given for `field`, a 1-D int32/int64 host tensor:
/// exactly `count` of them where it is given (one a request: the length is
/// checked before it is read), else at most as many as a step or a knob's list
/// holds (`what`).
inline std::vector<std::int64_t> integers_in(const any_tensor& tensor, const char* field,
                                             std::optional<std::size_t> count, listed what) {
  const DLTensor view = describe(tensor);
  if (view.device.device_type != kDLCPU && view.device.device_type != kDLCUDAHost)
    detail::fail(field, "must be in host memory (the plan is made on the host), not on " +
                            dlpack::detail::device_name(view.device.device_type));
  if (view.ndim != 1) detail::fail(field, "must be one-dimensional, got shape " + dlpack::detail::shape_name(view));
  const bool wide = dlpack::detail::holds<std::int64_t>(view.dtype);
  if (!wide && !dlpack::detail::holds<std::int32_t>(view.dtype))
    detail::fail(field, "must hold int64 or int32, got " + dlpack::detail::dtype_name(view.dtype));
  dlpack::detail::check_extents(view, field);
  // A tensor of any length may take no memory (a stride of 0): its length is checked before it is read, against
  // the requests' count, or against the most requests a step has (each reads a row, and its records count rows
  // in 32 bits).
  if (count)
    check_count(static_cast<std::size_t>(view.shape[0]), *count, field);
  else if (view.shape[0] > detail::most_counted && what == listed::requests)
    detail::fail(field, "has ", view.shape[0], " entries; a step has at most ", detail::most_counted,
                 " requests (each reads a row, and a step reads at most ", detail::most_counted, ")");
  else if (view.shape[0] > detail::most_counted)
    detail::fail(field, "has ", view.shape[0], " entries, more than the ", detail::most_counted,
                 " a knob's list may hold");
  const std::int64_t stride = view.strides != nullptr ? view.strides[0] : 1;
  std::vector<std::int64_t> values(static_cast<std::size_t>(view.shape[0]));
  // Copied byte by byte: a buffer's integers need not be aligned (NumPy's view of a bytearray at an odd offset).
  const auto* first = dlpack::detail::first_element<const std::byte>(view, field, view.shape[0]);
  const std::int64_t step = stride * (wide ? 8 : 4);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::byte* at = first + static_cast<std::int64_t>(i) * step;
    if (wide) {
      std::memcpy(&values[i], at, sizeof(std::int64_t));
    } else {
      std::int32_t narrow;
      std::memcpy(&narrow, at, sizeof narrow);
      values[i] = narrow;
    }
  }
  return values;
}

/// Integers from a 1-D int32/int64 host tensor (integers_in()) or a sequence
/// of Python ints: exactly `count` of them where it is given (a sequence is
/// iterated one entry past `count` at most), else as many as iterating the
/// sequence gives, at most its len().
inline std::vector<std::int64_t> read_integers(nb::handle given, const char* field,
                                               std::optional<std::size_t> count = std::nullopt,
                                               listed what = listed::requests) {
  any_tensor tensor;
  std::string refused;
  if (try_import(given, tensor, refused)) return integers_in(tensor, field, count, what);
  std::vector<std::int64_t> values;
  if (!is_entries(given)) {
    refuse_export(field, refused);
    detail::fail(field, "must be a sequence of ints or a 1-D int tensor");
  }
  // Read one entry past the bound at most, so that one whose iteration never ends is refused.
  const std::size_t bound = count ? *count : nb::len(given);
  values.reserve(std::min<std::size_t>(bound, std::size_t{1} << 20));  // a len() may say more than it holds
  nb::object iterator = nb::steal(PyObject_GetIter(given.ptr()));
  if (!iterator.is_valid()) throw nb::python_error();
  while (true) {
    nb::object item = nb::steal(PyIter_Next(iterator.ptr()));
    if (!item.is_valid()) {
      if (PyErr_Occurred() != nullptr) throw nb::python_error();
      if (count) check_count(values.size(), *count, field);
      return values;
    }
    if (values.size() == bound) {
      if (count) detail::fail(field, "has more entries than the step's ", bound, " requests");
      detail::fail(field, "has more entries than its len() of ", bound);
    }
    const std::optional<std::int64_t> value = integer_of(item);
    if (!value) detail::fail(field, "must hold ints, got " + nb::cast<std::string>(nb::repr(item)));
    values.push_back(*value);
  }
}

/// A per-request sequence's `count` entries as they are when it is read: a
/// tuple of them, so that reading them (which may run the caller's code: an
/// entry's __index__, a tensor's __dlpack__) sees those entries, however the
/// sequence changes meanwhile or whatever its len() said. A list or tuple is
/// taken whole; any other sequence is iterated one entry past the step's
/// requests at most, so that one whose iteration never ends is refused.
/// `expected` says what `field` must be.
inline nb::tuple entries_of(nb::handle given, std::size_t count, const char* field, const char* expected) {
  if (!is_entries(given)) detail::fail(field, "must be ", expected, ", got ", type_name_of(given));
  if (PyList_CheckExact(given.ptr()) || PyTuple_CheckExact(given.ptr())) {
    nb::tuple read = nb::steal<nb::tuple>(PySequence_Tuple(given.ptr()));
    if (!read.is_valid()) throw nb::python_error();
    check_count(nb::len(read), count, field);
    return read;
  }
  std::vector<nb::object> taken;
  nb::object iterator = nb::steal(PyObject_GetIter(given.ptr()));
  if (!iterator.is_valid()) throw nb::python_error();
  while (taken.size() <= count) {
    nb::object next = nb::steal(PyIter_Next(iterator.ptr()));
    if (!next.is_valid()) {
      if (PyErr_Occurred() != nullptr) throw nb::python_error();
      break;
    }
    taken.push_back(std::move(next));
  }
  if (taken.size() > count) detail::fail(field, "has more entries than the step's ", count, " requests");
  check_count(taken.size(), count, field);
  nb::tuple read = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(count)));
  if (!read.is_valid()) throw nb::python_error();
  for (std::size_t k = 0; k < count; ++k)
    PyTuple_SET_ITEM(read.ptr(), static_cast<Py_ssize_t>(k), taken[k].release().ptr());
  return read;
}

/// Token spans (`field`): a sequence of (begin, end) pairs of ints, each as
/// integer_of() reads one; whether they lie in order within the prompt the
/// planner checks.
inline std::vector<token_span> read_spans(nb::handle given, const char* field) {
  constexpr const char* expected = "a sequence of (begin, end) pairs of ints";
  if (!is_entries(given)) detail::fail(field, "must be ", expected);
  // Iterated one entry past its len() at most, so that one whose iteration never ends is refused.
  const std::size_t bound = nb::len(given);
  std::vector<token_span> spans;
  for (const nb::handle entry : given) {
    if (spans.size() == bound) detail::fail(field, "has more entries than its len() of ", bound);
    const auto refuse = [&] {
      detail::fail(field, "must be ", expected, ", got ", nb::cast<std::string>(nb::repr(entry)));
    };
    if (!is_entries(entry) || nb::len(entry) != 2) refuse();
    const nb::object first = entry[0];
    const nb::object second = entry[1];
    const std::optional<std::int64_t> begin = integer_of(first);
    const std::optional<std::int64_t> end = integer_of(second);
    if (!begin || !end) refuse();
    spans.push_back({*begin, *end});
  }
  return spans;
}

inline std::optional<task> task_named(std::string_view text) {
  for (const task candidate : every_task)
    if (name(candidate) == text) return candidate;
  return std::nullopt;
}

/// A task named by a str; a name is quoted as section 8 of SPEC says, anything else as repr() gives it.
inline task read_task(nb::handle given, const char* field = "tasks") {
  std::string text;
  const bool named = nb::try_cast(given, text);
  if (named)
    if (const std::optional<task> found = task_named(text)) return *found;
  detail::fail(field, "expected \"embed\", \"classify\", \"token_embed\" or \"token_classify\", got ",
               named ? detail::quoted(text) : nb::cast<std::string>(nb::repr(given)));
}

/// What a tensor argument may be, for messages.
inline constexpr std::string_view tensor_kinds =
    "an object with __dlpack__ or the buffer protocol, in native byte order";

/// `given` as a tensor: an object with __dlpack__ or the buffer protocol that
/// nanobind reads (native byte order), or where its producer refuses, what
/// `otherwise` takes; anything else is refused as `field`.
inline any_tensor tensor_of(nb::handle given, const std::string& field,
                            when_refused otherwise = when_refused::buffer_only) {
  any_tensor tensor;
  if (!try_tensor(given, tensor, field, otherwise))
    detail::fail(field, "must be a tensor (", tensor_kinds, "), got ", type_name_of(given));
  return tensor;
}

/// `given` as a tensor a step writes; anything else is refused as `field`.
inline nb::ndarray<> writable_tensor_of(nb::handle given, const std::string& field) {
  nb::ndarray<> tensor;
  if (!try_tensor(given, tensor, field)) detail::fail(field, "must be a writable tensor");
  return tensor;
}

/// `given` as a tensor whose values are copied (when_refused::copy), or nothing for None.
inline std::optional<any_tensor> optional_copied_tensor_of(nb::handle given, const std::string& field) {
  if (given.is_none()) return std::nullopt;
  return tensor_of(given, field, when_refused::copy);
}

/// A float32 host tensor of `ndim` dimensions, row-major, as its values; a
/// tensor of other dimensions is refused as not of shape `shape` (its words).
inline std::vector<float> read_floats(const any_tensor& tensor, std::int32_t ndim, const std::string& field,
                                      std::string_view shape) {
  const DLTensor view = describe(tensor);
  if (view.device.device_type != kDLCPU && view.device.device_type != kDLCUDAHost)
    detail::fail(field, "must be in host memory (it is copied into the dispatcher's space), not on ",
                 dlpack::detail::device_name(view.device.device_type));
  if (!dlpack::detail::holds<float>(view.dtype))
    detail::fail(field, "must hold float32, got ", dlpack::detail::dtype_name(view.dtype));
  if (view.ndim != ndim) detail::fail(field, "must have shape ", shape, ", got ", dlpack::detail::shape_name(view));
  const std::int64_t size = dlpack::detail::compact_size(view, field.c_str());
  std::int64_t stride = 1;
  for (std::int32_t d = view.ndim - 1; d >= 0; --d) {
    if (view.strides != nullptr && view.shape[d] > 1 && view.strides[d] != stride)
      detail::fail(field, "must be contiguous (row-major)");
    stride *= view.shape[d];
  }
  std::vector<float> values(static_cast<std::size_t>(size));  // copied byte by byte: they need not be aligned
  if (size > 0)
    std::memcpy(values.data(), dlpack::detail::first_element<const std::byte>(view, field.c_str(), size),
                values.size() * sizeof(float));
  return values;
}

/// A dense layer from its weight, [rows, cols] float32, and bias, [rows]
/// float32 or none; errors name the fields as given.
inline layer_weights read_layer(const any_tensor& weight, const std::optional<any_tensor>& bias,
                                const std::string& weight_field, const std::string& bias_field) {
  layer_weights layer;
  layer.weight = read_floats(weight, 2, weight_field, "[out, in]");
  layer.rows = static_cast<std::int64_t>(weight.shape(0));
  layer.cols = static_cast<std::int64_t>(weight.shape(1));
  // Refused here, where the weight is read: an empty one would be copied into no memory, and refused as null.
  if (layer.rows < 1 || layer.cols < 1)
    detail::fail(weight_field, "must have shape [out, in] of at least [1, 1], got [", layer.rows, ", ", layer.cols,
                 "]");
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

/// A head's layers as given (None for none): refused as `what` where they are
/// none of given_layers' kinds.
inline std::optional<given_layers> layers_of(nb::handle given, const std::string& what) {
  if (given.is_none()) return std::nullopt;
  // A weight tensor, copied (when_refused::copy); a Dense or a list of them as nanobind reads them.
  if (any_tensor weights; try_tensor(given, weights, what, when_refused::copy)) return weights;
  given_layers layers;
  if (!nb::try_cast(given, layers, false)) {
    detail::fail(what, "must be a weight tensor [out, in] (", tensor_kinds, "), a Dense or a list of them, got ",
                 type_name_of(given));
  }
  return layers;
}

inline std::vector<layer_weights> read_stack(std::optional<given_layers> given, const std::optional<any_tensor>& bias,
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

inline activation_function activation_of(const std::string& name) {
  if (const std::optional<activation_function> found = activation_named(name)) return *found;
  detail::fail("activation", "expected " + activation_name_list() + ", got " + detail::quoted(name));
}

inline result_kind result_named(const std::string& name) {
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
               "\"sparse\", got " +
                   detail::quoted(name));
}

inline head::problem_type problem_named(const std::string& name) {
  if (name == "single_label") return head::problem_type::single_label;
  if (name == "multi_label") return head::problem_type::multi_label;
  if (name == "regression") return head::problem_type::regression;
  detail::fail("problem", "expected \"single_label\", \"multi_label\" or \"regression\", got " + detail::quoted(name));
}

/// A float knob given as a Python float (a double): finite and within float's
/// range, as seqpool-run reads it (a double past it would become inf).
inline float float_knob(double given, const char* field) {
  if (!std::isfinite(given) || std::abs(given) > std::numeric_limits<float>::max())
    detail::fail(field, "must be a finite number within float's range, got ", given);
  return static_cast<float>(given);
}

/// The head arguments a Dispatcher and a Part take, into `config`: its layers,
/// problem, Platt scaling, weight floor and ranges. Returns the result type
/// `result_dtype` names.
inline result_kind read_heads(engine_config& config, nb::handle projector, nb::handle projector_bias,
                              nb::handle classifier, nb::handle classifier_bias, const std::string& problem,
                              std::optional<double> logit_mean, std::optional<double> logit_sigma,
                              const std::string& result_dtype, nb::handle given_ranges,
                              std::optional<double> weight_floor) {
  // Each refused in the order of the arguments.
  std::optional<given_layers> projector_layers = layers_of(projector, "projector");
  const std::optional<any_tensor> projector_biases = optional_copied_tensor_of(projector_bias, "projector_bias");
  config.projector = read_stack(std::move(projector_layers), projector_biases, "projector");
  std::optional<given_layers> classifier_layers = layers_of(classifier, "classifier");
  const std::optional<any_tensor> classifier_biases = optional_copied_tensor_of(classifier_bias, "classifier_bias");
  config.classifier = read_stack(std::move(classifier_layers), classifier_biases, "classifier");
  const std::optional<any_tensor> ranges = optional_copied_tensor_of(given_ranges, "ranges");
  config.problem = problem_named(problem);
  if (logit_mean.has_value() != logit_sigma.has_value())
    detail::fail("logit_mean", "and logit_sigma are given together (Platt scaling), or neither");
  if (logit_mean) {
    const float mean = float_knob(*logit_mean, "logit_mean");
    const float sigma = float_knob(*logit_sigma, "logit_sigma");
    // The head refuses a sigma of 0; one that only the float it becomes is 0 (1e-50) is refused as such here.
    if (sigma == 0.0f && *logit_sigma != 0.0)
      detail::fail("logit_sigma", "must not be 0 as a float, got ", *logit_sigma);
    config.platt = head::platt_scaling{mean, sigma};
  }
  const result_kind result = result_named(result_dtype);
  if (weight_floor && result != result_kind::sparse)
    detail::fail("weight_floor", "only sparse results take a weight floor");
  config.weight_floor = weight_floor ? float_knob(*weight_floor, "weight_floor") : 0.0f;
  const bool ranged = result == result_kind::int8 || result == result_kind::uint8;
  if (ranges && !ranged) detail::fail("ranges", "only int8 and uint8 results take calibration ranges");
  if (!ranges && ranged)
    detail::fail("ranges", result_dtype, " results need calibration ranges: float32 [2, D], lower then upper bounds");
  if (ranges) {
    constexpr std::string_view bounds = "[2, D] (lower bounds, then upper bounds)";
    config.ranges = read_floats(*ranges, 2, "ranges", bounds);
    if (ranges->shape(0) != 2) detail::fail("ranges", "must have shape ", bounds, ", got ", ranges->shape(0), " rows");
  }
  return result;
}

}  // namespace seqpool::python
