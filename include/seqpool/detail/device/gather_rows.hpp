// Device kernels, token methods: chosen rows and columns copied to the result or the state.
#pragma once

#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/rows.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/device/vector.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>

namespace seqpool::detail::device {

/// A block copies an even share of the returned rows (from its gather base to
/// the next): one thread walks the runs and hands each warp a row, a round at a
/// time; a warp copies a row, each lane a few runs of gather_run_elements elements of it
/// (16 bytes of float, 8 of a 16-bit type), loaded all at once, converted to
/// float and stored as 16-byte vectors where the destination is aligned: the
/// k-th store of a warp fills 512 neighbouring bytes, whole sectors. (Runs of 8
/// 16-bit elements would load in 16 bytes but store 32 a lane, every store
/// instruction half of each sector it touches, which doubles what L2 handles.)
/// A result row gets the head's epilogue while it is still in the lanes'
/// registers (rows of up to one strip) or from memory. Rows come from the
/// hidden states (through the request's column table when it has one) or from
/// the state, where an earlier chunk stashed them. 16-bit results are rounded as
/// the warp stores them from its registers, or, wider than a strip, encoded
/// from the draft row they were finished in, as quantized ones always are.
template <class Head, class T, class Result, class Policy>
struct gather_rows {
  static constexpr int threads = Policy::threads;
  static constexpr bool one_wave = true;
  static constexpr int elements = Policy::gather_run_elements;  ///< a lane's run: loaded at once, stored as one vector
  static constexpr int load_bytes = elements * static_cast<int>(sizeof(T));
  using layout = lane_layout<elements, Policy::lane_floats>;
  static constexpr int lane_runs = layout::vectors;
  using lane_row = lane_fragment<Policy::lane_floats>;

  struct shared_storage {
    row_copy rows[Policy::warps];  ///< a round's row for each warp
  };

  Head head;
  const T* hidden;
  std::int64_t row_stride;
  bool rows_aligned;
  const std::byte* image;
  Result* output;
  float* workspace;
  result_encoding<Result> encoding;

  template <class Block>
  SEQPOOL_HOST_DEVICE void operator()(const Block& block, std::int64_t index, shared_storage& shared) const {
    const image_header& header = *reinterpret_cast<const image_header*>(image);
    const gather_base* bases = first_records<gather_base>(image);  // their address needs no header field
    const gather_base base = bases[index];
    const std::int64_t rows = bases[index + 1].first - base.first;
    if (index + 1 >= static_cast<std::int64_t>(header.gather_bases.count)) return;
    gather_cursor cursor(header.gathers.in(image), header.masks.in(image), base);
    for (std::int64_t done = 0; done < rows; done += Policy::warps) {
      const std::int64_t round = rows - done < Policy::warps ? rows - done : Policy::warps;
      block.threads([&](int warp, int lane) {
        if (warp == 0 && lane == 0)
          for (int w = 0; w < round; ++w) shared.rows[w] = cursor.next();
      });
      block.sync();
      block.warps([&](const auto& warp) {
        if (warp.index < round) gather(warp, header, shared.rows[warp.index]);
      });
      block.sync();
    }
  }

 private:
  template <class Warp>
  SEQPOOL_HOST_DEVICE void gather(const Warp& warp, const image_header& header, const row_copy row) const {
    const request_record owner = requests_of(header, image)[row.request];
    const step_memory<Result> step{output, workspace, header.state_table.in(image), encoding};
    held_result<Result>* rounded = nullptr;
    if constexpr (!std::is_same_v<held_result<Result>, float>)
      if (owner.where == target::output) rounded = output + row.offset;
    float* out = step.at(owner.where, row.offset, row.detail);
    gather_into(
        warp, header, row, owner,
        warp_result<Warp, elements, Policy::lane_floats, Policy::warp_row_vectors_in_flight, held_result<Result>>{
            out, rounded, owner.width, (owner.flags & epilogue) != 0});
    if ((owner.flags & drafted) != 0)
      encode_into<Policy::warp_row_vectors_in_flight>(warp, output + encoded_offset<Result>(owner, row.offset), out,
                                                      owner.width, encoding);
  }

  template <class Warp, class Destination>
  SEQPOOL_HOST_DEVICE void gather_into(const Warp& warp, const image_header& header, const row_copy row,
                                       const request_record& owner, const Destination& result) const {
    const std::int64_t width = owner.width;
    const std::int32_t* chosen = owner.columns >= 0 ? header.column_table.in(image) + owner.columns : nullptr;
    typename Warp::template values<lane_row> held;
    for (std::int64_t strip = 0; strip < width; strip += layout::strip_columns) {
      warp.lanes([&](int lane) {
        lane_row& mine = held[lane];
        if (row.source < 0)
          load_stashed(header.state_table.in(image)[row.detail] + (-1 - row.source), strip, lane, width, mine);
        else
          load_hidden(hidden + row.source * row_stride, chosen, strip, lane, width, mine);
        result.strip_done(mine, strip, lane);
      });
    }
    result.finish(warp, head, owner.knobs, held);
  }

  /// A lane's columns of one strip of a row of hidden states (or of the columns
  /// the request chose from it).
  SEQPOOL_HOST_DEVICE void load_hidden(const T* source, const std::int32_t* chosen, std::int64_t strip, int lane,
                                       std::int64_t width, lane_row& mine) const {
    if (chosen != nullptr) {
      SEQPOOL_UNROLL
      for (int i = 0; i < Policy::lane_floats; ++i) {
        const std::int64_t column = layout::column(strip, lane, i);
        if (column < width) mine.at[i] = to_float(source[chosen[column]]);
      }
      return;
    }
    if (rows_aligned && layout::column(strip, lane, Policy::lane_floats - 1) < width) {
      raw_bytes<load_bytes> loaded[lane_runs];
      SEQPOOL_UNROLL
      for (int k = 0; k < lane_runs; ++k)
        loaded[k] = load_once<load_bytes>(source + layout::column(strip, lane, k * elements));
      SEQPOOL_UNROLL
      for (int k = 0; k < lane_runs; ++k) to_floats<T>(loaded[k], mine.at + k * elements);
      return;
    }
    SEQPOOL_UNROLL
    for (int k = 0; k < lane_runs; ++k) {
      const std::int64_t column = layout::column(strip, lane, k * elements);
      if (column >= width) continue;
      if (rows_aligned && width - column >= elements)
        to_floats<T>(load_once<load_bytes>(source + column), mine.at + k * elements);
      else
        load_columns<elements>(source, column, width - column, mine.at + k * elements);
    }
  }

  /// A lane's columns of one strip of a row an earlier chunk stashed, as floats.
  SEQPOOL_HOST_DEVICE static void load_stashed(const float* source, std::int64_t strip, int lane, std::int64_t width,
                                            lane_row& mine) {
    SEQPOOL_UNROLL
    for (int i = 0; i < Policy::lane_floats; ++i) {
      const std::int64_t column = layout::column(strip, lane, i);
      if (column < width) mine.at[i] = source[column];
    }
  }
};

}  // namespace seqpool::detail::device
