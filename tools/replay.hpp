// seqpool-run's replay of a batch file: one dispatcher and one state store in a
// space, with results of one type, stepping through the file (SPEC section 9).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <seqpool/seqpool.hpp>

#include "batch_file.hpp"
#include "npy.hpp"
#include "replay_batch.hpp"

namespace seqpool::tool {

namespace head = seqpool::head;

/// A layer's weights copied into the space.
template <class Space>
struct layer_memory {
  seqpool::buffer<float, Space> weight;
  std::optional<seqpool::buffer<float, Space>> bias;
  seqpool::dense_layer layer;

  layer_memory(Space& space, const layer_file& file)
      : weight(to_space(space, file.weight)),
        layer{{weight.data(), nullptr, file.weight.shape[0], file.weight.shape[1]}, file.activation} {
    if (!file.bias) return;
    bias.emplace(to_space(space, *file.bias));
    layer.linear.bias = bias->data();
  }

  static seqpool::buffer<float, Space> to_space(Space& space, const npy_array& array) {
    seqpool::buffer<float, Space> copy(space, static_cast<std::size_t>(array.count()));
    space.copy_in(std::span<const float>(reinterpret_cast<const float*>(array.data.data()), copy.size()), copy.span());
    return copy;
  }
};

/// Replays every step through one dispatcher and one state store, so that
/// chunked requests continue across steps; results are of type Result.
template <class Space, class Result>
class replay {
 public:
  replay(const batch_file& batch, const options& chosen)
      : batch_(batch), options_(chosen), dispatcher_(make_dispatcher()) {
    if (options_.audit) audit_log_.open(options_.out / "audit.jsonl", std::ios::trunc);
  }

  void run() {
    for (std::size_t step = 0; step < batch_.steps.size(); ++step) {
      try {
        run_step(step);
      } catch (const input_error&) {
        throw;  // already says where
      } catch (const std::bad_alloc&) {
        throw input_error("step " + std::to_string(step) + ": out of memory");
      } catch (const std::exception& failure) {
        throw input_error("step " + std::to_string(step) + ": " + failure.what());
      }
    }
  }

 private:
  /// A head's layers copied into the space, kept in `memory`.
  dense_stack load_layers(const std::vector<layer_file>& files, std::vector<layer_memory<Space>>& memory) {
    memory.reserve(files.size());
    std::vector<dense_layer> layers;
    for (const layer_file& file : files) layers.push_back(memory.emplace_back(space_, file).layer);
    return dense_stack(layers);
  }

  seqpool::dispatcher<seqpool::configurable_table<Space, Result>> make_dispatcher() {
    const head::embed embed_head(load_layers(batch_.projector, projector_));
    const head::classify classify_head(load_layers(batch_.classifier, classifier_), batch_.problem, batch_.platt);
    return seqpool::dispatcher<seqpool::configurable_table<Space, Result>>(
        space_, make_pooler(task::embed, batch_.poolers.embed, embed_head),
        make_pooler(task::classify, batch_.poolers.classify, classify_head),
        make_pooler(task::token_embed, batch_.poolers.token_embed, embed_head),
        make_pooler(task::token_classify, batch_.poolers.token_classify, classify_head));
  }

  /// A task's pooler, with the method the batch file named for it; none where
  /// it named none. A pooler seqpool refuses to make is named by its task.
  template <class Method, class Head>
  std::optional<seqpool::pooler<Method, Head, Space, Result>> make_pooler(task served,
                                                                          const std::optional<Method>& chosen,
                                                                          const Head& pooling_head) {
    if (!chosen) return std::nullopt;
    std::optional<seqpool::pooler<Method, Head, Space, Result>> made;
    try {
      made.emplace(space_, batch_.hidden_size, *chosen, pooling_head);
    } catch (const seqpool::error& refused) {
      throw input_error("poolers." + std::string(name(served)) + ": " + refused.what());
    }
    if constexpr (seqpool::ranged_element<Result>) {
      const auto columns = static_cast<std::size_t>(batch_.ranges->shape[1]);
      const std::span<const float> bounds(reinterpret_cast<const float*>(batch_.ranges->data.data()), 2 * columns);
      made->set_ranges({bounds.first(columns), bounds.last(columns)});
    }
    if constexpr (seqpool::sparse_element<Result>)
      if (batch_.weight_floor) made->set_weight_floor(*batch_.weight_floor);
    return made;
  }

  void run_step(std::size_t index) {
    const std::string where = "step " + std::to_string(index);
    const step_file step = read_step(batch_, index);
    seqpool::batch requests;
    requests.requests = step.requests;
    npy_array hidden;
    try {
      hidden = read_npy(step.hidden_states, hidden_dtypes);
    } catch (const input_error& unreadable) {
      throw input_error(where + ": hidden_states: " + unreadable.what());
    }
    const std::string width = std::to_string(batch_.hidden_size);
    const std::string found = where + ": hidden_states: " + step.hidden_states.string() + " has shape " +
                              shape_text(hidden.shape) + "; ";
    if (step.padding) {
      const std::string requests_count = std::to_string(requests.requests.size());
      if (hidden.shape.size() != 3 || hidden.shape[0] != static_cast<std::int64_t>(requests.requests.size()) ||
          hidden.shape[2] != batch_.hidden_size)
        throw input_error(found + "a padded step must have shape [" + requests_count + ", S, " + width +
                                "] (a sequence per request)");
      requests.padded = seqpool::padded_rows{.sequence_length = hidden.shape[1], .padding = *step.padding};
    } else if (hidden.shape.size() != 2 || hidden.shape[1] != batch_.hidden_size) {
      throw input_error(found + "it must have shape [T, " + width + "] (rows of all requests, packed)" +
                              (hidden.shape.size() == 3 ? ", or the step must say \"padding\": \"right\" or \"left\""
                                                        : ""));
    }
    const std::int64_t rows = hidden.shape.size() == 3 ? hidden.shape[0] * hidden.shape[1] : hidden.shape[0];
    // Checked before planning: a plan is as large as the rows the requests claim.
    const std::int64_t scheduled = seqpool::lay_out(requests).num_rows;
    if (scheduled != rows)
      throw input_error(where + ": num_scheduled: the requests schedule " + std::to_string(scheduled) +
                              " rows but hidden_states has " + std::to_string(rows));
    const element_type element = element_of(where, step, hidden);

    check_restarts(where, requests);
    seqpool::step_plan& plan = plan_;
    dispatcher_.plan(requests, state_, plan);
    dispatcher_.reserve(plan, state_);
    seqpool::buffer<Result, Space> output(space_, static_cast<std::size_t>(plan.output_size));
    seqpool::audit_counts counts;
    switch (element) {
      case element_type::float32: counts = forward<float>(hidden, plan, output); break;
      case element_type::float16: counts = forward<seqpool::half>(hidden, plan, output); break;
      case element_type::bfloat16: counts = forward<seqpool::bfloat16>(hidden, plan, output); break;
    }

    std::vector<Result> results(output.size());
    space_.copy_out(cuda::std::span<const Result>(output.data(), output.size()), std::span<Result>(results));
    write_results(where, requests, plan, results);
    if (audit_log_.is_open())
      audit_log_ << nlohmann::ordered_json{{"step", index},
                                           {"uploads", counts.uploads},
                                           {"upload_bytes", counts.upload_bytes},
                                           {"downloads", counts.downloads},
                                           {"waits", counts.waits},
                                           {"allocations", counts.allocations}}
                        .dump()
                 << std::endl;
  }

  /// Writes every finished request's result as DIR/<id>.npy, all or none: each
  /// goes to a hidden name first and is renamed once every one of them is written.
  /// A sparse result is written as the pairs its list holds, without its count
  /// and the unused entries after them.
  void write_results(const std::string& where, const seqpool::batch& requests, const seqpool::step_plan& plan,
                     std::span<const Result> results) {
    std::vector<std::pair<std::filesystem::path, std::filesystem::path>> written;  // hidden name, final name
    try {
      for (std::size_t i = 0; i < requests.requests.size(); ++i) {
        const auto& slice = plan.results[i];
        if (!slice) continue;
        const seqpool::request& r = requests.requests[i];
        std::span<const Result> values = results.subspan(slice->offset, slice->rows * slice->cols);
        std::vector<std::int64_t> shape{slice->cols};
        if constexpr (seqpool::sparse_element<Result>) {
          const std::int32_t pairs = values.front().id;  // the list's count
          if (pairs < 0 || std::cmp_greater_equal(pairs, values.size()))
            throw input_error(where + ": request " + std::to_string(i) + " (id \"" + r.id +
                              "\"): internal error: its list counts " + std::to_string(pairs) +
                              " pairs in room for " + std::to_string(values.size() - 1));
          values = values.subspan(1, static_cast<std::size_t>(pairs));
          shape = {pairs};
        } else if (seqpool::is_token_task(r.task) || !r.params.spans.empty()) {
          shape.insert(shape.begin(), slice->rows);
        }
        const std::filesystem::path final_name = options_.out / (r.id + ".npy");
        const std::filesystem::path hidden_name = options_.out / ("." + r.id + ".npy.partial");
        written.emplace_back(hidden_name, final_name);
        try {
          write_npy(hidden_name, values, shape);
          if (std::filesystem::is_directory(final_name))
            throw input_error(final_name.string() + " is a folder");
        } catch (const std::exception& failure) {
          throw input_error(where + ": request " + std::to_string(i) + " (id \"" + r.id +
                                  "\"): cannot write its result: " + failure.what());
        }
      }
      for (const auto& [hidden_name, final_name] : written) std::filesystem::rename(hidden_name, final_name);
    } catch (...) {
      std::error_code ignored;
      for (const auto& [hidden_name, final_name] : written) std::filesystem::remove(hidden_name, ignored);
      throw;
    }
  }

  enum class element_type { float32, float16, bfloat16 };

  /// What the step's array holds: as the batch's hidden_dtype says, which must
  /// fit the array's dtype, or else as the dtype alone says; 16-bit integers are
  /// bfloat16 bits only where the batch says so.
  element_type element_of(const std::string& where, const step_file& step, const npy_array& hidden) const {
    const std::string& dtype = hidden.descr;
    const std::string file = step.hidden_states.string();
    if (!batch_.hidden_dtype) {
      if (dtype == "<i2")
        throw input_error(where + ": hidden_states: " + file +
                                " holds 16-bit integers (<i2); if they are bfloat16 bits (tensor.view(torch.int16)), "
                                "add \"hidden_dtype\": \"bfloat16\" to the batch");
      return dtype == "<f4" ? element_type::float32 : dtype == "<f2" ? element_type::float16 : element_type::bfloat16;
    }
    const std::string& declared = *batch_.hidden_dtype;
    if (declared == "float32" && dtype == "<f4") return element_type::float32;
    if (declared == "float16" && dtype == "<f2") return element_type::float16;
    if (declared == "bfloat16" && (dtype == "<u2" || dtype == "<i2")) return element_type::bfloat16;
    const char* expected = declared == "float32" ? "<f4" : declared == "float16" ? "<f2" : "<u2 or <i2 (bfloat16 bits)";
    throw input_error(where + ": hidden_states: " + file + " has dtype " + dtype + ", but hidden_dtype \"" +
                            declared + "\" is saved as " + expected);
  }

  /// A request that starts over (num_computed 0) under an id whose earlier steps
  /// are still in progress: refused here in the batch file's terms (the library
  /// asks a program to release() the id first).
  void check_restarts(const std::string& where, const seqpool::batch& requests) const {
    for (std::size_t i = 0; i < requests.requests.size(); ++i) {
      const seqpool::request& r = requests.requests[i];
      const std::int64_t pooled = state_.num_computed(r.id);
      if (r.num_computed != 0 || pooled == 0) continue;
      const std::string tokens = std::to_string(pooled);
      throw input_error(where + ": request " + std::to_string(i) + " (id \"" + r.id +
                              "\"): num_computed: 0 starts over a prompt whose earlier steps pooled " + tokens +
                              " tokens; continue it with num_computed " + tokens + ", or give the new prompt another id");
    }
  }

  static std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string text = "[";
    for (std::size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
    return text + "]";
  }

  /// The step itself, with what the space counted while it ran: defined in
  /// replay_forward.hpp and instantiated once per hidden type (replay_part.cpp).
  template <class T>
  seqpool::audit_counts forward(const npy_array& hidden, const seqpool::step_plan& plan,
                                seqpool::buffer<Result, Space>& output);

  const batch_file& batch_;
  const options& options_;
  Space space_;
  std::vector<layer_memory<Space>> projector_;
  std::vector<layer_memory<Space>> classifier_;
  seqpool::dispatcher<seqpool::configurable_table<Space, Result>> dispatcher_;
  seqpool::state_store<Space> state_{space_};
  seqpool::step_plan plan_;  ///< every step's, planned into the last one's storage as an engine plans
  std::ofstream audit_log_;
};

template <class Space, class Result>
void replay_batch(const batch_file& batch, const options& chosen) {
  replay<Space, Result>(batch, chosen).run();
}

}  // namespace seqpool::tool
