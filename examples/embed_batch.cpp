// Serving pooling the way an inference engine does: a mixed batch of embedding
// (some of whole documents, an embedding per passage), classification and
// token-level requests, scheduled under a token budget so that long prompts
// arrive in chunks over several steps, pooled without the host ever waiting on
// the device.
//
// The same engine loop runs on host_space (CPU inference) and on device_space
// (CUDA under nvcc; its OpenMP stand-in in a g++ build), and the two agree.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <seqpool/seqpool.hpp>

namespace {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;

constexpr std::int64_t hidden_size = 768;
constexpr std::int64_t token_budget = 2048;  // rows of hidden states per step
constexpr std::int64_t step_tag = 7;         // the token id that ends a reasoning step
using element = seqpool::bfloat16;

/// The pooling step of an engine that embeds (MEAN), classifies (CLS, two
/// labels), returns token embeddings (ALL) and scores reasoning steps (STEP).
template <class Space>
using engine_table = seqpool::dispatch_table<
    seqpool::task_entry<task::embed, seqpool::pooler<method::mean, head::embed, Space>>,
    seqpool::task_entry<task::classify, seqpool::pooler<method::cls, head::classify, Space>>,
    seqpool::task_entry<task::token_embed, seqpool::pooler<method::all, head::embed, Space>>,
    seqpool::task_entry<task::token_classify, seqpool::pooler<method::step, head::classify, Space>>>;

struct prompt {
  seqpool::request r;
  std::vector<std::int64_t> token_ids;
  std::int64_t done = 0;
};

/// Four kinds of traffic with ragged lengths up to a few hundred tokens.
std::vector<prompt> make_traffic() {
  std::mt19937 random(7);
  const auto length = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  std::vector<prompt> traffic;
  for (int i = 0; i < 48; ++i) {
    prompt p;
    const task kind = i % 4 == 0   ? task::classify
                      : i % 6 == 1 ? task::token_embed
                      : i % 6 == 3 ? task::token_classify
                                   : task::embed;
    p.r.id = std::string(seqpool::name(kind)) + "-" + std::to_string(i);
    p.r.task = kind;
    p.r.prompt_len = length(4, 480);
    if (kind == task::embed && i % 3 == 0) p.r.params.dimensions = 256;  // a matryoshka client
    if (kind == task::embed && i % 12 == 2)  // late chunking: a document read once, an embedding per passage
      for (std::int64_t begin = 0; begin < p.r.prompt_len; begin += 128)
        p.r.params.spans.push_back({begin, std::min(begin + 128, p.r.prompt_len)});
    if (kind == task::token_classify) {
      p.r.params.step_tag_id = step_tag;           // score each reasoning step...
      p.r.params.returned_token_ids = {100, 200};  // ...by the logits of two label tokens
    }
    for (std::int64_t t = 0; t < p.r.prompt_len; ++t) p.token_ids.push_back(length(0, 9));
    traffic.push_back(std::move(p));
  }
  return traffic;
}

/// One step's worth of hidden states: what the model's last layer would give.
std::vector<element> model_forward(std::int64_t rows, std::mt19937& random) {
  std::normal_distribution<float> activation(0.0f, 1.0f);
  std::vector<element> hidden(rows * hidden_size);
  for (element& value : hidden) value = element(activation(random));
  return hidden;
}

template <class Space>
std::map<std::string, std::vector<float>> serve(const char* label, std::vector<prompt> traffic) {
  Space space;
  seqpool::state_store<Space> state(space);

  // Classifier weights live in the space's memory, loaded once.
  std::mt19937 random(11);
  std::normal_distribution<float> weight(0.0f, 0.03f);
  std::vector<float> host_weights(2 * hidden_size);
  for (float& w : host_weights) w = weight(random);
  seqpool::buffer<float, Space> classifier(space, host_weights.size());
  space.copy_in(std::span<const float>(host_weights), classifier.span());
  const seqpool::linear_layer two_labels{classifier.data(), nullptr, 2, hidden_size};

  seqpool::dispatcher<engine_table<Space>> dispatcher(
      space, seqpool::pooler<method::mean, head::embed, Space>(space, hidden_size),
      seqpool::pooler<method::cls, head::classify, Space>(space, hidden_size, {}, head::classify(two_labels)),
      seqpool::pooler<method::all, head::embed, Space>(space, hidden_size),
      seqpool::pooler<method::step, head::classify, Space>(space, hidden_size));

  std::printf("\n== %s ==\n", label);
  std::map<std::string, std::vector<float>> results;
  double pooling_seconds = 0;
  std::int64_t pooled_rows = 0;
  std::mt19937 model(3);
  for (int step = 0; results.size() < traffic.size(); ++step) {
    // The scheduler: fill the token budget in arrival order, chunking what does not fit.
    seqpool::batch batch;
    std::int64_t rows = 0;
    for (prompt& p : traffic) {
      if (p.done == p.r.prompt_len || rows == token_budget) continue;
      seqpool::request r = p.r;
      r.num_computed = p.done;
      r.num_scheduled = std::min(p.r.prompt_len - p.done, token_budget - rows);
      r.prompt_token_ids = p.token_ids;
      rows += r.num_scheduled;
      batch.requests.push_back(r);
    }
    const std::vector<element> host_hidden = model_forward(rows, model);
    seqpool::buffer<element, Space> hidden(space, host_hidden.size());
    space.copy_in(std::span<const element>(host_hidden), hidden.span());

    // Plan on the host, make room outside the step, then the step itself.
    const seqpool::step_plan plan = dispatcher.plan(batch, state);
    dispatcher.reserve(plan, state);
    seqpool::buffer<float, Space> output(space, static_cast<std::size_t>(plan.output_size));
    const seqpool::audit_scope audit(space.audit());
    const auto start = std::chrono::steady_clock::now();
    dispatcher.forward(seqpool::make_hidden_view(hidden.data(), rows, hidden_size), plan, state, output.span());
    const seqpool::audit_counts counts = audit.counts();
    space.synchronize();  // only to time the step; an engine would not wait here
    pooling_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    pooled_rows += rows;

    std::vector<float> host_output(output.size());
    space.copy_out(cuda::std::span<const float>(output.data(), output.size()), std::span<float>(host_output));
    int finished = 0;
    for (std::size_t i = 0; i < batch.requests.size(); ++i) {
      const seqpool::request& r = batch.requests[i];
      for (prompt& p : traffic)
        if (p.r.id == r.id) p.done += r.num_scheduled;
      if (!plan.results[i]) continue;
      const seqpool::result_slice& slice = *plan.results[i];
      const auto first = host_output.begin() + slice.offset;
      results[r.id.str()].assign(first, first + slice.rows * slice.cols);
      ++finished;
      if (step < 2 || finished <= 3)
        std::printf("  %-18s [%3lld x %3lld]  %8.4f %8.4f %8.4f\n", r.id.str().c_str(),
                    static_cast<long long>(slice.rows), static_cast<long long>(slice.cols), slice.rows ? first[0] : NAN,
                    slice.rows * slice.cols > 1 ? first[1] : NAN, slice.rows * slice.cols > 2 ? first[2] : NAN);
    }
    std::printf(
        "step %d: %zu requests, %lld rows, %d finished, %zu in progress | audit: uploads %lld, downloads %lld, "
        "waits %lld, allocations %lld, launches %lld%s\n",
        step, batch.requests.size(), static_cast<long long>(rows), finished, state.size(),
        static_cast<long long>(counts.uploads), static_cast<long long>(counts.downloads),
        static_cast<long long>(counts.waits), static_cast<long long>(counts.allocations),
        static_cast<long long>(counts.launches), seqpool::keeps_sync_contract(counts) ? "  (sync contract kept)" : "  (SYNC CONTRACT BROKEN)");
  }
  const double bytes = static_cast<double>(pooled_rows) * hidden_size * sizeof(element);
  std::printf("%s: %lld rows pooled in %.2f ms: %.2f M rows/s, %.2f GB/s of hidden states read\n", label,
              static_cast<long long>(pooled_rows), pooling_seconds * 1e3, pooled_rows / pooling_seconds / 1e6,
              bytes / pooling_seconds / 1e9);
  return results;
}

}  // namespace

int main() {
  const std::vector<prompt> traffic = make_traffic();
  const auto on_host = serve<seqpool::host_space>("host_space", traffic);
#if defined(__CUDACC__)
  const auto on_device = serve<seqpool::device_space<seqpool::cuda_backend>>("device_space<cuda_backend>", traffic);
#else
  const auto on_device = serve<seqpool::device_space<seqpool::omp_backend>>("device_space<omp_backend>", traffic);
#endif
  double largest_difference = 0;
  for (const auto& [id, values] : on_host)
    for (std::size_t i = 0; i < values.size(); ++i)
      largest_difference = std::max<double>(largest_difference, std::abs(values[i] - on_device.at(id)[i]));
  std::printf("\n%zu requests finished on both spaces; largest difference between them: %.2g\n", on_host.size(),
              largest_difference);
  return largest_difference < 1e-4 ? 0 : 1;
}
