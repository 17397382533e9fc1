// The dispatcher on both spaces of a g++ build.
#define SEQPOOL_TEST_SPACES seqpool::host_space, seqpool::device_space<seqpool::omp_backend>
#include "cases/dispatch.hpp"
