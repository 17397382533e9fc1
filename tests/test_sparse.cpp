// docs/TESTS.md case 32, sparse results against a plain loop, and their
// refusals, on the host algorithms and on the device kernels run by the OpenMP
// stand-in.
#include "cases/sparse.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(case_32_sparse_weights, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(sparse_matches_reference, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(sparse_refusals, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(sparse_capture, std::tuple<seqpool::device_space<seqpool::omp_backend>>);
TEST_CASE_TEMPLATE_APPLY(case_33_row_lists, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(row_lists_match_reference, test::cpu_spaces);
