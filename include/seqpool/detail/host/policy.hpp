// The host algorithms' launch policy: how a step's work is cut into items for CPU threads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace seqpool::detail::host {

/// Like CUB's tuning policies, one type holds every number the host algorithms
/// are tuned by; the planner cuts requests by it and the passes are written for
/// it (docs/PERFORMANCE.md has the measurements behind each).
struct launch_policy {
  /// Rows one item reduces before handing on a partial row: a long request's
  /// partials cost a float per column for every tile read back by the merge, and
  /// a prompt still splits into a tile for every tile_rows rows to share among
  /// the threads.
  static constexpr std::int64_t tile_rows = 128;

  /// The most bytes of each row a tile's sweep covers at once: the four rows
  /// asked for ahead fit in a third of L1 beside the result's columns.
  static constexpr std::int64_t sweep_bytes = 4096;

  /// The widest row an item assembles in a scratch row of its own, 32 KiB on its
  /// stack: a result row it then streams out, or a pooled row it passes through
  /// the head's linear layer. Wider rows go through the workspace and a pass of
  /// the layer.
  static constexpr std::int64_t scratch_row_floats = 8192;
  /// The widest result row an item holds whole through the head's epilogue: its
  /// scratch row. Results other than float wider than this are drafted in the workspace.
  static constexpr std::int64_t held_row_floats = scratch_row_floats;

  /// Rows a gathering item passes through the head's linear layer together,
  /// gathered into a block of linear_block_floats floats (64 KiB on its stack):
  /// each weight row, read from the caches once for all of them, is used
  /// linear_block_rows times. Rows too wide for two in the block go alone.
  static constexpr std::int64_t linear_block_rows = 4;
  static constexpr std::int64_t linear_block_floats = 16384;

  /// Token methods: items of the gathering pass, each an even share of the
  /// returned rows; enough to keep every thread of a large server busy.
  static constexpr std::int64_t gather_units = 1024;
  /// The fewest returned rows an item takes where they pass through the head's
  /// dense layer: a block's, so that a short prompt's rows are not each an
  /// item that reads every weight row for one row alone.
  static constexpr std::int64_t layer_unit_rows = linear_block_rows;

  /// Results are streamed past the caches when a share's are at least this
  /// large, twice what a server core's L2 holds. Between steps the model's own
  /// passes flush the caches, so plain stores would fetch every result line from
  /// memory first. Small results are stored plainly and stay cached for the
  /// reader that copies them out.
  static constexpr std::size_t streamed_output_bytes = std::size_t{4} << 20;
};

}  // namespace seqpool::detail::host
