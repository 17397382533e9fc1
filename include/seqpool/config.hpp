// Macros and element types shared by every seqpool header.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Functions that method and head policies run inside device work carry this
// annotation; user-written policies use it too, so one body serves nvcc and g++.
#if defined(__CUDACC__)
#define SEQPOOL_HOST_DEVICE __host__ __device__
#else
#define SEQPOOL_HOST_DEVICE
#endif

// Lets the host compiler split a reduction loop into vector lanes (OpenMP simd,
// honoured under -fopenmp or -fopenmp-simd); device code keeps its order.
// SEQPOOL_SIMD asserts a loop's iterations independent, where the compiler's
// cost model would otherwise leave a short loop scalar.
#if defined(__CUDA_ARCH__) || !defined(_OPENMP)
#define SEQPOOL_SIMD_REDUCTION(clause)
#define SEQPOOL_SIMD
#else
#define SEQPOOL_SIMD_REDUCTION(clause) _Pragma(SEQPOOL_STRINGIFY(omp simd reduction(clause)))
#define SEQPOOL_SIMD _Pragma("omp simd")
#define SEQPOOL_STRINGIFY(text) #text
#endif

namespace seqpool::detail {

/// Bytes in a host cache line: the step of software prefetch, and the boundary
/// streaming stores start from.
inline constexpr std::int64_t cache_line_bytes = 64;

/// The widest row a whole-row item assembles in a scratch row of its own, 32 KiB
/// on its stack: a result row it then streams out, or a pooled row it passes
/// through the head's linear layer. Wider rows take the paths of the device.
inline constexpr std::int64_t scratch_row_floats = 8192;

/// The cache a software prefetch fills: L2 unless what is asked for ahead fits
/// in a fraction of L1 beside what the loop is working on.
enum class prefetch_into { l1, l2 };

/// Asks the host's caches for the line at `address` ahead of its use. Hardware
/// prefetchers lose track of several row streams read in lockstep; a CPU thread
/// pooling rows says which lines come next. A hint only: an address past the
/// end of a buffer is never faulted on. No-op on the device.
template <prefetch_into Cache = prefetch_into::l2>
SEQPOOL_HOST_DEVICE void prefetch(const void* address) {
#if !defined(__CUDA_ARCH__)
  __builtin_prefetch(address, 0, Cache == prefetch_into::l1 ? 3 : 2);
#else
  (void)address;
#endif
}

/// Asks for every line of the `width` elements at `row`, into L2.
template <class T>
SEQPOOL_HOST_DEVICE void prefetch_row(const T* row, std::int64_t width) {
  for (std::int64_t element = 0; element < width; element += cache_line_bytes / sizeof(T)) prefetch(row + element);
}

/// Runs `body(c)` for the columns [begin, end) of rows of T, a cache line at a
/// time, calling `ask(line)` with each line's first column before it: a loop
/// over rows asks there for the same line of the rows it reads next. Whole lines
/// get a loop of constant length, which the compiler unrolls and vectorises.
template <class T, class Ask, class Body>
SEQPOOL_HOST_DEVICE void by_lines(std::int64_t begin, std::int64_t end, const Ask& ask, const Body& body) {
  constexpr std::int64_t line_elements = cache_line_bytes / sizeof(T);
  std::int64_t line = begin;
  for (; line + line_elements <= end; line += line_elements) {
    ask(line);
    SEQPOOL_SIMD
    for (std::int64_t c = line; c < line + line_elements; ++c) body(c);
  }
  if (line == end) return;
  ask(line);
  for (std::int64_t c = line; c < end; ++c) body(c);
}

}  // namespace seqpool::detail
