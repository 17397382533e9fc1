// The records a step's image holds, shared by the host algorithms and the device
// kernels, and how both find their memory from them.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/result_encoding.hpp>
#include <seqpool/head/knobs.hpp>

namespace seqpool::detail {

/// The most of anything a record counts or indexes, in 32 bits: a step's rows,
/// the rows a token method's request returns over its prompt, a row's columns,
/// a share's spans, listed rows, tiles, runs and arrival counters (offsets
/// into memory are 64-bit).
inline constexpr std::int64_t most_counted = std::numeric_limits<std::int32_t>::max();

/// Which memory a record's offset counts into.
enum class target : std::uint8_t { output, workspace, state };

/// Request flags.
inline constexpr std::uint8_t from_state = 1;  ///< start from the request's state instead of identity()
inline constexpr std::uint8_t finish = 2;      ///< the request finishes here: apply the method's finish()
inline constexpr std::uint8_t epilogue = 4;    ///< and the head's row epilogue, in the same launch
/// Host only: the finished row is pooled in a scratch row and passed through the
/// head's linear layer and epilogue by the item that pooled it; the request's
/// offset is its result's.
inline constexpr std::uint8_t through_linear = 8;
/// 16-bit and quantized results: the request's rows are finished in float in a
/// draft row of the workspace (at its offset), and the kernel that finishes a
/// row encodes it into the output (at its result offset). Rows a kernel cannot
/// hold whole through the head's epilogue are drafted, and on the device every
/// quantized row.
inline constexpr std::uint8_t drafted = 16;

/// The step's memory as the kernels see it, its results of type Result.
template <class Result>
struct step_memory {
  Result* output;
  float* workspace;
  float* const* state;               ///< the state table: a state per detail record, at its index (null where none)
  result_encoding<Result> encoding;  ///< how a row finished in float is stored

  /// The float row a record's offset names. A plan for results other than
  /// float sends no row to the output that a kernel finishes in memory (those
  /// are drafted), so for them the output has no float row: null.
  SEQPOOL_HOST_DEVICE float* at(target where, std::int64_t offset, std::int32_t state_index) const {
    if (where == target::output) {
      if constexpr (std::is_same_v<Result, float>)
        return output + offset;
      else
        return nullptr;
    }
    if (where == target::workspace) return workspace + offset;
    return state[state_index] + offset;
  }
};

/// The memory a share's launches read and write besides the hidden states and
/// the image: the step's whole output, of which the share writes
/// `output_values` values, and the pooler's workspace and arrival counters; and
/// how the output's values are encoded.
template <class Result>
struct launch_buffers {
  Result* output;
  std::int64_t output_values;
  float* workspace;
  int* arrivals;
  result_encoding<Result> encoding;
};

/// Per request of the plan (per span of a request that has spans), in full:
/// what planning writes and what the kernels read. The image holds each as a
/// request_entry (request_table). Offsets in `where` count its elements:
/// Result values in the output, floats in the workspace and the state.
struct request_record {
  std::int64_t prompt_len;
  std::int64_t position_offset;  ///< sequence methods: a row's prompt position is its hidden row plus this
  std::int64_t offset;           ///< where its pooled row, or its first gathered row, goes in `where`
  std::int64_t partials;         ///< sequence methods, several tiles: workspace float offset of a partial row per tile
  std::int64_t columns;          ///< token methods: first entry in the column table, -1 for all columns
  std::int64_t result;           ///< drafted: the output value offset its rows are encoded into
  std::int32_t width;            ///< columns pooled, or columns each gathered row receives
  std::int32_t linear_width;     ///< through_linear: the layer's leading outputs kept
  std::int32_t num_tiles;
  std::int32_t arrivals;  ///< device kernels, split requests: the first of its arrival counters
  target where;
  std::uint8_t flags;
  request_knobs knobs;  ///< what the head's epilogue is told about the request

  bool operator==(const request_record&) const = default;
};

/// A request record as the image holds it, in 28 bytes: the fields that
/// differ from request to request of a batch, over the share's common record;
/// or, for a record that differs from the common one in more (a chunked
/// request's, whose state its detail's entry of the state table holds; a split
/// one's; a drafted one's; a width or knob of its own; a field past 32 bits),
/// the index of its detail, the record in full. Its first three fields are
/// what a device warp that pools the request whole reads its rows by, without
/// a tile record; the host reads tiles, and leaves its rows 0.
struct request_entry {
  std::int32_t row_begin;  ///< device, a request a warp pools whole: the first hidden row it reads
  std::int32_t rows;       ///< and how many
  std::int32_t width;      ///< its record's
  std::int32_t prompt_len;
  std::int32_t position_offset;
  std::int32_t offset;
  std::int32_t detail;  ///< its detail record and entry of the state table; -1: the common record

  /// Planning, before the details are numbered: the mark of a record that must
  /// be held in full — a stateful one, or one its family's cut() marks (a
  /// request of several tiles, each partial row at its own offset), or, in a
  /// share's vote for its common record, one whose fields its entry cannot hold.
  static constexpr std::int32_t held_in_full = -2;
};

/// The request records of an image, each found from its entry.
struct request_table {
  const request_entry* entries;
  const request_record* details;
  const request_record* common;  ///< the share's common record (in the image's header)

  SEQPOOL_HOST_DEVICE request_record operator[](std::int64_t index) const { return of(entries[index]); }

  /// The record the entry's record takes its fields but the entry's own from:
  /// its detail, or the common record (one address either way, so that no
  /// load waits on a branch). Exact for every field but prompt_len,
  /// position_offset and offset.
  SEQPOOL_HOST_DEVICE const request_record& rest(const request_entry& entry) const {
    return *(entry.detail >= 0 ? details + entry.detail : common);
  }

  /// The record in full: its detail, or the common record with the entry's fields.
  SEQPOOL_HOST_DEVICE request_record of(const request_entry& entry) const {
    request_record owner = rest(entry);
    if (entry.detail < 0) {
      owner.prompt_len = entry.prompt_len;
      owner.position_offset = entry.position_offset;
      owner.offset = entry.offset;
    }
    return owner;
  }

  /// Where record `index`'s state lies in the state table: its detail's index
  /// (a stateful record is always held in full).
  SEQPOOL_HOST_DEVICE std::int32_t state_index(std::int64_t index) const { return entries[index].detail; }
};

/// Sequence methods: up to a tile's rows of one request, reduced by one item
/// (host) or one block (device). A request with one tile writes its result where
/// the request says; a request with several writes partial row `index` for the
/// merge.
struct tile_record {
  std::int64_t row_begin;
  std::int32_t rows;
  /// Its request record; on the device, whose split requests are held in full, its detail.
  std::int32_t request;
  std::int32_t index;  ///< its place among the request's tiles
  std::int32_t width;  ///< its request's: a block finds its rows' columns without the request record
};

/// Token methods: a run of a request's rows, copied to consecutive rows of its
/// target — rows of this step's hidden states (every one, or those its mask
/// keeps), or rows an earlier chunk stashed in the request's state. A request
/// has at most two: what its earlier chunks stashed, and what this chunk returns.
struct gather_record {
  std::int64_t source;  ///< its first hidden row, or -1 - (float offset of its first stashed row in the request's state)
  std::int64_t offset;  ///< where its first returned row goes, in the request's target; the next follow `stride` apart
  std::int32_t mask;    ///< the bit of the mask section that says whether its first row is returned; -1: every row is
  std::int32_t rows;    ///< rows the run spans
  std::int32_t request;
  std::int32_t detail;         ///< its request's detail, and entry of the state table; -1: none (request_entry)
  std::int32_t stashed_width;  ///< stashed rows: the floats of each in the state; 0 for hidden rows
  /// A returned row's elements in the target: values of a result row, or floats of a draft or state row.
  std::int32_t stride;
};

/// Token methods: where one work item's (host) or block's (device) even share
/// of the returned rows starts; the next base says where it ends.
struct gather_base {
  std::int64_t first;     ///< its first returned row, counted over the share's runs
  std::int64_t source;    ///< the place of that row in its run
  std::int32_t run;       ///< the run that row is in
  std::int32_t returned;  ///< rows of that run returned before it
};

/// One row a gather copies: from `source` (a hidden row, or -1 - the float
/// offset of a stashed row) to `offset` in the request's target.
struct row_copy {
  std::int64_t source;
  std::int64_t offset;
  std::int32_t request;
  std::int32_t detail;  ///< its run's
};

/// The output value offset a drafted gathered row is encoded at, from the
/// float offset of its draft: its request's draft rows lie a width apart, and
/// its result rows as many output values apart as a row takes.
template <class Result>
SEQPOOL_HOST_DEVICE std::int64_t encoded_offset(const request_record& owner, std::int64_t draft) {
  if constexpr (columns_per_value<Result> == 1)
    return owner.result + (draft - owner.offset);
  else
    return owner.result + (draft - owner.offset) / owner.width * values_of<Result>(owner.width);
}

/// Walks a share's returned rows in order from a gather base: each next() is
/// the next row's copy. A masked run's rows are found by the bits of its mask.
struct gather_cursor {
  const gather_record* runs;
  const std::uint32_t* masks;
  std::int32_t run;
  std::int64_t source;
  std::int64_t returned;

  SEQPOOL_HOST_DEVICE gather_cursor(const gather_record* all_runs, const std::uint32_t* all_masks,
                                    const gather_base& base)
      : runs(all_runs), masks(all_masks), run(base.run), source(base.source), returned(base.returned) {}

  /// The next returned row; the caller asks for no more than its share holds.
  SEQPOOL_HOST_DEVICE row_copy next() {
    while (true) {
      const gather_record& at = runs[run];
      if (at.mask >= 0)
        while (source < at.rows && !kept(at.mask + source)) ++source;
      if (source < at.rows) {
        const std::int64_t from = at.source >= 0 ? at.source + source : at.source - source * at.stashed_width;
        const row_copy copy{from, at.offset + returned * at.stride, at.request, at.detail};
        ++source;
        ++returned;
        return copy;
      }
      ++run;
      source = 0;
      returned = 0;
    }
  }

 private:
  SEQPOOL_HOST_DEVICE bool kept(std::int64_t bit) const { return ((masks[bit / 32] >> (bit % 32)) & 1u) != 0; }
};

/// A result row computed by the head's dense layers from a pooled row, or
/// from a token method's returned row.
struct linear_record {
  std::int64_t input;    ///< workspace float offset of the pooled (or gathered) row; -1: read at `source`
  std::int64_t source;   ///< a returned row read where it lies, as a row_copy's source; else unused
  std::int64_t offset;   ///< output value offset of the result row
  std::int64_t draft;    ///< results drafted: the workspace float offset of the draft row; else -1
  std::int64_t between;  ///< stacks: workspace float offset of its outputs of every layer but the last; else -1
  std::int32_t request;
  std::int32_t width;  ///< leading outputs kept (matryoshka truncation)
};

/// Sparse results: the list of a finishing request (list_sparse), made from
/// its weights in the workspace, from offset `weights`. A token method's list
/// has a slot a distinct token id of its returned rows, ascending, each
/// naming its rows, whose weights are a float a returned row in prompt order;
/// a sequence method's list has a slot a column of its finished row, which is
/// its weights (`first_slot` −1), the id of each its column.
struct sparse_list {
  std::int64_t weights;  ///< workspace float offset of its first row's weight, or of its row
  /// A token method's list: workspace float offset of a weight a slot, its
  /// rows' largest, which the listing writes first and reads in every pass
  /// after; a row's columns: `weights`.
  std::int64_t slot_weights;
  std::int64_t offset;      ///< output entry offset of the list: the count, then most() entries
  std::int32_t first_slot;  ///< its first slot (the slot after its last ends that one's rows); -1: a row's columns
  std::int32_t ids;         ///< its slots
  std::int32_t top;         ///< the most ids it lists, of the largest weights (top_k); -1: every one above the floor
  float floor;              ///< the weight an id's must be above to be listed (the pooler's, when planned)

  /// The pairs the list has room for.
  SEQPOOL_HOST_DEVICE std::int32_t most() const { return top >= 0 && top < ids ? top : ids; }
};

/// A distinct token id of a token method's list, and where its rows start in
/// the step's sparse order (the next slot's `first` ends them).
struct sparse_slot {
  std::int32_t id;
  std::int32_t first;  ///< into the sparse order: the rows' places among their request's returned rows
};

/// A list's slots as the passes and kernels read them: each one's id, and
/// its weight — for a token id, the largest its rows were given (NaN, never
/// listed, only where every one was NaN), which weigh() finds from the rows'
/// weights and the listing writes once, a float a slot, for weight() to read
/// in each pass after; for a column, the row's value.
struct list_slots {
  const sparse_slot* slots;   ///< the list's first slot; null for a row's columns
  const std::int32_t* order;  ///< the step's sparse order
  const float* row_weights;   ///< the list's first returned row's weight
  float* weights;             ///< the list's first slot's weight

  SEQPOOL_HOST_DEVICE list_slots(const sparse_list& list, const sparse_slot* slot_table, const std::int32_t* all_order,
                                 float* workspace)
      : slots(list.first_slot < 0 ? nullptr : slot_table + list.first_slot),
        order(all_order),
        row_weights(workspace + list.weights),
        weights(workspace + list.slot_weights) {}

  /// Whether the slots' weights are the largest of their rows', which the
  /// listing writes before it reads them (token ids), or a row's columns.
  SEQPOOL_HOST_DEVICE bool weighed_by_rows() const { return slots != nullptr; }

  SEQPOOL_HOST_DEVICE std::int32_t id(std::int32_t s) const { return slots == nullptr ? s : slots[s].id; }

  /// Token slot `s`'s rows, [first, end) of the sparse order (one at least).
  SEQPOOL_HOST_DEVICE std::int32_t first_row(std::int32_t s) const { return slots[s].first; }
  SEQPOOL_HOST_DEVICE std::int32_t end_row(std::int32_t s) const { return slots[s + 1].first; }
  /// The weight of the row at place `t` of the sparse order.
  SEQPOOL_HOST_DEVICE float row_weight(std::int32_t t) const { return row_weights[order[t]]; }

  /// The largest weight of token slot `s`'s rows, taken in order from its
  /// first: every family takes them so.
  SEQPOOL_HOST_DEVICE float weigh(std::int32_t s) const {
    float largest = row_weight(first_row(s));
    for (std::int32_t t = first_row(s) + 1; t < end_row(s); ++t) largest = fmaxf(largest, row_weight(t));
    return largest;
  }

  SEQPOOL_HOST_DEVICE float weight(std::int32_t s) const { return weights[s]; }
};

/// Device kernels: the work of one block of the pooling launch. A packed block
/// pools `count` whole short requests, a warp each, from request record
/// `first` (each entry says its rows); a split block reduces one slab of
/// columns of tile `first` of a long request.
struct work_record {
  std::int32_t first;  ///< packed: a request record; split: a tile
  std::int32_t count;
  std::int32_t slab;  ///< the slab of columns a split block covers; -1 for a packed block
};

/// Rounds a float offset up to a 16-byte boundary, where vector stores may start.
SEQPOOL_HOST_DEVICE constexpr std::int64_t align_floats(std::int64_t floats) { return (floats + 3) / 4 * 4; }

/// Rounds an offset into an output of `result_bytes`-byte values (1, 2 or 4)
/// up to a 16-byte boundary: in bytes, by shifts, as planning does for every
/// result (a division by a runtime width costs tens of cycles).
constexpr std::int64_t align_values(std::int64_t values, std::int64_t result_bytes) {
  const int shift = std::countr_zero(static_cast<std::uint64_t>(result_bytes));
  return (((values << shift) + 15) & ~std::int64_t{15}) >> shift;
}

}  // namespace seqpool::detail
