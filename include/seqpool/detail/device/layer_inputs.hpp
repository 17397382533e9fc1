// Device kernels: where a dense layer's launch reads its input rows.
#pragma once

#include <cstddef>
#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/vector.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/to_float.hpp>

namespace seqpool::detail::device {

/// Inputs in the workspace: a sequence method's pooled rows, or a stack's
/// outputs of the layer before.
struct workspace_inputs {
  using row = const float*;

  const float* workspace;
  /// Where among a row's floats between layers the inputs lie; -1: the pooled row.
  std::int64_t between;

  SEQPOOL_HOST_DEVICE row row_of(const std::byte*, const linear_record& record) const {
    return workspace + (between < 0 ? record.input : record.between + between);
  }

  /// Thread `thread` of `threads` copies its share of `count` inputs of each
  /// of the rows into `to`, a row after the other (staged rows fit shared
  /// memory: their indices are 32-bit).
  template <class Policy>
  SEQPOOL_HOST_DEVICE void stage(const row* rows, int num_rows, int count, float* to, int thread, int threads) const {
    for (int i = thread; i < num_rows * count; i += threads) to[i] = rows[i / count][i % count];
  }

  /// N inputs of a row as a thread holds them from their load to their use.
  template <int N>
  struct run {
    float at[N];
  };

  /// N inputs of a row from `column`, zeros past its `count`.
  template <int N>
  SEQPOOL_HOST_DEVICE void load_run(row from, std::int64_t column, std::int64_t count, run<N>& into) const {
    SEQPOOL_UNROLL
    for (int e = 0; e < N; ++e) into.at[e] = column + e < count ? from[column + e] : 0.0f;
  }

  template <int N>
  SEQPOOL_HOST_DEVICE static void unpack(const run<N>& held, float (&to)[N]) {
    SEQPOOL_UNROLL
    for (int e = 0; e < N; ++e) to[e] = held.at[e];
  }
};

/// A token method's returned rows, read by the first layer where they lie —
/// rows of the hidden states (through the request's column table when it has
/// one), or rows an earlier chunk stashed in the request's state — so that no
/// pass gathers them into the workspace first, and none reads them back.
template <class T>
struct returned_rows {
  static constexpr int elements = vector_elements<T>;  ///< inputs of a run: one 16-byte vector of hidden states

  /// Where one returned row's inputs lie.
  struct row {
    const float* stashed;  ///< a stashed row, or null
    const T* hidden;       ///< else its hidden row
    const std::int32_t* chosen;  ///< the hidden columns its inputs are, or null for all

    SEQPOOL_HOST_DEVICE float operator[](std::int64_t k) const {
      if (stashed != nullptr) return stashed[k];
      return to_float(hidden[chosen != nullptr ? chosen[k] : k]);
    }
  };

  const T* hidden;
  std::int64_t row_stride;
  bool rows_aligned;  ///< the hidden states and their row stride on 16-byte boundaries

  SEQPOOL_HOST_DEVICE row row_of(const std::byte* image, const linear_record& record) const {
    const image_header& header = *reinterpret_cast<const image_header*>(image);
    const request_table requests = requests_of(header, image);
    const request_entry entry = requests.entries[record.request];
    if (record.source >= 0) {
      const std::int64_t columns = requests.rest(entry).columns;
      return {nullptr, hidden + record.source * row_stride,
              columns >= 0 ? header.column_table.in(image) + columns : nullptr};
    }
    return {header.state_table.in(image)[entry.detail] + (-1 - record.source), nullptr, nullptr};
  }

  /// N inputs of a row as a thread holds them from their load to their use:
  /// a whole run of a hidden row as loaded, converted only at its use (so
  /// that nothing waits on the load before then), any other as floats.
  template <int N>
  struct run {
    static constexpr int bytes = N * static_cast<int>(sizeof(T));
    static constexpr bool loads_whole = bytes == 8 || bytes == 16;
    raw_bytes<loads_whole ? bytes : vector_bytes> loaded;
    float at[N];
    bool raw;
  };

  /// N inputs of a row from `column` (a multiple of N), zeros past its
  /// `count`: one load, evict-first, where they are a whole run of a hidden
  /// row of all columns on a 16-byte boundary (a layer of more than one tile
  /// of outputs reads it again from L2 or memory, as it would any row).
  template <int N>
  SEQPOOL_HOST_DEVICE void load_run(const row& from, std::int64_t column, std::int64_t count, run<N>& into) const {
    into.raw = false;
    if constexpr (run<N>::loads_whole) {
      if (from.hidden != nullptr && from.chosen == nullptr && rows_aligned && column + N <= count) {
        into.loaded = load_once<run<N>::bytes>(from.hidden + column);
        into.raw = true;
        return;
      }
    }
    SEQPOOL_UNROLL
    for (int e = 0; e < N; ++e) into.at[e] = column + e < count ? from[column + e] : 0.0f;
  }

  template <int N>
  SEQPOOL_HOST_DEVICE static void unpack(const run<N>& held, float (&to)[N]) {
    if constexpr (run<N>::loads_whole) {
      if (held.raw) {
        to_floats<T>(held.loaded, to);
        return;
      }
    }
    SEQPOOL_UNROLL
    for (int e = 0; e < N; ++e) to[e] = held.at[e];
  }

  /// Thread `thread` of `threads` converts its share of `count` inputs of
  /// each of the rows into `to`, a row after the other, a run of `elements`
  /// at a time: Policy::linear_vectors_in_flight runs loaded before any is
  /// converted, each a 16-byte load of data read once where the run is a
  /// whole vector of a hidden row of all columns on a 16-byte boundary.
  /// Staged rows fit shared memory: their indices are 32-bit.
  template <class Policy>
  SEQPOOL_HOST_DEVICE void stage(const row* rows, int num_rows, int count, float* to, int thread, int threads) const {
    constexpr int in_flight = Policy::linear_vectors_in_flight;
    const int runs = (count + elements - 1) / elements;  // a row's
    const int total = num_rows * runs;
    for (int first = thread; first < total; first += threads * in_flight) {
      raw_vector loaded[in_flight] = {};
      SEQPOOL_UNROLL
      for (int i = 0; i < in_flight; ++i) {
        const int run = first + i * threads;
        if (run < total && is_vector(rows[run / runs], run % runs * elements, count))
          loaded[i] = load_once(rows[run / runs].hidden + run % runs * elements);
      }
      SEQPOOL_UNROLL
      for (int i = 0; i < in_flight; ++i) {
        const int run = first + i * threads;
        if (run >= total) break;
        const row& from = rows[run / runs];
        const int column = run % runs * elements;
        float* out = to + run / runs * count + column;
        if (is_vector(from, column, count)) {
          to_floats<T>(loaded[i], out);
          continue;
        }
        for (int e = 0; e < elements && column + e < count; ++e) out[e] = from[column + e];
      }
    }
  }

 private:
  /// Whether the run at `column` of a row of `count` inputs is one vector load.
  SEQPOOL_HOST_DEVICE bool is_vector(const row& from, int column, int count) const {
    return from.hidden != nullptr && from.chosen == nullptr && rows_aligned && column + elements <= count;
  }
};

}  // namespace seqpool::detail::device
