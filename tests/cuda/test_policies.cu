// The candidate launch policy whose split blocks read rows through rings of
// bulk copies (sm_90's cp.async.bulk), on the GPU against the default and the host.
#include <doctest/doctest.h>

#include "../cases/bulk_rows.hpp"

TYPE_TO_STRING(seqpool::cuda_backend);
TEST_CASE_TEMPLATE_INVOKE(bulk_rows_candidate, seqpool::cuda_backend);
