// TESTS.md cases 12-19 on the host space (fused epilogue) and on the OpenMP
// stand-in of the device path (epilogue as its own pass).
#define SEQPOOL_TEST_SPACES seqpool::host_space, seqpool::device_space<seqpool::omp_backend>
#include "cases/heads.hpp"
