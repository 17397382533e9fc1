// The host algorithms' policy: how a step's work is cut into items for CPU threads.
#pragma once

#include <cstdint>

namespace seqpool::detail::host {

struct launch_policy {
  /// A long request's tiles are merged by a pass of their own, and an item that
  /// pools a row passes it through the head's linear layer itself.
  static constexpr bool merges_in_launch = false;

  /// Rows one item reduces before handing on a partial row: a long request's
  /// partials cost a float per column for every tile read back by the merge, and
  /// a prompt still splits into a tile for every tile_rows rows to share among
  /// the threads (docs/PERFORMANCE.md has the figures behind 128).
  static constexpr std::int64_t tile_rows = 128;

  /// The widest row an item assembles in a scratch row of its own, 32 KiB on its
  /// stack: a result row it then streams out, or a pooled row it passes through
  /// the head's linear layer. Wider rows go through the workspace and a pass of
  /// the layer.
  static constexpr std::int64_t scratch_row_floats = 8192;
  /// The widest result row an item holds whole through the head's epilogue: its
  /// scratch row. 16-bit results wider than this are finished in the workspace.
  static constexpr std::int64_t held_row_floats = scratch_row_floats;
};

}  // namespace seqpool::detail::host
