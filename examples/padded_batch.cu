// The padded-batch example built by nvcc: the device half runs on device_space<cuda_backend>.
#include "padded_batch.cpp"
