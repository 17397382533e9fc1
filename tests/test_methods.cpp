// TESTS.md cases 1-11 on the host space and on the device path's OpenMP stand-in.
#define SEQPOOL_TEST_SPACES seqpool::host_space, seqpool::device_space<seqpool::omp_backend>
#include "cases/methods.hpp"
