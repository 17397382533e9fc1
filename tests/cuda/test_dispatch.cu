// docs/TESTS.md cases 20-22, empty table entries and a user's method in a table on device_space<cuda_backend>.
#include "../cases/dispatch.hpp"
#include "../support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(case_20_three_groups, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(case_21_classify_and_token_classify, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(case_22_missing_task, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(empty_table_entry, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(user_written_method, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(shared_space, test::cuda_spaces);
