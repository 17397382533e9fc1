// Software prefetch and line-by-line loops of the host algorithms.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>

namespace seqpool::detail::host {

/// Bytes in a host cache line: the step of software prefetch, and the boundary
/// streaming stores start from.
inline constexpr std::int64_t cache_line_bytes = 64;

/// The cache a software prefetch fills: L2 unless what is asked for ahead fits
/// in a fraction of L1 beside what the loop is working on.
enum class prefetch_into { l1, l2 };

/// Asks the host's caches for the line at `address` ahead of its use. Hardware
/// prefetchers lose track of several row streams read in lockstep; a CPU thread
/// pooling rows says which lines come next. A hint only: an address past the
/// end of a buffer is never faulted on.
template <prefetch_into Cache = prefetch_into::l2>
inline void prefetch(const void* address) {
  __builtin_prefetch(address, 0, Cache == prefetch_into::l1 ? 3 : 2);
}

/// Asks for every line of the `width` elements at `row`, into L2.
template <class T>
void prefetch_row(const T* row, std::int64_t width) {
  for (std::int64_t element = 0; element < width; element += cache_line_bytes / sizeof(T)) prefetch(row + element);
}

/// Runs `body(c)` for the columns [begin, end) of rows of T, a cache line at a
/// time, calling `ask(line)` with each line's first column before it: a loop
/// over rows asks there for the same line of the rows it reads next. Whole lines
/// get a loop of constant length, which the compiler unrolls and vectorises.
template <class T, class Ask, class Body>
void by_lines(std::int64_t begin, std::int64_t end, const Ask& ask, const Body& body) {
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

}  // namespace seqpool::detail::host
