// Macros and element types shared by every seqpool header.
#pragma once

#include <cstdint>

// CUDA's 16-bit float types, where their headers are at hand (always under nvcc);
// seqpool's own (float16.hpp) need none.
#if defined(__CUDACC__) || (__has_include(<cuda_fp16.h>) && __has_include(<cuda_bf16.h>))
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define SEQPOOL_HAS_CUDA_FLOAT16 1
#else
#define SEQPOOL_HAS_CUDA_FLOAT16 0
#endif

// Functions that method and head policies run inside device work carry this
// annotation; user-written policies use it too, so one body serves nvcc and g++.
#if defined(__CUDACC__)
#define SEQPOOL_HOST_DEVICE __host__ __device__
#else
#define SEQPOOL_HOST_DEVICE
#endif

// Before a host-device template that calls what it is given: nvcc checks each
// instantiation's calls for both sides, and a host-only callable (a host pass's
// lambda) is called on the host only.
#if defined(__CUDACC__)
#define SEQPOOL_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define SEQPOOL_EXEC_CHECK_DISABLE
#endif

// Lets the host compiler split a reduction loop into vector lanes (OpenMP simd,
// honoured under -fopenmp or -fopenmp-simd); device code keeps its order.
// SEQPOOL_SIMD asserts a loop's iterations independent, where the compiler's
// cost model would otherwise leave a short loop scalar.
// A clause may name several variables: SEQPOOL_SIMD_REDUCTION(+ : a, b).
#if defined(__CUDA_ARCH__) || !defined(_OPENMP)
#define SEQPOOL_SIMD_REDUCTION(...)
#define SEQPOOL_SIMD
#else
#define SEQPOOL_SIMD_REDUCTION(...) _Pragma(SEQPOOL_STRINGIFY(omp simd reduction(__VA_ARGS__)))
#define SEQPOOL_SIMD _Pragma("omp simd")
#define SEQPOOL_STRINGIFY(...) #__VA_ARGS__
#endif

// Asks nvcc to unroll a loop of constant length, so that a lane's values stay
// in registers; the host compiler decides for itself.
#if defined(__CUDA_ARCH__)
#define SEQPOOL_UNROLL _Pragma("unroll")
#else
#define SEQPOOL_UNROLL
#endif
