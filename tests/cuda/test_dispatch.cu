// TESTS.md cases 20-22 and mixed-task batches on device_space<cuda_backend>.
#define SEQPOOL_TEST_SPACES seqpool::device_space<seqpool::cuda_backend>
#include "../cases/dispatch.hpp"
