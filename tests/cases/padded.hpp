// Padded batches ([B, S, H], SPEC section 2): hand-checked cases whose padding
// rows hold NaN, so that reading one shows, and a randomized comparison with the
// plain reference, chunked, for every built-in method and both paddings.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../support/reference.hpp"
#include "../support/step.hpp"

namespace padded_cases {

using seqpool::task;
namespace method = seqpool::method;

inline constexpr float pad = NAN;
inline const seqpool::pooling_params raw{.use_activation = false};

/// Two prompts of 2 and 3 rows of width 2, rows [1,2] … [9,10], in sequences of 3.
inline seqpool::batch two_prompts(task pooling_task, seqpool::padding side) {
  return {.requests = {test::whole("a", pooling_task, 2, raw), test::whole("b", pooling_task, 3, raw)},
          .padded = seqpool::padded_rows{.sequence_length = 3, .padding = side}};
}

inline const std::vector<float> right_padded{1, 2, 3, 4, pad, pad, /**/ 5, 6, 7, 8, 9, 10};
inline const std::vector<float> left_padded{pad, pad, 1, 2, 3, 4, /**/ 5, 6, 7, 8, 9, 10};

template <class Method, class Space>
test::results pool(const seqpool::batch& step, const std::vector<float>& hidden) {
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<Method, seqpool::head::embed, Space> pooler(space, 2);
  return test::run_step(space, pooler, state, step, hidden);
}

}  // namespace padded_cases

TEST_CASE_TEMPLATE_DEFINE("padded: MEAN, MAX, CLS, LAST and ALL read each sequence's rows and never its padding", Space,
                          padded_hand_checked) {
  using namespace padded_cases;
  for (const auto& [side, hidden] :
       {std::pair{seqpool::padding::right, right_padded}, std::pair{seqpool::padding::left, left_padded}}) {
    CAPTURE(static_cast<int>(side));
    const auto mean = pool<method::mean, Space>(two_prompts(task::embed, side), hidden);
    test::check_equal(*mean[0], 1, 2, {2, 3});
    test::check_equal(*mean[1], 1, 2, {7, 8});
    const auto max = pool<method::max, Space>(two_prompts(task::embed, side), hidden);
    test::check_equal(*max[0], 1, 2, {3, 4});
    const auto cls = pool<method::cls, Space>(two_prompts(task::embed, side), hidden);
    test::check_equal(*cls[0], 1, 2, {1, 2});
    const auto last = pool<method::last, Space>(two_prompts(task::embed, side), hidden);
    test::check_equal(*last[0], 1, 2, {3, 4});
    const auto all = pool<method::all, Space>(two_prompts(task::token_embed, side), hidden);
    test::check_equal(*all[0], 2, 2, {1, 2, 3, 4});
    test::check_equal(*all[1], 3, 2, {5, 6, 7, 8, 9, 10});
  }
}

TEST_CASE_TEMPLATE_DEFINE("padded: bad layouts are refused", Space, padded_refused) {
  using namespace padded_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, seqpool::head::embed, Space> pooler(space, 2);
  seqpool::batch step = two_prompts(task::embed, seqpool::padding::right);
  step.padded->sequence_length = 2;
  CHECK_THROWS_WITH_AS(pooler.plan(step, state),
                       "request 1 (id \"b\"): num_scheduled: 3 exceeds the padded sequence length 2", seqpool::error);
  step.padded->sequence_length = 0;
  CHECK_THROWS_WITH_AS(pooler.plan(step, state), "padded.sequence_length: must be at least 1, got 0", seqpool::error);
  step.padded->sequence_length = std::int64_t{1} << 62;
  CHECK_THROWS_WITH_AS(pooler.plan(step, state), "padded.sequence_length: the step's rows overflow a 64-bit count",
                       seqpool::error);
  // The hidden states must hold all B·S rows.
  step.padded->sequence_length = 3;
  const auto plan = pooler.plan(step, state);
  CHECK(plan.num_rows == 6);
}

TEST_CASE_TEMPLATE_DEFINE("padded: random chunked batches match the plain reference", Space, padded_random) {
  using namespace padded_cases;
  std::mt19937 random(17);
  const auto between = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  for (const std::string name : {"cls", "last", "mean", "max", "all"}) {
    for (const seqpool::padding side : {seqpool::padding::right, seqpool::padding::left}) {
      CAPTURE(name);
      CAPTURE(static_cast<int>(side));
      constexpr std::int64_t hidden_size = 37;  // rows that do not start on a vector boundary
      const bool token_wise = name == "all";
      const task pooling_task = token_wise ? task::token_embed : task::embed;
      Space space;
      seqpool::state_store<Space> state(space);
      seqpool::pooler<method::any_sequence, seqpool::head::embed, Space> sequence(
          space, hidden_size, method::any_sequence::from_name(token_wise ? "mean" : name).value());
      seqpool::pooler<method::any_token, seqpool::head::embed, Space> token(
          space, hidden_size, method::any_token::from_name("all").value());

      // Prompts, pooled in steps of at most `budget` rows each, each step's
      // chunks padded to their longest plus some.
      const std::int64_t count = between(1, 7);
      std::vector<std::vector<float>> prompts(count);
      std::vector<std::int64_t> done(count, 0);
      for (auto& prompt : prompts) {
        prompt.resize(between(1, 300) * hidden_size);
        for (float& value : prompt) value = static_cast<float>(between(-1000, 1000)) / 64.0f;
      }
      std::vector<std::optional<test::matrix>> results(count);
      for (int step_index = 0; std::any_of(results.begin(), results.end(), [](const auto& r) { return !r; });
           ++step_index) {
        REQUIRE(step_index < 100);
        seqpool::batch step;
        std::vector<std::size_t> members;
        std::int64_t longest = 0;
        for (std::int64_t i = 0; i < count; ++i) {
          const std::int64_t prompt_len = static_cast<std::int64_t>(prompts[i].size()) / hidden_size;
          if (done[i] == prompt_len) continue;
          const std::int64_t scheduled = std::min(prompt_len - done[i], between(1, 128));
          step.requests.push_back(test::part(test::id("r", i), pooling_task, prompt_len, done[i], scheduled, raw));
          members.push_back(static_cast<std::size_t>(i));
          longest = std::max(longest, scheduled);
        }
        const std::int64_t sequence_length = longest + between(0, 5);
        step.padded = seqpool::padded_rows{.sequence_length = sequence_length, .padding = side};
        std::vector<float> hidden(step.requests.size() * sequence_length * hidden_size, pad);
        for (std::size_t k = 0; k < members.size(); ++k) {
          const seqpool::request& r = step.requests[k];
          const std::int64_t first = static_cast<std::int64_t>(k) * sequence_length +
                                     (side == seqpool::padding::left ? sequence_length - r.num_scheduled : 0);
          std::copy_n(prompts[members[k]].begin() + r.num_computed * hidden_size, r.num_scheduled * hidden_size,
                      hidden.begin() + first * hidden_size);
        }
        const test::results out = token_wise ? test::run_step(space, token, state, step, hidden)
                                             : test::run_step(space, sequence, state, step, hidden);
        for (std::size_t k = 0; k < members.size(); ++k) {
          done[members[k]] += step.requests[k].num_scheduled;
          if (out[k]) results[members[k]] = out[k];
        }
      }
      for (std::int64_t i = 0; i < count; ++i) {
        const seqpool::request whole = test::whole("r", pooling_task, static_cast<std::int64_t>(prompts[i].size()) /
                                                                            hidden_size, raw);
        const auto expected = test::reference_rows(name, prompts[i], hidden_size, whole);
        test::matrix wanted{static_cast<std::int64_t>(expected.size()), hidden_size, {}};
        for (const auto& row : expected) wanted.values.insert(wanted.values.end(), row.begin(), row.end());
        test::check_close(*results[i], wanted, 1e-5);
      }
      CHECK(state.size() == 0);
    }
  }
}
