// What plan() costs the host, planned into a fresh step_plan and into the plan
// of the step before (its storage reused, as an engine plans), for the
// planning goals of docs/PERFORMANCE.md: many one-row requests, many short
// prompts, and token methods over long prompts. The fresh plan, timed in the
// same run, is the reference each reused figure is set against.
//
//   plan_bench [--json FILE] [--repeats N]
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <seqpool/seqpool.hpp>

#include "bandwidth.hpp"

namespace {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;
using device_omp = seqpool::device_space<seqpool::omp_backend>;

constexpr std::int64_t hidden_size = 1024;

struct record {
  std::string name, space;
  std::int64_t requests, rows;
  double fresh_seconds, reused_seconds;

  nlohmann::ordered_json json() const {
    return {{"case", name},         {"space", space},   {"requests", requests},
            {"rows", rows},         {"fresh_seconds", fresh_seconds}, {"reused_seconds", reused_seconds}};
  }
};

/// `count` whole prompts of `task`, of `rows_of(i)` rows each, with token ids `ids`.
template <class Rows>
seqpool::batch requests(std::int64_t count, task pooling_task, Rows rows_of, const std::vector<std::int64_t>& ids) {
  seqpool::batch step;
  for (std::int64_t i = 0; i < count; ++i) {
    step.requests.push_back({.id = "cmpl-request-" + std::to_string(i),
                             .task = pooling_task,
                             .prompt_len = rows_of(i),
                             .num_computed = 0,
                             .num_scheduled = rows_of(i),
                             .prompt_token_ids = ids,
                             .params = {.step_tag_id = 7}});
  }
  return step;
}

/// `step` with integer ids, as TensorRT-LLM's and llama.cpp's requests come: rising through the
/// step (distinct without the id table), or falling, which the table checks.
seqpool::batch with_integer_ids(seqpool::batch step, bool falling = false) {
  const std::size_t n = step.requests.size();
  for (std::size_t i = 0; i < n; ++i) step.requests[i].id = 1'000'000 + (falling ? n - 1 - i : i);
  return step;
}

template <class Space, class Pooler>
record measure(const std::string& name, const char* space_name, Space& space, const Pooler& pooler,
               const seqpool::batch& step, int repeats, const seqpool::state_store<Space>* held = nullptr) {
  const seqpool::state_store<Space> empty(space);
  const seqpool::state_store<Space>& state = held != nullptr ? *held : empty;
  seqpool::step_plan reused;
  const double fresh = bench::median_seconds(repeats, [&] { (void)pooler.plan(step, state); });
  const double into = bench::median_seconds(repeats, [&] { pooler.plan(step, state, reused); });
  std::int64_t rows = 0;
  for (const seqpool::request& r : step.requests) rows += r.num_scheduled;
  std::printf("%-32s %-6s %6zu requests %8lld rows   fresh %9.1f us   reused %9.1f us   %5.2fx\n", name.c_str(),
              space_name, step.requests.size(), static_cast<long long>(rows), fresh * 1e6, into * 1e6, fresh / into);
  return {name, space_name, static_cast<std::int64_t>(step.requests.size()), rows, fresh, into};
}

template <class Space>
void run_space(const char* space_name, int repeats, std::vector<record>& records) {
  Space space;
  const std::vector<std::int64_t> ids = [] {
    std::vector<std::int64_t> made(1024);
    for (std::size_t t = 0; t < made.size(); ++t) made[t] = t % 8 == 7 ? 7 : 1;
    return made;
  }();
  const auto one = [](std::int64_t) { return std::int64_t{1}; };
  const auto short_prompt = [](std::int64_t i) { return 8 + i % 17; };
  const auto long_prompt = [](std::int64_t) { return std::int64_t{1024}; };
  seqpool::pooler<method::cls, head::embed, Space> cls(space, hidden_size);
  records.push_back(
      measure("cls, 4096 one-row requests", space_name, space, cls, requests(4096, task::embed, one, {}), repeats));
  records.push_back(measure("cls, 4096, integer ids", space_name, space, cls,
                            with_integer_ids(requests(4096, task::embed, one, {})), repeats));
  records.push_back(measure("cls, 4096, integer ids falling", space_name, space, cls,
                            with_integer_ids(requests(4096, task::embed, one, {}), true), repeats));
  seqpool::pooler<method::mean, head::embed, Space> mean(space, hidden_size);
  records.push_back(measure("mean, 4096 prompts of 8-24", space_name, space, mean,
                            requests(4096, task::embed, short_prompt, {}), repeats));
  seqpool::pooler<method::all, head::embed, Space> all(space, hidden_size);
  records.push_back(measure("all, 64 prompts of 1024", space_name, space, all,
                            requests(64, task::token_embed, long_prompt, {}), repeats));
  seqpool::pooler<method::step, head::embed, Space> step(space, hidden_size);
  records.push_back(measure("step, 64 prompts of 1024", space_name, space, step,
                            requests(64, task::token_embed, long_prompt, ids), repeats));
  // A later chunk of a long prompt, planned against the state its earlier chunks left: what it
  // costs should not grow with the prompt's rows before and after it.
  constexpr std::int64_t prompt_len = 65536, chunk = 256;
  const std::vector<std::int64_t> long_ids = [] {
    std::vector<std::int64_t> made(prompt_len, 1);
    for (std::size_t t = 7; t < made.size(); t += 8) made[t] = 7;
    return made;
  }();
  seqpool::state_store<Space> state(space);
  const seqpool::buffer<float, Space> rows(space, static_cast<std::size_t>(chunk * hidden_size));
  const auto chunk_at = [&](std::int64_t first) {
    seqpool::batch later = requests(
        1, task::token_embed, [](std::int64_t) { return prompt_len; }, long_ids);
    later.requests[0].num_computed = first;
    later.requests[0].num_scheduled = chunk;
    return later;
  };
  for (std::int64_t first = 0; first < prompt_len / 2; first += chunk) {
    const seqpool::step_plan plan = step.plan(chunk_at(first), state);
    step.reserve(plan, state);
    seqpool::buffer<float, Space> output(space, static_cast<std::size_t>(plan.output_size));
    step.forward(seqpool::make_hidden_view(rows.data(), chunk, hidden_size), plan, state, output.span());
  }
  records.push_back(
      measure("step, chunk 129 of 256 of 65536", space_name, space, step, chunk_at(prompt_len / 2), repeats, &state));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"What plan() costs the host, fresh and into the last plan"};
  std::string json;
  int repeats = 301;
  app.add_option("--json", json, "also write the records as JSON to this file");
  app.add_option("--repeats", repeats, "timed plans per case and way (the median is reported)");
  CLI11_PARSE(app, argc, argv);
  std::vector<record> records;
  run_space<seqpool::host_space>("host", repeats, records);
  run_space<device_omp>("device", repeats, records);
  if (!json.empty()) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const record& r : records) all.push_back(r.json());
    std::ofstream(json) << all.dump(2) << '\n';
  }
}
