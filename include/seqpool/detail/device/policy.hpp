// The device kernels' launch policy: how a step's work is cut into blocks.
#pragma once

#include <cstdint>

namespace seqpool::detail::device {

/// Like CUB's tuning policies, one type says how the device kernels shape their
/// work; the plan builder cuts requests by it and the kernels are written for
/// it. Both device backends run it (the OpenMP stand-in runs the same blocks
/// as the GPU), so the CPU tests cross the GPU's tile and slab boundaries.
struct launch_policy {
  /// A long request's tiles are merged by the pooling launch itself, and a
  /// linear layer is a launch of its own.
  static constexpr bool merges_in_launch = true;

  static constexpr int warps = 8;  ///< warps of a block
  static constexpr int threads = warps * 32;

  /// Sequence methods: a request whose rows × columns are at most this is pooled
  /// whole by one warp, and up to `warps` such requests share a block (packed).
  /// Larger requests are split into tiles × slabs, a block each, whose partial
  /// rows the last block to finish merges in the same launch.
  static constexpr std::int64_t packed_elements = 32768;
  static constexpr std::int64_t tile_rows = 512;      ///< rows of a split request one block reads
  static constexpr std::int64_t slab_columns = 256;   ///< columns of a split request one block covers: 8 a lane
  static constexpr int slab_lane_floats = slab_columns / 32;

  /// Floats a lane of a pooling or gathering warp holds in registers: four
  /// 16-byte vectors of 16-bit elements, or eight of float. A row of up to 32 ×
  /// this many columns stays in registers through the head's epilogue.
  static constexpr int lane_floats = 32;
  /// The widest result row a warp holds whole through the head's epilogue: one
  /// pass of its lanes' registers. Wider 16-bit results, those of split requests
  /// and those of the linear layer are finished in the workspace.
  static constexpr std::int64_t held_row_floats = 32 * lane_floats;
  static constexpr int packed_vectors_in_flight = 8;  ///< vectors a packed lane loads before it accumulates
  static constexpr int split_rows_in_flight = 8;   ///< rows a split block's thread loads before it accumulates

  static constexpr std::int64_t gathers_per_block = 32;  ///< token methods: rows a block copies, one warp each in turn

  /// The linear layer: pooled rows a block passes through it together, sharing
  /// each weight row it reads, and the shared memory that holds them.
  static constexpr int linear_rows = 8;
  static constexpr int linear_shared_floats = 8192;
};

}  // namespace seqpool::detail::device
