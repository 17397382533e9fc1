// Turns a group's requests into the records of its step plan.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/config.hpp>
#include <seqpool/detail/index_block.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/space/memory_space.hpp>

namespace seqpool::detail {

/// Every size, offset and index of a step is decided here, on the host, from
/// metadata the host has; device work only follows the records.
class plan_builder {
 public:
  /// `num_requests`: how many requests will be added, to allocate once.
  plan_builder(std::int64_t hidden_size, launch_shape shape, bool has_linear, std::size_t num_requests)
      : hidden_size_(hidden_size), shape_(shape), has_linear_(has_linear) {
    results_.reserve(num_requests);
    records_.requests.reserve(num_requests);
  }

  /// A sequence method's request: tiles over its window, a combine where a
  /// request has other than one tile, and its result row or state as the target.
  void add_pooled(const request& r, const chunk& part, row_window window, bool keeps_state, std::int64_t out_width) {
    const std::int32_t slot = add_request(r, -1);
    const bool uses_state = part.partial() && keeps_state;
    if (part.partial()) keep_state(slot, r, keeps_state ? hidden_size_ : 0);
    destination to;
    if (part.finished())
      to = route_results(slot, 1, hidden_size_, out_width);
    else if (uses_state)
      to = {target::state, 0, hidden_size_, 0, hidden_size_};
    else
      return;  // a chunk that neither finishes nor keeps anything (LAST before the end)
    const std::uint8_t flags = to.flags | (uses_state && !part.first_chunk() ? from_state : 0);
    const auto width = static_cast<std::int32_t>(to.row_width);
    widest_tile_ = std::max(widest_tile_, to.row_width);

    const std::int64_t num_tiles = (window.count + shape_.tile_rows - 1) / shape_.tile_rows;
    if (num_tiles == 0 && !part.finished()) return;  // the state already holds all there is (CLS after its first chunk)
    if (num_tiles == 1) {
      records_.tiles.push_back(
          {window.begin, to.offset, static_cast<std::int32_t>(window.count), slot, width, to.where, flags});
      return;
    }
    const std::int64_t partials = take_workspace(num_tiles * to.row_width);
    for (std::int64_t t = 0; t < num_tiles; ++t) {
      const std::int64_t rows = std::min(shape_.tile_rows, window.count - t * shape_.tile_rows);
      records_.tiles.push_back({window.begin + t * shape_.tile_rows, partials + t * to.row_width,
                                static_cast<std::int32_t>(rows), slot, width, target::workspace, 0});
    }
    records_.combines.push_back(
        {partials, to.offset, static_cast<std::int32_t>(num_tiles), slot, width, to.where, flags});
  }

  /// A token method's request: one gather per row it returns (earlier chunks'
  /// rows from its state) or, before it finishes, per row it stashes in its state.
  /// `chosen` lists the prompt positions chosen in this chunk; `rows_before` and
  /// `rows_total` count those of earlier chunks and of the whole prompt.
  void add_gathered(const request& r, const chunk& part, std::int64_t rows_before, std::span<const std::int64_t> chosen,
                    std::int64_t rows_total, std::span<const std::int64_t> columns, std::int64_t out_width) {
    const std::int64_t width = columns.empty() ? hidden_size_ : static_cast<std::int64_t>(columns.size());
    std::int64_t column_offset = -1;
    if (!columns.empty()) {
      column_offset = static_cast<std::int64_t>(records_.column_table.size());
      for (const std::int64_t column : columns) records_.column_table.push_back(static_cast<std::int32_t>(column));
    }
    const std::int32_t slot = add_request(r, column_offset);
    if (part.partial()) keep_state(slot, r, static_cast<std::size_t>(rows_total * width));
    const std::int64_t rows = rows_before + static_cast<std::int64_t>(chosen.size());
    const destination to =
        part.finished() ? route_results(slot, rows, width, out_width) : destination{target::state, 0, width, 0, width};
    request_record& owner = records_.requests[slot];
    owner.row_width = static_cast<std::int32_t>(to.row_width);
    owner.where = to.where;
    owner.flags = to.flags;
    widest_tile_ = std::max(widest_tile_, to.row_width);

    if (part.finished())
      for (std::int64_t k = 0; k < rows_before; ++k)
        records_.gathers.push_back({-1 - k * width, to.offset + k * to.row_stride, slot});
    for (std::size_t j = 0; j < chosen.size(); ++j) {
      const std::int64_t k = rows_before + static_cast<std::int64_t>(j);
      records_.gathers.push_back(
          {part.first_row() + (chosen[j] - part.num_computed), to.offset + k * to.row_stride, slot});
    }
  }

  step_plan build(std::int64_t num_rows) && {
    step_plan plan;
    plan.results = std::move(results_);
    plan.output_size = output_size_;
    plan.num_rows = num_rows;
    plan.workspace_floats = workspace_floats_;
    plan.stateful = std::move(stateful_);

    plan_block& block = plan.block;
    index_block_layout layout;
    block.at.requests = layout.add<request_record>(records_.requests.size());
    block.at.state_table = layout.add<float*>(records_.requests.size());
    block.at.tiles = layout.add<tile_record>(records_.tiles.size());
    block.at.combines = layout.add<combine_record>(records_.combines.size());
    block.at.gathers = layout.add<gather_record>(records_.gathers.size());
    block.at.column_table = layout.add<std::int32_t>(records_.column_table.size());
    block.at.linears = layout.add<linear_record>(records_.linears.size());
    block.at.finishes = layout.add<finish_record>(records_.finishes.size());
    block.bytes = layout.bytes();
    block.records = std::move(records_);
    block.widest_tile = widest_tile_;
    block.widest_linear = widest_linear_;
    return plan;
  }

 private:
  /// Where a request's rows go this step, how wide they are, the flags that say
  /// what to do there, and how far apart they lie.
  struct destination {
    target where = target::output;
    std::int64_t offset = 0;
    std::int64_t row_width = 0;
    std::uint8_t flags = 0;
    std::int64_t row_stride = 0;
  };

  std::int32_t add_request(const request& r, std::int64_t column_offset) {
    records_.requests.push_back({.prompt_len = r.prompt_len,
                                 .columns = column_offset,
                                 .row_width = 0,
                                 .linear_width = 0,
                                 .where = target::output,
                                 .flags = 0,
                                 .use_activation = static_cast<std::uint8_t>(r.params.use_activation)});
    results_.emplace_back();
    return static_cast<std::int32_t>(records_.requests.size() - 1);
  }

  void keep_state(std::int32_t slot, const request& r, std::size_t floats) {
    request owner = r;
    owner.prompt_token_ids = {};
    stateful_.push_back({slot, std::move(owner), floats});
  }

  std::int64_t take_workspace(std::int64_t floats) {
    return std::exchange(workspace_floats_, workspace_floats_ + floats);
  }

  /// Reserves a finishing request's result rows. Without a linear layer the
  /// method writes them directly. With one, a whole-row item passes the rows it
  /// pools through the layer itself, where they fit its scratch; otherwise it
  /// writes pooled rows to the workspace and a pass of the layer writes the
  /// result. The epilogue rides along on whole rows and gets a pass of its own
  /// otherwise.
  destination route_results(std::int32_t slot, std::int64_t rows, std::int64_t pooled_width, std::int64_t out_width) {
    const result_slice result{output_size_, rows, out_width};
    results_[slot] = result;
    output_size_ += rows * out_width;
    if (!shape_.whole_rows)
      for (std::int64_t k = 0; k < rows; ++k)
        records_.finishes.push_back({result.offset + k * out_width, slot, static_cast<std::int32_t>(out_width)});
    if (!has_linear_)
      return {target::output, result.offset, out_width,
              static_cast<std::uint8_t>(finish | (shape_.whole_rows ? epilogue : 0)), out_width};
    if (shape_.whole_rows && pooled_width <= scratch_row_floats) {
      records_.requests[slot].linear_width = static_cast<std::int32_t>(out_width);
      return {target::output, result.offset, pooled_width, finish | through_linear, out_width};
    }
    const std::int64_t pooled = take_workspace(rows * pooled_width);
    for (std::int64_t k = 0; k < rows; ++k)
      records_.linears.push_back(
          {pooled + k * pooled_width, result.offset + k * out_width, slot, static_cast<std::int32_t>(out_width)});
    widest_linear_ = std::max(widest_linear_, out_width);
    return {target::workspace, pooled, pooled_width, finish, pooled_width};
  }

  std::int64_t hidden_size_;
  launch_shape shape_;
  bool has_linear_;

  std::vector<std::optional<result_slice>> results_;
  plan_records records_;
  std::vector<state_use> stateful_;
  std::int64_t output_size_ = 0;
  std::int64_t workspace_floats_ = 0;
  std::int64_t widest_tile_ = 0;
  std::int64_t widest_linear_ = 0;
};

}  // namespace seqpool::detail
