// docs/TESTS.md cases 20-22, randomized mixed-task batches, runtime-chosen and
// user-written methods, all through one dispatcher and one upload a step.
// Defines templated cases; a translation unit applies them to its spaces.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../../examples/splade.hpp"
#include "../support/step.hpp"

namespace dispatch_cases {

using seqpool::task;
using seqpool::task_entry;
namespace method = seqpool::method;
namespace head = seqpool::head;

template <class Space, class Result = float>
using all_tasks = seqpool::configurable_table<Space, Result>;

/// Methods for the four tasks, and the poolers, dispatcher and state that serve
/// them, with results of type Result.
template <class Space, class Result = float>
struct engine {
  static constexpr std::int64_t hidden_size = 6;

  method::any_sequence embed_method;
  method::any_sequence classify_method;
  method::any_token token_method;
  Space space;
  seqpool::state_store<Space> state{space};
  seqpool::dispatcher<all_tasks<Space, Result>> dispatcher;

  engine(method::any_sequence embed, method::any_sequence classify, method::any_token tokens)
      : embed_method(embed),
        classify_method(classify),
        token_method(tokens),
        dispatcher(space, seqpool::pooler<method::any_sequence, head::embed, Space, Result>(space, hidden_size, embed),
                   seqpool::pooler<method::any_sequence, head::classify, Space, Result>(space, hidden_size, classify),
                   seqpool::pooler<method::any_token, head::embed, Space, Result>(space, hidden_size, tokens),
                   seqpool::pooler<method::any_token, head::classify, Space, Result>(space, hidden_size, tokens)) {}

  /// The request pooled on its own, whole, by a fresh pooler of its task, in float.
  test::matrix alone(seqpool::request r, const std::vector<float>& prompt) {
    r.num_computed = 0;
    r.num_scheduled = r.prompt_len;
    r.id = "alone";
    const seqpool::batch step{{r}};
    const auto pool = [&](auto method, auto pooling_head) {
      seqpool::pooler<decltype(method), decltype(pooling_head), Space> single(space, hidden_size, method, pooling_head);
      seqpool::state_store<Space> fresh(space);
      return *test::run_step(space, single, fresh, step, prompt)[0];
    };
    switch (r.task) {
      case task::embed:
        return pool(embed_method, head::embed{});
      case task::classify:
        return pool(classify_method, head::classify{});
      case task::token_embed:
        return pool(token_method, head::embed{});
      case task::token_classify:
        return pool(token_method, head::classify{});
    }
    return {};
  }
};

inline std::vector<float> rows_from(std::int64_t first, std::int64_t count, std::int64_t width) {
  std::vector<float> rows;
  for (std::int64_t i = 0; i < count * width; ++i) rows.push_back(static_cast<float>((first * width + i) % 13) - 6.0f);
  return rows;
}

}  // namespace dispatch_cases

TEST_CASE_TEMPLATE_DEFINE("case 20: three groups, rows rebased, each result as if pooled alone", Space, case_20_three_groups) {
  using namespace dispatch_cases;
  engine<Space> e(method::mean{}, method::cls{}, method::all{});
  const seqpool::batch step{{test::whole("a", task::embed, 2), test::whole("b", task::embed, 1),
                             test::whole("c", task::token_embed, 3), test::whole("d", task::embed, 2)}};
  const seqpool::step_plan plan = e.dispatcher.plan(step, e.state);
  REQUIRE(plan.groups.size() == 3);
  CHECK(plan.groups[1].row_begin == 3);
  CHECK(plan.groups[2].row_begin == 6);
  CHECK(plan.groups[2].num_rows == 2);
  // The two embed groups launch together: one launch per pooler, not per group.
  const auto& shares = seqpool::detail::plan_access::program(plan).shares;
  REQUIRE(shares.size() == 2);
  CHECK(shares[0].num_requests == 3);  // a, b and d: each one's result, below, is as if pooled alone
  CHECK(shares[1].num_requests == 1);

  const std::vector<float> hidden = rows_from(0, 8, engine<Space>::hidden_size);
  const auto out = test::run_step(e.space, e.dispatcher, e.state, step, hidden);
  const std::int64_t starts[] = {0, 2, 3, 6};
  for (std::size_t i = 0; i < step.requests.size(); ++i) {
    const seqpool::request& r = step.requests[i];
    const auto first = hidden.begin() + starts[i] * engine<Space>::hidden_size;
    test::check_close(*out[i], e.alone(r, std::vector<float>(first, first + r.prompt_len * engine<Space>::hidden_size)),
                      1e-6);
  }
}

TEST_CASE_TEMPLATE_DEFINE("case 21: classify and token_classify in one batch", Space, case_21_classify_and_token_classify) {
  using namespace dispatch_cases;
  engine<Space> e(method::mean{}, method::last{}, method::all{});
  const seqpool::batch step{{test::whole("s", task::classify, 3), test::whole("t", task::token_classify, 4),
                             test::whole("u", task::classify, 1), test::whole("v", task::token_classify, 2)}};
  const std::vector<float> hidden = rows_from(5, 10, engine<Space>::hidden_size);
  const auto out = test::run_step(e.space, e.dispatcher, e.state, step, hidden);
  std::int64_t row = 0;
  for (std::size_t i = 0; i < step.requests.size(); ++i) {
    const seqpool::request& r = step.requests[i];
    const auto first = hidden.begin() + row * engine<Space>::hidden_size;
    CHECK(out[i]->rows == (seqpool::is_token_task(r.task) ? r.prompt_len : 1));
    test::check_close(*out[i], e.alone(r, std::vector<float>(first, first + r.prompt_len * engine<Space>::hidden_size)),
                      1e-6);
    row += r.prompt_len;
  }
}

TEST_CASE_TEMPLATE_DEFINE("case 22: a task the table lacks fails before anything runs", Space, case_22_missing_task) {
  using namespace dispatch_cases;
  using embed_only =
      seqpool::dispatch_table<task_entry<task::embed, seqpool::pooler<method::mean, head::embed, Space>>>;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::dispatcher<embed_only> dispatcher(space, seqpool::pooler<method::mean, head::embed, Space>(space, 1));
  const seqpool::pooling_params raw{.use_activation = false};
  test::run_step(space, dispatcher, state, seqpool::batch{{test::part("c", task::embed, 4, 0, 2, raw)}},
                 std::vector<float>{1, 2});

  const seqpool::audit_counts before = space.audit().counts();
  const seqpool::batch mixed{{test::part("c", task::embed, 4, 2, 2, raw), test::whole("x", task::classify, 1)}};
  CHECK_THROWS_WITH_AS(dispatcher.plan(mixed, state),
                       "request 1 (id \"x\"): task: classify has no pooler in the dispatch table", seqpool::error);
  CHECK(space.audit().counts() == before);
  CHECK(state.num_computed("c") == 2);

  const auto out =
      test::run_step(space, dispatcher, state, seqpool::batch{{mixed.requests[0]}}, std::vector<float>{3, 4});
  test::check_equal(*out[0], 1, 1, {2.5f});
}

TEST_CASE_TEMPLATE_DEFINE("an empty table entry refuses its task like a missing one", Space, empty_table_entry) {
  using namespace dispatch_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::dispatcher<all_tasks<Space>> dispatcher(
      space, seqpool::pooler<method::any_sequence, head::embed, Space>(space, 2, method::max{}), std::nullopt,
      std::nullopt, std::nullopt);
  CHECK_THROWS_WITH_AS(dispatcher.plan(seqpool::batch{{test::whole("t", task::token_embed, 1)}}, state),
                       "request 0 (id \"t\"): task: token_embed has no pooler in the dispatch table", seqpool::error);
  CHECK_THROWS_WITH_AS(
      (seqpool::dispatcher<all_tasks<Space>>(space, std::nullopt, std::nullopt, std::nullopt, std::nullopt)),
      "dispatcher: needs at least one pooler", seqpool::error);
  CHECK_THROWS_WITH_AS((seqpool::dispatcher<all_tasks<Space>>(
                           space, seqpool::pooler<method::any_sequence, head::embed, Space>(space, 2, method::max{}),
                           seqpool::pooler<method::any_sequence, head::classify, Space>(space, 3, method::max{}),
                           std::nullopt, std::nullopt)),
                       "hidden_size: the poolers of one dispatcher read the same hidden states, but one has 3 columns "
                       "and another 2",
                       seqpool::error);
}

namespace dispatch_cases {

/// Random batches of every task, chunked over several steps, through one
/// dispatcher: each result equals the request pooled alone (16-bit results: that
/// float result rounded, bit for bit).
template <class Space, class Result>
void mixed_batches() {
  CAPTURE(sizeof(Result));
  constexpr std::int64_t width = engine<Space, Result>::hidden_size;
  std::mt19937 random(20261129);
  const auto between = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  const char* sequence_methods[] = {"cls", "last", "mean", "max"};
  const char* token_methods[] = {"all", "step"};
  for (int round = 0; round < 12; ++round) {
    CAPTURE(round);
    engine<Space, Result> e(*method::any_sequence::from_name(sequence_methods[between(0, 3)]),
                            *method::any_sequence::from_name(sequence_methods[between(0, 3)]),
                            *method::any_token::from_name(token_methods[between(0, 1)]));
    struct flight {
      seqpool::request r;
      std::vector<float> prompt;
      std::vector<std::int64_t> ids;
      std::int64_t done = 0;
    };
    std::vector<flight> flights(between(1, 14));
    for (std::size_t i = 0; i < flights.size(); ++i) {
      flight& f = flights[i];
      const std::int64_t prompt_len = between(1, 150);
      f.prompt = rows_from(between(0, 100), prompt_len, width);
      for (std::int64_t t = 0; t < prompt_len; ++t) f.ids.push_back(between(0, 2));
      f.r = test::whole(test::id("r", i), static_cast<task>(between(0, 3)), prompt_len,
                        {.use_activation = between(0, 1) == 1, .step_tag_id = 1});
      f.r.prompt_token_ids = f.ids;
    }
    while (std::any_of(flights.begin(), flights.end(), [](const flight& f) { return f.done < f.r.prompt_len; })) {
      seqpool::batch step;
      std::vector<float> hidden;
      std::vector<flight*> scheduled;
      for (flight& f : flights) {
        if (f.done == f.r.prompt_len) continue;
        const std::int64_t size = between(0, 1) == 1 ? f.r.prompt_len - f.done : between(1, f.r.prompt_len - f.done);
        seqpool::request r = f.r;
        r.num_computed = f.done;
        r.num_scheduled = size;
        step.requests.push_back(r);
        hidden.insert(hidden.end(), f.prompt.begin() + f.done * width, f.prompt.begin() + (f.done + size) * width);
        f.done += size;
        scheduled.push_back(&f);
      }
      const auto out = test::run_step(e.space, e.dispatcher, e.state, step, hidden);
      for (std::size_t i = 0; i < scheduled.size(); ++i) {
        const flight& f = *scheduled[i];
        REQUIRE(out[i].has_value() == (f.done == f.r.prompt_len));
        if (!out[i]) continue;
        if constexpr (std::is_same_v<Result, float>)
          test::check_close(*out[i], e.alone(f.r, f.prompt), 1e-5);
        else
          test::check_rounded<Result>(*out[i], e.alone(f.r, f.prompt));
      }
    }
    CHECK(e.state.size() == 0);
  }
}

}  // namespace dispatch_cases

TEST_CASE_TEMPLATE_DEFINE("random mixed-task batches over several steps equal pooling each request alone", Space,
                          random_mixed_batches) {
  dispatch_cases::mixed_batches<Space, float>();
  dispatch_cases::mixed_batches<Space, seqpool::bfloat16>();
  dispatch_cases::mixed_batches<Space, __half>();
}

TEST_CASE_TEMPLATE_DEFINE("poolers sharing a space may each reserve before any forwards, step after step", Space,
                          shared_space) {
  using namespace dispatch_cases;
  constexpr std::int64_t width = 6;
  Space space;
  seqpool::state_store<Space> mean_state(space);
  seqpool::state_store<Space> max_state(space);
  seqpool::state_store<Space> other_state(space);
  // The engine's pooler type (above), whose code the other cases compile already.
  using sequence_pooler = seqpool::pooler<method::any_sequence, head::embed, Space>;
  sequence_pooler means(space, width, method::mean{});
  sequence_pooler maxima(space, width, method::max{});
  sequence_pooler refused(space, width, method::cls{});  // its forwards are refused
  sequence_pooler idle(space, width, method::cls{});     // its steps are empty
  constexpr int slots = static_cast<int>(seqpool::detail::device::staging_policy::slots);
  // Three times as many steps as a device space's staging ring has slots. On
  // the stand-in every copy completes at once, so this shows that no pooler
  // is refused and that none holds more than one slot; that each stages in a
  // slot of its own, test_space.cpp shows on a backend whose copies pend.
  for (int round = 0; round < 3 * slots; ++round) {
    const std::int64_t rows = 2 + round % 3;
    const seqpool::batch step{{test::whole(test::id("r", round), task::embed, rows)}};
    const auto hidden = test::to_space(space, rows_from(round, rows, width));
    const seqpool::step_plan mean_plan = means.plan(step, mean_state);
    const seqpool::step_plan max_plan = maxima.plan(step, max_state);
    const seqpool::step_plan refused_plan = refused.plan(step, other_state);
    const seqpool::step_plan idle_plan = idle.plan(seqpool::batch{}, other_state);
    means.reserve(mean_plan, mean_state);
    maxima.reserve(max_plan, max_state);
    refused.reserve(refused_plan, other_state);
    idle.reserve(idle_plan, other_state);
    seqpool::buffer<float, Space> mean_out(space, static_cast<std::size_t>(mean_plan.output_size));
    seqpool::buffer<float, Space> max_out(space, static_cast<std::size_t>(max_plan.output_size));
    seqpool::buffer<float, Space> refused_out(space, static_cast<std::size_t>(refused_plan.output_size));
    {
      const seqpool::audit_scope scope(space.audit());
      idle.forward(seqpool::make_hidden_view<float>(nullptr, 0, width), idle_plan, other_state, {});
      CHECK_THROWS_WITH_AS(refused.forward(seqpool::make_hidden_view(hidden.data(), rows - 1, width), refused_plan,
                                           other_state, refused_out.span()),
                           doctest::Contains("hidden"), seqpool::error);
      means.forward(seqpool::make_hidden_view(hidden.data(), rows, width), mean_plan, mean_state, mean_out.span());
      maxima.forward(seqpool::make_hidden_view(hidden.data(), rows, width), max_plan, max_state, max_out.span());
      const seqpool::audit_counts counts = scope.counts();
      CHECK(counts ==
            seqpool::audit_counts{.uploads = 2, .upload_bytes = counts.upload_bytes, .launches = counts.launches});
    }
    // Of the ring only the refused pooler's slot is held (a host space holds
    // none): the rest may be set aside elsewhere. So, too, once a pooler that
    // reserved has given its unit to a dispatcher, and once one has ended.
    const auto rest_of_ring_is_free = [&] {
      std::vector<typename Space::upload_reservation> rest(slots - 1);
      for (typename Space::upload_reservation& reservation : rest) space.reserve_upload(16, reservation);
    };
    rest_of_ring_is_free();
    {
      sequence_pooler giving(space, width, method::mean{});
      giving.reserve(giving.plan(step, other_state), other_state);
      const seqpool::dispatcher<seqpool::dispatch_table<seqpool::task_entry<task::embed, sequence_pooler>>> taking(
          space, std::move(giving));
      rest_of_ring_is_free();
      sequence_pooler ending(space, width, method::mean{});
      ending.reserve(ending.plan(step, other_state), other_state);
    }
    rest_of_ring_is_free();
    const test::results pooled_means = test::slice(mean_plan, test::to_host(space, mean_out));
    const test::results pooled_maxima = test::slice(max_plan, test::to_host(space, max_out));
    // Each equals the same pooler's step run on its own, reserved just before it forwards.
    CHECK(pooled_means == test::run_step(space, means, mean_state, step, rows_from(round, rows, width)));
    CHECK(pooled_maxima == test::run_step(space, maxima, max_state, step, rows_from(round, rows, width)));
  }
}

TEST_CASE("runtime methods are chosen by name") {
  using namespace dispatch_cases;
  CHECK(method::any_sequence::from_name("max")->name() == "max");
  CHECK(method::any_token::from_name("step")->name() == "step");
  CHECK_FALSE(method::any_sequence::from_name("all"));
  CHECK_FALSE(method::any_token::from_name("mean"));
  CHECK(method::any_sequence(method::cls{}).name() == "cls");
}

TEST_CASE_TEMPLATE_DEFINE("a user-written method pools whole and chunked prompts through a table", Space, user_written_method) {
  using namespace dispatch_cases;
  using splade_table = seqpool::dispatch_table<task_entry<task::embed, seqpool::pooler<splade, head::embed, Space>>>;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::dispatcher<splade_table> dispatcher(space, seqpool::pooler<splade, head::embed, Space>(space, 3));
  const std::vector<float> prompt{-1, 0.5f, 2, 3, -4, 0, 0.25f, 1, -2, 7, -1, 1};  // 4 rows
  const seqpool::pooling_params raw{.use_activation = false};
  const std::vector<float> expected{std::log1p(7.0f), std::log1p(1.0f), std::log1p(2.0f)};

  const auto whole =
      test::run_step(space, dispatcher, state, seqpool::batch{{test::whole("w", task::embed, 4, raw)}}, prompt);
  test::check_close(*whole[0], {1, 3, expected}, 1e-6);

  test::run_step(space, dispatcher, state, seqpool::batch{{test::part("c", task::embed, 4, 0, 3, raw)}},
                 std::vector<float>(prompt.begin(), prompt.begin() + 9));
  const auto chunked =
      test::run_step(space, dispatcher, state, seqpool::batch{{test::part("c", task::embed, 4, 3, 1, raw)}},
                     std::vector<float>(prompt.begin() + 9, prompt.end()));
  test::check_close(*chunked[0], {1, 3, expected}, 1e-6);
}
