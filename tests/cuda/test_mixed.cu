// Several poolers in one step on device_space<cuda_backend>: random mixed-task
// batches through a dispatcher, and docs/TESTS.md case 34 with the multi_pooler
// cases, captured steps included.
#include "../cases/dispatch.hpp"
#include "../cases/parts.hpp"
#include "../support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(random_mixed_batches, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(case_34_three_outputs, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_match_poolers, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_refuse_bad_input, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_release, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_captured, test::cuda_spaces);
