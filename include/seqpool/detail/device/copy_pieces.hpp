// Device kernel of a captured step: the parts of its image the batch uses,
// copied from the graph's pinned slot.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda/std/bit>

#include <seqpool/config.hpp>
#include <seqpool/detail/device/policy.hpp>
#include <seqpool/detail/device/team.hpp>
#include <seqpool/detail/device/vector.hpp>

namespace seqpool::detail::device {

/// A part of a captured step's image: `bytes` from `offset`, both multiples of 16.
struct image_piece {
  std::uint64_t offset;
  std::uint64_t bytes;
};

/// The most pieces a graph's slot lists: a lane of one warp reads each.
inline constexpr int most_image_pieces = warp_lanes;

/// Copies the pieces a graph's slot lists from the slot, pinned host memory the
/// GPU reads through unified addressing, to the device's image: each launch of
/// the graph moves what its batch uses, not what its capacity could. Warp 0
/// reads the list, a piece a lane, in one round trip to the host; then each
/// thread copies every (blocks × threads)-th 16-byte vector of each piece,
/// `vectors_in_flight` loads issued before their stores.
struct copy_pieces {
  static constexpr int threads = staging_policy::copy_threads;
  static constexpr bool one_wave = true;
  static constexpr int vectors_in_flight = staging_policy::copy_vectors_in_flight;

  struct shared_storage {
    image_piece pieces[most_image_pieces];
  };

  const std::byte* slot;  ///< `pieces` pieces, then the image they are parts of
  std::byte* image;       ///< the device's image
  int pieces;
  std::int64_t blocks;    ///< the launch's block indices

  template <class Block>
  SEQPOOL_HOST_DEVICE void operator()(const Block& block, std::int64_t index, shared_storage& shared) const {
    block.threads([&](int warp, int lane) {
      if (warp == 0 && lane < pieces)
        shared.pieces[lane] = cuda::std::bit_cast<image_piece>(load_uncached(slot + lane * sizeof(image_piece)));
    });
    block.sync();
    const std::byte* staged = slot + pieces * sizeof(image_piece);
    const std::int64_t stride = blocks * threads;
    block.threads([&](int warp, int lane) {
      const std::int64_t first = index * threads + warp * warp_lanes + lane;
      for (int p = 0; p < pieces; ++p) {
        const image_piece piece = shared.pieces[p];
        const auto vectors = static_cast<std::int64_t>(piece.bytes / vector_bytes);
        const std::byte* from = staged + piece.offset;
        std::byte* to = image + piece.offset;
        std::int64_t v = first;
        for (; v + (vectors_in_flight - 1) * stride < vectors; v += vectors_in_flight * stride) {
          raw_vector loaded[vectors_in_flight];
          SEQPOOL_UNROLL
          for (int u = 0; u < vectors_in_flight; ++u) loaded[u] = load_uncached(from + (v + u * stride) * vector_bytes);
          SEQPOOL_UNROLL
          for (int u = 0; u < vectors_in_flight; ++u) store_vector(to + (v + u * stride) * vector_bytes, loaded[u]);
        }
        for (; v < vectors; v += stride) store_vector(to + v * vector_bytes, load_uncached(from + v * vector_bytes));
      }
    });
  }
};

}  // namespace seqpool::detail::device
