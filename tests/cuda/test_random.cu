// Randomized comparison with the reference on device_space<cuda_backend>.
#include "../cases/random.hpp"
#include "../support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(random_sequence_methods, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(random_token_methods, test::cuda_spaces);
