// step_plan: everything a pooler fixed on the host about one step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/detail/index_block.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/state_key.hpp>

namespace seqpool {

/// Where a finished request's result lies in the step's output: `rows` rows of
/// `cols` floats from `offset`, which is a multiple of 4 (16 bytes). A sequence
/// task has one row.
struct result_slice {
  std::int64_t offset = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

namespace detail {

/// The records device work reads, built on the host.
struct plan_records {
  std::vector<request_record> requests;
  std::vector<tile_record> tiles;
  std::vector<work_record> works;
  std::vector<std::int32_t> combines;
  std::vector<gather_record> gathers;
  std::vector<std::int32_t> column_table;
  std::vector<linear_record> linears;

  record_counts counts() const {
    return {requests.size(), tiles.size(), works.size(), combines.size(), gathers.size(), column_table.size(),
            linears.size()};
  }
};

/// The step's index block as the plan laid it out. The records stay in their
/// vectors until the step writes them straight into a staging slot.
struct plan_block {
  plan_records records;
  plan_sections at;
  std::size_t bytes = 0;

  /// Writes the header and every section into the block at `base`, with an empty state table.
  void write(std::byte* base) const {
    std::memcpy(base, &at, sizeof at);
    copy(at.requests, records.requests, base);
    if (at.state_table.count > 0) std::memset(base + at.state_table.offset, 0, at.state_table.count * sizeof(float*));
    copy(at.tiles, records.tiles, base);
    copy(at.works, records.works, base);
    copy(at.combines, records.combines, base);
    copy(at.gathers, records.gathers, base);
    copy(at.column_table, records.column_table, base);
    copy(at.linears, records.linears, base);
  }

 private:
  template <class Record>
  static void copy(section<Record> where, const std::vector<Record>& from, std::byte* base) {
    if (!from.empty()) std::memcpy(base + where.offset, from.data(), from.size() * sizeof(Record));
  }
};

/// The most a step within a capacity can need: records (and the bytes of its
/// block), workspace, arrival counters, and output floats (per request, and per
/// result row of a token task).
struct plan_bounds {
  record_counts records;
  std::size_t block_bytes = 0;
  std::int64_t workspace_floats = 0;
  std::int64_t arrivals = 0;
  std::int64_t output_per_request = 0;
  std::int64_t output_per_result_row = 0;
};

/// A request that keeps state across steps, how many floats it keeps, and what
/// its state is begun with.
struct state_use {
  std::int32_t request;      ///< its first entry in the state table
  std::size_t batch_index;   ///< its place in the batch, for messages
  seqpool::request owner;    ///< a copy without token ids (the plan may outlive them)
  std::size_t floats;
  state_key key;
  std::int32_t records = 1;        ///< entries from `request` on that share the block (one per span)
  std::int64_t record_floats = 0;  ///< where each next entry's part of the block starts
};

}  // namespace detail

/// Made by a pooler's plan() on the host; forward() launches exactly this.
struct step_plan {
  /// Per planned request, in batch order: where its result lies, or nothing when it does not finish this step.
  std::vector<std::optional<result_slice>> results;
  std::int64_t output_size = 0;       ///< floats the output must hold
  std::int64_t num_rows = 0;          ///< rows the step's hidden states must have (at least)
  std::int64_t workspace_floats = 0;  ///< scratch the launch needs (partials, pooled rows)
  std::int64_t arrivals = 0;          ///< arrival counters the device kernels need
  std::int64_t result_rows = 0;       ///< rows of the results it returns
  std::uint64_t maker = 0;            ///< the pooler that made it, which alone may run it
  std::int64_t hidden_size = 0;       ///< the width of the rows it was made for
  detail::plan_block block;
  std::vector<detail::state_use> stateful;
};

}  // namespace seqpool
