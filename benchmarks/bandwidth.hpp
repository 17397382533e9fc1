// What the ceilings every figure is compared with are made of, on host memory:
// streaming reads and writes by all OpenMP threads, a cache flush, and timing
// that interleaves them with the case they are set against.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <unistd.h>

#include <seqpool/detail/host/store_row.hpp>

namespace bench {

/// Seconds of one call of `work` on the host clock.
struct host_clock {
  template <class Work>
  double operator()(Work&& work) const {
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

/// Seconds of one call of `work` on the host clock, until `space` has done all it
/// queued: what a caller waits for a step, as the PyTorch baseline is timed.
template <class Space>
struct synced_clock {
  Space* space;
  template <class Work>
  double operator()(Work& work) const {
    return host_clock{}([&] {
      work();
      space->synchronize();
    });
  }
};

/// Median seconds of each of `works`, called in turn `repeats` times after one
/// untimed round, every call preceded by an untimed `settle()` and timed by
/// `clock`. Interleaved, the works see the machine alike, so their ratios hold
/// while its speed drifts.
template <class Clock, class Settle, class... Works>
std::array<double, sizeof...(Works)> interleaved_medians(int repeats, const Clock& clock, Settle&& settle,
                                                         Works&&... works) {
  std::array<std::vector<double>, sizeof...(Works)> seconds;
  for (int round = -1; round < repeats; ++round) {
    std::size_t index = 0;
    const auto time = [&](auto& work) {
      settle();
      const double elapsed = clock(work);
      if (round >= 0) seconds[index].push_back(elapsed);
      ++index;
    };
    (time(works), ...);
  }
  std::array<double, sizeof...(Works)> medians{};
  for (std::size_t w = 0; w < seconds.size(); ++w) {
    std::nth_element(seconds[w].begin(), seconds[w].begin() + repeats / 2, seconds[w].end());
    medians[w] = seconds[w][repeats / 2];
  }
  return medians;
}

/// Median seconds of `repeats` calls of `work` on the host clock, after one untimed call.
template <class Work>
double median_seconds(int repeats, Work&& work) {
  return interleaved_medians(
      repeats, host_clock{}, [] {}, work)[0];
}

/// Reads every byte of `bytes` with all OpenMP threads, 64 independent lanes per
/// thread so that the loop is limited by memory, not by an addition chain.
inline std::uint64_t stream_read(const std::byte* data, std::size_t bytes) {
  const std::size_t words = bytes / sizeof(std::uint64_t);
  const auto* values = reinterpret_cast<const std::uint64_t*>(data);
  std::uint64_t total = 0;
#pragma omp parallel reduction(^ : total)
  {
    std::uint64_t lanes[8] = {};
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < words / 8 * 8; i += 8)
      for (int lane = 0; lane < 8; ++lane) lanes[lane] ^= values[i + lane];
    for (const std::uint64_t lane : lanes) total ^= lane;
  }
  return total;
}

/// Reads a buffer twice the size of the last-level cache, so that the call timed
/// next finds its data in memory: every ceiling and every case then measures
/// memory, whatever the size of its input and whatever the previous call left
/// in cache (a 128 MB input half-cached in a shared 260 MB L3 made the same
/// ceiling read anywhere from 25 to 58 GB/s).
inline void evict_host_caches() {
  static const std::vector<std::byte> flush = [] {
    const long last_level = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return std::vector<std::byte>(2 * static_cast<std::size_t>(last_level > 0 ? last_level : 256l << 20));
  }();
  static volatile std::uint64_t sink = 0;
  sink = sink ^ stream_read(flush.data(), flush.size());
}

/// Writes every byte of `bytes` at `data` with all OpenMP threads, a row at a
/// time through the stores seqpool writes large results with (past the caches).
inline void stream_write(std::byte* data, std::size_t bytes) {
  constexpr std::size_t row_floats = 1024;
  alignas(64) static const float row[row_floats] = {};
  const std::size_t floats = bytes / sizeof(float);
  auto* values = reinterpret_cast<float*>(data);
#pragma omp parallel for schedule(static)
  for (std::size_t begin = 0; begin < floats; begin += row_floats)
    seqpool::detail::host::store_row(values + begin, row,
                                     static_cast<std::int64_t>(std::min(row_floats, floats - begin)), true,
                                     seqpool::detail::result_encoding<float>{});
}

}  // namespace bench
