// Several poolers in one step on device_space<cuda_backend>: random mixed-task
// batches through a dispatcher, and docs/TESTS.md case 34 with the multi_pooler
// cases, captured steps included, parts fixed at compile time and chosen at run time.
#include "../cases/dispatch.hpp"
#include "../cases/parts.hpp"
#include "../support/spaces.hpp"

using both_assemblies = parts_cases::assemblies<test::cuda_spaces>::type;

TEST_CASE_TEMPLATE_APPLY(random_mixed_batches, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(case_34_three_outputs, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(plan_reads_no_batch, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(parts_match_poolers, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(parts_refuse_bad_input, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_release, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(parts_continue_alike, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(parts_captured, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(chosen_parts_of_any_type, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(chosen_parts_refuse_bad_input, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(chosen_parts_read_cuda_16_bit_rows, test::cuda_spaces);
