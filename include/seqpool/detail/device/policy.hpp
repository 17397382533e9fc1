// The device kernels' launch policy: how a step's work is cut into blocks.
#pragma once

#include <cstddef>
#include <cstdint>

namespace seqpool::detail::device {

/// Like CUB's tuning policies, one type holds every number the device kernels
/// are shaped by; the planner cuts requests by it and the kernels are written
/// for it. Both device backends run it (the OpenMP stand-in runs the same
/// blocks as the GPU), so the CPU tests cross the GPU's tile and slab boundaries.
struct launch_policy {
  static constexpr int warps = 8;  ///< warps of a block
  static constexpr int threads = warps * 32;

  /// Sequence methods: a request whose rows × columns are at most this (and
  /// whose rows lie within 32 bits) is pooled whole by one warp, and up to
  /// `warps` such requests share a block (packed). Larger requests are split
  /// into tiles × slabs, a block each, whose partial rows the last block to
  /// finish merges in the same launch.
  static constexpr std::int64_t packed_elements = 32768;
  /// Rows of a split request one block reads: fewer, longer tiles leave fewer
  /// partial rows to merge (docs/PERFORMANCE.md, GPU: the sweep that chose 1024).
  static constexpr std::int64_t tile_rows = 1024;
  static constexpr std::int64_t slab_columns = 256;   ///< columns of a split request one block covers: 8 a lane
  /// Where a step's split requests would leave part of a wave of pooling
  /// blocks empty at tile_rows (an H200's 132 SMs, two blocks each at the
  /// kernel's 128 registers, less the packed blocks beside them), cut their
  /// tiles shorter, to the most blocks that fit (true), or keep tile_rows
  /// (false). A tile keeps at least a stage of loads for each warp: eight
  /// warps, eight rows each.
  static constexpr bool split_tiles_fill_a_wave = false;
  static constexpr std::int64_t pooling_wave_blocks = 132 * 2;
  static constexpr std::int64_t shortest_tile_rows = 64;
  static constexpr int slab_lane_floats = slab_columns / 32;

  /// Floats a lane of a pooling or gathering warp holds in registers: four
  /// 16-byte vectors of 16-bit elements, or eight of float. A strip of 32 × this
  /// many columns of a row is what a warp holds at once.
  static constexpr int lane_floats = 32;
  /// The widest result row a warp holds whole through the head's epilogue: one
  /// strip. Wider 16-bit results, those of split requests and those of the
  /// linear layer are drafted in the workspace.
  static constexpr std::int64_t held_row_floats = 32 * lane_floats;
  static constexpr int packed_vectors_in_flight = 8;  ///< vectors a packed lane loads at once (a stage)
  static constexpr int split_rows_in_flight = 8;   ///< rows a split block's thread loads at once (a stage)
  /// Stages of loads a pooling thread holds (stream_rows): one — it loads a
  /// stage, then accumulates it with nothing in flight — or two, the next
  /// stage's loads issued before the current one is accumulated.
  static constexpr int load_stages = 1;
  /// Split blocks: each warp reads its rows' slab through a ring of slots in
  /// shared memory that its lane 0 fills with bulk copies (true; sm_90's
  /// cp.async.bulk, a row's slab a copy, every slot's copy in flight while the
  /// lanes take the rows before it), or through registers a stage at a time
  /// (false). A ring takes at most `bulk_ring_bytes`, and what static shared
  /// memory leaves beside the merge of the warps' runs.
  static constexpr bool split_rows_in_bulk = false;
  static constexpr int bulk_ring_bytes = 8192;
  /// Partial rows of a split request a lane of the merging block loads at
  /// once: four partials of a lane's 8 columns are 8 vector loads in flight.
  static constexpr int merged_partials_in_flight = 4;
  /// 16-byte vectors of a result row in memory a thread loads at once where a
  /// block (split requests) or a warp (rows wider than a strip, the linear
  /// layer's rows) finishes it: a block reads a row of 4096 floats in two round
  /// trips to L2, a warp in 32. More would cost the pooling kernel registers,
  /// and with them a block an SM, which its main loop needs more.
  static constexpr int block_row_vectors_in_flight = 2;
  static constexpr int warp_row_vectors_in_flight = 1;

  /// A captured step's pooling launch, sized by its capacity: a block an index
  /// (false), most of them returning at once when the batch is smaller than the
  /// capacity, or one wave of blocks taking the indices in turn (true), which
  /// starts at most a wave of blocks but costs the pooling kernel registers
  /// (166 for bf16, 192 for fp32, against 128: one block an SM where an eager
  /// launch has two) and half the fp32 split loop's loads in flight.
  static constexpr bool captured_pooling_in_one_wave = false;
  /// A captured step's upload: a kernel that copies the pieces of the image
  /// the graph's slot lists (true), so that a replay moves what its batch uses,
  /// read over the host link by the SMs; or one copy of the capacity's whole
  /// image (false), a copy node of fixed size that the copy engine runs.
  static constexpr bool captured_upload_in_pieces = true;
  /// A step of several entries (a dispatcher's poolers): each entry's launches
  /// on a branch of its own (true), forked from the stream after the upload and
  /// joined back before the step ends, so that an entry's under-filled launches
  /// run beside another's; or all on the stream, one after another (false).
  static constexpr bool entries_on_branches = false;

  /// Token methods: blocks of the gathering launch, each an even share of the
  /// returned rows, a warp a row: one wave on an H200 (132 SMs, four blocks each).
  static constexpr std::int64_t gather_units = 132 * 4;
  /// The fewest returned rows a block takes where they pass through the head's
  /// dense layer: one (a finishing request's rows are projected where they lie,
  /// not gathered).
  static constexpr std::int64_t layer_unit_rows = 1;
  /// Token methods: elements of a gathered row a lane loads as one run and
  /// stores as one 16-byte vector of floats, so that every store of a warp fills
  /// whole sectors (16 bytes of float, 8 of a 16-bit type).
  static constexpr int gather_run_elements = 4;

  /// Sparse results: token slots a thread of the listing launch weighs at
  /// once (their rows' largest weight), its loads of them in flight together.
  static constexpr int list_slots_in_flight = 4;

  /// A dense layer's launch: rows a block passes through the layer together,
  /// sharing each weight row it reads, and the shared memory that holds them.
  static constexpr int linear_rows = 8;
  static constexpr int linear_shared_floats = 8192;
  /// 16-byte vectors of a token method's returned rows a thread of that block
  /// loads at once as it stages them in shared memory.
  static constexpr int linear_vectors_in_flight = 4;
  /// Weights of an output a lane of that block loads before it uses the
  /// first: a layer over rows of 4096 inputs waits 32 round trips to L2 for
  /// them, not 128 (8 would spill, at 4 blocks an SM where 4 hold).
  static constexpr int linear_weights_in_flight = 4;
  /// A dense layer of at least this many outputs is a matrix product of tiles
  /// of rows × 128 outputs (linear_tiles), each input row read once a tile of
  /// outputs and each weight once a tile of rows (a quarter block of rows);
  /// narrower ones (a classifier's few classes, a lexical weight) take
  /// apply_linear, whose blocks read fewer rows of many fewer weights.
  static constexpr std::int64_t tiled_layer_outputs = 32;
  /// Inputs of a tile's rows and weights a block holds in shared memory at
  /// once, in each of two slices (one multiplied while the next is stored).
  static constexpr int layer_tile_depth = 16;
};

/// The candidates a sweep on the GPU measures against launch_policy
/// (`pool_bench_cuda_<name>`, tests/gpu/run.sh), each a change of one kind (but pipelined_loads_policy);
/// the CPU tests run every one (tests/test_policies.cpp; tests/test_capture.cpp
/// the one that changes captured steps alone), so whichever the
/// sweep chooses is known to give the same results. A space runs one through
/// a backend that names it (seqpool::with_policy).

/// Twice the loads a thread keeps in flight, at the registers of one of its
/// two blocks an SM.
struct deep_loads_policy : launch_policy {
  static constexpr int packed_vectors_in_flight = 16;
  static constexpr int split_rows_in_flight = 16;
};

/// Register double buffering: two stages of loads, each half launch_policy's
/// one, loads in flight while a stage is accumulated. At lanes of 32 floats a
/// packed fp32 stage is a whole row of 8 vectors and two cost the kernel a
/// block an SM (166 registers), and with the packed loop left at one stage the
/// split loop's two still spill (16 bytes, at 2 to 4 rows a stage); so lanes
/// hold 16 floats (4 vectors of fp32 a stage): strips of 512 columns, which
/// also halves the gathering kernel's lanes and drafts result rows wider than
/// 512 in the workspace (more than one kind of change: the sweep weighs them
/// together).
struct pipelined_loads_policy : launch_policy {
  static constexpr int load_stages = 2;
  static constexpr int split_rows_in_flight = 4;
  static constexpr int lane_floats = 16;
  static constexpr std::int64_t held_row_floats = 32 * lane_floats;
  static constexpr int packed_vectors_in_flight = 4;
};

/// Blocks of four warps: twice the blocks for the same work, a split tile's
/// rows shared by half the warps, a linear block's rows by a warp each.
struct small_blocks_policy : launch_policy {
  static constexpr int warps = 4;
  static constexpr int threads = warps * 32;
  static constexpr std::int64_t gather_units = 132 * 8;
  static constexpr int linear_rows = warps;
};

/// Split tiles of 2048 rows: half the partial rows to merge, half the blocks.
struct long_tiles_policy : launch_policy {
  static constexpr std::int64_t tile_rows = 2048;
};

/// A step's few split requests cut into tiles that fill a wave of blocks.
struct wave_tiles_policy : launch_policy {
  static constexpr bool split_tiles_fill_a_wave = true;
};

/// Split blocks reading their rows through rings that bulk copies fill (sm_90).
struct bulk_rows_policy : launch_policy {
  static constexpr bool split_rows_in_bulk = true;
};

/// A captured step's pooling launch on one wave of blocks.
struct one_wave_capture_policy : launch_policy {
  static constexpr bool captured_pooling_in_one_wave = true;
};

/// A captured step's upload as one copy of the capacity's whole image, not a
/// kernel that copies the pieces its batch uses.
struct whole_image_capture_policy : launch_policy {
  static constexpr bool captured_upload_in_pieces = false;
};

/// A dispatcher's entries on branches of the stream.
struct branched_entries_policy : launch_policy {
  static constexpr bool entries_on_branches = true;
};

/// The launch policy of a device backend: the one it names, or launch_policy.
template <class Backend>
struct policy_of {
  using type = launch_policy;
};
template <class Backend>
  requires requires { typename Backend::launch_policy; }
struct policy_of<Backend> {
  using type = typename Backend::launch_policy;
};

/// How a step's image reaches the device. How far the host may run ahead: the
/// eager step's upload comes from a ring of this many pinned staging slots, and
/// reserve() waits only when the copy from the slot it sets aside, made when the
/// ring last came round to it, is still pending. A captured step's upload in pieces is a kernel that
/// reads the graph's slot over the host link: a block an H200 SM, each thread
/// with a few 16-byte loads in flight.
struct staging_policy {
  static constexpr std::size_t slots = 4;
  static constexpr std::int64_t copy_blocks = 132;
  static constexpr int copy_threads = 256;
  static constexpr int copy_vectors_in_flight = 4;
};

}  // namespace seqpool::detail::device
