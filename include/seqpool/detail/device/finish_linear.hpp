// Device kernels: the result rows of a head's last dense layer, finished — its
// epilogue, then a drafted row encoded into place.
#pragma once

#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/rows.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/result_encoding.hpp>
#include <seqpool/head/knobs.hpp>

namespace seqpool::detail::device {

/// Where a dense layer's launch writes, and how a result row is finished: in
/// float at its place in a float output, or in the draft row the plan gave any
/// other (16-bit and quantized results), from which it is encoded into place.
template <class Result, class Policy>
struct layer_results {
  Result* output;
  float* workspace;
  result_encoding<Result> encoding;

  /// The float row a result row is finished in.
  SEQPOOL_HOST_DEVICE float* row_of(const linear_record& row) const {
    if constexpr (std::is_same_v<Result, float>)
      if (row.draft < 0) return output + row.offset;
    return workspace + row.draft;
  }

  /// The head's epilogue over a result row the last layer wrote at `written`
  /// (row_of(row)), its activation applied, then, drafted, its encoding into
  /// place: by one warp.
  template <class Warp, class Head>
  SEQPOOL_HOST_DEVICE void finish(const Warp& warp, const Head& head, const request_knobs& knobs, float* written,
                                  const linear_record& row) const {
    memory_row<Warp, Policy::warp_row_vectors_in_flight> result{warp, written, row.width};
    head.epilogue(result, knobs);
    if (row.draft >= 0)
      encode_into<Policy::warp_row_vectors_in_flight>(warp, output + row.offset, written, row.width, encoding);
  }
};

/// The last layer's result rows, a warp a row, after a launch whose blocks
/// each wrote some of every row's outputs (linear_tiles over outputs wider
/// than one tile): what a block that holds whole rows does at its end.
template <class Head, class Result, class Policy>
struct finish_linear {
  static constexpr int threads = Policy::threads;
  static constexpr bool one_wave = true;
  struct shared_storage {};

  Head head;
  const std::byte* image;
  layer_results<Result, Policy> results;

  template <class Block>
  SEQPOOL_HOST_DEVICE void operator()(const Block& block, std::int64_t index, shared_storage&) const {
    const image_header& header = *reinterpret_cast<const image_header*>(image);
    const auto count = static_cast<std::int64_t>(header.linears.count);
    const linear_record* records = header.linears.in(image);
    block.warps([&](const auto& warp) {
      const std::int64_t row = index * Policy::warps + warp.index;
      if (row >= count) return;
      const linear_record& finished = records[row];
      results.finish(warp, head, requests_of(header, image)[finished.request].knobs, results.row_of(finished),
                     finished);
    });
  }
};

}  // namespace seqpool::detail::device
