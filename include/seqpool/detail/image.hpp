// The image of a step's plan: the bytes the step uploads and its kernels read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/detail/records.hpp>

namespace seqpool::detail {

/// `count` records of T at `offset` bytes into the image.
template <class T>
struct section {
  std::size_t offset = 0;
  std::size_t count = 0;

  /// The section inside an image that starts at `base`, on the host or on the device.
  SEQPOOL_HOST_DEVICE T* in(std::byte* base) const { return reinterpret_cast<T*>(base + offset); }
  SEQPOOL_HOST_DEVICE const T* in(const std::byte* base) const { return reinterpret_cast<const T*>(base + offset); }
};

/// How many records of each kind an image holds: a plan's, or the most a capacity allows.
struct record_counts {
  std::size_t requests = 0;
  std::size_t details = 0;  ///< request records held in full (request_entry)
  std::size_t tiles = 0;
  std::size_t works = 0;     ///< device kernels: blocks of the pooling launch
  std::size_t combines = 0;  ///< host algorithms: requests whose tile partials a pass of its own merges
  std::size_t gathers = 0;       ///< token methods: runs of rows
  std::size_t gather_bases = 0;  ///< token methods: one more than the items or blocks of the gathering launch
  std::size_t mask_words = 0;    ///< token methods: the bits of masked runs
  std::size_t columns = 0;
  std::size_t linears = 0;
  std::size_t sparse_lists = 0;  ///< sparse results: a list per finishing request
  std::size_t sparse_slots = 0;  ///< sparse results: a slot per distinct id of a list, and one to end it
  std::size_t sparse_order = 0;  ///< sparse results: a list's tokens, by slot
};

/// What a step's launches are sized by: its plan's record counts (an eager
/// step), or a capacity's (a captured step, replayed for every batch within
/// it: block indices past the batch's records return at once).
enum class sized_by : std::uint8_t { plan, capacity };

/// Where each kind of record sits in the image. The image starts with this
/// header, so device work learns every count from the image it reads: a launch
/// sized for a capacity lets the items past the actual counts return. An
/// all-zero header is an image with nothing to do.
struct image_header {
  section<request_entry> requests;
  section<request_record> details;
  section<float*> state_table;  ///< one state per detail record, known only once reserve() has run
  section<tile_record> tiles;
  section<work_record> works;
  section<std::int32_t> combines;  ///< request record indices
  section<gather_record> gathers;
  section<gather_base> gather_bases;
  section<std::uint32_t> masks;
  section<std::int32_t> column_table;
  section<linear_record> linears;
  section<sparse_list> sparse_lists;
  section<sparse_slot> sparse_slots;
  section<std::int32_t> sparse_order;
  request_record common;  ///< the share's common request record (request_entry)
};

/// The request records of the image that starts with `header`.
SEQPOOL_HOST_DEVICE inline request_table requests_of(const image_header& header, const std::byte* image) {
  return {header.requests.in(image), header.details.in(image), &header.common};
}

/// Every section starts on a 16-byte boundary, after the header.
inline constexpr std::size_t section_alignment = 16;

constexpr std::size_t align_bytes(std::size_t bytes) {
  return (bytes + section_alignment - 1) / section_alignment * section_alignment;
}

/// Where the first section starts: the pooling launch's works, or the
/// gathering launch's bases (a share has one or the other, never both).
inline constexpr std::size_t first_section_offset = align_bytes(sizeof(image_header));

/// The records a block of the pooling or gathering launch reads first: their
/// address needs no field of the header, so a block loads its own beside the
/// header. A block reads its record (the gathering launch's, the next one too)
/// before it checks its index against the header's count: within the image's
/// memory as long as a launch has no more block indices than the image has
/// records (bases less one), as an eager launch (its plan's counts) and a
/// captured one (its capacity's, its region laid out for them) both have; a
/// captured block past its batch's records reads bytes of its region this
/// replay did not write, and returns.
template <class T>
SEQPOOL_HOST_DEVICE const T* first_records(const std::byte* image) {
  return reinterpret_cast<const T*>(image + first_section_offset);
}

/// Lays the sections for `counts` out after the header, the works and the
/// gather bases first (first_records); returns the image's bytes.
inline std::size_t lay_out_image(const record_counts& counts, image_header& header) {
  std::size_t bytes = first_section_offset;
  const auto add = [&]<class T>(section<T>& where, std::size_t count) {
    static_assert(std::is_trivially_copyable_v<T>, "an image holds plain bytes");
    where = {bytes, count};
    bytes = align_bytes(bytes + count * sizeof(T));
  };
  add(header.works, counts.works);
  add(header.gather_bases, counts.gather_bases);
  add(header.requests, counts.requests);
  add(header.details, counts.details);
  add(header.state_table, counts.details);
  add(header.tiles, counts.tiles);
  add(header.combines, counts.combines);
  add(header.gathers, counts.gathers);
  add(header.masks, counts.mask_words);
  add(header.column_table, counts.columns);
  add(header.linears, counts.linears);
  add(header.sparse_lists, counts.sparse_lists);
  add(header.sparse_slots, counts.sparse_slots);
  add(header.sparse_order, counts.sparse_order);
  return bytes;
}

inline std::size_t image_bytes(const record_counts& counts) {
  image_header header;
  return lay_out_image(counts, header);
}

}  // namespace seqpool::detail
