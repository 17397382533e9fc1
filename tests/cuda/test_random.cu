// Randomized comparison with the reference on device_space<cuda_backend>.
#include "../cases/random.hpp"
#include "../support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(random_batches, test::cuda_spaces);
