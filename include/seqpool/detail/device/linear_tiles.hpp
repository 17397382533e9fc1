// Device kernels: a wide dense layer of the head (a multi-vector projection, a
// stack's wide layers) as tiles of rows × outputs, a matrix product.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/finish_linear.hpp>
#include <seqpool/detail/device/layer_inputs.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/device/vector.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/head/concepts.hpp>

namespace seqpool::detail::device {

/// A block multiplies a tile of `tile_rows` input rows by the weights of
/// `tile_outputs` outputs, `depth` inputs at a time: the block's threads copy
/// the next slice of the rows (from where its Inputs say they lie) and of the
/// weights into registers, multiply the slice shared memory holds, then store
/// theirs into the other of two slices, one barrier a slice. Each thread sums
/// 4 rows × 8 outputs in registers, a product of 4 + 8 values read from shared
/// memory (the rows' 4 one vector that half a warp reads alike, the outputs' 8
/// two vectors half a tile apart, so that a quarter warp's vectors lie in
/// distinct banks) — where apply_linear reads a staged input from shared
/// memory for every product, and a weight from L2 for at most 8 rows. Each sum takes its inputs in order, so a row's
/// outputs do not depend on the rows that share its tile. The outputs are
/// written with the bias and the layer's activation function; after the last
/// layer a block whose tile holds every output finishes its rows itself, else a
/// launch of finish_linear follows.
template <class Head, class Inputs, class Result, class Policy>
struct linear_tiles {
  static constexpr int threads = Policy::threads;
  static constexpr bool one_wave = true;
  static constexpr int columns = 16;          ///< threads across a tile's outputs
  static constexpr int rows_a_thread = 4;     ///< one vector of a slice's row values
  static constexpr int outputs_a_thread = 8;  ///< two vectors, half a tile apart
  static constexpr int tile_outputs = columns * outputs_a_thread;
  static constexpr int tile_rows = threads / columns * rows_a_thread;
  static constexpr int depth = Policy::layer_tile_depth;
  static constexpr int inputs_copied = tile_rows * depth / threads;      ///< a thread's run of one row
  static constexpr int weights_copied = tile_outputs * depth / threads;  ///< a thread's run of one output
  static constexpr int padding = 4;  ///< floats after each row of a slice: stores of a warp spread over banks
  static_assert(rows_a_thread == 4 && outputs_a_thread == 8, "a thread reads its values as vectors of four");
  static_assert(depth % inputs_copied == 0 && depth % weights_copied == 0 && inputs_copied % 4 == 0,
                "a thread copies one run of a slice's row, a whole vector's worth, and one of an output's");

  struct alignas(16) slice {                       // 16-byte rows: a thread reads its values as vectors
    float inputs[depth][tile_rows + padding];      ///< input k of row r at [k][r]
    float weights[depth][tile_outputs + padding];  ///< weight k of output o at [k][o]
  };
  struct shared_storage {
    typename Inputs::row sources[tile_rows];  ///< where each of the tile's rows lies
    float* written[tile_rows];                ///< where its outputs go
    std::int32_t widths[tile_rows];           ///< its outputs kept
    slice slices[2];
  };

  /// What a thread holds: its sums, and the next slice's runs it copies.
  struct sums {
    float at[rows_a_thread][outputs_a_thread];
  };
  struct copied {
    typename Inputs::template run<inputs_copied> inputs;  ///< converted to floats at the store
    float weights[weights_copied];
  };

  SEQPOOL_HOST_DEVICE static constexpr std::int64_t output_tiles(std::int64_t out_features) {
    return (out_features + tile_outputs - 1) / tile_outputs;
  }
  SEQPOOL_HOST_DEVICE static constexpr std::int64_t row_tiles(std::int64_t rows) {
    return (rows + tile_rows - 1) / tile_rows;
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
    const std::int64_t out_features = layer.linear.out_features;
    const std::int64_t in_features = layer.linear.in_features;
    const std::int64_t across = output_tiles(out_features);
    const std::int64_t first_row = index / across * tile_rows;
    const std::int64_t first_output = index % across * tile_outputs;
    if (first_row >= count) return;
    const int rows = count - first_row < tile_rows ? static_cast<int>(count - first_row) : tile_rows;
    const linear_record* records = header.linears.in(image) + first_row;
    const bool last = outputs_between < 0;

    block.threads([&](int warp, int lane) {
      const int thread = warp * warp_lanes + lane;
      if (thread >= rows) return;
      const linear_record& row = records[thread];
      shared.sources[thread] = inputs.row_of(image, row);
      shared.written[thread] = last ? results.row_of(row) : results.workspace + row.between + outputs_between;
      shared.widths[thread] = last ? row.width : static_cast<std::int32_t>(out_features);
    });
    block.sync();

    typename Block::template values<sums> held;
    typename Block::template values<copied> next;
    block.threads([&](int warp, int lane) {
      sums& mine = held(warp, lane);
      SEQPOOL_UNROLL
      for (int r = 0; r < rows_a_thread; ++r) SEQPOOL_UNROLL
      for (int o = 0; o < outputs_a_thread; ++o) mine.at[r][o] = 0.0f;
      copy(shared, rows, first_output, 0, warp * warp_lanes + lane, next(warp, lane));
      store(next(warp, lane), warp * warp_lanes + lane, shared.slices[0]);
    });
    block.sync();
    int current = 0;
    for (std::int64_t from = 0; from < in_features; from += depth) {
      const bool more = from + depth < in_features;
      block.threads([&](int warp, int lane) {
        const int thread = warp * warp_lanes + lane;
        if (more) copy(shared, rows, first_output, from + depth, thread, next(warp, lane));
        multiply(shared.slices[current], thread, held(warp, lane));
        if (more) store(next(warp, lane), thread, shared.slices[1 - current]);
      });
      block.sync();
      current = 1 - current;
    }

    const activation_function function = layer.activation;
    block.threads([&](int warp, int lane) {
      const int thread = warp * warp_lanes + lane;
      const sums& mine = held(warp, lane);
      SEQPOOL_UNROLL
      for (int r = 0; r < rows_a_thread; ++r) {
        const int row = thread / columns * rows_a_thread + r;
        if (row >= rows) break;
        SEQPOOL_UNROLL
        for (int o = 0; o < outputs_a_thread; ++o) {
          const std::int64_t output = first_output + output_of(thread, o);
          if (output >= shared.widths[row]) continue;
          const float total = layer.linear.bias != nullptr ? mine.at[r][o] + layer.linear.bias[output] : mine.at[r][o];
          shared.written[row][output] = activate(function, total);
        }
      }
    });
    if (!last || across > 1) return;
    block.sync();
    block.warps([&](const auto& warp) {
      for (int row = warp.index; row < rows; row += Policy::warps)
        results.finish(warp, head, requests_of(header, image)[records[row].request].knobs, shared.written[row],
                       records[row]);
    });
  }

 private:
  /// The tile's output that a thread's `o`-th sum is: two runs of four, half a tile apart.
  SEQPOOL_HOST_DEVICE static int output_of(int thread, int o) {
    return o / 4 * (tile_outputs / 2) + thread % columns * 4 + o % 4;
  }

  /// A thread's runs of the slice of inputs from `from`: of a row, and of an
  /// output's weights (zeros past the rows, the outputs and the inputs: a row
  /// past the tile's reads the first row's past its last input).
  SEQPOOL_HOST_DEVICE void copy(const shared_storage& shared, int rows, std::int64_t first_output, std::int64_t from,
                                int thread, copied& run) const {
    const std::int64_t in_features = layer.linear.in_features;
    const int row = thread / (depth / inputs_copied);
    const std::int64_t column = from + thread % (depth / inputs_copied) * inputs_copied;
    inputs.load_run(shared.sources[row < rows ? row : 0], row < rows ? column : in_features, in_features, run.inputs);
    const std::int64_t output = first_output + thread / (depth / weights_copied);
    const std::int64_t weight = from + thread % (depth / weights_copied) * weights_copied;
    const float* weights = layer.linear.weight + output * in_features;
    SEQPOOL_UNROLL
    for (int e = 0; e < weights_copied; ++e)
      run.weights[e] = output < layer.linear.out_features && weight + e < in_features ? weights[weight + e] : 0.0f;
  }

  /// Stores a thread's runs into a slice, transposed: a slice's k-th row holds
  /// input k of every row of the tile, and weight k of every output.
  SEQPOOL_HOST_DEVICE static void store(const copied& run, int thread, slice& into) {
    const int row = thread / (depth / inputs_copied);
    const int input = thread % (depth / inputs_copied) * inputs_copied;
    float values[inputs_copied];
    Inputs::unpack(run.inputs, values);
    SEQPOOL_UNROLL
    for (int e = 0; e < inputs_copied; ++e) into.inputs[input + e][row] = values[e];
    const int output = thread / (depth / weights_copied);
    const int weight = thread % (depth / weights_copied) * weights_copied;
    SEQPOOL_UNROLL
    for (int e = 0; e < weights_copied; ++e) into.weights[weight + e][output] = run.weights[e];
  }

  /// Adds a slice's products to a thread's sums, input by input.
  SEQPOOL_HOST_DEVICE static void multiply(const slice& from, int thread, sums& mine) {
    const int first_row = thread / columns * rows_a_thread;
    SEQPOOL_UNROLL
    for (int k = 0; k < depth; ++k) {
      float row_values[rows_a_thread];
      float weights[outputs_a_thread];
      load_four(&from.inputs[k][first_row], row_values);
      SEQPOOL_UNROLL
      for (int o = 0; o < outputs_a_thread; o += 4) load_four(&from.weights[k][output_of(thread, o)], weights + o);
      SEQPOOL_UNROLL
      for (int r = 0; r < rows_a_thread; ++r) SEQPOOL_UNROLL
      for (int o = 0; o < outputs_a_thread; ++o) mine.at[r][o] += row_values[r] * weights[o];
    }
  }
};

}  // namespace seqpool::detail::device
