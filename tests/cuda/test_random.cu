// Randomized comparison with the reference on device_space<cuda_backend>.
#define SEQPOOL_TEST_SPACES seqpool::device_space<seqpool::cuda_backend>
#include "../cases/random.hpp"
