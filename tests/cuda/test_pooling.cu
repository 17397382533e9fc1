// TESTS.md cases 1-19 and the pooler's bad-input rules on device_space<cuda_backend>.
#define SEQPOOL_TEST_SPACES seqpool::device_space<seqpool::cuda_backend>
#include "../cases/heads.hpp"
#include "../cases/methods.hpp"
#include "../cases/validation.hpp"
