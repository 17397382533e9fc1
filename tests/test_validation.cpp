// SPEC section 8 at the pooler, on both spaces of a g++ build.
#include "cases/validation.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(bad_request_leaves_state, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(views_that_do_not_fit, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(token_method_knobs, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(span_knobs, test::cpu_spaces);
