// pool.cpp compiled by nvcc: seqpool's device kernels as CUDA C++, run on the CPU.
#include "pool.cpp"
