// Storing finished result rows into the output, on the host: rounded to the
// output's element type, and past the caches when the results are large.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <seqpool/detail/host/prefetch.hpp>
#include <seqpool/detail/to_float.hpp>

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

/// Copies `bytes` bytes to `to` with non-temporal stores. A plain store first
/// reads its line for ownership, so results larger than the caches cost twice
/// their size in traffic. No fence follows each row (it would stall the next
/// row's stores): the pass ends in OpenMP's join, whose locked instructions
/// order these stores before it like any other (Intel SDM vol. 3, "Memory
/// ordering in P6 and more recent processor families"). Elsewhere (other CPUs)
/// it is a plain copy.
inline void stream_bytes(std::byte* __restrict__ to, const std::byte* __restrict__ from, std::int64_t bytes) {
  std::int64_t done = 0;
#if defined(SEQPOOL_STREAMING_STORES)
  const auto misaligned = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(to) % cache_line_bytes);
  done = misaligned == 0 ? 0 : cache_line_bytes - misaligned;
  if (done > bytes) done = bytes;
  std::memcpy(to, from, static_cast<std::size_t>(done));
#if defined(__AVX512F__)
  for (; done + 64 <= bytes; done += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(to + done), _mm512_loadu_si512(from + done));
#elif defined(__AVX__)
  for (; done + 32 <= bytes; done += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to + done),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + done)));
#else
  for (; done + 16 <= bytes; done += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + done),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + done)));
#endif
#endif
  std::memcpy(to + done, from + done, static_cast<std::size_t>(bytes - done));
}

/// Stores a row an item finished in float to its place in the output: rounded
/// to nearest even where the results are 16-bit, and streamed when `stream`.
template <class Result>
void store_row(Result* to, const float* from, std::int64_t width, bool stream) {
  if constexpr (std::is_same_v<Result, float>) {
    if (stream)
      stream_bytes(reinterpret_cast<std::byte*>(to), reinterpret_cast<const std::byte*>(from),
                   width * static_cast<std::int64_t>(sizeof(float)));
    else
      std::memcpy(to, from, static_cast<std::size_t>(width) * sizeof(float));
  } else {
    // A block at a time, through a buffer that stays in L1, so that a row of
    // any width streams.
    constexpr std::int64_t block = 1024;
    alignas(64) Result rounded[block];
    for (std::int64_t begin = 0; begin < width; begin += block) {
      const std::int64_t count = width - begin < block ? width - begin : block;
      for (std::int64_t c = 0; c < count; ++c) rounded[c] = round_to<Result>(from[begin + c]);
      if (stream)
        stream_bytes(reinterpret_cast<std::byte*>(to + begin), reinterpret_cast<const std::byte*>(rounded),
                     count * static_cast<std::int64_t>(sizeof(Result)));
      else
        std::memcpy(to + begin, rounded, static_cast<std::size_t>(count) * sizeof(Result));
    }
  }
}

}  // namespace seqpool::detail::host
