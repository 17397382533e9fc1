// Device kernels: rows read through registers, a stage of loads at a time.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/vector.hpp>

namespace seqpool::detail::device {

/// Reads rows [begin, end) through registers and takes each in order: a stage
/// of `Rows` rows is loaded (`load(row, vectors)`, `Vectors` 16-byte vectors a
/// row), then taken (`take(row, vectors)`); the rows past the last whole stage
/// one at a time. With one stage a thread has nothing in flight while it takes
/// a stage; with two (register double buffering) it issues the next stage's
/// loads before it takes the current one, so loads stay in flight across the
/// loop at twice the registers. Either way every row is taken once, in order.
template <int Rows, int Stages, int Vectors, class Load, class Take>
SEQPOOL_HOST_DEVICE void stream_rows(std::int64_t begin, std::int64_t end, Load&& load, Take&& take) {
  static_assert(Rows >= 1 && (Stages == 1 || Stages == 2), "one or two stages of at least one row");
  using stage = raw_vector[Rows][Vectors];
  const auto load_stage = [&](stage& into, std::int64_t first) {
    SEQPOOL_UNROLL
    for (int u = 0; u < Rows; ++u) load(first + u, into[u]);
  };
  const auto take_stage = [&](const stage& loaded, std::int64_t first) {
    SEQPOOL_UNROLL
    for (int u = 0; u < Rows; ++u) take(first + u, loaded[u]);
  };
  std::int64_t row = begin;
  const std::int64_t stages = (end - begin) / Rows;
  if constexpr (Stages == 1) {
    for (std::int64_t s = 0; s < stages; ++s, row += Rows) {
      stage loaded;
      load_stage(loaded, row);
      take_stage(loaded, row);
    }
  } else if (stages > 0) {
    // Two buffers named apart (an index into one array would put it in local
    // memory): each turn of the loop takes a stage from each. Zeroed, because a
    // compiler cannot see that `odd` is loaded before every take of it.
    stage even{};
    stage odd{};
    load_stage(even, row);
    for (std::int64_t s = 0;;) {
      if (s + 1 < stages) load_stage(odd, row + Rows);
      take_stage(even, row);
      row += Rows;
      if (++s == stages) break;
      if (s + 1 < stages) load_stage(even, row + Rows);
      take_stage(odd, row);
      row += Rows;
      if (++s == stages) break;
    }
  }
  for (; row < end; ++row) {
    raw_vector loaded[Vectors];
    load(row, loaded);
    take(row, loaded);
  }
}

}  // namespace seqpool::detail::device
