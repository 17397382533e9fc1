// Misuse of the public API on both spaces of a g++ build.
#include "cases/misuse.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(plan_of_another_pooler, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(plan_of_another_dispatcher, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(state_of_another_shape, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(stale_plans, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(checked_inputs, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(huge_prompts, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(outputs_apart, test::cpu_spaces);
