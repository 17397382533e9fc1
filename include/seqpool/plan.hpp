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

namespace seqpool {

/// Where a finished request's result lies in the step's output: `rows` rows of
/// `cols` floats from `offset`. A sequence task has one row.
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
  std::vector<combine_record> combines;
  std::vector<gather_record> gathers;
  std::vector<std::int32_t> column_table;
  std::vector<linear_record> linears;
  std::vector<finish_record> finishes;
};

/// Where each kind of record sits in the uploaded block.
struct plan_sections {
  section<request_record> requests;
  section<float*> state_table;  ///< one slot pointer per request, known only once reserve() has run
  section<tile_record> tiles;
  section<combine_record> combines;
  section<gather_record> gathers;
  section<std::int32_t> column_table;
  section<linear_record> linears;
  section<finish_record> finishes;
};

/// The step's index block as the plan laid it out. The records stay in their
/// vectors until forward() writes them straight into the staging slot.
struct plan_block {
  plan_records records;
  plan_sections at;
  std::size_t bytes = 0;
  std::int64_t widest_tile = 0;  ///< the most columns any tile, combine or gather covers
  std::int64_t widest_linear = 0;

  /// Writes every section into the block at `base`, with an empty state table.
  void write(std::byte* base) const {
    copy(at.requests, records.requests, base);
    std::memset(base + at.state_table.offset, 0, at.state_table.count * sizeof(float*));
    copy(at.tiles, records.tiles, base);
    copy(at.combines, records.combines, base);
    copy(at.gathers, records.gathers, base);
    copy(at.column_table, records.column_table, base);
    copy(at.linears, records.linears, base);
    copy(at.finishes, records.finishes, base);
  }

 private:
  template <class Record>
  static void copy(section<Record> where, const std::vector<Record>& from, std::byte* base) {
    if (!from.empty()) std::memcpy(base + where.offset, from.data(), from.size() * sizeof(Record));
  }
};

/// A request that keeps state across steps, and how many floats it keeps.
struct state_use {
  std::int32_t slot;  ///< its entry in the state table
  request owner;      ///< a copy without token ids (the plan may outlive them)
  std::size_t floats;
};

}  // namespace detail

/// Made by a pooler's plan() on the host; forward() launches exactly this.
struct step_plan {
  /// Per planned request, in batch order: where its result lies, or nothing when it does not finish this step.
  std::vector<std::optional<result_slice>> results;
  std::int64_t output_size = 0;       ///< floats the output must hold
  std::int64_t num_rows = 0;          ///< rows the step's hidden states must have (at least)
  std::int64_t workspace_floats = 0;  ///< scratch the launch needs (partials, pooled rows)
  detail::plan_block block;
  std::vector<detail::state_use> stateful;
};

}  // namespace seqpool
