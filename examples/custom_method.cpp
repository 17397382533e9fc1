// A pooling method seqpool does not ship, written in user code and plugged into
// a dispatch table beside built-in ones: SPLADE-style sparse lexical weights
// (examples/splade.hpp), served under chunked prefill.
//
// A long prompt arrives in three chunks; the running maximum crosses the steps
// in the state store, and the finished vector equals pooling the prompt at once.
// Built by g++ it runs on host_space; built by nvcc (custom_method.cu), the same
// method runs in seqpool's kernels on device_space<cuda_backend>.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <seqpool/seqpool.hpp>

#include "splade.hpp"

namespace {

using seqpool::task;
#if defined(__CUDACC__)
using space = seqpool::device_space<seqpool::cuda_backend>;
#else
using space = seqpool::host_space;
#endif

constexpr std::int64_t vocabulary = 512;  // SPLADE pools MLM logits: one column per vocabulary entry

// The user's method serves embed; a built-in one serves classify in the same table.
using table = seqpool::dispatch_table<
    seqpool::task_entry<task::embed, seqpool::pooler<splade, seqpool::head::embed, space>>,
    seqpool::task_entry<task::classify, seqpool::pooler<seqpool::method::cls, seqpool::head::classify, space>>>;

/// Runs one step and returns each finished request's result, by id.
std::vector<std::pair<std::string, std::vector<float>>> step(seqpool::dispatcher<table>& engine, space& memory,
                                                             seqpool::state_store<space>& state,
                                                             const seqpool::batch& batch,
                                                             const std::vector<float>& hidden) {
  const seqpool::step_plan plan = engine.plan(batch, state);
  engine.reserve(plan, state);
  seqpool::buffer<float, space> rows(memory, hidden.size());
  memory.copy_in(std::span<const float>(hidden), rows.span());
  seqpool::buffer<float, space> output(memory, static_cast<std::size_t>(plan.output_size));
  {
    const seqpool::audit_scope audit(memory.audit());
    engine.forward(seqpool::make_hidden_view(rows.data(), plan.num_rows, vocabulary), plan, state,
                   output.span());
    std::printf("  %zu requests, %lld rows: sync contract %s\n", batch.requests.size(),
                static_cast<long long>(plan.num_rows),
                seqpool::keeps_sync_contract(audit.counts()) ? "kept" : "BROKEN");
  }
  std::vector<float> results(output.size());
  memory.copy_out(cuda::std::span<const float>(output.data(), output.size()), std::span<float>(results));

  std::vector<std::pair<std::string, std::vector<float>>> finished;
  for (std::size_t i = 0; i < batch.requests.size(); ++i)
    if (const auto& slice = plan.results[i]) {
      const float* first = results.data() + slice->offset;
      finished.emplace_back(batch.requests[i].id.str(), std::vector<float>(first, first + slice->rows * slice->cols));
    }
  return finished;
}

}  // namespace

int main() {
  space memory;
  seqpool::state_store<space> state(memory);
  seqpool::dispatcher<table> engine(
      memory, seqpool::pooler<splade, seqpool::head::embed, space>(memory, vocabulary),
      seqpool::pooler<seqpool::method::cls, seqpool::head::classify, space>(memory, vocabulary));

  // A 300-token document whose logits arrive in chunks of 120, 120 and 60 rows.
  std::mt19937 random(5);
  std::normal_distribution<float> logit(-4.5f, 1.5f);  // most logits negative: sparse weights
  std::vector<float> document(300 * vocabulary);
  for (float& value : document) value = logit(random);
  const seqpool::pooling_params raw{.use_activation = false};  // keep SPLADE's weights as they are

  std::vector<float> pooled;
  std::int64_t done = 0;
  for (const std::int64_t chunk : {120, 120, 60}) {
    std::printf("step with rows %lld-%lld of the document\n", static_cast<long long>(done),
                static_cast<long long>(done + chunk - 1));
    seqpool::request r{.id = "document",
                       .task = task::embed,
                       .prompt_len = 300,
                       .num_computed = done,
                       .num_scheduled = chunk,
                       .prompt_token_ids = {},
                       .params = raw};
    const std::vector<float> rows(document.begin() + done * vocabulary, document.begin() + (done + chunk) * vocabulary);
    for (auto& [id, values] : step(engine, memory, state, seqpool::batch{{r}}, rows)) pooled = values;
    done += chunk;
  }

  // The same weights computed directly from the whole prompt.
  double largest_difference = 0;
  std::int64_t active = 0;
  for (std::int64_t term = 0; term < vocabulary; ++term) {
    float expected = 0;
    for (std::int64_t t = 0; t < 300; ++t)
      expected = std::max(expected, std::log1p(std::max(document[t * vocabulary + term], 0.0f)));
    largest_difference = std::max<double>(largest_difference, std::abs(expected - pooled[term]));
    active += pooled[term] > 0.0f;
  }
  std::printf("document: %lld of %lld terms have a weight; largest difference from pooling at once: %.2g\n",
              static_cast<long long>(active), static_cast<long long>(vocabulary), largest_difference);
  return largest_difference < 1e-6 && state.size() == 0 ? 0 : 1;
}
