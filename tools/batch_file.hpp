// The recorded batch that seqpool-run replays (SPEC section 9): its JSON, read
// with every field's type and range checked, and the arrays it names.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <seqpool/batch.hpp>
#include <seqpool/error.hpp>
#include <seqpool/head/classify.hpp>
#include <seqpool/method/builtin.hpp>
#include <seqpool/part.hpp>

#include "npy.hpp"

namespace seqpool::tool {

using json = nlohmann::json;

/// The method of each task that has a pooler, parsed from its name by the
/// runtime method of the task's kind: a name it does not know never gets this far.
struct pooler_methods {
  std::optional<method::any_sequence> embed;
  std::optional<method::any_sequence> classify;
  std::optional<method::any_token> token_embed;
  std::optional<method::any_token> token_classify;
};

/// A dense layer as the batch file gives it: weight [out, in], an optional bias
/// [out] and the activation function applied to its outputs.
struct layer_file {
  npy_array weight;
  std::optional<npy_array> bias;
  activation_function activation = activation_function::identity;
};

/// What a set of poolers writes and through which heads: the batch's poolers
/// share one, and each of its parts has its own.
struct results_file {
  /// "float32", "float16", "bfloat16", "int8", "uint8", "binary", "ubinary" or "sparse": what the poolers write
  std::string result_dtype = "float32";
  /// int8 and uint8 results: the calibration ranges, <f4 [2, D] (sentence-transformers' `ranges`).
  std::optional<npy_array> ranges;
  /// Sparse results: the weight an id's must be above to be listed (the poolers' 0 where absent).
  std::optional<float> weight_floor;
  /// What an error about these fields begins with: "batch.json: ", or "batch.json: parts[1]." for a part's.
  std::string error_prefix;
  std::vector<layer_file> projector;   ///< the embed head's dense layers, one after another; none when empty
  std::vector<layer_file> classifier;  ///< the classify head's
  head::problem_type problem = head::problem_type::single_label;
  std::optional<head::platt_scaling> platt;
};

/// One output of every request of a batch that asks for several (SPEC section
/// 9's "parts"): a pooler of one task and method, its results and heads, and
/// the token filters it adds. Its results go to DIR/<name>/<id>.npy.
struct part_file {
  std::string field;  ///< "parts[k]", which names it in messages
  std::string name;
  task served = task::embed;
  pooler_methods method;  ///< of the served task's entry only: the method named, parsed for its task's kind
  results_file results;
  part_filters filters;
};

struct batch_file {
  std::filesystem::path folder;  ///< paths inside the file are relative to it
  std::int64_t hidden_size = 0;
  /// "float32", "float16" or "bfloat16" where the batch says which; else the
  /// .npy dtype decides, and <i2 is refused as ambiguous.
  std::optional<std::string> hidden_dtype;
  /// A pooler for each task named, which pools the requests of its task...
  pooler_methods poolers;
  results_file results;
  /// ...or, where the batch has parts, every part pools every request.
  std::vector<part_file> parts;
  json steps;  ///< read one at a time, so that earlier steps run before a later one is found bad
};

/// One step's requests, and the storage their token-id spans view.
struct step_file {
  std::filesystem::path hidden_states;
  /// Hidden states [B, S, H], padded on this side. The step's layout, not its
  /// requests': a request's chunks may come in steps of either layout.
  std::optional<seqpool::padding> padding;
  std::vector<request> requests;
  std::vector<std::vector<std::int64_t>> token_ids;
};

namespace detail {

/// A JSON object being read, and where it sits, so that each error names the field.
class object_reader {
 public:
  object_reader(const json& object, std::string where, std::string prefix = "")
      : object_(object), where_(std::move(where)), prefix_(std::move(prefix)) {
    if (!object_.is_object()) throw input_error(where_ + ": " + object_prefix() + "expected an object");
  }

  /// Rejects keys the format does not have: a misspelt field must not pass silently.
  void only(std::initializer_list<std::string_view> known) const {
    for (const auto& [key, value] : object_.items()) {
      bool listed = false;
      for (const std::string_view name : known) listed = listed || key == name;
      if (!listed) fail_on_key(key, "unknown field");
    }
  }

  /// Whether the object gives `key` a value: a null is none, as an absent key.
  bool has(std::string_view key) const { return object_.contains(key) && !object_.at(std::string(key)).is_null(); }
  const json& at(std::string_view key) const {
    if (!has(key)) fail_at(key, object_.contains(key) ? "missing (null is no value)" : "missing");
    return object_.at(std::string(key));
  }

  std::int64_t integer(std::string_view key) const { return as_integer(at(key), key); }
  std::optional<std::int64_t> optional_integer(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    return as_integer(at(key), key);
  }

  std::string string(std::string_view key) const {
    const json& value = at(key);
    if (!value.is_string()) fail_at(key, "expected a string");
    return value.get<std::string>();
  }

  /// The file `key` names, relative to `folder` (the batch file's); a name
  /// holding a NUL, which no file name can hold (the system would read it only
  /// up to the NUL), is refused.
  std::filesystem::path file(std::string_view key, const std::filesystem::path& folder) const {
    const std::string name = string(key);
    if (name.find('\0') != std::string::npos)
      fail_at(key, seqpool::detail::quoted(name) + " holds a NUL: no file has that name");
    return folder / name;
  }

  bool boolean(std::string_view key, bool otherwise) const {
    if (!has(key)) return otherwise;
    const json& value = at(key);
    if (!value.is_boolean()) fail_at(key, "expected true or false");
    return value.get<bool>();
  }

  std::optional<float> optional_number(std::string_view key) const {
    if (!has(key)) return std::nullopt;
    const json& value = at(key);
    if (!value.is_number() || !std::isfinite(value.get<double>())) fail_at(key, "expected a finite number");
    if (std::abs(value.get<double>()) > std::numeric_limits<float>::max())
      fail_at(key, "expected a finite number within float's range");
    return value.get<float>();
  }

  std::vector<std::int64_t> integers(std::string_view key) const {
    if (!has(key)) return {};
    const json& value = at(key);
    if (!value.is_array()) fail_at(key, "expected an array of integers");
    std::vector<std::int64_t> values;
    values.reserve(value.size());
    for (const json& item : value) values.push_back(as_integer(item, key));
    return values;
  }

  /// An array of [begin, end] pairs of integers; an empty array asks for no
  /// spans, as an empty params.spans does (the whole prompt, one row).
  std::vector<token_span> spans(std::string_view key) const {
    if (!has(key)) return {};
    const json& value = at(key);
    if (!value.is_array()) fail_at(key, "expected an array of [begin, end] pairs");
    std::vector<token_span> read;
    read.reserve(value.size());
    for (const json& pair : value) {
      if (!pair.is_array() || pair.size() != 2) fail_at(key, "expected an array of [begin, end] pairs");
      read.push_back({as_integer(pair[0], key), as_integer(pair[1], key)});
    }
    return read;
  }

  object_reader object(std::string_view key) const { return {at(key), where_, prefix_ + std::string(key) + "."}; }
  /// Item `index` of the array `key`, an object.
  object_reader item(std::string_view key, std::size_t index) const {
    return {at(key).at(index), where_, prefix_ + std::string(key) + "[" + std::to_string(index) + "]."};
  }

  [[noreturn]] void fail_at(std::string_view key, std::string_view problem) const {
    const std::string field = prefix_ + std::string(key);
    throw input_error(where_ + ": " + (field.empty() ? "" : field + ": ") + std::string(problem));
  }

  /// What an error about one of this object's fields begins with: "batch.json: params.".
  std::string field_prefix() const { return where_ + ": " + prefix_; }

  /// Fails at this object for `key`, a name the file gave (not one the format
  /// has), quoted as SPEC section 8 quotes names: `params: unknown field "x"`.
  [[noreturn]] void fail_on_key(std::string_view key, std::string_view problem, std::string_view after = "") const {
    throw input_error(where_ + ": " + object_prefix() + std::string(problem) + " " + seqpool::detail::quoted(key) +
                      std::string(after));
  }

 private:
  /// This object as a message names it, by its own field (which the prefix ends with): "params: ", or "" at the top.
  std::string object_prefix() const { return prefix_.empty() ? "" : prefix_.substr(0, prefix_.size() - 1) + ": "; }

  std::int64_t as_integer(const json& value, std::string_view key) const {
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > std::numeric_limits<std::int64_t>::max())
      fail_at(key, "integer out of range");
    if (!value.is_number_integer()) fail_at(key, "expected an integer");
    return value.get<std::int64_t>();
  }

  const json& object_;
  std::string where_;
  std::string prefix_;
};

inline std::optional<task> parse_task(std::string_view text) {
  for (const task candidate : {task::embed, task::classify, task::token_embed, task::token_classify})
    if (name(candidate) == text) return candidate;
  return std::nullopt;
}

/// The method `object`.<key> names for task `served`, as the runtime method
/// `Runtime` of the task's kind takes it; any other name is refused with the
/// names it takes.
template <class Runtime>
Runtime method_named(const object_reader& object, std::string_view key, task served) {
  const std::string wanted = object.string(key);
  if (std::optional<Runtime> found = Runtime::from_name(wanted)) return *found;
  object.fail_at(key, "method " + seqpool::detail::quoted(wanted) + " cannot serve " + std::string(name(served)) +
                          " (expected " + Runtime::listed_names() + ")");
}

/// The method `object`.<key> names for task `served`, into its entry of `into`.
inline void read_method(const object_reader& object, std::string_view key, task served, pooler_methods& into) {
  switch (served) {
    case task::embed:
      into.embed = method_named<method::any_sequence>(object, key, served);
      break;
    case task::classify:
      into.classify = method_named<method::any_sequence>(object, key, served);
      break;
    case task::token_embed:
      into.token_embed = method_named<method::any_token>(object, key, served);
      break;
    case task::token_classify:
      into.token_classify = method_named<method::any_token>(object, key, served);
      break;
  }
}

/// The result dtypes a batch may name.
inline constexpr std::array<std::string_view, 8> result_dtypes{"float32", "float16", "bfloat16", "int8",
                                                               "uint8",   "binary",  "ubinary",  "sparse"};

/// The .npy file `key` of `object` names, of one of `dtypes`; an error names the key.
inline npy_array read_named_array(const object_reader& object, std::string_view key,
                                  const std::filesystem::path& folder, const npy_dtypes& dtypes) {
  const std::filesystem::path file = object.file(key, folder);
  try {
    return read_npy(file, dtypes);
  } catch (const input_error& unreadable) {
    object.fail_at(key, unreadable.what());
  }
}

/// The weight, bias and activation function a layer object names, if it names
/// a weight; weight and bias must be <f4 and fit each other. Whether the weight
/// fits the rows it will see is checked per request.
inline std::optional<layer_file> read_layer(const object_reader& layer, const std::filesystem::path& folder) {
  if (!layer.has("weight")) {
    for (const std::string_view key : {"bias", "activation"})
      if (layer.has(key)) layer.fail_at(key, "given without a weight");
    return std::nullopt;
  }
  layer_file read{read_named_array(layer, "weight", folder, weight_dtypes), std::nullopt};
  if (layer.has("activation")) {
    const std::string wanted = layer.string("activation");
    const std::optional<activation_function> found = activation_named(wanted);
    if (!found) layer.fail_at("activation", seqpool::detail::quoted(wanted) + " is not " + activation_name_list());
    read.activation = *found;
  }
  if (read.weight.descr != "<f4" || read.weight.shape.size() != 2 || read.weight.shape[0] < 1 ||
      read.weight.shape[1] < 1)
    layer.fail_at("weight", "expected a non-empty 2-D <f4 array [out, in]");
  if (layer.has("bias")) {
    read.bias = read_named_array(layer, "bias", folder, weight_dtypes);
    if (read.bias->descr != "<f4" || read.bias->shape != std::vector<std::int64_t>{read.weight.shape[0]})
      layer.fail_at("bias", "expected a 1-D <f4 array of " + std::to_string(read.weight.shape[0]) + " values");
  }
  return read;
}

/// A head's dense layers: its own weight (one layer, or none), or `layers`, an
/// array of layers that run one after another.
inline std::vector<layer_file> read_layers(const object_reader& head, const std::filesystem::path& folder) {
  if (!head.has("layers")) {
    std::optional<layer_file> one = read_layer(head, folder);
    if (!one) return {};
    return {std::move(*one)};
  }
  for (const std::string_view key : {"weight", "bias", "activation"})
    if (head.has(key)) head.fail_at(key, "given beside layers (each layer names its own)");
  const json& list = head.at("layers");
  if (!list.is_array() || list.empty()) head.fail_at("layers", "expected a non-empty array of layers");
  if (list.size() > static_cast<std::size_t>(dense_stack::most_layers))
    head.fail_at("layers", "at most " + std::to_string(dense_stack::most_layers) + " layers, got " +
                               std::to_string(list.size()));
  std::vector<layer_file> layers;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const object_reader layer = head.item("layers", k);
    layer.only({"weight", "bias", "activation"});
    if (!layer.has("weight")) layer.fail_at("weight", "missing");
    layers.push_back(*read_layer(layer, folder));
  }
  return layers;
}

/// Ids name output files, so they must be plain file names.
/// The longest id: its result file DIR/<id>.npy must be a name the file system takes.
inline constexpr std::size_t longest_id = 200;

/// JSON nested deeper than this is refused: a batch needs four levels.
inline constexpr int deepest_nesting = 32;

inline bool is_plain_file_name(std::string_view id) {
  return !id.empty() && id != "." && id != ".." &&
         id.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

/// What `object` (the batch, or one of its parts) says its poolers write and
/// through which heads: result_dtype with the ranges or floor its results
/// take, projector and classifier.
inline results_file read_results(const object_reader& object, const std::filesystem::path& folder) {
  results_file read;
  read.error_prefix = object.field_prefix();
  if (object.has("result_dtype")) {
    read.result_dtype = object.string("result_dtype");
    if (std::ranges::find(result_dtypes, read.result_dtype) == result_dtypes.end())
      object.fail_at("result_dtype", seqpool::detail::quoted(read.result_dtype) +
                                         " is not float32, float16, bfloat16, int8, uint8, binary, ubinary or sparse");
  }
  const bool ranged = read.result_dtype == "int8" || read.result_dtype == "uint8";
  if (object.has("ranges")) {
    if (!ranged) object.fail_at("ranges", "only int8 and uint8 results take calibration ranges");
    read.ranges = read_named_array(object, "ranges", folder, range_dtypes);
    if (read.ranges->descr != "<f4" || read.ranges->shape.size() != 2 || read.ranges->shape[0] != 2 ||
        read.ranges->shape[1] < 1)
      object.fail_at("ranges", "expected a 2-D <f4 array [2, D]: lower bounds, then upper bounds");
  } else if (ranged) {
    object.fail_at("result_dtype", read.result_dtype + " results need \"ranges\", their calibration ranges");
  }
  read.weight_floor = object.optional_number("weight_floor");
  if (read.weight_floor && read.result_dtype != "sparse")
    object.fail_at("weight_floor", "only sparse results take a weight floor");
  if (object.has("projector")) {
    const object_reader projector = object.object("projector");
    projector.only({"weight", "bias", "activation", "layers"});
    read.projector = read_layers(projector, folder);
  }
  if (object.has("classifier")) {
    const object_reader classifier = object.object("classifier");
    classifier.only({"weight", "bias", "activation", "layers", "logit_mean", "logit_sigma", "problem_type"});
    read.classifier = read_layers(classifier, folder);
    const std::optional<float> mean = classifier.optional_number("logit_mean");
    const std::optional<float> sigma = classifier.optional_number("logit_sigma");
    if (sigma && *sigma == 0.0f) classifier.fail_at("logit_sigma", "must not be 0 as a float");
    // The classify head's (SPEC section 4): it scales the logits it is given, the
    // classifier's or, without a weight, the pooled rows, for both classify tasks.
    if (mean || sigma) read.platt = head::platt_scaling{mean.value_or(0.0f), sigma.value_or(1.0f)};
    if (classifier.has("problem_type")) {
      const std::string problem = classifier.string("problem_type");
      if (problem == "single_label")
        read.problem = head::problem_type::single_label;
      else if (problem == "multi_label")
        read.problem = head::problem_type::multi_label;
      else if (problem == "regression")
        read.problem = head::problem_type::regression;
      else
        classifier.fail_at("problem_type",
                           seqpool::detail::quoted(problem) + " is not single_label, multi_label or regression");
    }
  }
  return read;
}

/// The batch's parts: each a name (a plain file name, its results' folder,
/// unlike the others'), a task and a method, what it writes, and token filters.
inline std::vector<part_file> read_parts(const object_reader& top, const std::filesystem::path& folder) {
  const json& list = top.at("parts");
  if (!list.is_array() || list.empty()) top.fail_at("parts", "expected a non-empty array of parts");
  std::vector<part_file> parts;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const object_reader entry = top.item("parts", k);
    entry.only({"name", "task", "method", "result_dtype", "ranges", "weight_floor", "projector", "classifier",
                "drop_first", "drop_last", "drop_token_ids"});
    part_file read;
    read.field = "parts[" + std::to_string(k) + "]";
    read.name = entry.string("name");
    if (!is_plain_file_name(read.name) || read.name.size() > longest_id)
      entry.fail_at("name", "must be a plain file name of at most " + std::to_string(longest_id) +
                                " bytes (it names the folder of the part's results)");
    for (const part_file& earlier : parts)
      if (earlier.name == read.name)
        entry.fail_at("name", seqpool::detail::quoted(read.name) + " names an earlier part too");
    if (read.name == "audit.jsonl") entry.fail_at("name", "\"audit.jsonl\" names --audit's file");
    const std::string task_name = entry.string("task");
    const std::optional<task> served = parse_task(task_name);
    if (!served)
      entry.fail_at("task", "unknown task " + seqpool::detail::quoted(task_name) +
                                " (expected embed, classify, token_embed or token_classify)");
    read.served = *served;
    // A part's head is its task's: an embed task's projector, a classify task's classifier.
    const bool embeds = read.served == task::embed || read.served == task::token_embed;
    const std::string_view unused_head = embeds ? "classifier" : "projector";
    if (entry.has(unused_head))
      entry.fail_at(unused_head, "a part of task " + task_name + " has no " + std::string(unused_head) +
                                     " (its head is its " + (embeds ? "projector" : "classifier") + ")");
    read_method(entry, "method", read.served, read.method);
    read.results = read_results(entry, folder);
    read.filters = {.drop_first = entry.boolean("drop_first", false),
                    .drop_last = entry.boolean("drop_last", false),
                    .drop_token_ids = entry.integers("drop_token_ids")};
    parts.push_back(std::move(read));
  }
  return parts;
}

}  // namespace detail

/// Reads the batch file's configuration and the weights it names; steps are read by read_step().
inline batch_file read_batch_file(const std::filesystem::path& path) {
  // A folder opens as a stream on Linux, and its first read fails.
  if (std::error_code ignored; std::filesystem::is_directory(path, ignored))
    throw input_error(path.string() + ": is a folder, not a batch file");
  std::ifstream in(path);
  if (!in) throw input_error(path.string() + ": cannot open");
  batch_file batch;
  batch.folder = path.parent_path();
  json root;
  try {
    // Read whole before it is parsed: the parser takes a NUL, which no JSON text holds, for the end of its
    // input, and would leave what follows it unread.
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (const std::size_t nul = text.find('\0'); nul != std::string::npos)
      throw input_error("the byte at offset " + std::to_string(nul) + " is a NUL, which no JSON text holds");
    // The keys of each object open, from the outermost: JSON leaves a repeated key's meaning open, and the
    // parser would keep its last value.
    std::vector<std::unordered_set<std::string>> keys;
    root = json::parse(text, [&keys](int depth, json::parse_event_t event, json& parsed) {
      // An object or array is told as it starts at its parent's depth, and its values at its own.
      const bool starts = event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
      if (depth + (starts ? 1 : 0) > detail::deepest_nesting)
        throw input_error("nested more than " + std::to_string(detail::deepest_nesting) + " deep");
      if (event == json::parse_event_t::object_start) keys.emplace_back();
      if (event == json::parse_event_t::object_end) keys.pop_back();
      if (event == json::parse_event_t::key && !keys.back().insert(parsed.get<std::string>()).second)
        throw input_error("key " + seqpool::detail::quoted(parsed.get<std::string>()) + " appears twice in an object");
      return true;
    });
  } catch (const input_error& refused) {
    throw input_error(path.string() + ": malformed JSON: " + refused.what());
  } catch (const json::exception& malformed) {  // a syntax error, or a number too large to hold
    throw input_error(path.string() + ": malformed JSON: " + malformed.what());
  } catch (const std::ios_base::failure& unread) {  // the file's stream buffer failed to read
    throw input_error(path.string() + ": cannot read: " + unread.what());
  }
  const std::string where = path.filename().string();
  const detail::object_reader top(root, where);
  top.only({"hidden_size", "hidden_dtype", "result_dtype", "ranges", "weight_floor", "poolers", "projector",
            "classifier", "parts", "steps"});
  batch.hidden_size = top.integer("hidden_size");
  if (batch.hidden_size < 1 || batch.hidden_size > std::numeric_limits<std::int32_t>::max())
    top.fail_at("hidden_size", "must be in [1, 2147483647], got " + std::to_string(batch.hidden_size));
  if (top.has("hidden_dtype")) {
    batch.hidden_dtype = top.string("hidden_dtype");
    if (*batch.hidden_dtype != "float32" && *batch.hidden_dtype != "float16" && *batch.hidden_dtype != "bfloat16")
      top.fail_at("hidden_dtype",
                  seqpool::detail::quoted(*batch.hidden_dtype) + " is not float32, float16 or bfloat16");
  }
  if (top.has("parts")) {
    for (const std::string_view key : {"poolers", "result_dtype", "ranges", "weight_floor", "projector", "classifier"})
      if (top.has(key)) top.fail_at(key, "given beside parts (each part names its own)");
    batch.parts = detail::read_parts(top, batch.folder);
  } else {
    batch.results = detail::read_results(top, batch.folder);
    const detail::object_reader poolers = top.object("poolers");
    if (root.at("poolers").empty()) top.fail_at("poolers", "name a method for at least one task");
    for (const auto& [key, value] : root.at("poolers").items()) {
      const std::optional<task> served = detail::parse_task(key);
      if (!served)
        poolers.fail_on_key(key, "unknown task", " (expected embed, classify, token_embed or token_classify)");
      detail::read_method(poolers, key, *served, batch.poolers);
    }
  }

  batch.steps = top.at("steps");
  if (!batch.steps.is_array()) top.fail_at("steps", "expected an array");
  return batch;
}

/// Reads step `index`: its requests, checked field by field, and where its hidden states are.
inline step_file read_step(const batch_file& batch, std::size_t index) {
  const std::string where = "step " + std::to_string(index);
  const detail::object_reader step(batch.steps.at(index), where);
  step.only({"hidden_states", "padding", "requests"});
  step_file read;
  read.hidden_states = step.file("hidden_states", batch.folder);
  if (step.has("padding")) {
    const std::string side = step.string("padding");
    if (side != "right" && side != "left")
      step.fail_at("padding", seqpool::detail::quoted(side) + " is not right or left");
    read.padding = side == "right" ? seqpool::padding::right : seqpool::padding::left;
  }
  const json& requests = step.at("requests");
  if (!requests.is_array()) step.fail_at("requests", "expected an array");
  read.token_ids.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const json& entry = requests[i];
    const bool named = entry.is_object() && entry.contains("id") && entry.at("id").is_string();
    const std::string request_where =
        where + ": " +
        (named ? seqpool::detail::request_named(i, entry.at("id").get<std::string>()) : "request " + std::to_string(i));
    const detail::object_reader fields(entry, request_where);
    fields.only({"id", "task", "prompt_len", "num_computed", "num_scheduled", "prompt_token_ids", "params"});
    request r;
    const std::string id = fields.string("id");
    if (!detail::is_plain_file_name(id)) fields.fail_at("id", "must be a plain file name (it names the output)");
    if (id.size() > detail::longest_id)
      fields.fail_at("id", "at most " + std::to_string(detail::longest_id) + " bytes (it names the output file)");
    r.id = id;
    const std::string task_name = fields.string("task");
    const std::optional<task> parsed = detail::parse_task(task_name);
    if (!parsed) fields.fail_at("task", "unknown task " + seqpool::detail::quoted(task_name));
    r.task = *parsed;
    r.prompt_len = fields.integer("prompt_len");
    r.num_computed = fields.has("num_computed") ? fields.integer("num_computed") : 0;
    r.num_scheduled = fields.integer("num_scheduled");
    read.token_ids.push_back(fields.integers("prompt_token_ids"));
    r.prompt_token_ids = read.token_ids.back();
    if (fields.has("params")) {
      const detail::object_reader params = fields.object("params");
      params.only({"use_activation", "dimensions", "step_tag_id", "returned_token_ids", "spans", "instruction_len",
                   "drop_first", "drop_last", "drop_token_ids", "top_k"});
      r.params.use_activation = params.boolean("use_activation", true);
      r.params.dimensions = params.optional_integer("dimensions");
      r.params.step_tag_id = params.optional_integer("step_tag_id");
      r.params.returned_token_ids = params.integers("returned_token_ids");
      r.params.spans = params.spans("spans");
      r.params.instruction_len = params.has("instruction_len") ? params.integer("instruction_len") : 0;
      r.params.drop_first = params.boolean("drop_first", false);
      r.params.drop_last = params.boolean("drop_last", false);
      r.params.drop_token_ids = params.integers("drop_token_ids");
      r.params.top_k = params.optional_integer("top_k");
    }
    read.requests.push_back(std::move(r));
  }
  return read;
}

}  // namespace seqpool::tool
