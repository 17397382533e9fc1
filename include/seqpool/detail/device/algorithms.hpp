// The device kernels as one family: how a share's requests are cut into blocks,
// and which kernels run them on how big a grid.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include <seqpool/capacity.hpp>
#include <seqpool/detail/device/apply_linear.hpp>
#include <seqpool/detail/device/finish_linear.hpp>
#include <seqpool/detail/device/gather_rows.hpp>
#include <seqpool/detail/device/linear_tiles.hpp>
#include <seqpool/detail/device/list_sparse.hpp>
#include <seqpool/detail/device/policy.hpp>
#include <seqpool/detail/device/pool_rows.hpp>
#include <seqpool/detail/device/vector.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/share.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool::detail::device {

/// Kernel on a grid of at most one wave, its blocks taking the indices in turn,
/// whatever Kernel declares: a captured step's pooling launch, where the policy
/// says so (launch_policy::captured_pooling_in_one_wave).
template <class Kernel>
struct in_one_wave {
  static constexpr int threads = Kernel::threads;
  static constexpr bool one_wave = true;
  using shared_storage = typename Kernel::shared_storage;

  Kernel kernel;

  template <class Block>
  SEQPOOL_HOST_DEVICE void operator()(const Block& block, std::int64_t index, shared_storage& shared) const {
    kernel(block, index, shared);
  }
};

/// Written for the GPU: warps read whole lines with 16-byte loads and cooperate
/// on a row. A long request's tiles are merged by the pooling launch itself,
/// and each of the head's dense layers is a launch of its own (a wide last
/// layer's, two). The OpenMP stand-in runs the same
/// kernels, a block's threads in turn.
template <class Policy = launch_policy>
struct algorithms {
  using policy = Policy;

  // Planning: how the planner cuts a share.

  /// Whether one warp pools a request's window whole (packed with its
  /// neighbours into a block), rather than blocks of tiles and slabs: a short
  /// one whose pooled row of `width` columns is one mode's (the `loaded`
  /// columns it reads of each row), whose rows its entry can name in 32 bits.
  /// A concat's requests are split, whose blocks hold a few columns of every
  /// mode a lane.
  static bool pooled_whole(row_window window, std::int64_t width, std::int64_t loaded) {
    return width == loaded && window.count * width <= Policy::packed_elements &&
           window.begin + window.count <= std::numeric_limits<std::int32_t>::max();
  }

  /// The widest result row the kernel that finishes a pooled request holds
  /// whole: one strip for a warp that pools it whole, none for a request split
  /// over blocks (the last slab to arrive finishes it in memory).
  static std::int64_t held_width(row_window window, std::int64_t width, std::int64_t loaded) {
    return pooled_whole(window, width, loaded) ? Policy::held_row_floats : 0;
  }

  /// A warp rounds a 16-bit value in the lane that holds it, but an int8 or
  /// uint8 value needs its column's range and a byte of sign bits the columns
  /// of two lanes: every quantized row is drafted, and encoded from its draft.
  static constexpr bool drafts_quantized_rows = true;

  /// The head's dense layers are always launches of their own.
  static bool linear_in_item(std::int64_t, std::int64_t, bool) { return false; }

  /// The first layer's launch reads a token method's returned rows where they
  /// lie: no gathering launch copies them to the workspace for it.
  static constexpr bool projects_returned_rows = true;

  /// The layer's launch writes a row's outputs from every warp of its block, so
  /// a 16-bit result row is always drafted (as every quantized one is).
  static bool drafts_linear_rows(std::int64_t) { return true; }

  /// A split request is held in full, and its tiles name its detail
  /// (planner::settle_entries()): a split block finds its request's record
  /// from its tile, without the entry.
  static constexpr bool tiles_name_details = true;

  /// The rows of a split request's tiles in a share whose windows are
  /// `windows`, each pooling rows of `width` columns of which it reads
  /// `loaded`: tile_rows; or, where the policy says so
  /// (split_tiles_fill_a_wave) and the share has no capacity (`bounded`,
  /// whose bounds count tiles of tile_rows), and its split blocks at tile_rows
  /// leave part of a wave empty beside its packed ones, the shortest tiles —
  /// no shorter than shortest_tile_rows — whose blocks still fit in it: more
  /// blocks, each reading fewer rows, rather than idle SMs (a binary search:
  /// the blocks only fall as the tiles grow). The split requests are counted
  /// from the windows as the planner gives them, before it learns how many
  /// columns each result keeps, so a request whose dimensions it truncates
  /// may be counted split where it is packed: the tiles are then longer.
  static std::int64_t tile_rows_for(std::span<const row_window> windows, std::int64_t width, std::int64_t loaded,
                                    bool bounded) {
    if constexpr (!Policy::split_tiles_fill_a_wave) {
      return Policy::tile_rows;
    } else {
      if (bounded) return Policy::tile_rows;
      // cut() packs a short request into the block before it where that block
      // holds its neighbour: a run of consecutive short ones fills blocks of
      // `warps`, and a split request between two ends a run.
      std::int64_t packed_blocks = 0;
      std::int64_t run = 0;
      std::int64_t split = 0;
      for (const row_window window : windows) {
        if (pooled_whole(window, width, loaded)) {
          ++run;
          continue;
        }
        ++split;
        packed_blocks += (run + Policy::warps - 1) / Policy::warps;
        run = 0;
      }
      packed_blocks += (run + Policy::warps - 1) / Policy::warps;
      const std::int64_t slabs = (loaded + Policy::slab_columns - 1) / Policy::slab_columns;
      const std::int64_t room = Policy::pooling_wave_blocks - packed_blocks;
      const auto blocks = [&](std::int64_t tile_rows) {
        std::int64_t tiles = 0;
        for (const row_window window : windows)
          if (!pooled_whole(window, width, loaded))
            tiles += std::max<std::int64_t>(1, (window.count + tile_rows - 1) / tile_rows);
        return tiles * slabs;
      };
      if (split == 0 || room <= 0 || blocks(Policy::tile_rows) >= room) return Policy::tile_rows;
      std::int64_t fits = Policy::tile_rows;                    // the shortest tiles known to fit
      std::int64_t too_short = Policy::shortest_tile_rows - 1;  // known not to, or past the shortest
      while (fits - too_short > 1) {
        const std::int64_t middle = too_short + (fits - too_short) / 2;
        if (blocks(middle) <= room)
          fits = middle;
        else
          too_short = middle;
      }
      return fits;
    }
  }

  /// Whether tile_rows_for() reads the share's windows (where the policy
  /// fills a wave); where it does not, the planner builds each request as it
  /// decides it.
  static constexpr bool tile_rows_depend_on_share = Policy::split_tiles_fill_a_wave;

  /// Whether cut() takes `window` whole: a warp's (pooled_whole()).
  static bool takes_whole(row_window window, std::int64_t width, std::int64_t, std::int64_t loaded) {
    return pooled_whole(window, width, loaded);
  }

  /// Writes the one item of record `index`, whose window cut() takes whole:
  /// the rows its entry names (the entry's other fields are its caller's), and
  /// its warp, packed into the block before it where that block holds its
  /// neighbour.
  static void cut_whole(share& planned, std::int32_t index, row_window window, std::int64_t) {
    share_records& records = planned.records;
    request_entry& entry = records.entries[static_cast<std::size_t>(index)];
    entry.row_begin = static_cast<std::int32_t>(window.begin);
    entry.rows = static_cast<std::int32_t>(window.count);
    std::vector<work_record>& works = records.works;
    const bool joins = !works.empty() && works.back().slab < 0 && works.back().count < Policy::warps &&
                       works.back().first + works.back().count == index;
    if (joins)
      ++works.back().count;
    else
      works.push_back({index, 1, -1});
  }

  /// Cuts `owner`, record `index` as it is built (its entry not yet written).
  /// A short request is pooled whole by a warp, from the rows its entry names
  /// (no tile record), packed into a block with the short requests next to
  /// it; a long one (or a concat's, or one whose rows lie past 32 bits) is
  /// split into tiles of `tile_rows` rows and slabs of slab_columns of the
  /// `loaded` columns, a block each, with arrival counters for the merge of its
  /// tiles (one per slab) and for its epilogue (one), and a partial row per
  /// tile of a mode_stride for each mode whose columns its row keeps
  /// (partial_stride).
  static void cut(share& planned, std::int32_t index, request_record& owner, row_window window, std::int64_t tile_rows,
                  std::int64_t loaded) {
    share_records& records = planned.records;
    if (takes_whole(window, owner.width, tile_rows, loaded)) {
      owner.num_tiles = 1;
      cut_whole(planned, index, window, loaded);
      return;
    }
    // A concat's request that finishes from its state alone is one tile of no rows.
    const std::int64_t num_tiles = std::max<std::int64_t>(1, (window.count + tile_rows - 1) / tile_rows);
    const std::int64_t slabs = (loaded + Policy::slab_columns - 1) / Policy::slab_columns;
    check_indexable(static_cast<std::int64_t>(records.tiles.size()) + num_tiles, "tiles");
    owner.num_tiles = static_cast<std::int32_t>(num_tiles);
    owner.arrivals = planned.take_arrivals(slabs + 1);
    records.entries[static_cast<std::size_t>(index)].detail = request_entry::held_in_full;
    if (num_tiles > 1)
      owner.partials = planned.take_workspace(num_tiles * partial_stride(owner.width, loaded));
    for (std::int64_t t = 0; t < num_tiles; ++t) {
      const std::int64_t rows = std::min(tile_rows, window.count - t * tile_rows);
      const auto tile = static_cast<std::int32_t>(records.tiles.size());
      records.tiles.push_back({window.begin + t * tile_rows, static_cast<std::int32_t>(rows), index,
                               static_cast<std::int32_t>(t), static_cast<std::int32_t>(loaded)});
      for (std::int64_t slab = 0; slab < slabs; ++slab)
        records.works.push_back({tile, 1, static_cast<std::int32_t>(slab)});
    }
  }

  /// The most tiles, blocks, arrival counters and partial floats a share of a
  /// sequence method within `limits` can need: a request is at most one tile
  /// more than its rows fill, and a split request reads more than
  /// packed_elements, or is a concat's (`modes` > 1).
  static void bound_pooling(const capacity& limits, std::int64_t hidden_size, std::int64_t modes,
                            share_bounds& most) {
    const std::int64_t rows = limits.rows;
    most.records.tiles = static_cast<std::size_t>(limits.requests + rows / Policy::tile_rows);
    most.workspace_floats += (2 * rows / Policy::tile_rows + limits.requests) * modes * (hidden_size + 3);
    const std::int64_t slabs = (hidden_size + Policy::slab_columns - 1) / Policy::slab_columns;
    const std::int64_t split =
        modes > 1 ? limits.requests : std::min(limits.requests, rows * hidden_size / (Policy::packed_elements + 1));
    most.records.works = static_cast<std::size_t>(limits.requests + (split + rows / Policy::tile_rows) * slabs);
    most.arrivals = split * (slabs + 1);
  }

  // Launching: which kernels, on how many blocks.

  /// One pooling or gathering launch, and one for each of the head's dense
  /// layers (a token method's first reading the returned rows where they lie;
  /// a layer of tiled_layer_outputs or more as tiles, and after a last one
  /// wider than a tile a launch that finishes its rows),
  /// each carrying what kernels carry of the head (kernel_head_of) and
  /// sized by `counts` (a plan's, or a capacity's for a captured step, whose
  /// blocks past the image's own counts return at once), none when it has no
  /// blocks. Gathering and linear launches run on at most
  /// one wave of blocks, a pooling launch on a block an index (or, captured, as
  /// the policy says). A sparse result's launches are a float pooler's whose
  /// output is the workspace, where they write its weights; a launch of its
  /// own, on one wave, lists them.
  template <sized_by Sizing, class Method, class Head, class T, class Result, class Space>
  static void launch(Space& space, const Method& method, const Head& head, hidden_view<T> hidden,
                     const record_counts& counts, const std::byte* image, const launch_buffers<Result>& into) {
    if constexpr (sparse_element<Result>) {
      launch_rows<Sizing>(space, method, head, hidden, counts, image,
                          launch_buffers<float>{into.workspace, 0, into.workspace, into.arrivals, {}});
      if (counts.sparse_lists > 0)
        space.launch(static_cast<std::int64_t>(counts.sparse_lists),
                     list_sparse<Policy>{image, into.output, into.workspace});
    } else {
      launch_rows<Sizing>(space, method, head, hidden, counts, image, into);
    }
  }

 private:
  /// The pooling or gathering launch and the layers'.
  template <sized_by Sizing, class Method, class Head, class T, class Result, class Space>
  static void launch_rows(Space& space, const Method& method, const Head& head, hidden_view<T> hidden,
                          const record_counts& counts, const std::byte* image, const launch_buffers<Result>& into) {
    const auto carried = kernel_head_of(head);
    using Carried = decltype(carried);
    const T* rows = hidden.data_handle();
    const bool rows_aligned = is_aligned(rows) && hidden.stride(0) * static_cast<std::int64_t>(sizeof(T)) % 16 == 0;
    if constexpr (Method::kind == method_kind::token) {
      const auto blocks = static_cast<std::int64_t>(counts.gather_bases) - 1;
      if (blocks > 0)
        space.launch(blocks, gather_rows<Carried, T, Result, Policy>{carried, rows, hidden.stride(0), rows_aligned,
                                                                     image, into.output, into.workspace,
                                                                     into.encoding});
    } else if (counts.works > 0) {
      const pool_rows<Method, Carried, T, Result, Policy> pooling{
          method, carried, rows, hidden.stride(0), rows_aligned, image, into.output, into.workspace, into.arrivals,
          into.encoding};
      const auto works = static_cast<std::int64_t>(counts.works);
      if constexpr (Sizing == sized_by::capacity && Policy::captured_pooling_in_one_wave)
        space.launch(works, in_one_wave<decltype(pooling)>{pooling});
      else
        space.launch(works, pooling);
    }
    const dense_stack layers = head.layers();
    if (!layers.present() || counts.linears == 0) return;
    const auto rows_in = static_cast<std::int64_t>(counts.linears);
    const layer_results<Result, Policy> results{into.output, into.workspace, into.encoding};
    for (int k = 0; k < layers.size(); ++k) {
      const dense_layer& layer = layers[k];
      const std::int64_t outputs_between = k + 1 == layers.size() ? -1 : layers.between_offset(k);
      const auto run_layer = [&]<class Inputs>(const Inputs& inputs) {
        if (layer.linear.out_features >= Policy::tiled_layer_outputs) {
          using tiles = linear_tiles<Carried, Inputs, Result, Policy>;
          const std::int64_t across = tiles::output_tiles(layer.linear.out_features);
          space.launch(tiles::row_tiles(rows_in) * across,
                       tiles{carried, layer, inputs, outputs_between, image, results});
          if (outputs_between < 0 && across > 1)
            space.launch((rows_in + Policy::warps - 1) / Policy::warps,
                         finish_linear<Carried, Result, Policy>{carried, image, results});
          return;
        }
        using linear_kernel = apply_linear<Carried, Inputs, Result, Policy>;
        const std::int64_t per_block = linear_kernel::rows_per_block(layer.linear.in_features);
        space.launch((rows_in + per_block - 1) / per_block,
                     linear_kernel{carried, layer, inputs, outputs_between, image, results});
      };
      if constexpr (Method::kind == method_kind::token) {
        if (k == 0) {
          run_layer(returned_rows<T>{rows, hidden.stride(0), rows_aligned});
          continue;
        }
      }
      run_layer(workspace_inputs{into.workspace, k == 0 ? -1 : layers.between_offset(k - 1)});
    }
  }
};

}  // namespace seqpool::detail::device
