// Bandwidth of every pooling method and of the dispatcher on a mixed batch, on
// the host space and the device space, in fp32 and bf16, next to the read
// ceiling measured in the same run on a buffer as large as the input.
//
//   pool_bench [--json FILE] [--space host|device] [--dtype fp32|bf16] [--shape NAME] [--method NAME] [--repeats N]
//   [--warm] [--unheld]
//
// Shapes: long (64 prompts of 1024 rows), short (4096 prompts of 8-24 rows) and
// single (one prompt of 65536 rows), all 65536 x 1024; wide (8 prompts of 512 rows), 4096 x 4096.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <seqpool/seqpool.hpp>

#include "bandwidth.hpp"
#include "ceilings.hpp"
// CUB's segmented sums, a peer, in the default build alone: the sweep's builds measure seqpool's policies.
#if defined(__CUDACC__) && !defined(SEQPOOL_BENCH_POLICY)
#define SEQPOOL_BENCH_PEERS 1
#include "segmented_sums.hpp"
#endif

namespace {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;

constexpr std::int64_t step_tag = 7;  // every eighth token ends a reasoning step
constexpr std::int64_t colbert_width = 128;  // ColBERTv2's and PyLate's multi-vector width

// A g++ build measures the device code path on its OpenMP stand-in; the nvcc build
// (pool_bench_cuda) measures it on the GPU, its kernels cut by the launch policy
// that SEQPOOL_BENCH_POLICY names (pool_bench_cuda_<name>: the sweep's
// candidates, detail/device/policy.hpp) or by the default.
#if defined(__CUDACC__) && defined(SEQPOOL_BENCH_POLICY)
using device_backend = seqpool::with_policy<seqpool::cuda_backend, seqpool::detail::device::SEQPOOL_BENCH_POLICY>;
#elif defined(__CUDACC__)
using device_backend = seqpool::cuda_backend;
#else
using device_backend = seqpool::omp_backend;
#endif
using device_under_test = seqpool::device_space<device_backend>;
#define SEQPOOL_BENCH_NAME(policy) #policy
#define SEQPOOL_BENCH_NAMED(policy) SEQPOOL_BENCH_NAME(policy)
#if defined(SEQPOOL_BENCH_POLICY)
constexpr const char* device_policy = SEQPOOL_BENCH_NAMED(SEQPOOL_BENCH_POLICY);
#else
constexpr const char* device_policy = "launch_policy";
#endif
/// A policy's build holds the cases the sweep runs of it (tests/gpu/run.sh:
/// MEAN, ALL and the dispatcher's steps, on the device), so that building the
/// nine candidates compiles the kernels they differ in and little else.
constexpr bool every_case = device_policy == std::string_view("launch_policy");

/// A space for one case. A CUDA space gets a stream of its own: the legacy
/// default stream cannot be captured into a graph.
template <class Space>
Space make_space() {
#if defined(__CUDACC__)
  if constexpr (std::is_same_v<Space, device_under_test>) {
    static const cudaStream_t stream = [] {
      cudaStream_t created = nullptr;
      bench::detail::check(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking), "cudaStreamCreate");
      return created;
    }();
    return Space(device_backend(stream));
  }
#endif
  return Space();
}

struct batch_shape {
  std::string name;
  std::int64_t hidden_size;
  std::vector<std::int64_t> lengths;
  std::int64_t padded_to = 0;  ///< S of a right-padded [B, S, H] batch; 0: packed rows

  /// Rows of hidden states: every prompt's, and the padding.
  std::int64_t rows() const {
    if (padded_to > 0) return static_cast<std::int64_t>(lengths.size()) * padded_to;
    std::int64_t total = 0;
    for (const std::int64_t length : lengths) total += length;
    return total;
  }
};

std::vector<batch_shape> shapes() {
  std::vector<std::int64_t> short_lengths;
  std::mt19937 random(1);
  for (std::int64_t total = 0; total < 65536;) {
    const std::int64_t length =
        std::min<std::int64_t>(std::uniform_int_distribution<std::int64_t>(8, 24)(random), 65536 - total);
    short_lengths.push_back(length);
    total += length;
  }
  // A padded engine's batch: 256 sequences of 256 rows, prompts of 32-256 tokens
  // spread evenly (a formula torch_baseline.py repeats).
  std::vector<std::int64_t> padded_lengths;
  for (std::int64_t i = 0; i < 256; ++i) padded_lengths.push_back(32 + i * 97 % 225);
  return {{"long", 1024, std::vector<std::int64_t>(64, 1024)},
          {"short", 1024, short_lengths},
          {"single", 1024, {65536}},
          {"wide", 4096, std::vector<std::int64_t>(8, 512)},
          {"padded", 1024, padded_lengths, 256}};
}

/// The name a record gives its results' type.
template <class Result>
constexpr const char* result_name() {
  if constexpr (std::is_same_v<Result, float>)
    return "fp32";
  else if constexpr (std::is_same_v<Result, seqpool::bfloat16>)
    return "bf16";
  else if constexpr (std::is_same_v<Result, std::int8_t>)
    return "int8";
  else if constexpr (std::is_same_v<Result, seqpool::sparse_entry>)
    return "sparse";
  else
    return "ubinary";
}

/// One measured case, as a row of the table and a record of the JSON. `fraction`
/// sets the bandwidth against the read ceiling; `bound_fraction` sets the time
/// against reading the input at the read ceiling plus writing the output at the
/// write ceiling, which is what limits write-heavy methods (ALL writes 4-byte
/// floats for every 2-byte bf16 element it reads). `seconds` is what the step
/// costs the memory it runs on (on a GPU: its GPU time, queued ahead);
/// `latency_seconds`, from the call until the space has done it, as PyTorch is
/// timed (on the host the two are one measurement). `upload_bytes` is what the
/// step's image costs to send, as the audit counted it (for a graph, what the
/// batch uses of its slot). `policy`: the launch policy of the device kernels.
struct record {
  std::string method, space, policy, dtype, result, shape;  ///< dtype: the hidden states'; result: the results'.
  std::int64_t rows, hidden_size, requests, upload_bytes;
  double seconds, latency_seconds, plan_seconds, read_bytes, write_bytes, ceiling_gbps, write_ceiling_gbps;

  double bytes() const { return read_bytes + write_bytes; }
  double gbps() const { return bytes() / seconds / 1e9; }
  double fraction() const { return gbps() / ceiling_gbps; }
  double bound_fraction() const {
    return (read_bytes / ceiling_gbps + write_bytes / write_ceiling_gbps) / 1e9 / seconds;
  }

  nlohmann::ordered_json json() const {
    return {{"method", method},
            {"space", space},
            {"policy", policy},
            {"dtype", dtype},
            {"result", result},
            {"shape", shape},
            {"rows", rows},
            {"hidden_size", hidden_size},
            {"requests", requests},
            {"upload_bytes", upload_bytes},
            {"seconds", seconds},
            {"latency_seconds", latency_seconds},
            {"plan_seconds", plan_seconds},
            {"bytes", bytes()},
            {"read_bytes", read_bytes},
            {"write_bytes", write_bytes},
            {"gbps", gbps()},
            {"ceiling_gbps", ceiling_gbps},
            {"fraction", fraction()},
            {"write_ceiling_gbps", write_ceiling_gbps},
            {"bound_fraction", bound_fraction()}};
  }
};

/// The requests of a shape, all of one task, or cycling through the four tasks for the mixed batch.
seqpool::batch requests_of(const batch_shape& shape, std::optional<task> only,
                           const std::vector<std::int64_t>& token_ids) {
  const task cycle[] = {task::embed, task::classify, task::token_embed, task::token_classify};
  seqpool::batch step;
  std::int64_t first = 0;
  for (std::size_t i = 0; i < shape.lengths.size(); ++i) {
    seqpool::request r;
    r.id = std::to_string(i);
    r.task = only ? *only : cycle[i % 4];
    r.prompt_len = r.num_scheduled = shape.lengths[i];
    r.prompt_token_ids = std::span<const std::int64_t>(token_ids).subspan(first, r.prompt_len);
    r.params.step_tag_id = step_tag;
    step.requests.push_back(r);
    first += shape.padded_to > 0 ? shape.padded_to : r.prompt_len;
  }
  if (shape.padded_to > 0) step.padded = seqpool::padded_rows{.sequence_length = shape.padded_to};
  return step;
}

/// Bytes an ideal implementation reads: the rows the methods must read.
double read_traffic(const std::string& name, const seqpool::batch& step, std::int64_t hidden_size,
                    std::size_t element_size) {
  double read_rows = 0;
  for (const seqpool::request& r : step.requests) {
    const task t = r.task;
    const std::string used = name != "dispatcher"     ? name
                             : t == task::embed       ? "mean"
                             : t == task::classify    ? "cls"
                             : t == task::token_embed ? "all"
                                                      : "step";
    if (used == "cls" || used == "last")
      read_rows += 1;
    else if (used == "colbert")  // every row but the first
      read_rows += static_cast<double>(r.prompt_len - 1);
    else if (used == "step")
      for (std::int64_t k = 0; k < r.prompt_len; ++k) read_rows += r.prompt_token_ids[k] == step_tag;
    else if (used == "sparse")  // every row but those of id 0
      for (std::int64_t k = 0; k < r.prompt_len; ++k) read_rows += r.prompt_token_ids[k] != 0;
    else  // every row: MEAN, MAX, ALL, BGE-M3's three outputs (once for all three)
      read_rows += static_cast<double>(r.prompt_len);
  }
  return read_rows * static_cast<double>(hidden_size * element_size);
}

template <class Space, class T>
class runner {
 public:
  runner(const char* space_name, const char* dtype, const batch_shape& shape, const std::vector<T>& host_hidden,
         const std::vector<std::int64_t>& token_ids, int repeats)
      : space_name_(space_name),
        dtype_(dtype),
        shape_(shape),
        token_ids_(token_ids),
        host_hidden_(host_hidden),
        repeats_(repeats),
        hidden_(space_, host_hidden.size()) {
    space_.copy_in(std::span<const T>(host_hidden), hidden_.span());
    std::vector<float> weights(2 * shape.hidden_size, 1.0f / static_cast<float>(shape.hidden_size));
    classifier_weights_.emplace(space_, weights.size());
    space_.copy_in(std::span<const float>(weights), classifier_weights_->span());
    weights.assign(colbert_width * shape.hidden_size, 1.0f / static_cast<float>(shape.hidden_size));
    projector_weights_.emplace(space_, weights.size());
    space_.copy_in(std::span<const float>(weights), projector_weights_->span());
  }

  template <class Result = float, class Method, class Head>
  record pooler_case(const std::string& name, Method chosen, Head pooling_head) {
    seqpool::pooler<Method, Head, Space, Result> pooler(space_, shape_.hidden_size, chosen, pooling_head);
    if constexpr (seqpool::ranged_element<Result>) {  // normalised rows: every dimension in [-1, 1]
      const std::vector<float> lower(static_cast<std::size_t>(shape_.hidden_size), -1.0f);
      const std::vector<float> upper(lower.size(), 1.0f);
      pooler.set_ranges({lower, upper});
    }
    return measure(name, pooler, requests_of(shape_, pooler.task, token_ids_));
  }

  /// Multi-vector retrieval: every row but the prompt's first (CLS, as BGE-M3
  /// leaves it out) through a projector to colbert_width values (ColBERTv2's
  /// width; BGE-M3 keeps its hidden size), each row normalised.
  record colbert_case() {
    seqpool::pooler<method::all, head::embed, Space> pooler(space_, shape_.hidden_size, {}, head::embed(projector()));
    return measure("colbert", pooler, colbert_requests());
  }

  /// BGE-M3's lexical weights: every row through a layer of one output with
  /// relu, and each request's largest weight of each token id listed by id,
  /// id 0 left out (as BGE-M3 leaves out its tokenizer's special ids).
  record sparse_case() {
    seqpool::pooler<method::all, head::classify, Space, seqpool::sparse_entry> pooler(space_, shape_.hidden_size, {},
                                                                                      weigh());
    return measure("sparse", pooler, sparse_requests());
  }

  /// BGE-M3's three outputs of every prompt in one step, a multi_pooler of
  /// three parts: the dense CLS row normalised, the ColBERT vectors
  /// (colbert_case: every row but the first) and the lexical weights
  /// (sparse_case: every row but those of id 0), planned and uploaded once. The
  /// two token parts each issue loads for the rows (DESIGN, "Several
  /// outputs"); the ratio counts one read of every row. `chosen`: the same
  /// parts chosen at run time (a runtime_multi_pooler, as seqpool-run makes it).
  record bge_m3_case(bool chosen) {
    using dense = seqpool::pooler<method::cls, head::embed, Space>;
    using colbert = seqpool::pooler<method::all, head::embed, Space>;
    using lexical = seqpool::pooler<method::all, head::classify, Space, seqpool::sparse_entry>;
    const std::int64_t width = shape_.hidden_size;
    const seqpool::part_filters first_dropped{.drop_first = true, .drop_last = false, .drop_token_ids = {}};
    const seqpool::part_filters id_0_dropped{.drop_first = false, .drop_last = false, .drop_token_ids = {0}};
    if (!chosen) {
      seqpool::multi_pooler<dense, colbert, lexical> m3(
          space_, {dense(space_, width)}, {colbert(space_, width, {}, head::embed(projector())), first_dropped},
          {lexical(space_, width, {}, weigh()), id_0_dropped});
      return three_outputs_case("bge-m3", m3);
    }
    std::vector<seqpool::runtime_part<Space>> parts;
    parts.emplace_back(dense(space_, width));
    parts.emplace_back(colbert(space_, width, {}, head::embed(projector())), first_dropped);
    parts.emplace_back(lexical(space_, width, {}, weigh()), id_0_dropped);
    seqpool::runtime_multi_pooler<Space> m3(space_, std::move(parts));
    return three_outputs_case("bge-m3@runtime", m3);
  }

  /// bge_m3_case()'s step through `m3`, either kind of multi_pooler.
  template <class Multi>
  record three_outputs_case(const std::string& name, Multi& m3) {
    const seqpool::batch step = requests_of(shape_, task::embed, token_ids_);
    seqpool::state_store<Space> state(space_);
    seqpool::parts_plan plan;  // every step's, its storage reused
    const auto plan_step = [&] { m3.plan(step, state, plan); };
    const double plan_seconds = bench::median_seconds(repeats_, plan_step);
    m3.reserve(plan, state);
    seqpool::buffer<float, Space> dense_out(space_, static_cast<std::size_t>(plan.parts[0].output_size));
    seqpool::buffer<float, Space> colbert_out(space_, static_cast<std::size_t>(plan.parts[1].output_size));
    seqpool::buffer<seqpool::sparse_entry, Space> lexical_out(space_,
                                                              static_cast<std::size_t>(plan.parts[2].output_size));
    const std::vector<seqpool::part_output> outputs{dense_out.span(), colbert_out.span(), lexical_out.span()};
    record timed = time_case(name, step, plan_seconds, colbert_out.data(), plan.parts[1].output_size, plan_step, [&] {
      m3.reserve(plan, state);
      if constexpr (std::is_same_v<Multi, seqpool::runtime_multi_pooler<Space>>)
        m3.forward(view(), plan, state, std::span<const seqpool::part_output>(outputs));
      else
        m3.forward(view(), plan, state, dense_out.span(), colbert_out.span(), lexical_out.span());
    });
    // The write ceiling is measured on ColBERT's output, the largest; the step writes all three.
    timed.write_bytes +=
        static_cast<double>(dense_out.size() * sizeof(float) + lexical_out.size() * sizeof(seqpool::sparse_entry));
    return timed;
  }

  /// Hybrid retrieval outputs of a mean-pooling model, one multi_pooler: the
  /// dense MEAN row normalised and the lexical weights, two parts that each
  /// read every row (what the parts cost beyond one read of the rows).
  record hybrid_case() {
    using dense = seqpool::pooler<method::mean, head::embed, Space>;
    using lexical = seqpool::pooler<method::all, head::classify, Space, seqpool::sparse_entry>;
    const std::int64_t width = shape_.hidden_size;
    const seqpool::part_filters id_0_dropped{.drop_first = false, .drop_last = false, .drop_token_ids = {0}};
    seqpool::multi_pooler<dense, lexical> hybrid(space_, {dense(space_, width)},
                                                 {lexical(space_, width, {}, weigh()), id_0_dropped});
    const seqpool::batch step = requests_of(shape_, task::embed, token_ids_);
    seqpool::state_store<Space> state(space_);
    seqpool::parts_plan plan;
    const auto plan_step = [&] { hybrid.plan(step, state, plan); };
    const double plan_seconds = bench::median_seconds(repeats_, plan_step);
    hybrid.reserve(plan, state);
    seqpool::buffer<float, Space> dense_out(space_, static_cast<std::size_t>(plan.parts[0].output_size));
    seqpool::buffer<seqpool::sparse_entry, Space> lexical_out(space_,
                                                              static_cast<std::size_t>(plan.parts[1].output_size));
    record timed =
        time_case("mean+sparse", step, plan_seconds, lexical_out.data(), plan.parts[1].output_size, plan_step, [&] {
          hybrid.reserve(plan, state);
          hybrid.forward(view(), plan, state, dense_out.span(), lexical_out.span());
        });
    timed.write_bytes += static_cast<double>(dense_out.size() * sizeof(float));
    return timed;
  }

  record dispatcher_case() {
    auto engine = mixed_engine();
    return measure("dispatcher", engine, requests_of(shape_, std::nullopt, token_ids_));
  }

#if defined(__CUDACC__)
  /// A mixed step captured once into a CUDA graph, then replayed: the host
  /// writes the plan into the graph's slot, the graph uploads it and launches
  /// every pooler's kernels. The capacity is the whole mixed step; the replayed
  /// step is its first 1/`share` of the requests (a graph captured for the
  /// largest batch replaying a smaller one, whose launches the capacity sizes).
  record dispatcher_graph_case(const std::string& name, std::size_t share) {
    auto engine = mixed_engine();
    seqpool::batch step = requests_of(shape_, std::nullopt, token_ids_);
    seqpool::state_store<Space> state(space_);
    engine.reserve_capacity({.requests = static_cast<std::int64_t>(step.requests.size()),
                             .rows = shape_.rows(),
                             .result_rows = shape_.rows(),
                             .columns = 0});
    step.requests.resize(std::max<std::size_t>(1, step.requests.size() / share));
    seqpool::step_plan plan;  // every step's, its storage reused
    const double plan_seconds = bench::median_seconds(repeats_, [&] { engine.plan(step, state, plan); });
    engine.reserve(plan, state);
    seqpool::buffer<float, Space> output(space_, static_cast<std::size_t>(engine.output_capacity()));
    auto home = engine.reserve_graph();
    const cudaStream_t stream = space_.backend().stream();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t replay = nullptr;
    bench::detail::check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    engine.capture(view(), plan, state, output.span(), home);
    bench::detail::check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    bench::detail::check(cudaGraphInstantiate(&replay, graph, 0), "cudaGraphInstantiate");
    bench::detail::check(cudaGraphLaunch(replay, stream), "cudaGraphLaunch");
    home.mark_launched();
    space_.synchronize();
    const std::int64_t output_size = plan.output_size;
    const record timed = time_case(
        name, step, plan_seconds, output.data(), output_size,
        [&] {
          engine.plan(step, state, plan);  // each step is planned anew, as an engine plans it
          engine.reserve(plan, state);
        },
        [&] {
          engine.restage(plan, state, home);
          bench::detail::check(cudaGraphLaunch(replay, stream), "cudaGraphLaunch");
          home.mark_launched();
        });
    cudaGraphExecDestroy(replay);
    cudaGraphDestroy(graph);
    return timed;
  }
#endif

#if defined(SEQPOOL_BENCH_PEERS)
  /// MEAN's peer by the CUB route (segmented_sums.hpp): every request's column
  /// sums by cub::DeviceSegmentedReduce::Sum, a segment a request's column, so
  /// every row is read column by column. Checked against sums taken on the host.
  record segmented_sums_case() {
    const seqpool::batch step = requests_of(shape_, task::embed, token_ids_);
    std::vector<std::int64_t> first_rows;
    std::int64_t first = 0;
    for (const std::int64_t length : shape_.lengths) {
      first_rows.push_back(first);
      first += shape_.padded_to > 0 ? shape_.padded_to : length;
    }
    bench::segmented_sums<T> sums(hidden_.data(), shape_.rows(), shape_.hidden_size, shape_.hidden_size, first_rows,
                                  shape_.lengths);
    const cudaStream_t stream = space_.backend().stream();
    record timed = time_case(
        "mean@cub", step, 0.0, sums.sums(), sums.size(), [] {}, [&] { sums.run(stream); });
    timed.policy = "cub";
    check_sums(sums.sums(), first_rows);
    return timed;
  }
#endif

 private:
#if defined(SEQPOOL_BENCH_PEERS)
  /// Throws unless the column sums at `sums` (on the device, [requests, H]) are
  /// those of the host's copy of the rows, for every 61st of them and the last.
  void check_sums(const float* sums, const std::vector<std::int64_t>& first_rows) const {
    const auto width = static_cast<std::size_t>(shape_.hidden_size);
    std::vector<float> got(shape_.lengths.size() * width);
    bench::detail::check(cudaMemcpy(got.data(), sums, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
                         "cudaMemcpy");
    const auto check = [&](std::size_t s) {
      const std::size_t request = s / width;
      double want = 0, scale = 0;
      for (std::int64_t row = 0; row < shape_.lengths[request]; ++row) {
        const double value =
            static_cast<float>(host_hidden_[static_cast<std::size_t>(first_rows[request] + row) * width + s % width]);
        want += value;
        scale += std::abs(value);
      }
      if (std::abs(got[s] - want) > 1e-4 * scale + 1e-6)
        throw std::runtime_error("sum " + std::to_string(s) + " is " + std::to_string(got[s]) + ", not " +
                                 std::to_string(want));
    };
    for (std::size_t s = 0; s < got.size(); s += 61) check(s);
    check(got.size() - 1);
  }
#endif

  seqpool::linear_layer classifier() const { return {classifier_weights_->data(), nullptr, 2, shape_.hidden_size}; }
  seqpool::linear_layer projector() const {
    return {projector_weights_->data(), nullptr, colbert_width, shape_.hidden_size};
  }

  /// The layer of one output and relu that weighs BGE-M3's tokens.
  head::classify weigh() const {
    return head::classify(seqpool::dense_stack{{{classifier_weights_->data(), nullptr, 1, shape_.hidden_size},
                                                seqpool::activation_function::relu}},
                          head::problem_type::regression);
  }

  /// Every prompt as ColBERT's vectors take it: all but its first row.
  seqpool::batch colbert_requests() const {
    seqpool::batch step = requests_of(shape_, task::token_embed, token_ids_);
    for (seqpool::request& r : step.requests) r.params.drop_first = true;
    return step;
  }

  /// Every prompt as BGE-M3's lexical weights take it: all but its rows of id 0.
  seqpool::batch sparse_requests() const {
    seqpool::batch step = requests_of(shape_, task::token_classify, token_ids_);
    for (seqpool::request& r : step.requests) r.params.drop_token_ids = {0};
    return step;
  }

  seqpool::hidden_view<T> view() const {
    return seqpool::make_hidden_view<T>(hidden_.data(), shape_.rows(), shape_.hidden_size);
  }

  seqpool::dispatcher<seqpool::configurable_table<Space>> mixed_engine() {
    return seqpool::dispatcher<seqpool::configurable_table<Space>>(
        space_, seqpool::pooler<method::any_sequence, head::embed, Space>(space_, shape_.hidden_size, method::mean{}),
        seqpool::pooler<method::any_sequence, head::classify, Space>(space_, shape_.hidden_size, method::cls{},
                                                                     head::classify(classifier())),
        seqpool::pooler<method::any_token, head::embed, Space>(space_, shape_.hidden_size, method::all{}),
        seqpool::pooler<method::any_token, head::classify, Space>(space_, shape_.hidden_size, method::step{},
                                                                  head::classify(classifier())));
  }

  /// One step of `pooler` (a pooler or a dispatcher), as an engine runs it:
  /// planned into the plan of the step before (timed apart: on a GPU it
  /// overlaps the step before), then reserve and forward.
  template <class Pooler>
  record measure(const std::string& name, Pooler& pooler, const seqpool::batch& step) {
    seqpool::state_store<Space> state(space_);
    seqpool::step_plan plan;  // every step's, its storage reused
    const double plan_seconds = bench::median_seconds(repeats_, [&] { pooler.plan(step, state, plan); });
    pooler.reserve(plan, state);
    seqpool::buffer<typename Pooler::result_type, Space> output(space_, static_cast<std::size_t>(plan.output_size));
    const std::int64_t output_size = plan.output_size;
    return time_case(
        name, step, plan_seconds, output.data(), output_size, [&] { pooler.plan(step, state, plan); },
        [&] {
          pooler.reserve(plan, state);  // what an engine does before every step; nothing to allocate after the first
          pooler.forward(view(), plan, state, output.span());
        });
  }

  /// Times `work` against the read ceiling of the input and the write ceiling of
  /// the first `output_values` values at `output`, interleaved, every call after
  /// `prepare` (untimed: the step's plan) and a cache flush.
  template <class Result, class Prepare, class Work>
  record time_case(const std::string& name, const seqpool::batch& step, double plan_seconds, Result* output,
                   std::int64_t output_values, Prepare&& prepare, Work&& work) {
    const auto* input = reinterpret_cast<const std::byte*>(hidden_.data());
    const std::size_t input_bytes = hidden_.size() * sizeof(T);
    auto* results = reinterpret_cast<std::byte*>(output);
    const std::size_t output_bytes = static_cast<std::size_t>(output_values) * sizeof(Result);
    using clock = typename bench::ceilings<Space>::clock;
    const auto settle = [&] {
      prepare();
      if (bench::evict_before_runs) bench::ceilings<Space>::evict(space_);
    };
    const auto [seconds, read_seconds, write_seconds] = bench::interleaved_medians(
        repeats_, clock{&space_}, settle, work, [&] { bench::ceilings<Space>::read(space_, input, input_bytes); },
        [&] { bench::ceilings<Space>::write(space_, results, output_bytes); });
    double latency = seconds;
    if constexpr (!std::is_same_v<clock, bench::synced_clock<Space>>)
      latency = bench::interleaved_medians(repeats_, bench::synced_clock<Space>{&space_}, settle, work)[0];
    const double ceiling = static_cast<double>(input_bytes) / read_seconds / 1e9;
    const double write_ceiling = output_bytes == 0 ? ceiling : static_cast<double>(output_bytes) / write_seconds / 1e9;
    const std::string used = name.starts_with("dispatcher graph") ? "dispatcher" : name;
    prepare();
    const seqpool::audit_scope uploaded(space_.audit());
    work();
    space_.synchronize();
    return {name,
            space_name_,
            std::is_same_v<Space, seqpool::host_space> ? "host" : device_policy,
            dtype_,
            result_name<Result>(),
            shape_.name,
            shape_.rows(),
            shape_.hidden_size,
            static_cast<std::int64_t>(step.requests.size()),
            uploaded.counts().upload_bytes,
            seconds,
            latency,
            plan_seconds,
            read_traffic(used, step, shape_.hidden_size, sizeof(T)),
            static_cast<double>(output_bytes),
            ceiling,
            write_ceiling};
  }

  const char* space_name_;
  const char* dtype_;
  const batch_shape& shape_;
  const std::vector<std::int64_t>& token_ids_;
  const std::vector<T>& host_hidden_;
  int repeats_;
  Space space_ = make_space<Space>();
  seqpool::buffer<T, Space> hidden_;
  std::optional<seqpool::buffer<float, Space>> classifier_weights_;
  std::optional<seqpool::buffer<float, Space>> projector_weights_;
};

/// Filters left empty choose every value.
struct options {
  std::string json, space, dtype, shape, method;
  int repeats = 7;
};

/// Whether a case failed: pool_bench exits non-zero once it has written every other case's record.
bool failed = false;

bool chosen(const std::string& filter, const std::string& value) { return filter.empty() || filter == value; }

/// Whether a case matched --method: a build that holds none of the named
/// cases (a policy's build holds the sweep's) says so rather than measure nothing.
bool matched = false;

/// Writes every record so far to `path`, whole: into a file beside it, then
/// renamed over it, so that a run cut short leaves the cases it finished.
/// Throws where it cannot.
void write_records(const std::string& path, const std::vector<record>& records) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const record& r : records) all.push_back(r.json());
  const std::string part = path + ".part";
  std::ofstream out(part);
  out << all.dump(2) << '\n';
  out.close();
  if (!out) throw std::runtime_error("cannot write " + part);
  std::filesystem::rename(part, path);
}

/// write_records(), a failure reported and counted (the records stay for the next write).
void save_records(const std::string& path, const std::vector<record>& records) {
  try {
    write_records(path, records);
  } catch (const std::exception& failure) {
    std::printf("records not written: %s\n", failure.what());
    failed = true;
  }
}

/// The cases the sweep does not run, in the default build alone.
template <class Space, class T, class Add>
void run_unswept(runner<Space, T>& run, const Add& add) {
  const head::embed normalise;
  add("cls", [&] { return run.pooler_case("cls", method::cls{}, normalise); });
  add("last", [&] { return run.pooler_case("last", method::last{}, normalise); });
  add("max", [&] { return run.pooler_case("max", method::max{}, normalise); });
  // sentence-transformers' CLS ‖ MEAN ‖ MAX, from one read of the rows (three results' worth of columns).
  add("cls+mean+max", [&] {
    return run.pooler_case("cls+mean+max", method::concat<method::cls, method::mean, method::max>{}, normalise);
  });
  // The same modes named at run time (sentence-transformers' order), as seqpool-run and Python choose them.
  add("cls+max+mean@runtime", [&] {
    return run.pooler_case("cls+max+mean@runtime", *method::any_sequence::from_name("cls+max+mean"), normalise);
  });
  add("step", [&] { return run.pooler_case("step", method::step{}, normalise); });
  // ALL and STEP write more than they read: with bf16 results they write half as much.
  add("all", [&] { return run.template pooler_case<seqpool::bfloat16>("all", method::all{}, normalise); });
  add("step", [&] { return run.template pooler_case<seqpool::bfloat16>("step", method::step{}, normalise); });
  // Quantized results, encoded as each row is stored: MEAN as int8, ALL as sign
  // bits (a thirty-second of float's bytes).
  add("mean", [&] { return run.template pooler_case<std::int8_t>("mean", method::mean{}, normalise); });
  add("all", [&] { return run.template pooler_case<seqpool::ubinary>("all", method::all{}, normalise); });
  // The stand-in's linear pass runs a GPU-shaped kernel on the host at a tenth of host_space's
  // speed (seconds a call): the multi-vector case runs on host_space and on a GPU.
  if (std::is_same_v<Space, seqpool::host_space> || !std::is_same_v<device_backend, seqpool::omp_backend>)
    add("colbert", [&] { return run.colbert_case(); });
  add("sparse", [&] { return run.sparse_case(); });
  // BGE-M3's dense, ColBERT and lexical outputs together; the ColBERT pooler's linear pass keeps the stand-in out.
  if (std::is_same_v<Space, seqpool::host_space> || !std::is_same_v<device_backend, seqpool::omp_backend>)
    add("bge-m3", [&] { return run.bge_m3_case(false); });
  // A dense MEAN embedding and lexical weights: two parts that read every row, and little else.
  add("mean+sparse", [&] { return run.hybrid_case(); });
  // The same parts chosen at run time: what one virtual call a part a phase costs.
  if (std::is_same_v<Space, seqpool::host_space> || !std::is_same_v<device_backend, seqpool::omp_backend>)
    add("bge-m3@runtime", [&] { return run.bge_m3_case(true); });
#if defined(SEQPOOL_BENCH_PEERS)
  // MEAN's sums by CUB's segmented reduction, a peer.
  if constexpr (std::is_same_v<Space, device_under_test>) add("mean@cub", [&] { return run.segmented_sums_case(); });
#endif
}

template <class Space, class T>
void run_space(const char* space_name, const char* dtype, const batch_shape& shape, const std::vector<T>& hidden,
               const std::vector<std::int64_t>& token_ids, const options& opts, std::vector<record>& records) {
  if (!chosen(opts.space, space_name)) return;
  std::optional<runner<Space, T>> made;
  try {
    made.emplace(space_name, dtype, shape, hidden, token_ids, opts.repeats);
  } catch (const seqpool::device_error& unavailable) {  // an nvcc build on a machine without a GPU
    std::printf("%-10s %-6s %-5s %-6s %-7s skipped: %s\n", "*", space_name, dtype, "*", shape.name.c_str(),
                unavailable.what());
    return;
  }
  runner<Space, T>& run = *made;
  const head::embed normalise;
  const auto add = [&](const std::string& name, auto make) {
    if (!chosen(opts.method, name)) return;
    matched = true;
    try {
      records.push_back(make());
    } catch (const std::exception& failure) {  // the other cases still run, and their records are written
      std::printf("%-10s %-6s %-5s %-6s %-7s FAILED: %s\n", name.c_str(), space_name, dtype, "*", shape.name.c_str(),
                  failure.what());
      std::fflush(stdout);
      failed = true;
      return;
    }
    if (!opts.json.empty()) save_records(opts.json, records);
    const record& r = records.back();
    std::printf(
        "%-10s %-6s %-5s %-6s %-7s %8.3f ms %7.2f GB/s  ceiling %6.2f GB/s  %5.2f  bound %5.2f  (plan %.3f ms, "
        "%lld bytes uploaded, latency %.3f ms)\n",
        r.method.c_str(), r.space.c_str(), r.dtype.c_str(), r.result.c_str(), r.shape.c_str(), r.seconds * 1e3,
        r.gbps(), r.ceiling_gbps, r.fraction(), r.bound_fraction(), r.plan_seconds * 1e3,
        static_cast<long long>(r.upload_bytes), r.latency_seconds * 1e3);
    std::fflush(stdout);
  };
  add("mean", [&] { return run.pooler_case("mean", method::mean{}, normalise); });
  add("all", [&] { return run.pooler_case("all", method::all{}, normalise); });
  add("dispatcher", [&] { return run.dispatcher_case(); });
#if defined(__CUDACC__)
  if constexpr (std::is_same_v<Space, device_under_test>)
    add("dispatcher graph", [&] { return run.dispatcher_graph_case("dispatcher graph", 1); });
  // The same graph replaying an eighth of its capacity's requests.
  if constexpr (std::is_same_v<Space, device_under_test>)
    add("dispatcher graph eighth", [&] { return run.dispatcher_graph_case("dispatcher graph eighth", 8); });
#endif
  if constexpr (every_case) run_unswept(run, add);
}

}  // namespace

int main(int argc, char** argv) {
  options opts;
  CLI::App app("seqpool's bandwidth benchmarks", "pool_bench");
  app.add_option("--json", opts.json, "also write the records as JSON to this file");
  app.add_option("--space", opts.space, "host or device (default: both)");
  app.add_option("--dtype", opts.dtype, "fp32 or bf16 (default: both)");
  app.add_option("--shape", opts.shape, "long, short, single, wide or padded (default: every one)");
  app.add_option(
      "--method", opts.method,
      "cls, last, mean, max, all, step, colbert, sparse, bge-m3, mean+sparse, bge-m3@runtime, dispatcher, or (CUDA) "
      "\"dispatcher graph\", "
      "\"dispatcher graph eighth\" and mean@cub (CUB's segmented sums, a peer) (default: every one)");
  app.add_option("--repeats", opts.repeats, "timed runs per case (the median is reported)");
  bool warm = false;
  app.add_flag("--warm", warm,
               "leave the caches as the runs before left them, the interleaved ceilings' among them (default: flushed "
               "before every run)");
#if defined(__CUDACC__)
  bool unheld = false;
  app.add_flag("--unheld", unheld,
               "queue GPU work without holding the stream, for a profiler that runs kernels one at a time (the GPU "
               "times then include the host's queuing)");
#endif
  CLI11_PARSE(app, argc, argv);
  bench::evict_before_runs = !warm;
#if defined(__CUDACC__)
  bench::hold_stream = !unheld;
#endif

  std::vector<record> records;
  if (!opts.json.empty()) {  // a path the records cannot be written to is refused before any case runs
    try {
      write_records(opts.json, records);
    } catch (const std::exception& failure) {
      std::printf("records not written: %s\n", failure.what());
      return 2;
    }
  }
  std::printf("%-10s %-6s %-5s %-6s %-7s %11s %12s  %20s  %5s  %11s\n", "method", "space", "dtype", "result", "shape",
              "time", "bandwidth", "read ceiling (same run)", "ratio", "r+w bound");
  struct shape_data {
    batch_shape shape;
    std::vector<float> hidden;
    std::vector<std::int64_t> token_ids;
  };
  std::vector<shape_data> inputs;
  for (const batch_shape& shape : shapes()) {
    if (!chosen(opts.shape, shape.name)) continue;
    shape_data& input =
        inputs.emplace_back(shape_data{shape, std::vector<float>(shape.rows() * shape.hidden_size), {}});
    std::mt19937 random(2);
    std::normal_distribution<float> activation;
    for (float& value : input.hidden) value = activation(random);
    for (std::int64_t t = 0; t < shape.rows(); ++t) input.token_ids.push_back(t % 8 == 7 ? step_tag : t % 5);
  }
  // Every host case first: the device stand-in's long runs would otherwise disturb
  // the caches and the machine under the host figures that follow them.
  const auto run_all_inputs = [&]<class Space>(const char* space_name) {
    for (const shape_data& input : inputs) {
      if (chosen(opts.dtype, "fp32"))
        run_space<Space, float>(space_name, "fp32", input.shape, input.hidden, input.token_ids, opts, records);
      if (chosen(opts.dtype, "bf16")) {
        const std::vector<__nv_bfloat16> narrow(input.hidden.begin(), input.hidden.end());
        run_space<Space, __nv_bfloat16>(space_name, "bf16", input.shape, narrow, input.token_ids, opts, records);
      }
    }
  };
#if !defined(SEQPOOL_BENCH_POLICY)  // a policy's build measures the device alone
  run_all_inputs.template operator()<seqpool::host_space>("host");
#endif
  run_all_inputs.template operator()<device_under_test>("device");
  if (!opts.json.empty()) save_records(opts.json, records);
  if (!opts.method.empty() && !matched) {
    std::printf("no case of this build is named \"%s\"%s\n", opts.method.c_str(),
                every_case ? "" : " (a policy's build holds the sweep's: mean, all and the dispatcher's)");
    return 1;
  }
  return failed ? 1 : 0;
}
