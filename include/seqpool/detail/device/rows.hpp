// A result row spread over the lanes of a warp, as a head's epilogue sees it.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/device/vector.hpp>
#include <seqpool/head/knobs.hpp>

namespace seqpool::detail::device {

/// The floats one lane holds of a row.
template <int Floats>
struct lane_fragment {
  float at[Floats];
};

/// How a warp's lanes hold a row, 32 × Floats columns (a strip) at a time, in
/// vectors of E: value `i` of lane `lane` in the strip from column `strip` is
/// column strip + ((i / E) × 32 + lane) × E + i % E, so the warp's k-th vectors
/// are 32 neighbouring vectors of the row, which a warp loads in whole lines.
template <int E, int Floats>
struct lane_layout {
  static constexpr int vectors = Floats / E;
  static constexpr std::int64_t strip_columns = warp_lanes * Floats;

  SEQPOOL_HOST_DEVICE static std::int64_t column(std::int64_t strip, int lane, int i) {
    return strip + (i / E * warp_lanes + lane) * E + i % E;
  }

  /// Stores a lane's values of one strip into the row at `out`, vector by vector.
  template <class Out>
  SEQPOOL_HOST_DEVICE static void store(Out* out, const lane_fragment<Floats>& mine, std::int64_t strip, int lane,
                                        std::int64_t width, bool aligned) {
    SEQPOOL_UNROLL
    for (int k = 0; k < vectors; ++k) {
      const std::int64_t first = column(strip, lane, k * E);
      if (first >= width) continue;
      store_values<E>(out + first, mine.at + k * E, width - first, aligned);
    }
  }
};

/// A row of up to one strip held in the registers of a warp's lanes, laid out
/// as lane_layout says. Offers what plain_row offers.
template <class Warp, int E, int Floats>
struct fragment_row {
  const Warp& warp;
  typename Warp::template values<lane_fragment<Floats>>& held;
  std::int64_t columns;

  SEQPOOL_HOST_DEVICE static std::int64_t column(int lane, int i) { return lane_layout<E, Floats>::column(0, lane, i); }

  SEQPOOL_HOST_DEVICE std::int64_t width() const { return columns; }

  template <class F>
  SEQPOOL_HOST_DEVICE void transform(F&& f) {
    warp.lanes([&](int lane) {
      lane_fragment<Floats>& mine = held[lane];
      for (int i = 0; i < Floats; ++i)
        if (column(lane, i) < columns) mine.at[i] = f(mine.at[i]);
    });
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float sum(F&& f) {
    return warp.sum([&](int lane) {
      const lane_fragment<Floats>& mine = held[lane];
      float total = 0.0f;
      for (int i = 0; i < Floats; ++i)
        if (column(lane, i) < columns) total += f(mine.at[i]);
      return total;
    });
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float max(F&& f) {
    return warp.max([&](int lane) {
      const lane_fragment<Floats>& mine = held[lane];
      float largest = -__builtin_huge_valf();
      for (int i = 0; i < Floats; ++i)
        if (column(lane, i) < columns) largest = fmaxf(largest, f(mine.at[i]));
      return largest;
    });
  }
};

/// A row in memory that one warp finishes, lane `lane` taking columns lane,
/// lane + 32, …: rows too wide for registers, and rows other blocks wrote.
template <class Warp>
struct memory_row {
  const Warp& warp;
  float* row;
  std::int64_t columns;

  SEQPOOL_HOST_DEVICE std::int64_t width() const { return columns; }

  template <class F>
  SEQPOOL_HOST_DEVICE void transform(F&& f) {
    warp.lanes([&](int lane) {
      for (std::int64_t c = lane; c < columns; c += warp_lanes) row[c] = f(read_fresh(row + c));
    });
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float sum(F&& f) {
    return warp.sum([&](int lane) {
      float total = 0.0f;
      for (std::int64_t c = lane; c < columns; c += warp_lanes) total += f(read_fresh(row + c));
      return total;
    });
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float max(F&& f) {
    return warp.max([&](int lane) {
      float largest = -__builtin_huge_valf();
      for (std::int64_t c = lane; c < columns; c += warp_lanes) largest = fmaxf(largest, f(read_fresh(row + c)));
      return largest;
    });
  }
};

/// Where a warp's result row goes and how: a strip at a time into `row` as the
/// lanes finish it, or, where the whole row is one strip and the head's epilogue
/// runs on it, held in the lanes' registers until the epilogue is done, then
/// stored once. A row of 16-bit results goes to `result` instead (a float row,
/// to the workspace or the state, still goes to `row`): it is always held,
/// since the plan sends a warp no wider one (launch_policy::held_row_floats),
/// and rounded as it is stored. One code path serves both, so that a kernel of
/// 16-bit results holds no more registers than one of float results.
template <class Warp, int E, int Floats, class Result = float>
struct warp_result {
  using layout = lane_layout<E, Floats>;

  float* row;
  Result* result;  ///< null unless 16-bit results go here; always null for float results
  std::int64_t width;
  bool has_epilogue;

  SEQPOOL_HOST_DEVICE bool rounds() const {
    if constexpr (std::is_same_v<Result, float>)
      return false;
    else
      return result != nullptr;
  }

  SEQPOOL_HOST_DEVICE bool in_registers() const {
    return rounds() || (has_epilogue && width <= layout::strip_columns);
  }

  /// A lane's part of the strip from column `strip`, once the lane has it.
  SEQPOOL_HOST_DEVICE void strip_done(const lane_fragment<Floats>& mine, std::int64_t strip, int lane) const {
    if (!in_registers()) layout::store(row, mine, strip, lane, width, is_aligned(row));
  }

  /// After the last strip: the head's epilogue, where there is one, and the row stored.
  template <class Head>
  SEQPOOL_HOST_DEVICE void finish(const Warp& warp, const Head& head, const request_knobs& knobs,
                                  typename Warp::template values<lane_fragment<Floats>>& held) const {
    if (in_registers()) {
      if (has_epilogue) {
        fragment_row<Warp, E, Floats> fragment{warp, held, width};
        head.epilogue(fragment, knobs);
      }
      warp.lanes([&](int lane) {
        if (rounds())
          layout::store(result, held[lane], 0, lane, width, is_aligned(result));
        else
          layout::store(row, held[lane], 0, lane, width, is_aligned(row));
      });
    } else if (has_epilogue) {
      warp.sync();  // the strips stored the row in another lane order
      memory_row<Warp> in_memory{warp, row, width};
      head.epilogue(in_memory, knobs);
    }
  }
};

/// A row of 16-bit results the warp finished in float in a draft row at `from`,
/// rounded into the output at `to`.
template <class Warp, class Result>
SEQPOOL_HOST_DEVICE void round_into(const Warp& warp, Result* to, const float* from, std::int64_t width) {
  warp.sync();  // the row was written in another lane order
  warp.lanes([&](int lane) {
    for (std::int64_t c = lane; c < width; c += warp_lanes) to[c] = round_to<Result>(read_fresh(from + c));
  });
}

}  // namespace seqpool::detail::device
