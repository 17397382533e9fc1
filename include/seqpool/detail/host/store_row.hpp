// Storing finished result rows into the output, on the host: encoded as the
// output's element type, and past the caches when the results are large.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <seqpool/detail/host/prefetch.hpp>
#include <seqpool/detail/result_encoding.hpp>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define SEQPOOL_STREAMING_STORES 1
#endif

namespace seqpool::detail::host {

/// Whether an item finishes a result row in its scratch row and stores it from
/// there: every row other than float (a plan sends an item none wider than its
/// scratch row), and a float row when the results are streamed and it fits.
template <class Policy, class Result>
bool stored_from_scratch(bool stream, std::int64_t width) {
  return !std::is_same_v<Result, float> || (stream && width <= Policy::scratch_row_floats);
}

/// Copies one cache line to a line-aligned `to` with a non-temporal store where
/// the CPU has them (a plain copy elsewhere). A plain store first reads its line
/// for ownership, so results larger than the caches would cost twice their size
/// in traffic. No fence follows (it would stall the next stores): the pass ends
/// in OpenMP's join, whose locked instructions order these stores before it like
/// any other (Intel SDM vol. 3, "Memory ordering in P6 and more recent processor
/// families").
inline void stream_line(std::byte* __restrict__ to, const std::byte* __restrict__ from) {
#if defined(SEQPOOL_STREAMING_STORES) && defined(__AVX512F__)
  _mm512_stream_si512(reinterpret_cast<__m512i*>(to), _mm512_loadu_si512(from));
#elif defined(SEQPOOL_STREAMING_STORES) && defined(__AVX__)
  for (int half = 0; half < 64; half += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to + half),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + half)));
#elif defined(SEQPOOL_STREAMING_STORES)
  for (int quarter = 0; quarter < 64; quarter += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + quarter),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + quarter)));
#else
  std::memcpy(to, from, cache_line_bytes);
#endif
}

/// Stores a row an item finished in float to its place in the output, encoded
/// as the output's values are (rounded to nearest even where they are 16-bit,
/// quantized where they are int8 or uint8), and, when `stream`, a cache line at
/// a time past the caches (the partial lines at either end plainly). A line of
/// encoded values is made in a buffer the compiler keeps in vector registers
/// and stored from there. Packed sign bits, 8 columns a value, are stored a
/// value at a time.
template <class Result>
void store_row(Result* to, const float* from, std::int64_t width, bool stream,
               const result_encoding<Result>& encoding) {
  if constexpr (columns_per_value<Result> > 1) {
    constexpr int packed = columns_per_value<Result>;
    const std::int64_t whole = width / packed;
    for (std::int64_t v = 0; v < whole; ++v) to[v] = encoding.pack(from + v * packed, packed);
    if (whole * packed < width)
      to[whole] = encoding.pack(from + whole * packed, static_cast<int>(width - whole * packed));
  } else {
    constexpr std::int64_t line = cache_line_bytes / static_cast<std::int64_t>(sizeof(Result));
    std::int64_t c = 0;
    if (stream)
      for (; c < width && reinterpret_cast<std::uintptr_t>(to + c) % cache_line_bytes != 0; ++c)
        to[c] = encoding.encode(from[c], c);
    for (; c + line <= width; c += line) {
      alignas(64) Result encoded[line];
      for (std::int64_t k = 0; k < line; ++k) encoded[k] = encoding.encode(from[c + k], c + k);
      if (stream)
        stream_line(reinterpret_cast<std::byte*>(to + c), reinterpret_cast<const std::byte*>(encoded));
      else
        std::memcpy(to + c, encoded, sizeof encoded);
    }
    for (; c < width; ++c) to[c] = encoding.encode(from[c], c);
  }
}

}  // namespace seqpool::detail::host
