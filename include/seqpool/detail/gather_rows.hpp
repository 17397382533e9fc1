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

  SEQPOOL_HOST_DEVICE void operator()(std::int64_t item) const {
    const gather_record gather = gathers[item / items_per_row];
    const request_record owner = requests[gather.request];
    const column_range columns = columns_of<WholeRows>(item % items_per_row, owner.row_width);
    if (columns.begin == columns.end) return;
    float* out = memory.at(owner.where, gather.offset, gather.request);
    const T* ahead = row_ahead(item, gather, owner);

    if constexpr (WholeRows) {
      const bool through = (owner.flags & through_linear) != 0;
      if (through || (stream_results && owner.where == target::output && owner.row_width <= scratch_row_floats)) {
        alignas(64) float scratch[scratch_row_floats];
        copy_row(gather, owner, columns, scratch, ahead);
        if (through) {
          finish_through_linear(head, layer, scratch, out, owner);
          return;
        }
        if ((owner.flags & epilogue) != 0) head.finish_row(scratch, owner.row_width, owner.use_activation != 0);
        stream_row(out, scratch, owner.row_width);
        return;
      }
    }
    copy_row(gather, owner, columns, out, ahead);
    if constexpr (WholeRows)
      if ((owner.flags & epilogue) != 0) head.finish_row(out, owner.row_width, owner.use_activation != 0);
  }

 private:
  /// On whole rows, a row read whole asks for the row this thread gathers next,
  /// line by line as it is copied, wherever that row lies (every eighth for STEP,
  /// another request's in a mixed batch): ALL fp32 went from 18.3 to 14.1 ms and
  /// STEP fp32 from 2.45 to 2.0 against asking for the row two items on all at
  /// once, which also cost rows of 16 KiB 4 %. Null where there is none to ask for.
  SEQPOOL_HOST_DEVICE const T* row_ahead(std::int64_t item, gather_record gather, request_record owner) const {
    if (!WholeRows || item + 1 >= num_gathers || gather.source < 0 || owner.columns >= 0) return nullptr;
    const gather_record after = gathers[item + 1];
    if (after.source < 0 || requests[after.request].columns >= 0) return nullptr;
    return hidden + after.source * row_stride;
  }

  /// Copies the gathered row's `columns` to `out`, asking for the same lines of
  /// the row at `ahead`, when given, as it goes.
  SEQPOOL_HOST_DEVICE void copy_row(gather_record gather, request_record owner, column_range columns,
                                    float* __restrict__ out, const T* ahead) const {
    if (gather.source < 0) {
      const float* __restrict__ kept = memory.state[gather.request] + (-1 - gather.source);
      for (std::int64_t c = columns.begin; c < columns.end; ++c) out[c] = kept[c];
    } else if (owner.columns < 0) {
      const T* __restrict__ row = hidden + gather.source * row_stride;
      by_lines<T>(
          columns.begin, columns.end,
          [&](std::int64_t line) {
            if (ahead != nullptr) prefetch(ahead + line);
          },
          [&](std::int64_t c) { out[c] = to_float(row[c]); });
    } else {
      const T* row = hidden + gather.source * row_stride;
      const std::int32_t* chosen = column_table + owner.columns;
      for (std::int64_t c = columns.begin; c < columns.end; ++c) out[c] = to_float(row[chosen[c]]);
    }
  }
};

}  // namespace seqpool::detail
