// A long run of a simulated scheduler through one dispatcher and one state store:
// requests of every task arrive (some with an instruction, some dropping rows, some with ids longer
// than a string holds inline), are cut into chunks by a token budget, some are
// abandoned and released mid-prompt; every finished result must equal pooling the
// whole prompt at once, and the store must be empty at the end. Every step is
// planned into the same plan, as an engine reuses one.
//
// The suite runs a few hundred steps; SEQPOOL_SOAK_STEPS=10000 (or a build set up
// with -Dsoak_steps=10000, as CI's) runs the long soak.
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "support/spaces.hpp"
#include "support/step.hpp"

namespace {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;

constexpr std::int64_t hidden_size = 12;

int soak_steps() {
  const char* asked = std::getenv("SEQPOOL_SOAK_STEPS");
  return asked != nullptr ? std::atoi(asked) : 400;
}

/// The four poolers of a configurable table, with methods drawn by name.
template <class Space>
seqpool::dispatcher<seqpool::configurable_table<Space>> engine_of(Space& space, const char* sequence,
                                                                  const char* classify, const char* token) {
  return seqpool::dispatcher<seqpool::configurable_table<Space>>(
      space,
      seqpool::pooler<method::any_sequence, head::embed, Space>(space, hidden_size,
                                                                *method::any_sequence::from_name(sequence)),
      seqpool::pooler<method::any_sequence, head::classify, Space>(space, hidden_size,
                                                                   *method::any_sequence::from_name(classify)),
      seqpool::pooler<method::any_token, head::embed, Space>(space, hidden_size, *method::any_token::from_name(token)),
      seqpool::pooler<method::any_token, head::classify, Space>(space, hidden_size,
                                                                *method::any_token::from_name(token)));
}

struct flight {
  seqpool::request r;
  std::vector<float> prompt;
  std::vector<std::int64_t> ids;
  std::int64_t done = 0;
};

template <class Space>
void soak(int steps, std::uint32_t seed) {
  std::mt19937 random(seed);
  const auto between = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  const auto chance = [&](double p) { return std::bernoulli_distribution(p)(random); };
  const char* sequences[] = {"cls", "last", "mean", "max"};
  const char* tokens[] = {"all", "step"};
  const char* sequence = sequences[between(0, 3)];
  const char* classify = sequences[between(0, 3)];
  const char* token = tokens[between(0, 1)];
  INFO("methods: ", std::string(sequence), " (embed), ", std::string(classify), " (classify), ", std::string(token),
       " (token tasks)");

  Space space;
  seqpool::state_store<Space> state(space);
  auto engine = engine_of(space, sequence, classify, token);
  auto alone = engine_of(space, sequence, classify, token);  // pools each finished prompt whole
  seqpool::state_store<Space> alone_state(space);
  seqpool::step_plan plan;  // every step's, its storage reused

  std::vector<flight> flights;
  int serial = 0, finished = 0, abandoned = 0;
  for (int step = 0; step < steps || !flights.empty(); ++step) {
    CAPTURE(step);
    REQUIRE(step < steps + 10000);
    if (step < steps)
      for (std::int64_t fresh = between(0, 3); fresh > 0; --fresh) {
        flight& f = flights.emplace_back();
        const std::int64_t prompt_len = between(1, 160);
        std::uniform_real_distribution<float> value(-2.0f, 2.0f);
        for (std::int64_t i = 0; i < prompt_len * hidden_size; ++i) f.prompt.push_back(value(random));
        for (std::int64_t t = 0; t < prompt_len; ++t) f.ids.push_back(between(0, 3));
        const auto pooling_task = static_cast<task>(between(0, 3));
        seqpool::pooling_params params{.use_activation = chance(0.7), .step_tag_id = 2};
        if (pooling_task == task::embed && chance(0.3)) params.dimensions = between(1, hidden_size);
        if (!seqpool::is_token_task(pooling_task) && prompt_len > 1 && chance(0.2))
          params.instruction_len = between(1, prompt_len - 1);
        if (seqpool::is_token_task(pooling_task) && chance(0.3)) {  // token filters
          params.drop_first = chance(0.5);
          params.drop_last = chance(0.5);
          if (chance(0.5)) params.drop_token_ids = {1, 3};
        }
        f.r = test::whole(test::id(chance(0.5) ? "q" : "cmpl-a-request-id-longer-than-sixteen-", serial++),
                          pooling_task, prompt_len, params);
      }
    // Abandoned requests leave; those with state in the store are released.
    for (auto it = flights.begin(); it != flights.end();) {
      if (it->done > 0 && chance(0.02)) {
        state.release(it->r.id);
        it = flights.erase(it);
        ++abandoned;
      } else {
        ++it;
      }
    }
    // A token budget cuts the prompts into chunks, oldest first.
    std::int64_t budget = between(1, 300);
    seqpool::batch batch;
    std::vector<float> hidden;
    std::vector<flight*> scheduled;
    for (flight& f : flights) {
      if (budget == 0) break;
      const std::int64_t size = std::min(budget, f.r.prompt_len - f.done);
      seqpool::request r = f.r;
      r.num_computed = f.done;
      r.num_scheduled = size;
      r.prompt_token_ids = f.ids;
      batch.requests.push_back(r);
      hidden.insert(hidden.end(), f.prompt.begin() + f.done * hidden_size,
                    f.prompt.begin() + (f.done + size) * hidden_size);
      f.done += size;
      budget -= size;
      scheduled.push_back(&f);
    }
    if (batch.requests.empty()) continue;
    const test::results out = test::run_step(space, engine, state, batch, hidden, hidden_size, plan);
    for (std::size_t i = 0; i < scheduled.size(); ++i) {
      const flight& f = *scheduled[i];
      REQUIRE(out[i].has_value() == (f.done == f.r.prompt_len));
      if (!out[i]) continue;
      seqpool::request whole = f.r;
      whole.prompt_token_ids = f.ids;
      const test::results expected = test::run_step(space, alone, alone_state, seqpool::batch{{whole}}, f.prompt);
      CAPTURE(f.r.id);
      test::check_close(*out[i], *expected[0], 1e-5);
      ++finished;
    }
    std::erase_if(flights, [](const flight& f) { return f.done == f.r.prompt_len; });
  }
  CHECK(state.size() == 0);
  CHECK(finished > 0);
  MESSAGE(finished << " requests finished, " << abandoned << " abandoned");
}

}  // namespace

TEST_CASE_TEMPLATE_DEFINE("a simulated scheduler's steps through one dispatcher and one store", Space, soaked) {
  const int steps = soak_steps();
  for (std::uint32_t seed : {11u, 12u, 13u}) {
    CAPTURE(seed);
    soak<Space>(steps, seed);
  }
}

TEST_CASE_TEMPLATE_APPLY(soaked, test::cpu_spaces);
