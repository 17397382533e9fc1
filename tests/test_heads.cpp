// docs/TESTS.md cases 12-19 and 30 and the head errors on the host algorithms and on the device
// kernels run by the OpenMP stand-in.
#include "cases/heads.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(case_12_normalisation, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_13_truncation_then_normalisation, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_14_mixed_knobs, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_15_sigmoid, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_16_softmax, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_17_platt, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_18_problem_types, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_19_raw_logits, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(classifier_with_bias, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(projector_before_truncation, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(token_heads_every_row, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(head_knobs_that_do_not_fit, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_30_dense_stacks, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(stacks_that_do_not_chain, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(user_head_stacks, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(stack_through_wide_layer, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(wide_layer_tiles, test::cpu_spaces);
