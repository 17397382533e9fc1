// Host algorithms for token methods: copy chosen rows and columns to the result or the state.
#pragma once

#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/host/apply_linear.hpp>
#include <seqpool/detail/host/prefetch.hpp>
#include <seqpool/detail/host/store_row.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/to_float.hpp>
#include <seqpool/head/row.hpp>

namespace seqpool::detail::host {

/// One item copies an even share of the returned rows (from its gather base to
/// the next), row after row: from the step's hidden states through the
/// request's column table, or from rows an earlier chunk left in the state
/// (which hold the chosen columns already), converting to float. A result row gets the head's
/// epilogue in the same item, after its linear layer when flagged, and, when
/// the pooler's results are streamed or not float, is assembled in scratch and
/// encoded from there. Rows flagged for the linear layer are copied into a
/// block and passed through it a block at a time, but for a layer of one
/// output, whose dot product is taken as the row is read.
template <class Head, class T, class Result, class Policy>
struct gather_rows {
  Head head;
  dense_layer layer;  ///< the head's one dense layer, where an item passes rows through it
  const T* hidden;
  std::int64_t row_stride;
  const gather_record* runs;
  const gather_base* bases;
  const std::uint32_t* masks;
  request_table requests;
  const std::int32_t* column_table;
  step_memory<Result> memory;
  bool stream_results;

  /// The item's share of the returned rows, from its base to the next.
  void operator()(std::int64_t item) const {
    const std::int64_t rows = bases[item + 1].first - bases[item].first;
    if (rows == 0) return;
    gather_cursor cursor(runs, masks, bases[item]);
    linear_block block;
    row_copy next = cursor.next();
    for (std::int64_t k = 0; k < rows; ++k) {
      const row_copy row = next;
      if (k + 1 < rows) next = cursor.next();
      const row_copy* after = k + 1 < rows ? &next : nullptr;
      const request_record owner = requests[row.request];
      if (goes_to_one_output(owner)) {
        weigh_row(row, owner, after);
        continue;
      }
      const std::int64_t floats = block_floats(owner);
      if (floats == 0) {
        copy(row, owner, after);
        continue;
      }
      if (block.used + floats > Policy::linear_block_floats) project(block);
      add_to_block(block, row, owner, floats, after);
      if (block.count == Policy::linear_block_rows) project(block);
    }
    project(block);
  }

 private:
  /// Rows copied for the head's linear layer, each followed, for results other
  /// than float, by its draft of the layer's outputs, waiting to be passed
  /// through it together.
  struct linear_block {
    static_assert(Policy::linear_block_rows >= 1 && Policy::linear_block_rows <= 4,
                  "linear_outputs_of_rows passes one to four rows at once");
    alignas(64) float floats[Policy::linear_block_floats];
    row_copy rows[Policy::linear_block_rows];
    std::int64_t starts[Policy::linear_block_rows];
    int count = 0;
    std::int64_t used = 0;
  };

  /// Whether the request's rows go through a layer of one output (BGE-M3's
  /// sparse_linear, a regression head): each row's dot product is then taken as
  /// the row is read, with no copy of it, for rows from the hidden states and
  /// from the state alike.
  static bool goes_to_one_output(const request_record& owner) {
    return (owner.flags & through_linear) != 0 && owner.linear_width == 1 && owner.columns < 0;
  }

  /// A row of goes_to_one_output()'s through the layer and the head's epilogue, into its result.
  void weigh_row(const row_copy& gather, const request_record& owner, const row_copy* after) const {
    const float* weights = layer.linear.weight;
    const float total = gather.source < 0 ? dot_in_lanes<float>(memory.state[gather.detail] + (-1 - gather.source),
                                                                weights, owner.width, nullptr)
                                          : dot_in_lanes<T>(hidden + gather.source * row_stride, weights, owner.width,
                                                            row_ahead(gather, owner, after));
    float value = dense_output(layer, 0, total);
    head::plain_row row{&value, 1};
    head.epilogue(row, owner.knobs);
    store_row(memory.output + gather.offset, &value, 1, false, memory.encoding);
  }

  /// The dot product of `width` elements of `row` with `weights` in 16 lanes:
  /// element c into lane c mod 16, then the lanes added in order, whatever E
  /// is, so that a row read from the hidden states and the same row stashed in
  /// the state in floats give the same bits. Asks for each line of `ahead`,
  /// when given, as it goes.
  template <class E>
  static float dot_in_lanes(const E* __restrict__ row, const float* __restrict__ weights, std::int64_t width,
                            const E* ahead) {
    constexpr std::int64_t lanes = 16;
    constexpr std::int64_t line_elements = cache_line_bytes / sizeof(E);
    float lane[lanes] = {};
    std::int64_t c = 0;
    for (; c + lanes <= width; c += lanes) {
      if (ahead != nullptr && c % line_elements == 0) prefetch(ahead + c);
      SEQPOOL_SIMD
      for (std::int64_t l = 0; l < lanes; ++l) lane[l] += weights[c + l] * to_float(row[c + l]);
    }
    for (std::int64_t l = 0; c + l < width; ++l) lane[l] += weights[c + l] * to_float(row[c + l]);
    float total = 0.0f;
    for (const float value : lane) total += value;
    return total;
  }

  /// `floats` rounded up to whole cache lines.
  static constexpr std::int64_t whole_lines(std::int64_t floats) { return (floats + 15) / 16 * 16; }

  /// The floats of the block a row takes: 0 for a row that does not go
  /// through the layer, or that is too wide for two in a block.
  std::int64_t block_floats(const request_record& owner) const {
    if ((owner.flags & through_linear) == 0) return 0;
    const std::int64_t floats =
        whole_lines(owner.width) + (std::is_same_v<Result, float> ? 0 : whole_lines(owner.linear_width));
    return 2 * floats <= Policy::linear_block_floats ? floats : 0;
  }

  void add_to_block(linear_block& block, const row_copy& gather, const request_record& owner, std::int64_t floats,
                    const row_copy* after) const {
    block.rows[block.count] = gather;
    block.starts[block.count] = block.used;
    copy_row(gather, owner, block.floats + block.used, row_ahead(gather, owner, after));
    block.used += floats;
    ++block.count;
  }

  /// Passes the block's rows through the layer, runs the head's epilogue on
  /// each and stores it: a float row in place in the output, any other encoded
  /// from its draft. Empties the block.
  void project(linear_block& block) const {
    if (block.count == 0) return;
    const float* pooled[Policy::linear_block_rows] = {};
    float* out[Policy::linear_block_rows] = {};
    std::int64_t outputs[Policy::linear_block_rows] = {};
    for (int b = 0; b < block.count; ++b) {
      const request_record owner = requests[block.rows[b].request];
      pooled[b] = block.floats + block.starts[b];
      if constexpr (std::is_same_v<Result, float>)
        out[b] = memory.output + block.rows[b].offset;
      else
        out[b] = block.floats + block.starts[b] + whole_lines(owner.width);
      outputs[b] = owner.linear_width;
    }
    linear_outputs_of_rows(layer, pooled, out, outputs, block.count);
    for (int b = 0; b < block.count; ++b) {
      const request_record owner = requests[block.rows[b].request];
      head::plain_row row{out[b], owner.linear_width};
      head.epilogue(row, owner.knobs);
      if constexpr (!std::is_same_v<Result, float>)
        store_row(memory.output + block.rows[b].offset, out[b], owner.linear_width, false, memory.encoding);
    }
    block.count = 0;
    block.used = 0;
  }

  /// One row of `owner`'s, asking meanwhile for the row `after` it, when there is one.
  void copy(const row_copy& gather, const request_record& owner, const row_copy* after) const {
    float* out = memory.at(owner.where, gather.offset, gather.detail);
    const T* ahead = row_ahead(gather, owner, after);

    const bool through = (owner.flags & through_linear) != 0;
    const bool to_output = owner.where == target::output;
    if (through || (to_output && stored_from_scratch<Policy, Result>(stream_results, owner.width))) {
      alignas(64) float scratch[Policy::scratch_row_floats];
      copy_row(gather, owner, scratch, ahead);
      if (through) {
        linear_into<Policy>(head, layer, scratch, memory.output + gather.offset, owner.linear_width, owner.knobs,
                            memory.encoding);
        return;
      }
      apply_epilogue(owner, scratch);
      store_row(memory.output + gather.offset, scratch, owner.width, stream_results, memory.encoding);
      return;
    }
    copy_row(gather, owner, out, ahead);
    apply_epilogue(owner, out);
    if ((owner.flags & drafted) != 0)
      store_row(memory.output + encoded_offset<Result>(owner, gather.offset), out, owner.width, stream_results,
                memory.encoding);
  }

  void apply_epilogue(const request_record& owner, float* row) const {
    if ((owner.flags & epilogue) == 0) return;
    head::plain_row result{row, owner.width};
    head.epilogue(result, owner.knobs);
  }

  /// A row read whole asks for the row this thread gathers next, line by line as
  /// it is copied, wherever that row lies (every eighth for STEP, another
  /// request's in a mixed batch), which the hardware cannot guess. Null where
  /// there is none to ask for.
  const T* row_ahead(const row_copy& gather, const request_record& owner, const row_copy* after) const {
    if (after == nullptr || gather.source < 0 || owner.columns >= 0) return nullptr;
    if (after->source < 0 || requests.rest(requests.entries[after->request]).columns >= 0) return nullptr;
    return hidden + after->source * row_stride;
  }

  /// Copies the gathered row to `out`, asking for the same lines of the row at
  /// `ahead`, when given, as it goes.
  void copy_row(const row_copy& gather, const request_record& owner, float* __restrict__ out, const T* ahead) const {
    const std::int64_t width = owner.width;
    if (gather.source < 0) {
      const float* __restrict__ stashed = memory.state[gather.detail] + (-1 - gather.source);
      for (std::int64_t c = 0; c < width; ++c) out[c] = stashed[c];
    } else if (owner.columns < 0) {
      const T* __restrict__ row = hidden + gather.source * row_stride;
      by_lines<T>(
          0, width,
          [&](std::int64_t line) {
            if (ahead != nullptr) prefetch(ahead + line);
          },
          [&](std::int64_t c) { out[c] = to_float(row[c]); });
    } else {
      const T* row = hidden + gather.source * row_stride;
      const std::int32_t* chosen = column_table + owner.columns;
      for (std::int64_t c = 0; c < width; ++c) out[c] = to_float(row[chosen[c]]);
    }
  }
};

}  // namespace seqpool::detail::host
