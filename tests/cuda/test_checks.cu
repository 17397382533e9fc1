// Padded batches, the pooler's bad-input rules and API misuse on device_space<cuda_backend>.
#include "../cases/misuse.hpp"
#include "../cases/padded.hpp"
#include "../cases/validation.hpp"
#include "../support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(plan_of_another_pooler, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(plan_of_another_dispatcher, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(state_of_another_shape, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(stale_plans, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(checked_inputs, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(huge_prompts, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(outputs_apart, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(padded_hand_checked, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(padded_refused, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(padded_random, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(bad_request_leaves_state, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(views_that_do_not_fit, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(token_method_knobs, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(span_knobs, test::cuda_spaces);
