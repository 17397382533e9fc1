// Random mixed-task batches through a dispatcher on device_space<cuda_backend>.
#include "../cases/dispatch.hpp"
#include "../support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(random_mixed_batches, test::cuda_spaces);
