// Writing finished result rows past the caches, on the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include <seqpool/detail/host/prefetch.hpp>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define SEQPOOL_STREAMING_STORES 1
#endif

namespace seqpool::detail::host {

/// The host algorithms stream a pooler's results when they are at least this
/// large, twice what a server core's L2 holds. Between steps the model's own
/// passes flush the caches, so plain stores would fetch every result line from
/// memory first. Small results are stored plainly and stay cached for the reader
/// that copies them out.
inline constexpr std::size_t streamed_output_bytes = std::size_t{4} << 20;

/// Copies a finished row from the item's scratch row to its place in the output
/// with non-temporal stores. A plain store first reads its line for ownership, so
/// results larger than the caches cost twice their size in traffic. No fence
/// follows each row (it would stall the next row's stores): the pass ends in
/// OpenMP's join, whose locked instructions order these
/// stores before it like any other (Intel SDM vol. 3, "Memory ordering in P6 and
/// more recent processor families"). Elsewhere (other CPUs) it is a plain copy.
inline void stream_row(float* __restrict__ to, const float* __restrict__ from, std::int64_t width) {
  std::int64_t column = 0;
#if defined(SEQPOOL_STREAMING_STORES)
  for (; column < width && reinterpret_cast<std::uintptr_t>(to + column) % cache_line_bytes != 0; ++column)
    to[column] = from[column];
#if defined(__AVX512F__)
  for (; column + 16 <= width; column += 16) _mm512_stream_ps(to + column, _mm512_loadu_ps(from + column));
#elif defined(__AVX__)
  for (; column + 8 <= width; column += 8) _mm256_stream_ps(to + column, _mm256_loadu_ps(from + column));
#else
  for (; column + 4 <= width; column += 4) _mm_stream_ps(to + column, _mm_loadu_ps(from + column));
#endif
#endif
  for (; column < width; ++column) to[column] = from[column];
}

}  // namespace seqpool::detail::host
