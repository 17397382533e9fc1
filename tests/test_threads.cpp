// What SPEC section 10 promises of threads: spaces, and everything made with one,
// used by different threads at the same time, pool as they do alone; a space's
// memory freed on another thread is counted.
#include <optional>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "support/step.hpp"

namespace {

using seqpool::task;

/// Three prompts of 40, 7 and 25 rows of width 16, the first and last arriving in
/// chunks over three steps; every finished MEAN, in the order they finish.
template <class Space>
std::vector<test::matrix> serve(int seed) {
  constexpr std::int64_t hidden_size = 16;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<seqpool::method::mean, seqpool::head::embed, Space> pooler(space, hidden_size);
  const std::vector<seqpool::batch> steps{
      {{test::part("a", task::embed, 40, 0, 16), test::whole("b", task::embed, 7), test::part("c", task::embed, 25, 0, 9)}},
      {{test::part("a", task::embed, 40, 16, 16), test::part("c", task::embed, 25, 9, 16)}},
      {{test::part("a", task::embed, 40, 32, 8)}}};
  std::vector<test::matrix> finished;
  for (const seqpool::batch& step : steps) {
    std::int64_t rows = 0;
    for (const seqpool::request& r : step.requests) rows += r.num_scheduled;
    std::vector<float> hidden(static_cast<std::size_t>(rows * hidden_size));
    for (std::size_t i = 0; i < hidden.size(); ++i) hidden[i] = static_cast<float>((i * 7 + seed) % 13) - 6.0f;
    for (const auto& result : test::run_step(space, pooler, state, step, hidden))
      if (result) finished.push_back(*result);
  }
  CHECK_FALSE(state.contains("a"));
  return finished;
}

}  // namespace

TEST_CASE("threads that each own a space, its poolers and its state store pool as each would alone") {
  constexpr int threads = 6;
  std::vector<std::vector<test::matrix>> alone(threads), together(threads);
  for (int t = 0; t < threads; ++t)
    alone[t] = t % 2 ? serve<seqpool::host_space>(t) : serve<seqpool::device_space<seqpool::omp_backend>>(t);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t)
      running.emplace_back([&, t] {
        together[t] = t % 2 ? serve<seqpool::host_space>(t) : serve<seqpool::device_space<seqpool::omp_backend>>(t);
      });
    for (std::thread& thread : running) thread.join();
    for (int t = 0; t < threads; ++t) {
      REQUIRE(together[t].size() == 3);
      for (std::size_t r = 0; r < 3; ++r) CHECK(together[t][r].values == alone[t][r].values);
    }
  }
}

TEST_CASE_TEMPLATE(
    "memory a space's thread allocates while another thread frees the space's other buffers is all "
    "counted",
    Space, seqpool::host_space, seqpool::device_space<seqpool::omp_backend>) {
  // As Python frees an output on whichever thread lets it go while the engine's thread plans its next step.
  constexpr int buffers = 20000;
  Space space;
  std::vector<std::optional<seqpool::buffer<float, Space>>> freed(buffers);
  for (auto& buffer : freed) buffer.emplace(space, 4);
  const seqpool::audit_counts before = space.audit().counts();
  std::thread freeing([&] {
    for (auto& buffer : freed) buffer.reset();
  });
  for (int k = 0; k < buffers; ++k) seqpool::buffer<float, Space> made(space, 4);
  freeing.join();
  CHECK(space.audit().counts().allocations - before.allocations == 3 * buffers);
}
