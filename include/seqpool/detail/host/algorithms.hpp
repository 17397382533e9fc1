// The host algorithms as one family: how a share's requests are cut into items
// for CPU threads, and which passes run them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include <seqpool/capacity.hpp>
#include <seqpool/detail/host/apply_linear.hpp>
#include <seqpool/detail/host/combine_partials.hpp>
#include <seqpool/detail/host/gather_rows.hpp>
#include <seqpool/detail/host/list_sparse.hpp>
#include <seqpool/detail/host/policy.hpp>
#include <seqpool/detail/host/reduce_tiles.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/share.hpp>
#include <seqpool/head/concepts.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool::detail::host {

/// Written for CPU caches: an item covers whole rows, so its inner loop
/// vectorises and a row's epilogue runs while the row is in cache. A long
/// request's tiles are merged by a pass of their own (combine_partials), and an
/// item that pools a row passes it through the head's one dense layer itself.
template <class Policy = launch_policy>
struct algorithms {
  using policy = Policy;

  // Planning: how the planner cuts a share.

  /// The widest result row the item that finishes a pooled request holds whole
  /// through the head's epilogue: its scratch row, however the request is cut.
  static std::int64_t held_width(row_window, std::int64_t, std::int64_t) { return Policy::held_row_floats; }

  /// An item encodes any row its scratch row holds (store_row): quantized rows
  /// are drafted only where 16-bit ones would be.
  static constexpr bool drafts_quantized_rows = false;

  /// Whether the item that pools a row passes it through the head's one dense
  /// layer itself: when the pooled row, and a result row other than float, fit
  /// its scratch row. (A stack takes the layers' pass.)
  static bool linear_in_item(std::int64_t pooled_width, std::int64_t out_width, bool rounding) {
    return pooled_width <= Policy::scratch_row_floats && (!rounding || out_width <= Policy::scratch_row_floats);
  }

  /// A token method's returned rows bound for a stack, or too wide for the
  /// item, are gathered into the workspace for the layers' pass.
  static constexpr bool projects_returned_rows = false;

  /// Whether the layer's pass drafts a result row other than float in the
  /// workspace: when its item cannot hold the row in its scratch row.
  static bool drafts_linear_rows(std::int64_t out_width) { return out_width > Policy::held_row_floats; }

  /// Tiles name their request records.
  static constexpr bool tiles_name_details = false;

  /// Every share's tiles are of tile_rows rows.
  static std::int64_t tile_rows_for(std::span<const row_window>, std::int64_t, std::int64_t, bool) {
    return Policy::tile_rows;
  }

  /// tile_rows_for() reads no window: the planner builds each request as it decides it.
  static constexpr bool tile_rows_depend_on_share = false;

  /// Whether cut() takes `window` whole, as one tile.
  static bool takes_whole(row_window window, std::int64_t, std::int64_t tile_rows, std::int64_t) {
    return window.count <= tile_rows;
  }

  /// Writes the one item of record `index`, whose window cut() takes whole:
  /// its tile, reading `loaded` columns of each row.
  static void cut_whole(share& planned, std::int32_t index, row_window window, std::int64_t loaded) {
    planned.records.tiles.push_back(
        {window.begin, static_cast<std::int32_t>(window.count), index, 0, static_cast<std::int32_t>(loaded)});
  }

  /// Cuts `owner`, record `index` as it is built (its entry not yet written):
  /// a tile of up to `tile_rows` rows per item (one of no rows for a request
  /// that finishes from its state alone), reading `loaded` columns of each,
  /// and, for several, a combine that merges their partials in a pass of its
  /// own.
  static void cut(share& planned, std::int32_t index, request_record& owner, row_window window, std::int64_t tile_rows,
                  std::int64_t loaded) {
    if (takes_whole(window, owner.width, tile_rows, loaded)) {
      owner.num_tiles = 1;
      cut_whole(planned, index, window, loaded);
      return;
    }
    const std::int64_t num_tiles = (window.count + tile_rows - 1) / tile_rows;
    owner.num_tiles = static_cast<std::int32_t>(num_tiles);
    owner.partials = planned.take_workspace(num_tiles * owner.width);
    planned.records.combines.push_back(index);
    planned.records.entries[static_cast<std::size_t>(index)].detail = request_entry::held_in_full;
    for (std::int64_t t = 0; t < num_tiles; ++t) {
      const std::int64_t rows = std::min(tile_rows, window.count - t * tile_rows);
      planned.records.tiles.push_back({window.begin + t * tile_rows, static_cast<std::int32_t>(rows), index,
                                       static_cast<std::int32_t>(t), static_cast<std::int32_t>(loaded)});
    }
  }

  /// The most tiles, combines and partial floats a share of a sequence method
  /// within `limits` can need: a request is at most one tile more than its rows
  /// fill, and each of its tiles may write a partial row of `modes` × hidden_size floats.
  static void bound_pooling(const capacity& limits, std::int64_t hidden_size, std::int64_t modes,
                            share_bounds& most) {
    most.records.tiles = static_cast<std::size_t>(limits.requests + limits.rows / Policy::tile_rows);
    most.records.combines = static_cast<std::size_t>(limits.requests);
    most.workspace_floats += (2 * limits.rows / Policy::tile_rows + limits.requests) * (modes * hidden_size + 3);
  }

  // Launching: the passes of a share, over an image on the host.

  /// One pass per kind of record the image holds (an image on the host, whose
  /// header gives every count): reduce_tiles then combine_partials for a
  /// sequence method, gather_rows for a token method, then apply_linear for
  /// rows the items could not pass through the layer. A captured step's passes
  /// are the same: the header gives the batch's counts. A sparse result's
  /// passes are a float pooler's whose output is the workspace, where they
  /// write its weights; list_sparse lists them.
  template <sized_by, class Method, class Head, class T, class Result, class Space>
  static void launch(Space& space, const Method& method, const Head& head, hidden_view<T> hidden,
                     const record_counts&, const std::byte* image, const launch_buffers<Result>& into) {
    if constexpr (sparse_element<Result>) {
      const image_header& at = *reinterpret_cast<const image_header*>(image);
      launch_rows(space, method, head, hidden, image,
                  launch_buffers<float>{into.workspace, 0, into.workspace, into.arrivals, {}});
      if (at.sparse_lists.count > 0)
        space.launch(static_cast<std::int64_t>(at.sparse_lists.count),
                     list_sparse{at.sparse_lists.in(image), at.sparse_slots.in(image), at.sparse_order.in(image),
                                 into.workspace, into.output});
    } else {
      launch_rows(space, method, head, hidden, image, into);
    }
  }

 private:
  /// The passes that read the hidden states, and the layers'.
  template <class Method, class Head, class T, class Result, class Space>
  static void launch_rows(Space& space, const Method& method, const Head& head, hidden_view<T> hidden,
                          const std::byte* image, const launch_buffers<Result>& into) {
    const image_header& at = *reinterpret_cast<const image_header*>(image);
    const auto items = [](auto section) { return static_cast<std::int64_t>(section.count); };
    const request_table requests = requests_of(at, image);
    const step_memory<Result> memory{into.output, into.workspace, at.state_table.in(image), into.encoding};
    const bool stream_results =
        static_cast<std::size_t>(into.output_values) * sizeof(Result) >= Policy::streamed_output_bytes;
    const dense_layer layer = head.layers()[0];  // the items' own, where the head has one layer
    if constexpr (Method::kind == method_kind::token) {
      if (items(at.gather_bases) > 1)
        space.launch(items(at.gather_bases) - 1,
                     gather_rows<Head, T, Result, Policy>{head, layer, hidden.data_handle(), hidden.stride(0),
                                                          at.gathers.in(image), at.gather_bases.in(image),
                                                          at.masks.in(image), requests, at.column_table.in(image),
                                                          memory, stream_results});
    } else {
      if (items(at.tiles) > 0)
        space.launch(items(at.tiles),
                     reduce_tiles<Method, Head, T, Result, Policy>{{method, hidden.data_handle(), hidden.stride(0)},
                                                                   head,
                                                                   layer,
                                                                   at.tiles.in(image),
                                                                   requests,
                                                                   memory,
                                                                   items(at.tiles),
                                                                   stream_results});
      if (items(at.combines) > 0)
        space.launch(items(at.combines),
                     combine_partials<Method, Head, Result, Policy>{method, head, layer, hidden.extent(1),
                                                                    at.combines.in(image), requests, memory});
    }
    if (items(at.linears) > 0)
      space.launch(items(at.linears),
                   apply_linear<Head, Result, Policy>{head, head.layers(), at.linears.in(image), requests, memory});
  }
};

}  // namespace seqpool::detail::host
