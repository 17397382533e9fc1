// A result row spread over the lanes of a warp, or in memory that a warp or a
// block finishes, as a head's epilogue sees it.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/device/vector.hpp>
#include <seqpool/detail/result_encoding.hpp>
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

  SEQPOOL_HOST_DEVICE void scale(float factor) {
    transform([factor](float x) { return x * factor; });
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

/// Calls visit(value, column) on each column of the float row at `row` that
/// thread `thread` of `Threads` takes, writing the value back where `Writes`.
/// Where the row starts on a 16-byte boundary the thread takes its vectors
/// thread, thread + Threads, …, `InFlight` loads issued before it visits the
/// first, then the columns past the last whole vector one at a time; otherwise
/// every Threads-th column. The row's values were written by other blocks
/// before they arrived: every load reads them past the SM's own L1.
template <int Threads, int InFlight, bool Writes, class Float, class Visit>
SEQPOOL_HOST_DEVICE void visit_columns(Float* row, std::int64_t columns, int thread, Visit&& visit) {
  constexpr int floats = vector_bytes / static_cast<int>(sizeof(float));
  std::int64_t loose = 0;  // the first column past the whole vectors
  if (is_aligned(row)) {
    const std::int64_t vectors = columns / floats;
    for (std::int64_t v = thread; v < vectors; v += InFlight * Threads) {
      float values[InFlight][floats];
      SEQPOOL_UNROLL
      for (int u = 0; u < InFlight; ++u)
        if (v + u * Threads < vectors) to_floats<float>(load_fresh(row + (v + u * Threads) * floats), values[u]);
      SEQPOOL_UNROLL
      for (int u = 0; u < InFlight; ++u) {
        if (v + u * Threads >= vectors) continue;
        const std::int64_t first = (v + u * Threads) * floats;
        SEQPOOL_UNROLL
        for (int e = 0; e < floats; ++e) visit(values[u][e], first + e);
        if constexpr (Writes) store_values<floats>(row + first, values[u], floats, true);
      }
    }
    loose = vectors * floats;
  }
  for (std::int64_t c = loose + thread; c < columns; c += Threads) {
    float value = read_fresh(row + c);
    visit(value, c);
    if constexpr (Writes) row[c] = value;
  }
}

/// Encodes the columns of the float row at `from` that thread `thread` of
/// `Threads` takes into the output's values at `to`: column by column where a
/// value holds one (as visit_columns gives them), else each Threads-th value,
/// its columns read past the SM's L1.
template <int Threads, int InFlight, class Result>
SEQPOOL_HOST_DEVICE void encode_columns(Result* to, const float* from, std::int64_t columns, int thread,
                                        const result_encoding<Result>& encoding) {
  constexpr int packed = columns_per_value<Result>;
  if constexpr (packed == 1) {
    visit_columns<Threads, InFlight, false>(from, columns, thread, [&](const float& value, std::int64_t column) {
      to[column] = encoding.encode(value, column);
    });
  } else {
    for (std::int64_t v = thread; v < values_of<Result>(columns); v += Threads) {
      const std::int64_t first = v * packed;
      const int count = columns - first < packed ? static_cast<int>(columns - first) : packed;
      float values[packed];
      SEQPOOL_UNROLL
      for (int e = 0; e < packed; ++e) values[e] = e < count ? read_fresh(from + first + e) : 0.0f;
      to[v] = encoding.pack(values, count);
    }
  }
}

/// A row in memory that one warp finishes, each lane taking the columns
/// visit_columns gives it: rows too wide for registers, and rows other warps
/// or blocks wrote.
template <class Warp, int InFlight>
struct memory_row {
  const Warp& warp;
  float* row;
  std::int64_t columns;

  SEQPOOL_HOST_DEVICE std::int64_t width() const { return columns; }

  template <class F>
  SEQPOOL_HOST_DEVICE void transform(F&& f) {
    warp.lanes([&](int lane) {
      visit_columns<warp_lanes, InFlight, true>(row, columns, lane, [&](float& value, std::int64_t) { value = f(value); });
    });
  }

  SEQPOOL_HOST_DEVICE void scale(float factor) {
    transform([factor](float x) { return x * factor; });
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float sum(F&& f) {
    return warp.sum([&](int lane) {
      float total = 0.0f;
      visit_columns<warp_lanes, InFlight, false>(row, columns, lane,
                                                 [&](float& value, std::int64_t) { total += f(value); });
      return total;
    });
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float max(F&& f) {
    return warp.max([&](int lane) {
      float largest = -__builtin_huge_valf();
      visit_columns<warp_lanes, InFlight, false>(row, columns, lane,
                                                 [&](float& value, std::int64_t) { largest = fmaxf(largest, f(value)); });
      return largest;
    });
  }
};

/// A row in memory that a whole block finishes, each thread taking the columns
/// visit_columns gives it, sums and maxima over the block in a fixed order:
/// the rows of split requests, which the last block to arrive finishes in a
/// few round trips to memory however wide they are. A thread transforms only
/// the columns it reads, so its next reduction needs no barrier before it.
template <class Block, int Threads, int InFlight>
struct block_memory_row {
  const Block& block;
  float* row;
  std::int64_t columns;

  SEQPOOL_HOST_DEVICE std::int64_t width() const { return columns; }

  template <class F>
  SEQPOOL_HOST_DEVICE void transform(F&& f) {
    block.threads([&](int warp, int lane) {
      visit_columns<Threads, InFlight, true>(row, columns, warp * warp_lanes + lane,
                                             [&](float& value, std::int64_t) { value = f(value); });
    });
  }

  SEQPOOL_HOST_DEVICE void scale(float factor) {
    transform([factor](float x) { return x * factor; });
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float sum(F&& f) {
    return block.sum([&](int warp, int lane) {
      float total = 0.0f;
      visit_columns<Threads, InFlight, false>(row, columns, warp * warp_lanes + lane,
                                              [&](float& value, std::int64_t) { total += f(value); });
      return total;
    });
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float max(F&& f) {
    return block.max([&](int warp, int lane) {
      float largest = -__builtin_huge_valf();
      visit_columns<Threads, InFlight, false>(row, columns, warp * warp_lanes + lane,
                                              [&](float& value, std::int64_t) { largest = fmaxf(largest, f(value)); });
      return largest;
    });
  }

  /// Encodes the row, finished in float, into the output's values at `to`:
  /// column by column, each thread the columns it finished; packed sign bits,
  /// whose values span the columns of several threads, after a barrier.
  template <class Result>
  SEQPOOL_HOST_DEVICE void encode_into(Result* to, const result_encoding<Result>& encoding) const {
    if constexpr (columns_per_value<Result> > 1) block.sync();
    block.threads([&](int warp, int lane) {
      encode_columns<Threads, InFlight>(to, row, columns, warp * warp_lanes + lane, encoding);
    });
  }
};

/// The results a warp rounds from its registers as it stores them: float and
/// 16-bit ones. Quantized rows are always drafted (the plan sends none to the
/// output directly), so their kernels' warps store only float rows.
template <class Result>
using held_result = std::conditional_t<quantized_element<Result>, float, Result>;

/// Where a warp's result row goes and how: a strip at a time into `row` as the
/// lanes finish it, or, where the whole row is one strip and the head's epilogue
/// runs on it, held in the lanes' registers until the epilogue is done, then
/// stored once. A row of 16-bit results goes to `result` instead (a float row,
/// to the workspace or the state, still goes to `row`): it is always held,
/// since the plan sends a warp no wider one (launch_policy::held_row_floats),
/// and rounded as it is stored. One code path serves both, so that a kernel of
/// 16-bit results holds no more registers than one of float results.
template <class Warp, int E, int Floats, int InFlight, class Result = float>
struct warp_result {
  static_assert(!quantized_element<Result>, "quantized rows are drafted: a warp holds them as floats");

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
      memory_row<Warp, InFlight> in_memory{warp, row, width};
      head.epilogue(in_memory, knobs);
    }
  }
};

/// A row the warp finished in float in a draft row at `from`, encoded into
/// the output's values at `to`.
template <int InFlight, class Warp, class Result>
SEQPOOL_HOST_DEVICE void encode_into(const Warp& warp, Result* to, const float* from, std::int64_t width,
                                     const result_encoding<Result>& encoding) {
  warp.sync();  // the row was written in another lane order
  warp.lanes([&](int lane) { encode_columns<warp_lanes, InFlight>(to, from, width, lane, encoding); });
}

}  // namespace seqpool::detail::device
