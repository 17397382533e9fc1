// The main example built by nvcc: the device half runs on device_space<cuda_backend>.
#include "embed_batch.cpp"
