// Macros and element types shared by every seqpool header.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Functions that method and head policies run inside device work carry this
// annotation; user-written policies use it too, so one body serves nvcc and g++.
#if defined(__CUDACC__)
#define SEQPOOL_HOST_DEVICE __host__ __device__
#else
#define SEQPOOL_HOST_DEVICE
#endif
