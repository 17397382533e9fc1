// SPEC section 8 at the pooler: bad input is a seqpool::error raised before any
// device work, and every request's state is exactly as before the call.
// Defines templated cases; a translation unit applies them to its spaces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../support/step.hpp"

namespace validation_cases {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;

/// A space with a MEAN pooler whose request "c" (8 tokens) has pooled its first 3.
template <class Space>
struct chunk_in_flight {
  Space space;
  seqpool::state_store<Space> state{space};
  seqpool::pooler<method::mean, head::embed, Space> pooler{space, 2};
  std::vector<float> prompt{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

  chunk_in_flight() {
    const seqpool::batch first{{test::part("c", task::embed, 8, 0, 3, {.use_activation = false})}};
    test::run_step(space, pooler, state, first, std::vector<float>(prompt.begin(), prompt.begin() + 6));
  }

  seqpool::request rest() const { return test::part("c", task::embed, 8, 3, 5, {.use_activation = false}); }

  /// Checks the failed call left "c" where it was and launched nothing, then finishes it.
  void check_untouched_and_finish(const seqpool::audit_counts& before) {
    CHECK(space.audit().counts() == before);
    CHECK(state.num_computed("c") == 3);
    const auto out = test::run_step(space, pooler, state, seqpool::batch{{rest()}},
                                    std::vector<float>(prompt.begin() + 6, prompt.end()));
    test::check_equal(*out[0], 1, 2, {8, 9});
  }
};

}  // namespace validation_cases

TEST_CASE_TEMPLATE_DEFINE("a bad request in a batch fails the plan and leaves the state alone", Space, bad_request_leaves_state) {
  using namespace validation_cases;
  chunk_in_flight<Space> flight;
  const seqpool::audit_counts before = flight.space.audit().counts();
  const auto plan_with = [&](seqpool::request bad) {
    return flight.pooler.plan(seqpool::batch{{flight.rest(), bad}}, flight.state);
  };
  CHECK_THROWS_WITH_AS(plan_with(test::whole("x", task::classify, 2)),
                       "request 1 (id \"x\"): task: classify has no pooler here (this one serves embed)",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(plan_with(test::whole("x", task::embed, 2, {.dimensions = 3})),
                       "request 1 (id \"x\"): dimensions: must be in [1, 2], got 3", seqpool::error);
  CHECK_THROWS_WITH_AS(plan_with(test::part("x", task::embed, 4, 2, 2)),
                       "request 1 (id \"x\"): num_computed: 2 continues a request that has no state (its first chunk "
                       "never ran, or it finished)",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(plan_with(test::whole("c", task::embed, 2)),
                       "request 1 (id \"c\"): id: appears twice in one step (first as request 0)", seqpool::error);
  CHECK_THROWS_AS(flight.pooler.plan(seqpool::batch{{test::part("c", task::embed, 8, 4, 4)}}, flight.state),
                  seqpool::error);
  flight.check_untouched_and_finish(before);
}

TEST_CASE_TEMPLATE_DEFINE("hidden states and output that do not fit the plan fail the forward before it launches", Space, views_that_do_not_fit) {
  using namespace validation_cases;
  chunk_in_flight<Space> flight;
  const seqpool::step_plan plan = flight.pooler.plan(seqpool::batch{{flight.rest()}}, flight.state);
  flight.pooler.reserve(plan, flight.state);
  const auto hidden = test::to_space(flight.space, std::vector<float>(flight.prompt.begin() + 6, flight.prompt.end()));
  seqpool::buffer<float, Space> output(flight.space, 2);
  const seqpool::audit_counts before = flight.space.audit().counts();

  CHECK_THROWS_WITH_AS(
      flight.pooler.forward(seqpool::make_hidden_view(hidden.data(), 4, 2), plan, flight.state, output.span()),
      "num_scheduled: the requests schedule 5 rows but hidden_states has 4", seqpool::error);
  CHECK_THROWS_WITH_AS(
      flight.pooler.forward(seqpool::make_hidden_view(hidden.data(), 2, 5), plan, flight.state, output.span()),
      "hidden_states: width 5 differs from hidden_size 2", seqpool::error);
  CHECK_THROWS_WITH_AS(
      flight.pooler.forward(seqpool::make_hidden_view(hidden.data(), 5, 2), plan, flight.state, output.span().first(1)),
      "output: holds 1 values but the step writes 2", seqpool::error);
  flight.check_untouched_and_finish(before);
}

TEST_CASE_TEMPLATE_DEFINE("spans must lie in the prompt, in order, and stay the same across chunks", Space,
                          span_knobs) {
  using namespace validation_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> means(space, 2);
  const auto refused = [&](std::vector<seqpool::token_span> spans, const std::string& message) {
    const seqpool::request r = test::whole("s", task::embed, 5, {.spans = std::move(spans)});
    CHECK_THROWS_WITH_AS(means.plan(seqpool::batch{{r}}, state), ("request 0 (id \"s\"): spans: " + message).c_str(),
                         seqpool::error);
  };
  refused(
      {{0, 2}, {1, 3}},
      "span 1 is [1, 3); spans must be non-empty, within [0, prompt_len = 5), in order and not overlapping (the one "
      "before ends at 2)");
  refused({{2, 2}},
          "span 0 is [2, 2); spans must be non-empty, within [0, prompt_len = 5), in order and not overlapping");
  refused({{3, 6}},
          "span 0 is [3, 6); spans must be non-empty, within [0, prompt_len = 5), in order and not overlapping");
  refused({{-1, 2}},
          "span 0 is [-1, 2); spans must be non-empty, within [0, prompt_len = 5), in order and not overlapping");
  refused(
      {{3, 5}, {0, 2}},
      "span 1 is [0, 2); spans must be non-empty, within [0, prompt_len = 5), in order and not overlapping (the one "
      "before ends at 5)");

  // A chunk must ask for the spans the first chunk asked for.
  CHECK_FALSE(test::run_step(space, means, state,
                             seqpool::batch{{test::part("c", task::embed, 5, 0, 2, {.spans = {{0, 3}}})}},
                             std::vector<float>(4, 1.0f))[0]);
  CHECK_THROWS_WITH_AS(means.plan(seqpool::batch{{test::part("c", task::embed, 5, 2, 3, {.spans = {{0, 4}}})}}, state),
                       "request 0 (id \"c\"): params: spans differs from the first chunk's", seqpool::error);
  state.release("c");

  // Token methods return rows, not spans; a captured step does not pool them.
  seqpool::pooler<method::all, head::embed, Space> rows(space, 2);
  CHECK_THROWS_WITH_AS(rows.plan(seqpool::batch{{test::whole("t", task::token_embed, 3, {.spans = {{0, 1}}})}}, state),
                       "request 0 (id \"t\"): spans: only sequence methods pool spans; a token method returns rows",
                       seqpool::error);
  means.reserve_capacity({.requests = 2, .rows = 8});
  CHECK_THROWS_WITH_AS(means.plan(seqpool::batch{{test::whole("s", task::embed, 5, {.spans = {{0, 1}}})}}, state),
                       "request 0 (id \"s\"): spans: a pooler with a capacity (a captured step) does not pool spans",
                       seqpool::error);
}

TEST_CASE_TEMPLATE_DEFINE("token methods check their knobs", Space, token_method_knobs) {
  using namespace validation_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::step, head::classify, Space> steps(space, 3);
  const std::vector<std::int64_t> ids{1, 2};
  seqpool::request short_ids = test::whole("s", task::token_classify, 3, {.step_tag_id = 1});
  short_ids.prompt_token_ids = ids;
  CHECK_THROWS_WITH_AS(steps.plan(seqpool::batch{{short_ids}}, state),
                       "request 0 (id \"s\"): prompt_token_ids: the method reads all 3 ids of the prompt, got 2",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(steps.plan(seqpool::batch{{test::whole("s", task::token_classify, 3)}}, state),
                       "request 0 (id \"s\"): prompt_token_ids: the method reads all 3 ids of the prompt, got 0",
                       seqpool::error);
  const std::vector<std::int64_t> three{1, 2, 3};
  seqpool::request outside = test::whole("o", task::token_classify, 3, {.returned_token_ids = {0, 3}});
  outside.prompt_token_ids = three;
  CHECK_THROWS_WITH_AS(steps.plan(seqpool::batch{{outside}}, state),
                       "request 0 (id \"o\"): returned_token_ids: column 3 is outside [0, 3)", seqpool::error);
  outside.params.returned_token_ids = {-1};
  CHECK_THROWS_AS(steps.plan(seqpool::batch{{outside}}, state), seqpool::error);
  CHECK_THROWS_WITH_AS((seqpool::pooler<method::all, head::embed, Space>(space, 0)),
                       "hidden_size: must be in [1, 2147483647], got 0", seqpool::error);
}
