// Randomized comparison with the reference on device_space<cuda_backend>.
#include "../cases/random.hpp"
#include "../support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(random_cls_and_last, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(random_mean_and_max, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(random_all_and_step, test::cuda_spaces);
