// pool_bench built by nvcc: "device" is device_space<cuda_backend>, its ceilings measured on the GPU.
#include "pool_bench.cpp"
