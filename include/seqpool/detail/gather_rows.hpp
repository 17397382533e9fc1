// Token methods: copy chosen rows and columns to the result or the state.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/apply_linear.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/stream_row.hpp>
#include <seqpool/detail/to_float.hpp>

namespace seqpool::detail {

/// One item copies one row (all its columns, or one column) from the step's hidden
/// states through the request's column table, or from rows an earlier chunk left
/// in the state (which hold the chosen columns already), converting to float. On
/// whole rows a result row gets the head's epilogue in the same item, after its
/// linear layer when flagged, and, when the pooler's results are streamed, is
/// assembled in scratch and streamed out.
template <class Head, class T, bool WholeRows>
struct gather_rows {
  Head head;
  linear_layer layer;
  const T* hidden;
  std::int64_t row_stride;
  const gather_record* gathers;
  const request_record* requests;
  const std::int32_t* column_table;
  step_memory memory;
  std::int64_t items_per_row;
  std::int64_t num_gathers;
  bool stream_results;

  static constexpr std::int64_t prefetched_row_elements = 4096 / sizeof(T);

  SEQPOOL_HOST_DEVICE void operator()(std::int64_t item) const {
    const gather_record gather = gathers[item / items_per_row];
    const request_record owner = requests[gather.request];
    const column_range columns = columns_of<WholeRows>(item % items_per_row, owner.row_width);
    if (columns.begin == columns.end) return;
    float* out = memory.at(owner.where, gather.offset, gather.request);

    if constexpr (WholeRows) {
      // Ask now for the row this thread gathers two items on, when it is read
      // whole and short: the hardware prefetcher alone left ALL at 0.82 of the
      // read ceiling with 4 KiB rows, and with this it reaches 0.93 (bf16 ALL
      // 12.8 -> 10.8 ms). Rows of 16 KiB lost 4 % to it: they train the hardware.
      if (item + 2 < num_gathers) {
        const gather_record later = gathers[item + 2];
        const request_record later_owner = requests[later.request];
        if (later.source >= 0 && later_owner.columns < 0 && later_owner.row_width <= prefetched_row_elements)
          prefetch_row(hidden + later.source * row_stride, later_owner.row_width);
      }
      const bool through = (owner.flags & through_linear) != 0;
      if (through || (stream_results && owner.where == target::output && owner.row_width <= scratch_row_floats)) {
        alignas(64) float scratch[scratch_row_floats];
        copy_row(gather, owner, columns, scratch);
        if (through) {
          finish_through_linear(head, layer, scratch, out, owner);
          return;
        }
        if ((owner.flags & epilogue) != 0) head.finish_row(scratch, owner.row_width, owner.use_activation != 0);
        stream_row(out, scratch, owner.row_width);
        return;
      }
    }
    copy_row(gather, owner, columns, out);
    if constexpr (WholeRows)
      if ((owner.flags & epilogue) != 0) head.finish_row(out, owner.row_width, owner.use_activation != 0);
  }

 private:
  SEQPOOL_HOST_DEVICE void copy_row(gather_record gather, request_record owner, column_range columns,
                                    float* __restrict__ out) const {
    if (gather.source < 0) {
      const float* __restrict__ kept = memory.state[gather.request] + (-1 - gather.source);
      for (std::int64_t c = columns.begin; c < columns.end; ++c) out[c] = kept[c];
    } else if (owner.columns < 0) {
      const T* __restrict__ row = hidden + gather.source * row_stride;
      for (std::int64_t c = columns.begin; c < columns.end; ++c) out[c] = to_float(row[c]);
    } else {
      const T* row = hidden + gather.source * row_stride;
      const std::int32_t* chosen = column_table + owner.columns;
      for (std::int64_t c = columns.begin; c < columns.end; ++c) out[c] = to_float(row[chosen[c]]);
    }
  }
};

}  // namespace seqpool::detail
