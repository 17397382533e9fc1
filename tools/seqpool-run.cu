// seqpool-run built by nvcc: --space device runs on device_space<cuda_backend>.
#include "seqpool-run.cpp"
