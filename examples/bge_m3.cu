// BGE-M3's three outputs built by nvcc: the device half runs on device_space<cuda_backend>.
#include "bge_m3.cpp"
