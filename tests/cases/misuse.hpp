// Misuse of the public API: each must throw seqpool::error before anything is
// launched, and leave the state as it was. Defines templated cases over spaces.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../support/step.hpp"

namespace misuse_cases {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;

inline const seqpool::pooling_params raw{.use_activation = false};

/// A token method whose select() and count() are given wrong on purpose.
struct careless_tokens {
  static constexpr seqpool::method_kind kind = seqpool::method_kind::token;
  static constexpr std::string_view name = "careless";
  static constexpr bool reads_token_ids = false;
  std::int64_t shift = 0;        ///< select() reports positions this far off
  std::int64_t extra_count = 0;  ///< count() reports this many more than select() chooses
  /// count() of a range longer than this (where positive) reports `long_extra`
  /// more: counts that do not add up over a prompt's chunks.
  std::int64_t long_range = 0;
  std::int64_t long_extra = 0;
  /// select() chooses no position from here on, and count() of a range no
  /// longer than long_range says so; a longer range's counts them all.
  std::int64_t stop = std::numeric_limits<std::int64_t>::max();

  void check(std::size_t, const seqpool::request&, std::int64_t) const {}
  void select(const seqpool::request&, std::int64_t begin, std::int64_t end, std::vector<std::int64_t>& positions) const {
    for (std::int64_t position = begin; position < std::min(end, stop); ++position)
      positions.push_back(position + shift);
  }
  std::int64_t count(const seqpool::request&, std::int64_t begin, std::int64_t end) const {
    if (long_range > 0 && end - begin > long_range) return end - begin + long_extra + extra_count;
    return std::clamp(stop - begin, std::int64_t{0}, end - begin) + extra_count;
  }
  std::span<const std::int64_t> columns(const seqpool::request&) const { return {}; }
};

/// A token method that returns every row, and of each the columns it is given.
struct wide_rows {
  static constexpr seqpool::method_kind kind = seqpool::method_kind::token;
  static constexpr std::string_view name = "wide";
  static constexpr bool reads_token_ids = false;
  std::span<const std::int64_t> kept;

  void check(std::size_t, const seqpool::request&, std::int64_t) const {}
  void select(const seqpool::request&, std::int64_t begin, std::int64_t end,
              std::vector<std::int64_t>& positions) const {
    for (std::int64_t position = begin; position < end; ++position) positions.push_back(position);
  }
  std::int64_t count(const seqpool::request&, std::int64_t begin, std::int64_t end) const { return end - begin; }
  std::span<const std::int64_t> columns(const seqpool::request&) const { return kept; }
};

/// Plans, reserves and forwards a step whose hidden states are `rows` rows of ones.
template <class Pooler>
void run(typename Pooler::space_type& space, Pooler& pooler, seqpool::state_store<typename Pooler::space_type>& state,
         const seqpool::step_plan& plan) {
  pooler.reserve(plan, state);
  const auto hidden =
      test::to_space(space, std::vector<float>(static_cast<std::size_t>(plan.num_rows * pooler.hidden_size()), 1.0f));
  seqpool::buffer<float, typename Pooler::space_type> output(space, static_cast<std::size_t>(plan.output_size));
  pooler.forward(seqpool::make_hidden_view(hidden.data(), plan.num_rows, pooler.hidden_size()), plan, state,
                 output.span());
}

}  // namespace misuse_cases

TEST_CASE_TEMPLATE_DEFINE("a plan is forwarded only by the pooler that made it", Space, plan_of_another_pooler) {
  using namespace misuse_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> wide(space, 16);
  seqpool::pooler<method::mean, head::embed, Space> narrow(space, 8);
  const seqpool::step_plan plan = wide.plan(seqpool::batch{{test::whole("a", task::embed, 3)}}, state);
  const seqpool::audit_counts before = space.audit().counts();
  CHECK_THROWS_WITH_AS(run(space, narrow, state, plan), doctest::Contains("plan: it was made by another pooler"),
                       seqpool::error);
  CHECK(space.audit().counts() == before);
}

TEST_CASE_TEMPLATE_DEFINE("a dispatcher's plan runs only on that dispatcher, also where another has the entry empty",
                          Space, plan_of_another_dispatcher) {
  using namespace misuse_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  using table = seqpool::dispatch_table<
      seqpool::task_entry<task::embed, seqpool::pooler<method::mean, head::embed, Space>>,
      seqpool::task_entry<task::classify, seqpool::pooler<method::cls, head::classify, Space>>>;
  seqpool::dispatcher<table> embeds(space, seqpool::pooler<method::mean, head::embed, Space>(space, 4), std::nullopt);
  seqpool::dispatcher<table> classifies(space, std::nullopt, seqpool::pooler<method::cls, head::classify, Space>(space, 4));
  const seqpool::step_plan plan = embeds.plan(seqpool::batch{{test::whole("e", task::embed, 2)}}, state);
  const seqpool::audit_counts before = space.audit().counts();
  CHECK_THROWS_WITH_AS(classifies.reserve(plan, state), doctest::Contains("plan: it was made by another pooler"),
                       seqpool::error);
  CHECK(space.audit().counts() == before);
}

TEST_CASE_TEMPLATE_DEFINE("a pooler or dispatcher moved from, or whose unit was given away, plans and runs nothing",
                          Space, moved_runners) {
  using namespace misuse_cases;
  using mean_pooler = seqpool::pooler<method::mean, head::embed, Space>;
  Space space;
  seqpool::state_store<Space> state(space);
  const char* const gone =
      "runner: it holds no units (it was moved from, or its unit was given to a "
      "dispatcher or multi_pooler): plan and run with the runner that holds them";
  const seqpool::batch step{{test::whole("a", task::embed, 2)}};
  const seqpool::capacity limits{.requests = 2, .rows = 4, .result_rows = 2, .columns = 4};

  // A plan made before the move is the new holder's; the pooler left behind refuses every call.
  mean_pooler first(space, 4);
  const seqpool::step_plan before_move = first.plan(step, state);
  mean_pooler second = std::move(first);
  const seqpool::audit_counts before = space.audit().counts();
  CHECK_THROWS_WITH_AS(first.plan(step, state), gone, seqpool::error);
  CHECK_THROWS_WITH_AS(first.reserve(before_move, state), gone, seqpool::error);
  CHECK_THROWS_WITH_AS(first.reserve_capacity(limits), gone, seqpool::error);
  CHECK(space.audit().counts() == before);
  run(space, second, state, before_move);

  // Assigned: the target takes the id (plans the source made run on it), and the source refuses.
  mean_pooler third(space, 4);
  const seqpool::step_plan of_second = second.plan(step, state);
  third = std::move(second);
  CHECK_THROWS_WITH_AS(second.plan(step, state), gone, seqpool::error);
  run(space, third, state, of_second);
  // Moved into itself (runners[i] = std::move(runners[j]) with i == j): its members may be
  // emptied, so it holds none either.
  const seqpool::step_plan of_third = third.plan(step, state);
  mean_pooler& alias = third;
  third = std::move(alias);
  CHECK_THROWS_WITH_AS(third.plan(step, state), gone, seqpool::error);
  CHECK_THROWS_WITH_AS(third.reserve(of_third, state), gone, seqpool::error);

  // A pooler whose unit a dispatcher took.
  using table = seqpool::dispatch_table<seqpool::task_entry<task::embed, mean_pooler>>;
  mean_pooler given(space, 4);
  seqpool::dispatcher<table> dispatcher(space, std::move(given));
  CHECK_THROWS_WITH_AS(given.plan(step, state), gone, seqpool::error);
  CHECK_THROWS_WITH_AS(seqpool::dispatcher<table>(space, std::move(given)), gone, seqpool::error);
  // Its knobs would go nowhere: the dispatcher's unit keeps the ones it was given.
  using int8_pooler = seqpool::pooler<method::mean, head::embed, Space, std::int8_t>;
  using int8_table = seqpool::dispatch_table<seqpool::task_entry<task::embed, int8_pooler>>;
  const std::vector<float> lower(4, -1.0f), upper(4, 1.0f), narrower(2, 0.0f);
  int8_pooler quantizing(space, 4);
  quantizing.set_ranges({.lower = lower, .upper = upper});
  const seqpool::dispatcher<int8_table> quantized(space, std::move(quantizing));
  CHECK_THROWS_WITH_AS(quantizing.set_ranges({.lower = narrower, .upper = narrower}), gone, seqpool::error);
  seqpool::dispatcher<table> moved_dispatcher = std::move(dispatcher);
  CHECK_THROWS_WITH_AS(dispatcher.plan(step, state), gone, seqpool::error);
  run(space, moved_dispatcher, state, moved_dispatcher.plan(step, state));
  CHECK(state.size() == 0);
}

TEST_CASE_TEMPLATE_DEFINE("a runner runs with poolers and a state store of its own space", Space, other_spaces) {
  using namespace misuse_cases;
  using mean_pooler = seqpool::pooler<method::mean, head::embed, Space>;
  Space space;
  Space other;
  seqpool::state_store<Space> state(space);
  seqpool::state_store<Space> elsewhere(other);
  mean_pooler pooler(space, 4);
  const seqpool::batch step{{test::whole("a", task::embed, 2)}};
  const char* const other_store =
      "state: the state store was made on another space than the runner's: keep a "
      "runner's states in a store of its space";
  CHECK_THROWS_WITH_AS(pooler.plan(step, elsewhere), other_store, seqpool::error);
  const seqpool::step_plan plan = pooler.plan(step, state);
  CHECK_THROWS_WITH_AS(pooler.reserve(plan, elsewhere), other_store, seqpool::error);
  pooler.reserve(plan, state);
  const auto hidden = test::to_space(space, std::vector<float>(8, 1.0f));
  seqpool::buffer<float, Space> output(space, static_cast<std::size_t>(plan.output_size));
  const auto view = seqpool::make_hidden_view(hidden.data(), 2, 4);
  CHECK_THROWS_WITH_AS(pooler.forward(view, plan, elsewhere, output.span()), other_store, seqpool::error);
  pooler.forward(view, plan, state, output.span());
  // A captured step and a restage check the store as forward() does, before anything is staged.
  if constexpr (Space::family == seqpool::algorithm_family::device) {
    pooler.reserve_capacity({.requests = 1, .rows = 2, .result_rows = 1, .columns = 4});
    auto home = pooler.reserve_graph();
    seqpool::buffer<float, Space> captured(space, static_cast<std::size_t>(pooler.output_capacity()));
    const seqpool::step_plan next = pooler.plan(step, state);
    pooler.reserve(next, state);
    const seqpool::audit_counts before = space.audit().counts();
    CHECK_THROWS_WITH_AS(pooler.capture(view, next, elsewhere, captured.span(), home), other_store, seqpool::error);
    CHECK_THROWS_WITH_AS(pooler.restage(next, elsewhere, home), other_store, seqpool::error);
    CHECK(space.audit().counts() == before);
  }

  // A dispatcher stages and captures on its space: a pooler of another would launch on another stream.
  using table =
      seqpool::dispatch_table<seqpool::task_entry<task::embed, mean_pooler>,
                              seqpool::task_entry<task::classify, seqpool::pooler<method::cls, head::classify, Space>>>;
  CHECK_THROWS_WITH_AS(seqpool::dispatcher<table>(space, mean_pooler(space, 4),
                                                  seqpool::pooler<method::cls, head::classify, Space>(other, 4)),
                       "space: the poolers of one dispatcher run on the space it runs on, and its entry 1 was made on "
                       "another",
                       seqpool::error);
}

TEST_CASE_TEMPLATE_DEFINE("a chunked request continues only with the method, width and knobs it began with", Space,
                          state_of_another_shape) {
  using namespace misuse_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> narrow(space, 8);
  seqpool::pooler<method::mean, head::embed, Space> wide(space, 128);
  run(space, narrow, state, narrow.plan(seqpool::batch{{test::part("m", task::embed, 6, 0, 2, raw)}}, state));
  CHECK_THROWS_WITH_AS(wide.plan(seqpool::batch{{test::part("m", task::embed, 6, 2, 4, raw)}}, state),
                       "request 0 (id \"m\"): hidden_size: 128 continues a state begun with 8", seqpool::error);

  seqpool::pooler<method::last, head::embed, Space> last(space, 8);
  seqpool::pooler<method::cls, head::embed, Space> cls(space, 8);
  run(space, last, state, last.plan(seqpool::batch{{test::part("l", task::embed, 6, 0, 2, raw)}}, state));
  CHECK_THROWS_WITH_AS(cls.plan(seqpool::batch{{test::part("l", task::embed, 6, 2, 4, raw)}}, state),
                       "request 0 (id \"l\"): method: cls continues a state begun by last", seqpool::error);

  seqpool::pooler<method::step, head::embed, Space> steps(space, 8);
  const std::vector<std::int64_t> ids{1, 2, 1, 2, 1, 2};
  const std::vector<std::int64_t> other_ids{2, 2, 2, 2, 2, 2};
  seqpool::request first = test::part("s", task::token_embed, 6, 0, 2, {.step_tag_id = 1});
  first.prompt_token_ids = ids;
  run(space, steps, state, steps.plan(seqpool::batch{{first}}, state));
  seqpool::request next = test::part("s", task::token_embed, 6, 2, 4, {.step_tag_id = 2});
  next.prompt_token_ids = ids;
  CHECK_THROWS_WITH_AS(steps.plan(seqpool::batch{{next}}, state),
                       "request 0 (id \"s\"): params: step_tag_id differs from the first chunk's", seqpool::error);
  next.params = {.step_tag_id = 1, .returned_token_ids = {0}};
  CHECK_THROWS_WITH_AS(steps.plan(seqpool::batch{{next}}, state),
                       "request 0 (id \"s\"): params: returned_token_ids differs from the first chunk's",
                       seqpool::error);
  next.params = {.step_tag_id = 1};
  next.prompt_token_ids = other_ids;
  CHECK_THROWS_WITH_AS(steps.plan(seqpool::batch{{next}}, state),
                       "request 0 (id \"s\"): prompt_token_ids: differ from those of the first chunk", seqpool::error);
  // A later chunk short of the ids the method reads hears so, not that its ids differ.
  next.prompt_token_ids = std::span<const std::int64_t>(ids).first(3);
  CHECK_THROWS_WITH_AS(steps.plan(seqpool::batch{{next}}, state),
                       "request 0 (id \"s\"): prompt_token_ids: the method reads all 6 ids of the prompt, got 3",
                       seqpool::error);
  // The same ids in 32 bits continue the state.
  const std::vector<std::int32_t> narrow_ids(ids.begin(), ids.end());
  next.prompt_token_ids = narrow_ids;
  run(space, steps, state, steps.plan(seqpool::batch{{next}}, state));
  CHECK_FALSE(state.contains("s"));
}

TEST_CASE_TEMPLATE_DEFINE("a plan runs once, against the state it was planned with, and only once planned whole", Space,
                          stale_plans) {
  using namespace misuse_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> pooler(space, 4);
  const char* const ran_already =
      "plan: it ran already, or a later plan has (a plan runs once, against the state it was planned with, and plans "
      "run in the order they are made): plan the step again";
  run(space, pooler, state, pooler.plan(seqpool::batch{{test::part("c", task::embed, 9, 0, 3, raw)}}, state));
  const seqpool::step_plan second = pooler.plan(seqpool::batch{{test::part("c", task::embed, 9, 3, 3, raw)}}, state);
  seqpool::pooler<method::mean, head::embed, Space> sharing(space, 4);  // shares the store
  const seqpool::step_plan stale = sharing.plan(seqpool::batch{{test::part("c", task::embed, 9, 3, 3, raw)}}, state);
  run(space, pooler, state, second);
  CHECK_THROWS_WITH_AS(run(space, pooler, state, second), ran_already, seqpool::error);
  // Another pooler's plan of the same chunk, made before it ran, is refused by the state it was planned against.
  CHECK_THROWS_WITH_AS(run(space, sharing, state, stale),
                       "request 0 (id \"c\"): plan: planned when the state held 3 tokens, it holds 6: plan each step "
                       "once, against the state it runs with",
                       seqpool::error);
  CHECK(state.num_computed("c") == 6);

  const seqpool::step_plan last = pooler.plan(seqpool::batch{{test::part("c", task::embed, 9, 6, 3, raw)}}, state);
  state.release("c");
  CHECK_THROWS_WITH_AS(run(space, pooler, state, last),
                       "request 0 (id \"c\"): plan: planned when the state held 6 tokens, it holds none: plan each "
                       "step once, against the state it runs with",
                       seqpool::error);
  CHECK_FALSE(state.contains("c"));

  // A request released and begun again, here by another pooler that shares the
  // store, holds another state than the one its later chunk was planned
  // against, though it has pooled as many tokens: with other knobs, say.
  const char* const begun_again =
      "request 0 (id \"a\"): plan: its state was begun again since: for another task or prompt length, with "
      "another method, width, knobs or ids, or choosing other rows so far (released and begun anew, or reserved "
      "again by a pooler that shares the store): plan each step once, against the state it runs with";
  seqpool::pooler<method::mean, head::embed, Space> other(space, 4);
  run(space, pooler, state, pooler.plan(seqpool::batch{{test::part("a", task::embed, 9, 0, 3, raw)}}, state));
  const seqpool::step_plan continued = pooler.plan(seqpool::batch{{test::part("a", task::embed, 9, 3, 3, raw)}}, state);
  state.release("a");
  run(space, other, state, other.plan(seqpool::batch{{test::part("a", task::embed, 9, 0, 3, {})}}, state));
  CHECK_THROWS_WITH_AS(run(space, pooler, state, continued), begun_again, seqpool::error);
  CHECK(state.num_computed("a") == 3);
  // So does one begun alike but for a longer prompt.
  state.release("a");
  run(space, other, state, other.plan(seqpool::batch{{test::part("a", task::embed, 12, 0, 3, raw)}}, state));
  CHECK_THROWS_WITH_AS(run(space, pooler, state, continued), begun_again, seqpool::error);
  state.release("a");
  run(space, other, state, other.plan(seqpool::batch{{test::part("a", task::embed, 9, 0, 3, {})}}, state));
  // Reserved before the state was begun again, it is refused at forward().
  const seqpool::step_plan reserved = other.plan(seqpool::batch{{test::part("a", task::embed, 9, 3, 3, {})}}, state);
  other.reserve(reserved, state);
  state.release("a");
  run(space, pooler, state, pooler.plan(seqpool::batch{{test::part("a", task::embed, 9, 0, 3, raw)}}, state));
  const auto three_rows = test::to_space(space, std::vector<float>(12, 1.0f));
  seqpool::buffer<float, Space> pooled(space, 4);
  CHECK_THROWS_WITH_AS(
      other.forward(seqpool::make_hidden_view(three_rows.data(), 3, 4), reserved, state, pooled.span()), begun_again,
      seqpool::error);
  CHECK(state.num_computed("a") == 3);
  // A first chunk reserved by one pooler and then by another, with other knobs,
  // holds the second's state: the first's plan is refused.
  state.release("a");
  const seqpool::step_plan first_of_pooler =
      pooler.plan(seqpool::batch{{test::part("a", task::embed, 9, 0, 3, raw)}}, state);
  pooler.reserve(first_of_pooler, state);
  const seqpool::step_plan first_of_other =
      other.plan(seqpool::batch{{test::part("a", task::embed, 9, 0, 3, {})}}, state);
  other.reserve(first_of_other, state);
  CHECK_THROWS_WITH_AS(
      pooler.forward(seqpool::make_hidden_view(three_rows.data(), 3, 4), first_of_pooler, state, pooled.span()),
      begun_again, seqpool::error);
  CHECK(state.num_computed("a") == 0);
  // Begun again with the same key, the state is the one the plan was made for.
  run(space, other, state, first_of_other);
  state.release("a");
  run(space, other, state, other.plan(seqpool::batch{{test::part("a", task::embed, 9, 0, 3, {})}}, state));
  const seqpool::step_plan same = other.plan(seqpool::batch{{test::part("a", task::embed, 9, 3, 6, {})}}, state);
  state.release("a");
  run(space, pooler, state, pooler.plan(seqpool::batch{{test::part("a", task::embed, 9, 0, 3, {})}}, state));
  run(space, other, state, same);
  CHECK_FALSE(state.contains("a"));

  // Plans run in the order they are made: one made before a plan that has run
  // was planned against a state that step has changed.
  const seqpool::step_plan earlier = pooler.plan(seqpool::batch{{test::whole("e", task::embed, 2)}}, state);
  const seqpool::step_plan later = pooler.plan(seqpool::batch{{test::whole("l", task::embed, 2)}}, state);
  run(space, pooler, state, later);
  CHECK_THROWS_WITH_AS(run(space, pooler, state, earlier), ran_already, seqpool::error);
  // reserve() refuses such a plan before it touches the store: a first chunk's
  // plan that ran, reserved again once its request finished, would begin a
  // state that no step runs (and that refuses another pooler's first chunk).
  const seqpool::step_plan begun = pooler.plan(seqpool::batch{{test::part("f", task::embed, 4, 0, 2, raw)}}, state);
  run(space, pooler, state, begun);
  run(space, pooler, state, pooler.plan(seqpool::batch{{test::part("f", task::embed, 4, 2, 2, raw)}}, state));
  CHECK_FALSE(state.contains("f"));
  const seqpool::audit_counts before_reserve = space.audit().counts();
  CHECK_THROWS_WITH_AS(pooler.reserve(begun, state), ran_already, seqpool::error);
  CHECK_FALSE(state.contains("f"));
  CHECK(space.audit().counts() == before_reserve);

  // A plan holds a step only once plan() has planned one into it whole, and until it is moved from.
  const char* const empty =
      "plan: it holds no plan (none was planned into it, its plan() threw, or it was moved from): plan the step again";
  seqpool::step_plan reused;
  CHECK_THROWS_WITH_AS(pooler.reserve(reused, state), empty, seqpool::error);
  seqpool::step_plan moved = pooler.plan(seqpool::batch{{test::whole("m", task::embed, 2)}}, state);
  const seqpool::step_plan taken = std::move(moved);
  CHECK_THROWS_WITH_AS(pooler.reserve(moved, state), empty, seqpool::error);
  // Moved into itself (plans[i] = std::move(plans[j]) with i == j), its lists may be emptied: it holds none.
  seqpool::step_plan itself = pooler.plan(seqpool::batch{{test::whole("i", task::embed, 2)}}, state);
  seqpool::step_plan& alias = itself;
  itself = std::move(alias);
  CHECK_THROWS_WITH_AS(pooler.reserve(itself, state), empty, seqpool::error);
  run(space, pooler, state, taken);
  pooler.plan(seqpool::batch{{test::part("r", task::embed, 4, 0, 2, raw)}}, state, reused);
  run(space, pooler, state, reused);
  CHECK_THROWS_AS(pooler.plan(seqpool::batch{{test::part("r", task::embed, 4, 1, 3, raw)}}, state, reused),
                  seqpool::error);
  CHECK_THROWS_WITH_AS(pooler.reserve(reused, state), empty, seqpool::error);
  const auto hidden = test::to_space(space, std::vector<float>(8, 1.0f));
  seqpool::buffer<float, Space> output(space, 4);
  CHECK_THROWS_WITH_AS(pooler.forward(seqpool::make_hidden_view(hidden.data(), 2, 4), reused, state, output.span()),
                       empty, seqpool::error);
  pooler.plan(seqpool::batch{{test::part("r", task::embed, 4, 2, 2, raw)}}, state, reused);
  run(space, pooler, state, reused);
  CHECK(reused.results[0].has_value());
  CHECK_FALSE(state.contains("r"));
}

TEST_CASE_TEMPLATE_DEFINE("a reserve() refused for one request leaves every request's state as it was", Space,
                          refused_reserves) {
  using namespace misuse_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> pooler(space, 4);
  seqpool::pooler<method::mean, head::embed, Space> other(space, 4);
  const char* const released =
      "request 2 (id \"b\"): plan: planned when the state held 3 tokens, it holds none: plan each step once, against "
      "the state it runs with";
  // "b" has run a chunk; "f"'s first chunk is reserved with raw results, not run.
  run(space, pooler, state, pooler.plan(seqpool::batch{{test::part("b", task::embed, 9, 0, 3, raw)}}, state));
  const seqpool::step_plan first_of_f =
      pooler.plan(seqpool::batch{{test::part("f", task::embed, 9, 0, 3, raw)}}, state);
  pooler.reserve(first_of_f, state);
  // A step that would begin "n", begin "f" anew with other knobs, and continue "b", which is released before
  // its reserve().
  const seqpool::step_plan step =
      other.plan(seqpool::batch{{test::part("n", task::embed, 9, 0, 3, {}), test::part("f", task::embed, 9, 0, 3, {}),
                                 test::part("b", task::embed, 9, 3, 3, raw)}},
                 state);
  state.release("b");
  CHECK_THROWS_WITH_AS(other.reserve(step, state), released, seqpool::error);
  CHECK_FALSE(state.contains("n"));
  CHECK(state.size() == 1);
  // "f" holds the state its own plan reserved: that plan runs.
  const auto rows = test::to_space(space, std::vector<float>(12, 1.0f));
  seqpool::buffer<float, Space> pooled(space, 4);
  pooler.forward(seqpool::make_hidden_view(rows.data(), 3, 4), first_of_f, state, pooled.span());
  CHECK(state.num_computed("f") == 3);
  CHECK(state.size() == 1);
}

TEST_CASE_TEMPLATE_DEFINE("what a caller or a user method hands the pooler is checked", Space, checked_inputs) {
  using namespace misuse_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> pooler(space, 4);

  // Duplicate ids.
  const seqpool::batch twice{{test::whole("d", task::embed, 1), test::whole("d", task::embed, 1)}};
  CHECK_THROWS_WITH_AS(pooler.plan(twice, state),
                       "request 1 (id \"d\"): id: appears twice in one step (first as request 0)", seqpool::error);

  // Rows that overlap.
  const seqpool::step_plan plan = pooler.plan(seqpool::batch{{test::whole("o", task::embed, 2)}}, state);
  pooler.reserve(plan, state);
  const auto hidden = test::to_space(space, std::vector<float>(8, 1.0f));
  seqpool::buffer<float, Space> output(space, 4);
  CHECK_THROWS_WITH_AS(pooler.forward(seqpool::make_hidden_view(hidden.data(), 2, 4, 3), plan, state, output.span()),
                       "hidden_states: rows are 3 elements apart, fewer than their 4 columns", seqpool::error);

  // A token method whose select() leaves its range, or whose count() disagrees with it.
  seqpool::pooler<careless_tokens, head::embed, Space> shifted(space, 4, {.shift = 1});
  CHECK_THROWS_WITH_AS(shifted.plan(seqpool::batch{{test::whole("t", task::token_embed, 3)}}, state),
                       "request 0 (id \"t\"): method: careless's select() chose position 3, outside [0, 3) or out "
                       "of order",
                       seqpool::error);
  seqpool::pooler<careless_tokens, head::embed, Space> miscounted(space, 4, {.extra_count = 1});
  CHECK_THROWS_WITH_AS(miscounted.plan(seqpool::batch{{test::part("t", task::token_embed, 6, 0, 3)}}, state),
                       "request 0 (id \"t\"): method: careless's count() says 4 rows in [0, 3), select() chose 3",
                       seqpool::error);
  // A count() that does not add up over the prompt: the state was sized by the first chunk's, and
  // the chunks that choose more rows than it holds, or fewer by the last, are refused, not stashed
  // past it or read short of it.
  for (const auto& [method, message] :
       {std::pair{careless_tokens{.long_range = 3, .long_extra = -1},
                  "request 0 (id \"u\"): method: careless's chunks chose 9 rows of the prompt "
                  "through position 9; its count() over the prompt said 8 at the first chunk"},
        std::pair{careless_tokens{.long_range = 3, .stop = 8},
                  "request 0 (id \"u\"): method: careless's chunks chose 8 rows of the prompt "
                  "through position 9; its count() over the prompt said 9 at the first chunk"}}) {
    seqpool::pooler<careless_tokens, head::embed, Space> uneven(space, 4, method);
    for (const std::int64_t computed : {0, 3})
      run(space, uneven, state,
          uneven.plan(seqpool::batch{{test::part("u", task::token_embed, 9, computed, 3)}}, state));
    CHECK_THROWS_WITH_AS(uneven.plan(seqpool::batch{{test::part("u", task::token_embed, 9, 6, 3)}}, state), message,
                         seqpool::error);
    state.release("u");
  }
  // A count() of the prompt's other chunks below 0 or above their positions is refused
  // before it is added: the rows the prompt returns would wrap, or pass their bound.
  for (const auto& [extra, message] :
       {std::pair{std::int64_t{-100},
                  "request 0 (id \"u\"): method: careless's count() says -94 rows in [3, 9), "
                  "which holds 6 positions"},
        std::pair{std::numeric_limits<std::int64_t>::max() - 6,
                  "request 0 (id \"u\"): method: careless's count() says 9223372036854775807 rows in [3, 9), "
                  "which holds 6 positions"}}) {
    seqpool::pooler<careless_tokens, head::embed, Space> wild(space, 4, {.long_range = 3, .long_extra = extra});
    CHECK_THROWS_WITH_AS(wild.plan(seqpool::batch{{test::part("u", task::token_embed, 9, 0, 3)}}, state), message,
                         seqpool::error);
  }
}

TEST_CASE_TEMPLATE_DEFINE("sizes computed from a request's numbers never overflow", Space, huge_prompts) {
  using namespace misuse_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::all, head::embed, Space> all(space, 8);
  for (const std::int64_t prompt_len :
       {std::int64_t{1} << 61, std::int64_t{1} << 62, std::numeric_limits<std::int64_t>::max()}) {
    CAPTURE(prompt_len);
    const seqpool::batch step{{test::part("h", task::token_embed, prompt_len, 0, 2)}};
    CHECK_THROWS_WITH_AS(run(space, all, state, all.plan(step, state)), doctest::Contains("request 0 (id \"h\")"),
                         seqpool::error);
    CHECK_FALSE(state.contains("h"));
  }
  // A step of more rows than any memory could hold is refused before any is
  // planned, before a sequence method would cut its rows into tiles; so is one
  // that reads more rows than its records count in 32 bits. A padded batch's
  // rows may lie past 2^31 (test_plan_size pools one).
  seqpool::pooler<method::mean, head::embed, Space> mean(space, 8);
  const std::int64_t rows = std::int64_t{1} << 62;
  CHECK_THROWS_WITH_AS(mean.plan(seqpool::batch{{test::whole("h", task::embed, rows)}}, state),
                       "num_scheduled: the step's 4611686018427387904 rows of 8 columns are more bytes than a 64-bit "
                       "count holds",
                       seqpool::error);
  seqpool::batch padded{{test::whole("p", task::embed, 2), test::whole("q", task::embed, 2)}};
  padded.padded = seqpool::padded_rows{.sequence_length = rows / 2};
  CHECK_THROWS_WITH_AS(mean.plan(padded, state),
                       "padded.sequence_length: the step's 4611686018427387904 rows of 8 columns are more bytes than "
                       "a 64-bit count holds",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(mean.plan(seqpool::batch{{test::whole("h", task::embed, std::int64_t{1} << 31)}}, state),
                       "num_scheduled: the step reads 2147483648 rows; a step reads at most 2147483647 (its records "
                       "count rows in 32 bits)",
                       seqpool::error);
  seqpool::batch halves{
      {test::whole("p", task::embed, std::int64_t{1} << 30), test::whole("q", task::embed, std::int64_t{1} << 30)}};
  halves.padded = seqpool::padded_rows{.sequence_length = std::int64_t{1} << 30};
  CHECK_THROWS_WITH_AS(mean.plan(halves, state),
                       "num_scheduled: the step reads 2147483648 rows; a step reads at most 2147483647 (its records "
                       "count rows in 32 bits)",
                       seqpool::error);
  // So is a token method's request that returns more rows over its prompt,
  // which its last chunk gathers in one run.
  CHECK_THROWS_WITH_AS(
      all.plan(seqpool::batch{{test::part("t", task::token_embed, std::int64_t{1} << 31, 0, 2)}}, state),
      "request 0 (id \"t\"): prompt_len: 2147483648 returns 2147483648 rows; a request returns at "
      "most 2147483647 (its records count rows in 32 bits)",
      seqpool::error);
  const std::int64_t most = std::numeric_limits<std::int32_t>::max();
  CHECK(all.plan(seqpool::batch{{test::part("t", task::token_embed, most, 0, 2)}}, state).num_rows == 2);
  // A sparse list of a row of 2^31 - 1 columns takes its count and an entry a
  // column: 2^31 values, which the results and the output count in 64 bits.
  seqpool::pooler<method::mean, head::embed, Space, seqpool::sparse_entry> listed(space, most);
  const seqpool::step_plan lists =
      listed.plan(seqpool::batch{{test::whole("a", task::embed, 1), test::whole("b", task::embed, 1)}}, state);
  const std::int64_t values = most + 1;
  CHECK(lists.results[0]->cols == values);
  CHECK(lists.results[1]->cols == values);
  CHECK(lists.results[1]->offset >= lists.results[0]->offset + values);
  CHECK(lists.output_size >= lists.results[1]->offset + values);
  // A token method's row of more columns than records count (columns may
  // repeat) is refused before any is read: here 2^31 of them, in memory
  // mapped but never touched.
  const std::size_t count = std::size_t{1} << 31;
  void* mapped =
      mmap(nullptr, count * sizeof(std::int64_t), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  REQUIRE(mapped != MAP_FAILED);
  const std::span<const std::int64_t> columns(static_cast<const std::int64_t*>(mapped), count);
  seqpool::pooler<wide_rows, head::embed, Space> wide(space, 8, wide_rows{columns});
  CHECK_THROWS_WITH_AS(wide.plan(seqpool::batch{{test::whole("w", task::token_embed, 2)}}, state),
                       "request 0 (id \"w\"): method: wide returns 2147483648 columns a row; a row holds "
                       "at most 2147483647 (its records count columns in 32 bits)",
                       seqpool::error);
  munmap(mapped, count * sizeof(std::int64_t));
}

TEST_CASE_TEMPLATE_DEFINE("an output lies apart from the hidden states and from the other outputs", Space,
                          outputs_apart) {
  using namespace misuse_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> pooler(space, 4);
  const seqpool::step_plan plan = pooler.plan(seqpool::batch{{test::whole("a", task::embed, 2, raw)}}, state);
  pooler.reserve(plan, state);
  // One buffer: the step's 2 rows, then room for its output.
  const auto memory = test::to_space(space, std::vector<float>{1, 2, 3, 4, 3, 4, 5, 6, 0, 0, 0, 0});
  const auto rows = seqpool::make_hidden_view(memory.data(), 2, 4);
  const char* const over_rows =
      "output: overlaps the hidden states, which the step reads while it writes: give it memory of its own";
  for (const std::size_t at : {std::size_t{0}, std::size_t{4}, std::size_t{7}}) {
    CAPTURE(at);
    CHECK_THROWS_WITH_AS(pooler.forward(rows, plan, state, cuda::std::span<float>(memory.data() + at, 4)), over_rows,
                         seqpool::error);
  }
  // Refused before anything ran: the plan still runs, into the memory after the rows.
  pooler.forward(rows, plan, state, cuda::std::span<float>(memory.data() + 8, 4));
  CHECK(test::to_host(space, memory) == std::vector<float>{1, 2, 3, 4, 3, 4, 5, 6, 2, 3, 4, 5});

  // Rows far apart span the memory between them, which the step may not write either.
  seqpool::pooler<method::mean, head::embed, Space> narrow(space, 2);
  const seqpool::step_plan spread_plan = narrow.plan(seqpool::batch{{test::whole("s", task::embed, 2, raw)}}, state);
  narrow.reserve(spread_plan, state);
  const auto spread_memory = test::to_space(space, std::vector<float>{1, 2, 9, 9, 9, 9, 3, 4, 0, 0});
  const auto spread = seqpool::make_hidden_view(spread_memory.data(), 2, 2, 6);
  CHECK_THROWS_WITH_AS(narrow.forward(spread, spread_plan, state, cuda::std::span<float>(spread_memory.data() + 2, 2)),
                       over_rows, seqpool::error);
  narrow.forward(spread, spread_plan, state, cuda::std::span<float>(spread_memory.data() + 8, 2));
  CHECK(test::to_host(space, spread_memory) == std::vector<float>{1, 2, 9, 9, 9, 9, 3, 4, 2, 3});
}
