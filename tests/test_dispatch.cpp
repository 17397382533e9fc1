// The dispatcher on both spaces of a g++ build.
#include "cases/dispatch.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(case_20_three_groups, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_21_classify_and_token_classify, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_22_missing_task, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(empty_table_entry, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(random_mixed_batches, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(user_written_method, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(shared_space, test::cpu_spaces);
