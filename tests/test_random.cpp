// Randomized comparison with the reference on both spaces of a g++ build.
#include "cases/random.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(random_sequence_methods, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(random_token_methods, test::cpu_spaces);
