// Randomized comparison with the reference on both spaces of a g++ build.
#include "cases/random.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(random_cls_and_last, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(random_mean_and_max, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(random_all_and_step, test::cpu_spaces);
