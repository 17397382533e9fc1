// Randomized comparison with the reference on both spaces of a g++ build.
#include "cases/random.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(random_batches, test::cpu_spaces);
