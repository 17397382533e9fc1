// docs/TESTS.md cases 1-11, 23-28, 31 and 35 on the host algorithms and on the device kernels run by the OpenMP
// stand-in.
#include "cases/methods.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(case_1_cls, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_2_last, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_3_mean, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_4_max, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_5_mean_of_one_and_identical_rows, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_6_empty_batch, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_7_fp16_mean, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_8_all, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_9_chunked_all, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_10_step, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_11_chunked_equals_one_shot, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_23_weighted_mean, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_26_mean_sqrt_len, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_27_instruction, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_28_token_filters, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_31_concat, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_35_runtime_concat, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_24_16_bit_results, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_25_spans, test::cpu_spaces);
