// A share: the requests of one pooler in a step, and the records planned for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/reused_list.hpp>
#include <seqpool/error.hpp>
#include <seqpool/state_key.hpp>

namespace seqpool::detail {

/// Refuses a step whose records would index `count` of `what` (tiles, runs,
/// arrival counters), more than they index in 32 bits: a step too large for
/// its records, which smaller steps plan.
inline void check_indexable(std::int64_t count, std::string_view what) {
  if (count > most_counted)
    fail("requests", "the step's records would index ", count, " ", what, ", more than the ", most_counted,
         " they index in 32 bits: plan fewer requests a step");
}

/// A request that keeps state across steps, how many floats it keeps, and what
/// its state is begun with.
struct state_use {
  std::int32_t request;      ///< its first request record
  std::size_t batch_index;   ///< its place in the batch, for messages
  seqpool::request owner;    ///< a copy without token ids (the plan may outlive them)
  std::size_t floats;
  state_key key;
  std::int32_t records = 1;        ///< request records from `request` on that share the state (one per span)
  std::int64_t record_floats = 0;  ///< where each next record's part of the state starts
  std::uint32_t part = 0;          ///< the multi_pooler part whose state it is (state_store), 0 elsewhere
  chosen_rows before;              ///< token methods: the rows the chunks before chose, as planned
  chosen_rows chunk;               ///< token methods: the rows this chunk chooses, which advance() adds
};

/// The records of a share, built on the host, until the step writes them into its image.
struct share_records {
  std::vector<request_entry> entries;   ///< each request record's, as the image holds it
  std::vector<request_record> details;  ///< those the entries hold in full
  std::vector<tile_record> tiles;
  std::vector<work_record> works;
  std::vector<std::int32_t> combines;
  std::vector<gather_record> gathers;
  std::vector<gather_base> gather_bases;
  std::vector<std::uint32_t> masks;
  std::vector<std::int32_t> column_table;
  std::vector<linear_record> linears;
  std::vector<sparse_list> sparse_lists;
  std::vector<sparse_slot> sparse_slots;
  std::vector<std::int32_t> sparse_order;

  record_counts counts() const {
    return {entries.size(),      details.size(),      tiles.size(),       works.size(),        combines.size(),
            gathers.size(),      gather_bases.size(), masks.size(),       column_table.size(), linears.size(),
            sparse_lists.size(), sparse_slots.size(), sparse_order.size()};
  }

  /// Empties every section, keeping its storage for the next plan.
  void clear() {
    entries.clear();
    details.clear();
    tiles.clear();
    works.clear();
    combines.clear();
    gathers.clear();
    gather_bases.clear();
    masks.clear();
    column_table.clear();
    linears.clear();
    sparse_lists.clear();
    sparse_slots.clear();
    sparse_order.clear();
  }
};

/// One pooler's part of a step: its task's requests, from every task group of
/// that task (their count; the plan's results say where each went); their
/// records, laid out as an image of their own within the step's; and what
/// running them needs. A plan keeps its shares, and their storage, for the
/// next plan made into it (clear()).
struct share {
  std::size_t entry = 0;                ///< the pooler's place in its table
  std::size_t num_requests = 0;         ///< the requests it plans (the plan's results say where each went)
  share_records records;
  image_header header;
  std::size_t image_bytes = 0;
  std::size_t image_offset = 0;  ///< where its image starts in the step's
  std::int64_t output_values = 0;
  std::int64_t workspace_floats = 0;
  std::int64_t arrivals = 0;  ///< arrival counters the device kernels need
  std::int64_t result_rows = 0;
  reused_list<state_use> stateful;

  /// Empties the share for the next plan, keeping the storage of every list.
  void clear() {
    entry = 0;
    num_requests = 0;
    records.clear();
    header = {};
    image_bytes = 0;
    image_offset = 0;
    output_values = 0;
    workspace_floats = 0;
    arrivals = 0;
    result_rows = 0;
    stateful.clear();
  }

  /// Workspace floats for the share's kernels, from a 16-byte boundary.
  std::int64_t take_workspace(std::int64_t floats) {
    const std::int64_t begin = align_floats(workspace_floats);
    workspace_floats = begin + floats;
    return begin;
  }

  /// Arrival counters for the share's kernels.
  std::int32_t take_arrivals(std::int64_t count) {
    check_indexable(arrivals + count, "arrival counters");
    const auto first = static_cast<std::int32_t>(arrivals);
    arrivals += count;
    return first;
  }

  /// Writes the header and every section at `base`, with an empty state table.
  void write(std::byte* base) const {
    std::memcpy(base, &header, sizeof header);
    copy(header.requests, records.entries, base);
    copy(header.details, records.details, base);
    if (header.state_table.count > 0)
      std::memset(base + header.state_table.offset, 0, header.state_table.count * sizeof(float*));
    copy(header.tiles, records.tiles, base);
    copy(header.works, records.works, base);
    copy(header.combines, records.combines, base);
    copy(header.gathers, records.gathers, base);
    copy(header.gather_bases, records.gather_bases, base);
    copy(header.masks, records.masks, base);
    copy(header.column_table, records.column_table, base);
    copy(header.linears, records.linears, base);
    copy(header.sparse_lists, records.sparse_lists, base);
    copy(header.sparse_slots, records.sparse_slots, base);
    copy(header.sparse_order, records.sparse_order, base);
  }

 private:
  template <class Record>
  static void copy(section<Record> where, const std::vector<Record>& from, std::byte* base) {
    if (!from.empty()) std::memcpy(base + where.offset, from.data(), from.size() * sizeof(Record));
  }
};

/// The most one pooler's share can need in a step within a capacity: records
/// (and the bytes of its image), workspace, arrival counters, and output values
/// (per request, and per result row of a token task).
struct share_bounds {
  record_counts records;
  std::size_t image_bytes = 0;
  std::int64_t workspace_floats = 0;
  std::int64_t arrivals = 0;
  std::int64_t output_per_request = 0;
  std::int64_t output_per_result_row = 0;
};

}  // namespace seqpool::detail
