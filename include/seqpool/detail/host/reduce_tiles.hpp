// Host algorithms, pass 1 of sequence methods: reduce each tile of rows.
#pragma once

#include <cstdint>

#include <seqpool/detail/host/apply_linear.hpp>
#include <seqpool/detail/host/finish_row.hpp>
#include <seqpool/detail/host/prefetch.hpp>
#include <seqpool/detail/host/row_reduction.hpp>
#include <seqpool/detail/host/store_row.hpp>
#include <seqpool/detail/records.hpp>

namespace seqpool::detail::host {

/// One item reduces a tile of up to tile_rows rows of one request over all its
/// columns. A tile that is its request's only one writes the result where it
/// belongs (state or result row) and runs the head's epilogue too, after its
/// linear layer when flagged; otherwise it writes a partial for combine_partials.
/// A result row it streams, or encodes as other than float, it assembles in scratch first.
/// The rows' reduction is the method's alone (row_reduction), shared by every head.
template <class Method, class Head, class T, class Result, class Policy>
struct reduce_tiles {
  row_reduction<Method, T, Policy> reduction;
  Head head;
  dense_layer layer;  ///< the head's one dense layer, where an item passes rows through it
  const tile_record* tiles;
  request_table requests;
  step_memory<Result> memory;
  std::int64_t num_tiles;
  bool stream_results;

  void operator()(std::int64_t item) const {
    const tile_record tile = tiles[item];
    const request_record owner = requests[tile.request];
    const bool alone = owner.num_tiles == 1;
    const std::uint8_t flags = alone ? owner.flags : 0;
    const std::int64_t width = owner.width;  // the pooled row's: its modes' columns
    const std::int32_t state_index = requests.state_index(tile.request);
    // `out` may be `init` itself: a chunk continuing in place.
    float* out = alone ? memory.at(owner.where, owner.offset, state_index)
                       : memory.workspace + owner.partials + tile.index * width;
    const float* init = (flags & from_state) != 0 ? memory.state[state_index] : nullptr;
    const T* first_row = reduction.hidden + tile.row_begin * reduction.row_stride;
    const std::int64_t first_position = tile.row_begin + owner.position_offset;  // its first row's in the prompt

    // This thread's next item is most likely the next tile: a tile of several
    // rows asks for its first row now. Its following rows come from the sweep's
    // own prefetch, which runs on into the next tile; asking for more here stalls
    // on full fill buffers. A tile of one row asks as it goes (start_sweep).
    const tile_record* next = item + 1 < num_tiles ? &tiles[item + 1] : nullptr;
    if (next != nullptr && tile.rows > 1)
      prefetch_row(reduction.hidden + next->row_begin * reduction.row_stride, next->width);
    const bool finishes = (flags & finish) != 0;
    const bool through = (flags & through_linear) != 0;
    const bool to_output = finishes && owner.where == target::output;
    if (through || (to_output && stored_from_scratch<Policy, Result>(stream_results, width))) {
      alignas(64) float scratch[Policy::scratch_row_floats];
      reduction.reduce(tile, first_position, width, next, init, first_row, scratch);
      finish_row(reduction.method, head, owner, tile.width, flags, scratch);
      if (through)
        linear_into<Policy>(head, layer, scratch, memory.output + owner.offset, owner.linear_width, owner.knobs,
                            memory.encoding);
      else
        store_row(memory.output + owner.offset, scratch, width, stream_results, memory.encoding);
      return;
    }
    reduction.reduce(tile, first_position, width, next, init, first_row, out);
    finish_row(reduction.method, head, owner, tile.width, flags, out);
    if ((flags & drafted) != 0) store_row(memory.output + owner.result, out, width, stream_results, memory.encoding);
  }
};

}  // namespace seqpool::detail::host
