// seqpool-run: replays a recorded batch through seqpool, step by step, and
// writes each finished request's result (SPEC section 9). The way to reproduce
// a batch outside an engine, and the interface black-box tests drive.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <seqpool/seqpool.hpp>

#include "batch_file.hpp"
#include "npy.hpp"

namespace {

namespace head = seqpool::head;
namespace tool = seqpool::tool;

struct options {
  std::filesystem::path batch;
  std::filesystem::path out;
  std::string space = "host";
  bool audit = false;
};

/// A layer's weights copied into the space.
template <class Space>
struct layer_memory {
  seqpool::buffer<float, Space> weight;
  std::optional<seqpool::buffer<float, Space>> bias;
  seqpool::linear_layer layer;

  layer_memory(Space& space, const tool::layer_file& file)
      : weight(to_space(space, file.weight)),
        layer{weight.data(), nullptr, file.weight.shape[0], file.weight.shape[1]} {
    if (!file.bias) return;
    bias.emplace(to_space(space, *file.bias));
    layer.bias = bias->data();
  }

  static seqpool::buffer<float, Space> to_space(Space& space, const tool::npy_array& array) {
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
  replay(const tool::batch_file& batch, const options& chosen)
      : batch_(batch), options_(chosen), dispatcher_(make_dispatcher()) {
    if (options_.audit) audit_log_.open(options_.out / "audit.jsonl", std::ios::trunc);
  }

  void run() {
    for (std::size_t step = 0; step < batch_.steps.size(); ++step) {
      try {
        run_step(step);
      } catch (const tool::input_error&) {
        throw;  // already says where
      } catch (const std::bad_alloc&) {
        throw tool::input_error("step " + std::to_string(step) + ": out of memory");
      } catch (const std::exception& failure) {
        throw tool::input_error("step " + std::to_string(step) + ": " + failure.what());
      }
    }
  }

 private:
  seqpool::dispatcher<seqpool::configurable_table<Space, Result>> make_dispatcher() {
    if (batch_.projector) projector_.emplace(space_, *batch_.projector);
    if (batch_.classifier) classifier_.emplace(space_, *batch_.classifier);
    const head::embed embed_head = projector_ ? head::embed(projector_->layer) : head::embed();
    const head::classify classify_head(classifier_ ? std::optional(classifier_->layer) : std::nullopt, batch_.problem,
                                       batch_.platt);
    return seqpool::dispatcher<seqpool::configurable_table<Space, Result>>(
        space_, make_pooler(batch_.poolers.embed, embed_head), make_pooler(batch_.poolers.classify, classify_head),
        make_pooler(batch_.poolers.token_embed, embed_head), make_pooler(batch_.poolers.token_classify, classify_head));
  }

  /// A task's pooler, with the method the batch file named for it; none where it named none.
  template <class Method, class Head>
  std::optional<seqpool::pooler<Method, Head, Space, Result>> make_pooler(const std::optional<Method>& chosen,
                                                                          const Head& pooling_head) {
    if (!chosen) return std::nullopt;
    return seqpool::pooler<Method, Head, Space, Result>(space_, batch_.hidden_size, *chosen, pooling_head);
  }

  void run_step(std::size_t index) {
    const std::string where = "step " + std::to_string(index);
    const tool::step_file step = tool::read_step(batch_, index);
    seqpool::batch requests;
    requests.requests = step.requests;
    tool::npy_array hidden;
    try {
      hidden = tool::read_npy(step.hidden_states, tool::hidden_dtypes);
    } catch (const tool::input_error& unreadable) {
      throw tool::input_error(where + ": hidden_states: " + unreadable.what());
    }
    const std::string width = std::to_string(batch_.hidden_size);
    const std::string found = where + ": hidden_states: " + step.hidden_states.string() + " has shape " +
                              shape_text(hidden.shape) + "; ";
    if (step.padding) {
      const std::string requests_count = std::to_string(requests.requests.size());
      if (hidden.shape.size() != 3 || hidden.shape[0] != static_cast<std::int64_t>(requests.requests.size()) ||
          hidden.shape[2] != batch_.hidden_size)
        throw tool::input_error(found + "a padded step must have shape [" + requests_count + ", S, " + width +
                                "] (a sequence per request)");
      requests.padded = seqpool::padded_rows{.sequence_length = hidden.shape[1], .padding = *step.padding};
    } else if (hidden.shape.size() != 2 || hidden.shape[1] != batch_.hidden_size) {
      throw tool::input_error(found + "it must have shape [T, " + width + "] (rows of all requests, packed)" +
                              (hidden.shape.size() == 3 ? ", or the step must say \"padding\": \"right\" or \"left\""
                                                        : ""));
    }
    const std::int64_t rows = hidden.shape.size() == 3 ? hidden.shape[0] * hidden.shape[1] : hidden.shape[0];
    // Checked before planning: a plan is as large as the rows the requests claim.
    const std::int64_t scheduled = seqpool::lay_out(requests).num_rows;
    if (scheduled != rows)
      throw tool::input_error(where + ": num_scheduled: the requests schedule " + std::to_string(scheduled) +
                              " rows but hidden_states has " + std::to_string(rows));
    const element_type element = element_of(where, step, hidden);

    check_restarts(where, requests);
    const seqpool::step_plan plan = dispatcher_.plan(requests, state_);
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
                                           {"downloads", counts.downloads},
                                           {"waits", counts.waits},
                                           {"allocations", counts.allocations}}
                        .dump()
                 << std::endl;
  }

  /// Writes every finished request's result as DIR/<id>.npy, all or none: each
  /// goes to a hidden name first and is renamed once every one of them is written.
  void write_results(const std::string& where, const seqpool::batch& requests, const seqpool::step_plan& plan,
                     std::span<const Result> results) {
    std::vector<std::pair<std::filesystem::path, std::filesystem::path>> written;  // hidden name, final name
    try {
      for (std::size_t i = 0; i < requests.requests.size(); ++i) {
        const auto& slice = plan.results[i];
        if (!slice) continue;
        const seqpool::request& r = requests.requests[i];
        std::vector<std::int64_t> shape{slice->cols};
        if (seqpool::is_token_task(r.task) || !r.params.spans.empty()) shape.insert(shape.begin(), slice->rows);
        const std::filesystem::path final_name = options_.out / (r.id + ".npy");
        const std::filesystem::path hidden_name = options_.out / ("." + r.id + ".npy.partial");
        written.emplace_back(hidden_name, final_name);
        try {
          tool::write_npy(hidden_name, results.subspan(slice->offset, slice->rows * slice->cols), shape);
          if (std::filesystem::is_directory(final_name))
            throw tool::input_error(final_name.string() + " is a folder");
        } catch (const std::exception& failure) {
          throw tool::input_error(where + ": request " + std::to_string(i) + " (id \"" + r.id +
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
  element_type element_of(const std::string& where, const tool::step_file& step, const tool::npy_array& hidden) const {
    const std::string& dtype = hidden.descr;
    const std::string file = step.hidden_states.string();
    if (!batch_.hidden_dtype) {
      if (dtype == "<i2")
        throw tool::input_error(where + ": hidden_states: " + file +
                                " holds 16-bit integers (<i2); if they are bfloat16 bits (tensor.view(torch.int16)), "
                                "add \"hidden_dtype\": \"bfloat16\" to the batch");
      return dtype == "<f4" ? element_type::float32 : dtype == "<f2" ? element_type::float16 : element_type::bfloat16;
    }
    const std::string& declared = *batch_.hidden_dtype;
    if (declared == "float32" && dtype == "<f4") return element_type::float32;
    if (declared == "float16" && dtype == "<f2") return element_type::float16;
    if (declared == "bfloat16" && (dtype == "<u2" || dtype == "<i2")) return element_type::bfloat16;
    const char* expected = declared == "float32" ? "<f4" : declared == "float16" ? "<f2" : "<u2 or <i2 (bfloat16 bits)";
    throw tool::input_error(where + ": hidden_states: " + file + " has dtype " + dtype + ", but hidden_dtype \"" +
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
      throw tool::input_error(where + ": request " + std::to_string(i) + " (id \"" + r.id +
                              "\"): num_computed: 0 starts over a prompt whose earlier steps pooled " + tokens +
                              " tokens; continue it with num_computed " + tokens + ", or give the new prompt another id");
    }
  }

  static std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string text = "[";
    for (std::size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
    return text + "]";
  }

  /// The step itself, with what the space counted while it ran.
  template <class T>
  seqpool::audit_counts forward(const tool::npy_array& hidden, const seqpool::step_plan& plan,
                                seqpool::buffer<Result, Space>& output) {
    seqpool::buffer<T, Space> rows(space_, static_cast<std::size_t>(hidden.count()));
    space_.copy_in(std::span<const T>(reinterpret_cast<const T*>(hidden.data.data()), rows.size()), rows.span());
    const seqpool::audit_scope scope(space_.audit());
    const std::int64_t num_rows = static_cast<std::int64_t>(rows.size()) / batch_.hidden_size;  // B·S where padded
    dispatcher_.forward(seqpool::make_hidden_view<T>(rows.data(), num_rows, batch_.hidden_size), plan, state_,
                        output.span());
    return scope.counts();
  }

  const tool::batch_file& batch_;
  const options& options_;
  Space space_;
  std::optional<layer_memory<Space>> projector_;
  std::optional<layer_memory<Space>> classifier_;
  seqpool::dispatcher<seqpool::configurable_table<Space, Result>> dispatcher_;
  seqpool::state_store<Space> state_{space_};
  std::ofstream audit_log_;
};

#if defined(__CUDACC__)
using device = seqpool::device_space<seqpool::cuda_backend>;
#else
using device = seqpool::device_space<seqpool::omp_backend>;
#endif

/// Replays the batch in Space with the results its result_dtype names.
template <class Space>
void replay_in(const tool::batch_file& batch, const options& chosen) {
  if (batch.result_dtype == "float16")
    replay<Space, seqpool::half>(batch, chosen).run();
  else if (batch.result_dtype == "bfloat16")
    replay<Space, seqpool::bfloat16>(batch, chosen).run();
  else
    replay<Space, float>(batch, chosen).run();
}

/// Errors are one line on standard error: every line break a terminal or a
/// reader of UTF-8 honours (LF, VT, FF, CR, NEL, LS, PS) becomes a space.
int fail(std::string message) {
  std::string line;
  line.reserve(message.size());
  for (std::size_t i = 0; i < message.size(); ++i) {
    const auto byte = static_cast<unsigned char>(message[i]);
    if (byte == '\n' || byte == '\v' || byte == '\f' || byte == '\r') {
      line += ' ';
    } else if (byte == 0xc2 && i + 1 < message.size() && static_cast<unsigned char>(message[i + 1]) == 0x85) {
      line += ' ';  // U+0085
      i += 1;
    } else if (byte == 0xe2 && i + 2 < message.size() && static_cast<unsigned char>(message[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(message[i + 2]) == 0xa8 || static_cast<unsigned char>(message[i + 2]) == 0xa9)) {
      line += ' ';  // U+2028, U+2029
      i += 2;
    } else {
      line += message[i];
    }
  }
  std::cerr << "seqpool: error: " << line << '\n';
  return 2;
}

/// `kind: name name …`, one line.
template <class Names>
void print_names(std::string_view kind, const Names& names) {
  std::cout << kind << ':';
  for (const std::string_view name : names) std::cout << ' ' << name;
  std::cout << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  options chosen;
  CLI::App app("Replays a recorded batch through seqpool and writes each finished request's result to DIR/<id>.npy.",
               "seqpool-run");
  app.add_option("batch", chosen.batch, "BATCH.json: the recorded batch (docs/SPEC.md section 9)")->required();
  app.add_option("--out", chosen.out, "DIR: where results (and audit.jsonl) go")->required();
  app.add_option("--space", chosen.space, "host or device (default host)")->check(CLI::IsMember({"host", "device"}));
  app.add_flag("--audit", chosen.audit, "write DIR/audit.jsonl: what the space counted during each step's forward");
  app.add_flag_callback(
      "--methods",
      [] {
        print_names("sequence", seqpool::method::any_sequence::names);
        print_names("token", seqpool::method::any_token::names);
        throw CLI::Success();
      },
      "list the methods `poolers` may name, by kind, and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& done) {  // --methods, or --help
    return app.exit(done);
  } catch (const CLI::ParseError& misuse) {
    return fail(misuse.what());
  }

  try {
    const tool::batch_file batch = tool::read_batch_file(chosen.batch);
    std::filesystem::create_directories(chosen.out);
    if (chosen.space == "host")
      replay_in<seqpool::host_space>(batch, chosen);
    else
      replay_in<device>(batch, chosen);
  } catch (const std::exception& failure) {
    return fail(failure.what());
  }
  return 0;
}
