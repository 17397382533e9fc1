// Device kernels: a narrow dense layer of the head (a classifier's classes, a
// lexical weight, a stack's narrow layers) over pooled or returned rows.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/finish_linear.hpp>
#include <seqpool/detail/device/layer_inputs.hpp>
#include <seqpool/detail/device/rows.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/head/concepts.hpp>

namespace seqpool::detail::device {

/// A block passes up to `rows_per_block` rows through one of the head's dense
/// layers of fewer than Policy::tiled_layer_outputs outputs together (wider
/// ones are linear_tiles'): it copies them into shared memory from where its Inputs
/// say they lie (layer_inputs.hpp), then each warp takes
/// outputs in turn, its lanes reading the output's weight row front to back
/// (coalesced) and each weight serving every row of the block; then a warp a
/// row applies the layer's activation function. A launch runs one layer: one
/// before the last writes its outputs to the rows the plan gave between
/// layers, which the next launch reads; the last writes the result rows, and
/// the same warp finishes each (layer_results::finish).
template <class Head, class Inputs, class Result, class Policy>
struct apply_linear {
  static constexpr int threads = Policy::threads;
  static constexpr bool one_wave = true;
  static_assert(Policy::linear_rows <= Policy::warps, "a warp runs the epilogue of each row");

  struct shared_storage {
    typename Inputs::row sources[Policy::linear_rows];  ///< where each of the block's rows lies
    float pooled[Policy::linear_shared_floats];
  };

  /// Rows a block takes for a layer of `in_features` inputs: as many as shared
  /// memory holds, and one, read where it lies for every output, when not even that fits.
  SEQPOOL_HOST_DEVICE static constexpr int rows_per_block(std::int64_t in_features) {
    const std::int64_t fit = Policy::linear_shared_floats / in_features;
    return fit < 1 ? 1 : fit < Policy::linear_rows ? static_cast<int>(fit) : Policy::linear_rows;
  }

  Head head;
  dense_layer layer;  ///< the layer this launch runs
  Inputs inputs;      ///< where it reads its input rows
  /// Where among a row's floats between layers it writes its outputs; -1: the
  /// result row (the last layer's).
  std::int64_t outputs_between;
  const std::byte* image;
  layer_results<Result, Policy> results;

  template <class Block>
  SEQPOOL_HOST_DEVICE void operator()(const Block& block, std::int64_t index, shared_storage& shared) const {
    const image_header& header = *reinterpret_cast<const image_header*>(image);
    const auto count = static_cast<std::int64_t>(header.linears.count);
    const std::int64_t in_features = layer.linear.in_features;
    const int per_block = rows_per_block(in_features);
    const std::int64_t first = index * per_block;
    if (first >= count) return;
    const int rows = count - first < per_block ? static_cast<int>(count - first) : per_block;
    const linear_record* records = header.linears.in(image) + first;
    const bool in_shared = rows * in_features <= Policy::linear_shared_floats;

    block.threads([&](int warp, int lane) {
      const int thread = warp * warp_lanes + lane;
      if (thread < rows) shared.sources[thread] = inputs.row_of(image, records[thread]);
    });
    block.sync();
    if (in_shared) {
      block.threads([&](int warp, int lane) {
        inputs.template stage<Policy>(shared.sources, rows, static_cast<int>(in_features), shared.pooled,
                                      warp * warp_lanes + lane, threads);
      });
    }
    block.sync();
    const bool last = outputs_between < 0;
    auto widest = static_cast<std::int32_t>(layer.linear.out_features);  // widths are 32-bit, as records hold them
    if (last) {
      widest = 0;
      for (int r = 0; r < rows; ++r) widest = records[r].width > widest ? records[r].width : widest;
    }
    // A block whose rows do not fit shared memory has one, read where it lies.
    block.warps([&](const auto& warp) {
      for (std::int32_t o = warp.index; o < widest; o += Policy::warps)
        outputs(warp, o, records, rows, in_shared ? nullptr : &shared.sources[0], shared);
    });
    block.sync();
    // A warp a row: the layer's activation function over the row's outputs,
    // then, after the last layer, the head's epilogue.
    const activation_function function = layer.activation;
    block.warps([&](const auto& warp) {
      if (warp.index >= rows) return;
      const linear_record row = records[warp.index];
      float* written = outputs_of(row);
      const std::int32_t width = last ? row.width : widest;
      if (function != activation_function::identity) {
        warp.lanes([&](int lane) {
          for (std::int32_t c = lane; c < width; c += warp_lanes) written[c] = activate(function, written[c]);
        });
        warp.sync();
      }
      if (last) results.finish(warp, head, requests_of(header, image)[row.request].knobs, written, row);
    });
  }

 private:
  /// Where this launch's layer writes a row's outputs: the result row after
  /// the last layer, the row's place between layers before it.
  SEQPOOL_HOST_DEVICE float* outputs_of(const linear_record& row) const {
    return outputs_between < 0 ? results.row_of(row) : results.workspace + row.between + outputs_between;
  }

  /// Output `o` of every row of the block that keeps it, from the rows staged
  /// in shared memory, or from the one row of a block too wide to stage it.
  template <class Warp>
  SEQPOOL_HOST_DEVICE void outputs(const Warp& warp, std::int32_t o, const linear_record* records, int rows,
                                   const typename Inputs::row* unstaged, const shared_storage& shared) const {
    const std::int64_t in_features = layer.linear.in_features;
    const float* weights = layer.linear.weight + o * in_features;
    typename Warp::template values<lane_fragment<Policy::linear_rows>> sums;
    warp.lanes([&](int lane) {
      lane_fragment<Policy::linear_rows>& mine = sums[lane];
      SEQPOOL_UNROLL
      for (int r = 0; r < Policy::linear_rows; ++r) mine.at[r] = 0.0f;
      // A lane's inputs in ascending order, linear_weights_in_flight weights
      // loaded before the first is used: one round trip to L2 each, not one a weight.
      constexpr int in_flight = Policy::linear_weights_in_flight;
      for (std::int64_t first = lane; first < in_features; first += warp_lanes * in_flight) {
        float weight[in_flight];
        SEQPOOL_UNROLL
        for (int u = 0; u < in_flight; ++u) {
          const std::int64_t k = first + u * warp_lanes;
          weight[u] = k < in_features ? weights[k] : 0.0f;
        }
        SEQPOOL_UNROLL
        for (int u = 0; u < in_flight; ++u) {
          const std::int64_t k = first + u * warp_lanes;
          if (k >= in_features) break;
          SEQPOOL_UNROLL
          for (int r = 0; r < Policy::linear_rows; ++r)
            if (r < rows)
              mine.at[r] += weight[u] * (unstaged == nullptr ? shared.pooled[r * in_features + k] : (*unstaged)[k]);
        }
      }
    });
    SEQPOOL_UNROLL
    for (int r = 0; r < Policy::linear_rows; ++r) {
      if (r >= rows) break;
      const float total = warp.sum([&](int lane) { return sums[lane].at[r]; });
      if (outputs_between < 0 && o >= records[r].width) continue;
      warp.lanes([&](int lane) {
        if (lane == 0) outputs_of(records[r])[o] = layer.linear.bias != nullptr ? total + layer.linear.bias[o] : total;
      });
    }
  }
};

}  // namespace seqpool::detail::device
