// Misuse of the public API on both spaces of a g++ build, and the bound on
// what a step's records index.
#include "cases/misuse.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(plan_of_another_pooler, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(plan_of_another_dispatcher, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(moved_runners, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(other_spaces, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(state_of_another_shape, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(stale_plans, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(refused_reserves, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(checked_inputs, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(huge_prompts, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(outputs_apart, test::cpu_spaces);

TEST_CASE("a step's records index at most 2^31 - 1 arrival counters, tiles and runs of gathered rows") {
  // Reached only by steps of about 2^30 requests or spans (a terabyte of
  // records): the share's bound itself, at its edge.
  using seqpool::detail::check_indexable;
  constexpr std::int64_t most = std::numeric_limits<std::int32_t>::max();
  seqpool::detail::share planned;
  planned.arrivals = most - 3;
  CHECK(planned.take_arrivals(3) == most - 3);
  CHECK_THROWS_WITH_AS(planned.take_arrivals(1),
                       "requests: the step's records would index 2147483648 arrival counters, more than the "
                       "2147483647 they index in 32 bits: plan fewer requests a step",
                       seqpool::error);
  CHECK_NOTHROW(check_indexable(most, "tiles"));
  CHECK_THROWS_WITH_AS(check_indexable(most + 1, "runs of gathered rows"),
                       "requests: the step's records would index 2147483648 runs of gathered rows, more than the "
                       "2147483647 they index in 32 bits: plan fewer requests a step",
                       seqpool::error);
}
