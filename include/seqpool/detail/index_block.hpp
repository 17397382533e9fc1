// The layout of the one block of indices a step uploads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/records.hpp>

namespace seqpool::detail {

/// `count` records of T at `offset` bytes into the block.
template <class T>
struct section {
  std::size_t offset = 0;
  std::size_t count = 0;

  /// The section inside a block that starts at `base`, on the host or on the device.
  SEQPOOL_HOST_DEVICE T* in(std::byte* base) const { return reinterpret_cast<T*>(base + offset); }
  SEQPOOL_HOST_DEVICE const T* in(const std::byte* base) const { return reinterpret_cast<const T*>(base + offset); }
};

/// How many records of each kind a block holds: a plan's, or the most a capacity allows.
struct record_counts {
  std::size_t requests = 0;
  std::size_t tiles = 0;
  std::size_t works = 0;     ///< device kernels: blocks of the pooling launch
  std::size_t combines = 0;  ///< host algorithms: requests whose tile partials a pass of its own merges
  std::size_t gathers = 0;
  std::size_t columns = 0;
  std::size_t linears = 0;
};

/// Where each kind of record sits in the uploaded block. The block starts with
/// this header, so device work learns every count from the block it reads: a
/// launch sized for a capacity lets the items past the actual counts return.
/// An all-zero header is a block with nothing to do.
struct plan_sections {
  section<request_record> requests;
  section<float*> state_table;  ///< one state block per request, known only once reserve() has run
  section<tile_record> tiles;
  section<work_record> works;
  section<std::int32_t> combines;  ///< request indices
  section<gather_record> gathers;
  section<std::int32_t> column_table;
  section<linear_record> linears;
};

/// Every section starts on a 16-byte boundary, after the header.
inline constexpr std::size_t block_alignment = 16;

constexpr std::size_t align_bytes(std::size_t bytes) {
  return (bytes + block_alignment - 1) / block_alignment * block_alignment;
}

/// Lays the sections for `counts` out after the header; returns the block's size.
inline std::size_t lay_out_sections(const record_counts& counts, plan_sections& at) {
  std::size_t bytes = align_bytes(sizeof(plan_sections));
  const auto add = [&]<class T>(section<T>& where, std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T>, "uploaded records must be plain bytes");
    where = {bytes, count};
    bytes = align_bytes(bytes + count * sizeof(T));
  };
  add(at.requests, counts.requests);
  add(at.state_table, counts.requests);
  add(at.tiles, counts.tiles);
  add(at.works, counts.works);
  add(at.combines, counts.combines);
  add(at.gathers, counts.gathers);
  add(at.column_table, counts.columns);
  add(at.linears, counts.linears);
  return bytes;
}

inline std::size_t block_bytes(const record_counts& counts) {
  plan_sections at;
  return lay_out_sections(counts, at);
}

}  // namespace seqpool::detail
