// The multi_pooler on both spaces of a g++ build: docs/TESTS.md case 34, each
// part equal to its pooler alone, the knobs that reach each part, and, on the
// device stand-in, a captured step.
#include "cases/parts.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(case_34_three_outputs, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_match_poolers, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_refuse_bad_input, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_release, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_captured, std::tuple<seqpool::device_space<seqpool::omp_backend>>);
