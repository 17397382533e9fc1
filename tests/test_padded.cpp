// Padded batches on the host algorithms and on the device kernels run by the OpenMP stand-in.
#include "cases/padded.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(padded_hand_checked, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(padded_refused, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(padded_random, test::cpu_spaces);
