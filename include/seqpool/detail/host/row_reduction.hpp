// Host algorithms: a method's reduction of a tile's rows, which every head's
// pass over tiles shares.
#pragma once

#include <algorithm>
#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/host/prefetch.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/to_float.hpp>
#include <seqpool/method/concepts.hpp>

namespace seqpool::detail::host {

/// Columns [begin, end) of a row.
struct column_range {
  std::int64_t begin;
  std::int64_t end;
};

/// Reduces the rows of a tile into a row of floats, by a method over hidden
/// states of type T. It knows no head and no result type, so that the pass of
/// every head and result over the same method and rows compiles it once.
/// A concat's reduction takes each value it reads into each mode's columns of
/// the row, but a mode that keeps one row (rows_read_of) takes only that.
template <class Method, class T, class Policy>
struct row_reduction {
  Method method;
  const T* hidden;
  std::int64_t row_stride;

  static constexpr std::int64_t line_elements = cache_line_bytes / sizeof(T);
  static constexpr int modes = modes_of<Method>;

  /// The tile's rows reduced into the `width` columns of `out` from `init` or
  /// identity(); a tile of no rows (a request that finishes from its state
  /// alone, CLS after its first chunk) is `init` itself.
  void reduce(tile_record tile, std::int64_t first_position, std::int64_t width, const tile_record* next,
              const float* init, const T* first_row, float* out) const {
    if (tile.rows > 0) {
      sweep(tile, first_position, next, {tile.width, width}, init, first_row, out);
      return;
    }
    for_mode_columns<modes>(tile.width, width, [&]<int S>(std::int64_t begin, std::int64_t end) {
      with_mode_of<S>(method, [&](const auto& reducing) {
        for (std::int64_t c = begin; c < end; ++c) out[c] = init != nullptr ? init[c] : reducing.identity();
      });
    });
  }

 private:
  /// Lines a sweep asks for ahead of its rows: `width` elements from `first`.
  struct lines_ahead {
    const T* first = nullptr;
    std::int64_t width = 0;

    /// Asks for the line at `offset` elements from `first`, when it is one of these.
    template <prefetch_into Cache = prefetch_into::l2>
    void ask(std::int64_t offset) const {
      if (offset < width) prefetch<Cache>(first + offset);
    }
  };

  /// Columns of the row a tile reduces: `loaded` read of each row, which every
  /// mode takes; `width` in the pooled row, its modes' side by side.
  struct row_columns {
    std::int64_t loaded;
    std::int64_t width;

    /// The loaded columns mode S keeps: all of them, but in a row cut short.
    template <int S>
    std::int64_t kept() const {
      if constexpr (S == 0)
        return loaded;
      else
        return std::clamp<std::int64_t>(width - S * loaded, 0, loaded);
    }
  };

  /// Which of a tile's rows a call of each_mode() takes: its first, which every
  /// mode takes; the rows after it, which a mode that reads only a window's
  /// first or last row (rows_read) skips; or, for a mode that reads only the
  /// last, the tile's last row once those are done.
  enum class rows_taken { first, later, last };

  /// Whether a mode that reads `reads` takes the rows a call for `Rows` covers.
  template <rows_taken Rows>
  static constexpr bool takes(rows_read reads) {
    if constexpr (Rows == rows_taken::first)
      return true;
    else if constexpr (Rows == rows_taken::later)
      return reads == rows_read::every;
    else
      return reads == rows_read::last;
  }

  /// Calls body(reducing, c, at) for each column c of `range` that a mode keeps,
  /// a mode at a time, for each mode that takes the tile's `Rows`, with the
  /// mode's method and the column's place `at` in the pooled row: by_lines,
  /// asking for lines (`ask`) in the first such mode's pass; the later modes'
  /// passes find the sweep's rows in L1 and L2. A mode at a time, each pass is
  /// one method's loop, which vectorises as a single method's does (a mode
  /// chosen at run time visited once for it, not at every value); a mode at a
  /// time a line instead is slower (PERFORMANCE.md).
  template <rows_taken Rows = rows_taken::first, class Ask, class Body>
  void each_mode(const row_columns& columns, column_range range, const Ask& ask, const Body& body) const {
    bool asked = false;
    for_modes<modes>([&]<int S>() {
      const std::int64_t end = std::min(range.end, columns.template kept<S>());
      if (range.begin >= end) return;
      with_mode_of<S>(method, [&](const auto& reducing) {
        if constexpr (takes<Rows>(rows_read_of<std::remove_cvref_t<decltype(reducing)>>)) {
          const bool asks = !asked;
          asked = true;
          by_lines<T>(
              range.begin, end,
              [&](std::int64_t line) {
                if (asks) ask(line);
              },
              [&](std::int64_t c) { body(reducing, c, c + S * columns.loaded); });
        }
      });
    });
  }

  /// each_mode() that asks for no lines.
  template <rows_taken Rows = rows_taken::first, class Body>
  void each_mode(const row_columns& columns, column_range range, const Body& body) const {
    each_mode<Rows>(
        columns, range, [](std::int64_t) {}, body);
  }

  /// Reduces the tile's rows into `out`, starting from `init` or identity(), a
  /// sweep of columns at a time. A sweep covers up to Policy::sweep_bytes of each
  /// row, so that the four rows asked for ahead fit in a third of L1 beside the
  /// result's columns and go there: sums whose rows are already in L1 leave the
  /// core's scheduler free to wait on more misses, where whole 8 KiB rows asked
  /// for into L1 would push the result row out of it. Sweeps share a row evenly,
  /// in whole lines, leaving no sliver.
  void sweep(tile_record tile, std::int64_t first_position, const tile_record* next, row_columns columns,
             const float* init, const T* first_row, float* out) const {
    const std::int64_t width = columns.loaded;
    const std::int64_t row_bytes = width * static_cast<std::int64_t>(sizeof(T));
    const std::int64_t num_sweeps = (row_bytes + Policy::sweep_bytes - 1) / Policy::sweep_bytes;
    const std::int64_t sweep_lines = ((width + num_sweeps - 1) / num_sweeps + line_elements - 1) / line_elements;
    const std::int64_t sweep_width = sweep_lines * line_elements;
    for (std::int64_t begin = 0; begin < width; begin += sweep_width) {
      const std::int64_t end = begin + sweep_width < width ? begin + sweep_width : width;
      sweep_columns(tile, first_position, columns, next, {begin, end}, init, first_row, out);
    }
  }

  /// Reduces the tile's rows, the first at prompt position `first_position`,
  /// over the columns of `sweep`.
  void sweep_columns(tile_record tile, std::int64_t first_position, row_columns columns, const tile_record* next,
                     column_range sweep, const float* init, const T* first_row, float* out) const {
    const std::int64_t width = columns.loaded;
    // Rows outer, columns inner: the result's columns stay in cache and the
    // inner loop vectorises. Four rows at a time load and store them a quarter
    // as often, and still accumulate in row order.
    start_sweep(tile, first_position, columns, next, sweep, init, first_row, out);
    std::int32_t r = 1;
    for (; r + 4 <= tile.rows; r += 4) {
      const std::int64_t position = first_position + r;
      const T* __restrict__ row0 = first_row + r * row_stride;
      const T* __restrict__ row1 = row0 + row_stride;
      const T* __restrict__ row2 = row1 + row_stride;
      const T* __restrict__ row3 = row2 + row_stride;
      // A cache line of columns at a time, asking for the same line of the four
      // rows after these while it is summed.
      lines_ahead ahead[4];
      for (int k = 0; k < 4; ++k) ahead[k] = ahead_of(tile, width, next, sweep, r + 4 + k);
      each_mode<rows_taken::later>(
          columns, sweep,
          [&](std::int64_t line) {
            for (const lines_ahead& later : ahead) later.template ask<prefetch_into::l1>(line - sweep.begin);
          },
          [&](const auto& reducing, std::int64_t c, std::int64_t at) {
            float value = accumulate_at(reducing, out[at], to_float(row0[c]), position);
            value = accumulate_at(reducing, value, to_float(row1[c]), position + 1);
            value = accumulate_at(reducing, value, to_float(row2[c]), position + 2);
            out[at] = accumulate_at(reducing, value, to_float(row3[c]), position + 3);
          });
    }
    // The rows left over ask for the rows four on, as the sweeps did, all at once.
    for (std::int32_t left = r; left < tile.rows; ++left) {
      const lines_ahead later = ahead_of(tile, width, next, sweep, left + 4);
      prefetch_row(later.first, later.width);
    }
    for (; r < tile.rows; ++r) {
      const T* __restrict__ row = first_row + r * row_stride;
      each_mode<rows_taken::later>(columns, sweep, [&](const auto& reducing, std::int64_t c, std::int64_t at) {
        out[at] = accumulate_at(reducing, out[at], to_float(row[c]), first_position + r);
      });
    }
    if (tile.rows > 1) {
      const std::int32_t last = tile.rows - 1;
      const T* __restrict__ row = first_row + last * row_stride;
      each_mode<rows_taken::last>(columns, sweep, [&](const auto& reducing, std::int64_t c, std::int64_t at) {
        out[at] = accumulate_at(reducing, out[at], to_float(row[c]), first_position + last);
      });
    }
  }

  /// Starts the sweep's columns from the tile's first row (every tile has one) and
  /// `init` or identity(). A tile of one row (CLS, LAST) asks meanwhile for the
  /// same lines of the row its thread reduces next, which the hardware cannot
  /// guess, a line for each line it converts rather than all at once as the item
  /// starts, which would fill the line-fill buffers.
  void start_sweep(tile_record tile, std::int64_t first_position, row_columns columns, const tile_record* next,
                   column_range sweep, const float* init, const T* first_row, float* out) const {
    const T* __restrict__ first = first_row;
    if (tile.rows == 1) {
      const lines_ahead later = ahead_of(tile, columns.loaded, next, sweep, 1);
      each_mode(
          columns, sweep, [&](std::int64_t line) { later.ask(line - sweep.begin); },
          [&](const auto& reducing, std::int64_t c, std::int64_t at) {
            out[at] = accumulate_at(reducing, init != nullptr ? init[at] : reducing.identity(), to_float(first[c]),
                                    first_position);
          });
    } else if (init != nullptr) {
      each_mode(columns, sweep, [&](const auto& reducing, std::int64_t c, std::int64_t at) {
        out[at] = accumulate_at(reducing, init[at], to_float(first[c]), first_position);
      });
    } else {
      each_mode(columns, sweep, [&](const auto& reducing, std::int64_t c, std::int64_t at) {
        out[at] = accumulate_at(reducing, reducing.identity(), to_float(first[c]), first_position);
      });
    }
  }

  /// The lines a sweep asks for ahead of row `row`, counted from the tile's
  /// first: the row's own columns; past the tile's last row, its first rows
  /// again at the next sweep's columns; past the last sweep, the next tile's rows at
  /// their first columns, which need not follow in memory (a mixed batch puts
  /// other tasks' rows between); past those, none.
  lines_ahead ahead_of(tile_record tile, std::int64_t width, const tile_record* next, column_range sweep,
                       std::int32_t row) const {
    const std::int64_t sweep_width = sweep.end - sweep.begin;
    if (row < tile.rows) return {hidden + (tile.row_begin + row) * row_stride + sweep.begin, sweep_width};
    row -= tile.rows;
    if (sweep.end < width) {
      if (row >= tile.rows) return {};
      const std::int64_t next_width = width - sweep.end;
      return {hidden + (tile.row_begin + row) * row_stride + sweep.end,
              next_width < sweep_width ? next_width : sweep_width};
    }
    if (next == nullptr || row >= next->rows) return {};
    const std::int64_t next_width = next->width;
    return {hidden + (next->row_begin + row) * row_stride, next_width < sweep_width ? next_width : sweep_width};
  }
};

}  // namespace seqpool::detail::host
