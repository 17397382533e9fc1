// Turns a group's requests into the records of its step plan.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/detail/device/policy.hpp>
#include <seqpool/detail/host/policy.hpp>
#include <seqpool/detail/index_block.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/state_key.hpp>

namespace seqpool::detail {

/// Every size, offset and index of a step is decided here, on the host, from
/// metadata the host has; device work only follows the records. `Policy` is the
/// layer's launch policy, which says how requests are cut into tiles.
template <class Policy>
class plan_builder {
 public:
  /// `num_requests`: how many requests will be added, to allocate once.
  /// `output_begin`: where this plan's results start in the step's output, whose
  /// elements are `result_bytes` bytes (4, or 2 for 16-bit results).
  plan_builder(std::int64_t hidden_size, bool has_linear, std::size_t num_requests, std::int64_t output_begin,
               std::int64_t result_bytes)
      : hidden_size_(hidden_size),
        has_linear_(has_linear),
        result_bytes_(result_bytes),
        output_begin_(output_begin),
        output_end_(output_begin) {
    results_.reserve(num_requests);
    records_.requests.reserve(num_requests);
  }

  /// A sequence method's request (request `batch_index` of the batch): tiles
  /// over its window, its result row or its state as the destination; a chunked
  /// request's state is begun with `key`.
  void add_pooled(std::size_t batch_index, const request& r, const chunk& part, row_window window, bool keeps_state,
                  std::int64_t out_width, const state_key& key) {
    const std::size_t slot = take_result_slot();
    const std::int32_t index = add_request(r, -1);
    const bool uses_state = part.partial() && keeps_state;
    if (part.partial()) keep_state(index, batch_index, r, keeps_state ? hidden_size_ : 0, key);
    destination to;
    if (part.finished())
      to = route_results(index, slot, 1, hidden_size_, out_width, held_pooled(window, out_width));
    else if (uses_state)
      to = {target::state, 0, hidden_size_, 0, hidden_size_};
    else
      return;  // a chunk that neither finishes nor keeps anything (LAST before the end)
    if (window.count == 0 && !part.finished()) return;  // the state holds all there is (CLS after its first chunk)
    request_record& owner = records_.requests[index];
    owner.where = to.where;
    owner.offset = to.offset;
    owner.width = static_cast<std::int32_t>(to.row_width);
    owner.flags = to.flags | (uses_state && !part.first_chunk() ? from_state : 0);
    owner.position_offset = part.num_computed - part.first_row();
    if constexpr (Policy::merges_in_launch)
      cut_for_device(index, window);
    else
      cut_for_host(index, window);
  }

  /// A sequence method's request pooled over spans of its prompt (late
  /// chunking): a record per span, each pooling the span as a prompt of its own
  /// (chunk_of_span), with its own part of the request's state block and, when
  /// the request finishes, its own row of the result. A span that ends before
  /// the request does keeps its reduction, unfinished, in the state, whatever the
  /// method keeps otherwise, and is finished from there with the request.
  template <class WindowOf>
  void add_spans(std::size_t batch_index, const request& r, const chunk& part, WindowOf window_of, bool keeps_state,
                 std::int64_t out_width, const state_key& key) {
    const std::span<const token_span> spans = r.params.spans;
    check_spans(batch_index, r, spans);
    const auto count = static_cast<std::int64_t>(spans.size());
    std::vector<row_window> windows;
    std::int64_t held = Policy::held_row_floats;
    for (const token_span span : spans) {
      const chunk seen = chunk_of_span(part, span);
      // A span the chunk has not reached, or has passed, has no rows of it.
      windows.push_back(seen.num_scheduled > 0 ? window_of(seen) : row_window{seen.first_row(), 0});
      held = std::min(held, held_pooled(windows.back(), out_width));
    }
    const std::size_t slot = take_result_slot();
    const auto first = static_cast<std::int32_t>(records_.requests.size());
    for (std::int64_t k = 0; k < count; ++k) add_request(r, -1);
    if (part.partial()) keep_state(first, batch_index, r, count * hidden_size_, key, count, hidden_size_);
    const destination to = part.finished() ? route_results(first, slot, count, hidden_size_, out_width, held)
                                           : destination{target::state, 0, hidden_size_, 0, 0};
    const request_record leader = records_.requests[first];
    for (std::int64_t k = 0; k < count; ++k) {
      const chunk seen = chunk_of_span(part, spans[k]);
      if (!part.finished() && windows[k].count == 0) continue;  // its state, if any, stays as it is
      const bool ended_before = seen.num_scheduled == 0 && seen.finished();
      const bool from = part.partial() && (keeps_state ? seen.num_computed > 0 : ended_before);
      request_record& owner = records_.requests[first + k];
      owner.prompt_len = seen.prompt_len;
      owner.position_offset = seen.num_computed - seen.first_row();
      owner.where = to.where;
      owner.offset = to.offset + k * to.row_stride;  // state: each span's entry of the table is its own part
      owner.width = static_cast<std::int32_t>(to.row_width);
      owner.flags = to.flags | (from ? from_state : 0);
      owner.kept = leader.kept;
      if ((to.flags & rounds) != 0) owner.result = leader.result + k * out_width;
      if constexpr (Policy::merges_in_launch)
        cut_for_device(first + static_cast<std::int32_t>(k), windows[k]);
      else
        cut_for_host(first + static_cast<std::int32_t>(k), windows[k]);
    }
  }

  /// A token method's request: one gather per row it returns (earlier chunks'
  /// rows from its state) or, before it finishes, per row it stashes in its state.
  /// `chosen` lists the prompt positions chosen in this chunk; `rows_before` and
  /// `rows_total` count those of earlier chunks and of the whole prompt.
  void add_gathered(std::size_t batch_index, const request& r, const chunk& part, std::int64_t rows_before,
                    std::span<const std::int64_t> chosen, std::int64_t rows_total, std::span<const std::int64_t> columns,
                    std::int64_t out_width, const state_key& key) {
    const std::int64_t width = columns.empty() ? hidden_size_ : static_cast<std::int64_t>(columns.size());
    // The prompt's rows at this width must be countable in floats, for the state
    // and for the result.
    if (rows_total > std::numeric_limits<std::int64_t>::max() / std::max(width, out_width) / 2)
      fail_request(batch_index, r.id, "prompt_len", r.prompt_len, " rows of ", std::max(width, out_width),
                   " columns are more floats than a step can count");
    std::int64_t column_offset = -1;
    if (!columns.empty()) {
      column_offset = static_cast<std::int64_t>(records_.column_table.size());
      for (const std::int64_t column : columns) records_.column_table.push_back(static_cast<std::int32_t>(column));
    }
    const std::size_t slot = take_result_slot();
    const std::int32_t index = add_request(r, column_offset);
    if (part.partial()) keep_state(index, batch_index, r, static_cast<std::size_t>(rows_total * width), key);
    const std::int64_t rows = rows_before + static_cast<std::int64_t>(chosen.size());
    const destination to = part.finished() ? route_results(index, slot, rows, width, out_width, Policy::held_row_floats)
                                           : destination{target::state, 0, width, 0, width};
    request_record& owner = records_.requests[index];
    owner.where = to.where;
    owner.offset = to.offset;
    owner.width = static_cast<std::int32_t>(to.row_width);
    owner.flags = to.flags;

    if (part.finished())
      for (std::int64_t k = 0; k < rows_before; ++k)
        records_.gathers.push_back({-1 - k * width, to.offset + k * to.row_stride, index});
    for (std::size_t j = 0; j < chosen.size(); ++j) {
      const std::int64_t k = rows_before + static_cast<std::int64_t>(j);
      records_.gathers.push_back(
          {part.first_row() + (chosen[j] - part.num_computed), to.offset + k * to.row_stride, index});
    }
  }

  /// The most a step within `limits` can need of what build() counts, for rows
  /// of `hidden_size` columns and results at most `widest_result` wide. Each
  /// term bounds its count whatever the batch: a request is at most one tile
  /// more than its rows fill, a split request reads more than packed_elements,
  /// and every result starts on a 16-byte boundary. 16-bit results may each be
  /// finished in the workspace as well.
  static plan_bounds bounds(const capacity& limits, std::int64_t hidden_size, std::int64_t widest_result,
                            bool token_wise, bool has_linear, std::int64_t result_bytes) {
    const auto requests = static_cast<std::size_t>(limits.requests);
    const std::int64_t rows = limits.rows;
    const std::int64_t align_slack = 16 / result_bytes - 1;
    plan_bounds most;
    most.records.requests = requests;
    if (token_wise) {
      most.records.gathers = static_cast<std::size_t>(limits.result_rows + rows);
      most.records.columns = static_cast<std::size_t>(limits.columns);
      if (has_linear) {
        most.records.linears = static_cast<std::size_t>(limits.result_rows);
        most.workspace_floats = limits.result_rows * hidden_size + 3 * limits.requests;
      }
      most.output_per_request = align_slack;
      most.output_per_result_row = widest_result;
      if (result_bytes < 4) most.workspace_floats += limits.result_rows * widest_result + 3 * limits.requests;
    } else {
      const std::int64_t tiles = limits.requests + rows / Policy::tile_rows;
      most.records.tiles = static_cast<std::size_t>(tiles);
      const std::int64_t pooled = has_linear ? limits.requests * (hidden_size + 3) : 0;
      const std::int64_t partials = (2 * rows / Policy::tile_rows + limits.requests) * (hidden_size + 3);
      most.workspace_floats = pooled + partials;
      if constexpr (Policy::merges_in_launch) {
        const std::int64_t slabs = (hidden_size + Policy::slab_columns - 1) / Policy::slab_columns;
        const std::int64_t split = std::min(limits.requests, rows * hidden_size / (Policy::packed_elements + 1));
        most.records.works = static_cast<std::size_t>(limits.requests + (split + rows / Policy::tile_rows) * slabs);
        most.arrivals = split * (slabs + 1);
      } else {
        most.records.combines = requests;
      }
      if (has_linear) most.records.linears = requests;
      most.output_per_request = widest_result + align_slack;
      if (result_bytes < 4) most.workspace_floats += limits.requests * (widest_result + 3);
    }
    most.block_bytes = block_bytes(most.records);
    return most;
  }

  step_plan build(std::int64_t num_rows) && {
    step_plan plan;
    plan.output_size = output_end_ - output_begin_;
    plan.num_rows = num_rows;
    plan.workspace_floats = workspace_floats_;
    plan.arrivals = arrivals_;
    for (const auto& result : results_)
      if (result) plan.result_rows += result->rows;
    plan.stateful = std::move(stateful_);
    plan.results = std::move(results_);
    plan.block.bytes = lay_out_sections(records_.counts(), plan.block.at);
    plan.block.records = std::move(records_);
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
                                 .position_offset = 0,
                                 .offset = 0,
                                 .partials = 0,
                                 .columns = column_offset,
                                 .result = 0,
                                 .width = 0,
                                 .kept = 0,
                                 .num_tiles = 0,
                                 .arrivals = 0,
                                 .where = target::output,
                                 .flags = 0,
                                 .use_activation = static_cast<std::uint8_t>(r.params.use_activation)});
    return static_cast<std::int32_t>(records_.requests.size() - 1);
  }

  /// The planned request's place in the plan's results, in the order added.
  std::size_t take_result_slot() {
    results_.emplace_back();
    return results_.size() - 1;
  }

  /// The request's state block, `floats` floats, which `records` entries of the
  /// state table from `index` on share, each `record_floats` after the last.
  void keep_state(std::int32_t index, std::size_t batch_index, const request& r, std::size_t floats,
                  const state_key& key, std::int64_t records = 1, std::int64_t record_floats = 0) {
    seqpool::request owner = r;
    owner.prompt_token_ids = {};
    stateful_.push_back(
        {index, batch_index, std::move(owner), floats, key, static_cast<std::int32_t>(records), record_floats});
  }

  /// Spans must lie in the prompt, each non-empty, in order, touching at most.
  static void check_spans(std::size_t batch_index, const request& r, std::span<const token_span> spans) {
    std::int64_t previous_end = 0;
    for (std::size_t k = 0; k < spans.size(); ++k) {
      const token_span span = spans[k];
      if (span.begin < previous_end || span.begin >= span.end || span.end > r.prompt_len)
        fail_request(batch_index, r.id, "spans", "span ", k, " is [", span.begin, ", ", span.end,
                     "); spans must be non-empty, within [0, prompt_len = ", r.prompt_len,
                     "), in order and not overlapping", k > 0 ? " (the one before ends at " : "",
                     k > 0 ? std::to_string(previous_end) + ")" : "");
      previous_end = span.end;
    }
  }

  /// Workspace floats from a 16-byte boundary.
  std::int64_t take_workspace(std::int64_t floats) {
    const std::int64_t begin = align_floats(workspace_floats_);
    workspace_floats_ = begin + floats;
    return begin;
  }

  /// Host: a tile of up to tile_rows rows per item (one of no rows for a request
  /// that finishes from its state alone) and, for several, a combine that merges
  /// their partials in a pass of its own.
  void cut_for_host(std::int32_t index, row_window window) {
    request_record& owner = records_.requests[index];
    const std::int64_t num_tiles = std::max<std::int64_t>(1, (window.count + Policy::tile_rows - 1) / Policy::tile_rows);
    owner.num_tiles = static_cast<std::int32_t>(num_tiles);
    if (num_tiles > 1) {
      owner.partials = take_workspace(num_tiles * owner.width);
      records_.combines.push_back(index);
    }
    for (std::int64_t t = 0; t < num_tiles; ++t) {
      const std::int64_t rows = std::min(Policy::tile_rows, window.count - t * Policy::tile_rows);
      records_.tiles.push_back(
          {window.begin + t * Policy::tile_rows, static_cast<std::int32_t>(rows), index, static_cast<std::int32_t>(t)});
    }
  }

  /// Device: a short request is one tile that a warp pools whole, packed into a
  /// block with the short requests next to it; a long one is split into tiles
  /// of tile_rows rows and slabs of slab_columns columns, a block each, with
  /// arrival counters for the merge of its tiles (one per slab) and for its
  /// epilogue (one).
  void cut_for_device(std::int32_t index, row_window window) {
    request_record& owner = records_.requests[index];
    const auto first_tile = static_cast<std::int32_t>(records_.tiles.size());
    if (window.count * owner.width <= Policy::packed_elements) {
      owner.num_tiles = 1;
      records_.tiles.push_back({window.begin, static_cast<std::int32_t>(window.count), index, 0});
      std::vector<work_record>& works = records_.works;
      if (open_packed_ && works.back().num_tiles < Policy::warps &&
          works.back().first_tile + works.back().num_tiles == first_tile) {
        ++works.back().num_tiles;
      } else {
        works.push_back({first_tile, 1, -1});
        open_packed_ = true;
      }
      return;
    }
    open_packed_ = false;
    const std::int64_t num_tiles = (window.count + Policy::tile_rows - 1) / Policy::tile_rows;
    const std::int64_t slabs = (owner.width + Policy::slab_columns - 1) / Policy::slab_columns;
    owner.num_tiles = static_cast<std::int32_t>(num_tiles);
    owner.arrivals = static_cast<std::int32_t>(std::exchange(arrivals_, arrivals_ + slabs + 1));
    if (num_tiles > 1) owner.partials = take_workspace(num_tiles * owner.width);
    for (std::int64_t t = 0; t < num_tiles; ++t) {
      const std::int64_t rows = std::min(Policy::tile_rows, window.count - t * Policy::tile_rows);
      const auto tile = static_cast<std::int32_t>(records_.tiles.size());
      records_.tiles.push_back(
          {window.begin + t * Policy::tile_rows, static_cast<std::int32_t>(rows), index, static_cast<std::int32_t>(t)});
      for (std::int64_t slab = 0; slab < slabs; ++slab) records_.works.push_back({tile, 1, static_cast<std::int32_t>(slab)});
    }
  }

  /// Reserves a finishing request's result rows, from a 16-byte boundary.
  /// Without a linear layer the method writes them directly, with the head's
  /// epilogue; 16-bit rows wider than `held_width`, the widest the finishing
  /// kernel holds whole, are finished in the workspace and rounded into place.
  /// With a linear layer, the host item that pools a row passes it through the
  /// layer itself, where it fits the item's scratch row; otherwise pooled rows go
  /// to the workspace and a pass of the layer writes the result and runs the
  /// epilogue, finishing 16-bit rows in the workspace where it cannot hold them.
  destination route_results(std::int32_t index, std::size_t slot, std::int64_t rows, std::int64_t pooled_width,
                            std::int64_t out_width, std::int64_t held_width) {
    const result_slice result{align_results(output_end_, result_bytes_), rows, out_width};
    results_[slot] = result;
    output_end_ = result.offset + rows * out_width;
    const bool rounding = result_bytes_ < 4;
    if (!has_linear_) {
      if (!rounding || out_width <= held_width)
        return {target::output, result.offset, out_width, finish | epilogue, out_width};
      records_.requests[index].result = result.offset;
      return {target::workspace, take_workspace(rows * out_width), out_width, finish | epilogue | rounds, out_width};
    }
    if constexpr (!Policy::merges_in_launch) {
      if (pooled_width <= Policy::scratch_row_floats && (!rounding || out_width <= Policy::scratch_row_floats)) {
        records_.requests[index].kept = static_cast<std::int32_t>(out_width);
        return {target::output, result.offset, pooled_width, finish | through_linear, out_width};
      }
    }
    const std::int64_t pooled = take_workspace(rows * pooled_width);
    // The device's layer writes a row's outputs from every warp of its block.
    const bool staged = rounding && (Policy::merges_in_launch || out_width > Policy::held_row_floats);
    const std::int64_t staging = staged ? take_workspace(rows * out_width) : -1;
    for (std::int64_t k = 0; k < rows; ++k)
      records_.linears.push_back({pooled + k * pooled_width, result.offset + k * out_width,
                                  staged ? staging + k * out_width : -1, index, static_cast<std::int32_t>(out_width)});
    return {target::workspace, pooled, pooled_width, finish, pooled_width};
  }

  /// The widest result row the kernel that finishes a pooled request holds
  /// whole: none for a device request split over blocks.
  static std::int64_t held_pooled(row_window window, std::int64_t width) {
    if constexpr (Policy::merges_in_launch)
      if (window.count * width > Policy::packed_elements) return 0;
    return Policy::held_row_floats;
  }

  std::int64_t hidden_size_;
  bool has_linear_;
  std::int64_t result_bytes_;
  std::int64_t output_begin_;

  std::vector<std::optional<result_slice>> results_;
  plan_records records_;
  std::vector<state_use> stateful_;
  std::int64_t output_end_;
  std::int64_t workspace_floats_ = 0;
  std::int64_t arrivals_ = 0;
  bool open_packed_ = false;  ///< the last work record is a packed block that may take more
};

}  // namespace seqpool::detail
