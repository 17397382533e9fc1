// step_plan: everything a pooler fixed on the host about one step.
#pragma once

#include <cstddef>
#include <cstdint>
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

/// The step's index block as the plan laid it out. `bytes` holds every record
/// but the state table, which only exists once reserve() has given slots memory.
struct plan_block {
  std::vector<std::byte> bytes;
  section<request_record> requests;
  section<float*> state_table;
  section<tile_record> tiles;
  section<combine_record> combines;
  section<gather_record> gathers;
  section<std::int32_t> column_table;
  section<linear_record> linears;
  section<finish_record> finishes;
  std::int64_t widest_tile = 0;  ///< the most columns any tile, combine or gather covers
  std::int64_t widest_linear = 0;
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
