// The multi_pooler on both spaces of a g++ build: docs/TESTS.md case 34, each
// part equal to its pooler alone, the knobs that reach each part, and, on the
// device stand-in, a captured step; each with its parts fixed at compile time
// and chosen at run time (runtime_multi_pooler), which also takes parts of any
// result type.
#include "cases/parts.hpp"
#include "support/spaces.hpp"

using both_assemblies = parts_cases::assemblies<test::cpu_spaces>::type;

TEST_CASE_TEMPLATE_APPLY(case_34_three_outputs, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(plan_reads_no_batch, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(parts_match_poolers, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(parts_refuse_bad_input, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(parts_release, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(parts_continue_alike, both_assemblies);
TEST_CASE_TEMPLATE_APPLY(parts_captured,
                         parts_cases::assemblies<std::tuple<seqpool::device_space<seqpool::omp_backend>>>::type);
TEST_CASE_TEMPLATE_APPLY(chosen_parts_of_any_type, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(chosen_parts_refuse_bad_input, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(chosen_parts_read_cuda_16_bit_rows, test::cpu_spaces);
