// The planner: one pooler's requests of a step checked, then turned into records.
#pragma once

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/share.hpp>
#include <seqpool/detail/sort_by_id.hpp>
#include <seqpool/detail/token_filter.hpp>
#include <seqpool/error.hpp>
#include <seqpool/head/knobs.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/result_slice.hpp>
#include <seqpool/state_key.hpp>

namespace seqpool::detail {

/// What the planner is told about the pooler whose share it plans.
struct pooler_shape {
  std::int64_t hidden_size = 0;
  std::int64_t modes = 1;  ///< sequence methods: a concat's modes, whose rows lie side by side in its pooled row
  bool has_linear = false;
  std::int64_t between_floats = 0;  ///< a stack of dense layers: the floats a row takes between them (0: one layer)
  std::int64_t result_bytes = 4;  ///< bytes of a result value: 4, 2 for 16-bit results, 1 for quantized ones
  bool bounded = false;           ///< the pooler has a capacity (a captured step): it pools no spans
  /// Quantized results: where the family says so (the device's), every row is
  /// finished in float in a draft row and encoded from there.
  bool quantized = false;
  std::int64_t columns_per_value = 1;  ///< result columns one output value holds: 8 for packed sign bits
  std::int64_t ranged_columns = -1;    ///< int8 and uint8: the columns the calibration ranges cover; else -1
  /// Sparse results: a finishing request's weights are listed by id — a token
  /// method's rows weighed by the head's one output, by token id; a sequence
  /// method's row, by column. The passes that read the rows write the weights
  /// as a float pooler writes results, into the workspace as their output.
  bool sparse = false;
  float floor = 0.0f;  ///< sparse results: the weight an id's must be above to be listed
};

/// Sparse results: a returned row of a finishing request, by its token id and
/// its place among the request's returned rows.
struct listed_token {
  std::int64_t id;
  std::int32_t row;
};

/// What the checks decided about one request, which building follows.
struct request_decision {
  std::int64_t width = 0;      ///< columns pooled or gathered
  std::int64_t out_width = 0;  ///< columns of each result row
  std::size_t first = 0;       ///< sequence methods: its first window; token methods: its first chosen position
  std::size_t count = 0;       ///< windows (one per span, or one), or positions chosen in this chunk
  request_knobs knobs;         ///< what the head's epilogue is told of the request
  /// Sequence methods: the request arrives in one chunk and pools its prompt as
  /// one window (no spans, no instruction left out): add_one_window() builds it.
  bool one_window = false;
};

/// A token method's decision: also what its chunk chose of the prompt's rows.
/// A sequence method's is the fields above alone, written whole for each of a
/// step's requests, of which it may have thousands.
struct token_decision : request_decision {
  chosen_rows before;           ///< rows chosen in earlier chunks
  std::int64_t rows_total = 0;  ///< rows chosen over the whole prompt
  /// Sparse results of a method that lists its positions: the digest of the
  /// positions chosen in this chunk (chosen_rows::digest).
  std::uint64_t chunk_digest = 0;
  /// The chosen positions are `count` consecutive ones, from first_position
  /// where count > 0, none listed (every row the chunk has, less a first or
  /// last row the request drops).
  bool consecutive = false;
  std::int64_t first_position = 0;
  std::span<const std::int64_t> columns;  ///< the columns kept (empty: all)
  std::size_t first_listed = 0;  ///< sparse results, finishing: its first returned row in the planner's listed tokens
};

/// What the planner works in, which a plan keeps for the next plan made into
/// it: once they have grown to a step's size, planning another allocates nothing.
struct planner_scratch {
  std::vector<request_decision> pooled_decisions;  ///< per chosen request of a sequence method
  std::vector<token_decision> token_decisions;     ///< per chosen request of a token method
  /// Per chosen request that is chunked, what its state is begun with; never
  /// shrunk, so that each key's knobs keep their storage.
  std::vector<state_key> keys;
  std::vector<row_window> windows;
  std::vector<std::int64_t> positions;
  std::vector<std::int64_t> run_returns;  ///< rows each run returns
  std::vector<listed_token> listed;       ///< sparse results: every finishing request's returned rows
  std::vector<listed_token> sorting;      ///< sparse results: what sort_by_id() moves the rows through
  /// A request's records, in full, until their entries are written; a vote's
  /// every record of the share (enter_by_vote()).
  std::vector<request_record> built;
  std::vector<std::int32_t> unlike;  ///< records that may be compact but are unlike the share's first such
};

/// Every size, offset and index of a step is decided here, on the host, from
/// metadata the host has; device work only follows the records. plan() checks
/// each request, in batch order, and decides what it needs (its state's key,
/// widths, rows): a token method's every request before it writes any record,
/// a sequence method's (where the family's tiles do not depend on the share)
/// each before its own records. A refusal leaves the share half planned, and
/// the step's plan holds no plan (the next one clears the share).
/// `Algorithms` is the family the space runs: it says how requests are cut
/// into work.
template <class Algorithms>
class planner {
 public:
  /// Plans the requests `chosen` of a step (batch indices, in batch order),
  /// whose chunks count rows from the start of the step's hidden states, with
  /// Method (a concrete method) and Head, against `state` (a state_store), into
  /// `into` (cleared), working in `scratch`. Results go from value
  /// `output_begin` (a 16-byte boundary) of the step's output; where each
  /// finishing request's result lies is written into `results`, at its batch
  /// index.
  template <class Method, class Head, class State>
  static void plan(const Method& method, const Head& head, const pooler_shape& shape, const batch& step,
                   std::span<const chunk> chunks, std::span<const std::size_t> chosen, const State& state,
                   std::int64_t output_begin, share& into, std::span<std::optional<result_slice>> results,
                   planner_scratch& scratch) {
    planner planned(shape, output_begin, into, results, scratch);
    if constexpr (Method::kind == method_kind::sequence && !Algorithms::tile_rows_depend_on_share) {
      planned.plan_in_one_pass(method, head, step, chunks, chosen, state);
    } else {
      planned.decide(method, head, step, chunks, chosen, state);
      planned.build(method, step, chunks, chosen);
    }
  }

  /// The most a share within `limits` can need of what plan() counts, for rows
  /// of `hidden_size` columns and results at most `widest_result` wide. Each
  /// term bounds its count whatever the batch; every result starts on a 16-byte
  /// boundary, and 16-bit and quantized results may each be drafted in the
  /// workspace as well.
  static share_bounds bounds(const capacity& limits, const pooler_shape& shape, std::int64_t widest_result,
                             bool token_wise) {
    const std::int64_t align_slack = 16 / shape.result_bytes - 1;
    const std::int64_t hidden_size = shape.hidden_size;
    share_bounds most;
    most.records.requests = static_cast<std::size_t>(limits.requests);
    most.records.details = static_cast<std::size_t>(limits.requests);
    if (token_wise) {
      // Two runs a request, a bit a row for masked runs, and a base for each
      // item or block of the gathering launch and one to end them.
      most.records.gathers = static_cast<std::size_t>(2 * limits.requests);
      most.records.mask_words = static_cast<std::size_t>(limits.rows / 32 + 1);
      most.records.gather_bases = static_cast<std::size_t>(Algorithms::policy::gather_units + 1);
      most.records.columns = static_cast<std::size_t>(limits.columns);
      if (shape.has_linear) {
        // A family that projects returned rows where they lie gathers none into the workspace.
        const std::int64_t gathered = Algorithms::projects_returned_rows ? 0 : hidden_size;
        most.records.linears = static_cast<std::size_t>(limits.result_rows);
        most.workspace_floats = limits.result_rows * (gathered + shape.between_floats) + 6 * limits.requests;
      }
      most.output_per_request = align_slack;
      // A STEP row without a layer is as wide as its returned columns, which may outnumber H (a column may repeat).
      most.output_per_result_row = std::max(widest_result, limits.columns);
      if (shape.sparse) {
        // A list a request, its count and at most an entry a returned row; a
        // weight a returned row and one a distinct id, and a slot a distinct
        // id and one to end them.
        most.output_per_request = align_slack + 1;
        most.output_per_result_row = 1;
        most.workspace_floats += 2 * (limits.result_rows + 3 * limits.requests);
        most.records.sparse_lists = static_cast<std::size_t>(limits.requests);
        most.records.sparse_slots = static_cast<std::size_t>(limits.result_rows + limits.requests);
        most.records.sparse_order = static_cast<std::size_t>(limits.result_rows);
      } else if (shape.result_bytes < 4) {
        most.workspace_floats += limits.result_rows * widest_result + 3 * limits.requests;
      }
    } else {
      if (shape.has_linear) {
        most.records.linears = static_cast<std::size_t>(limits.requests);
        most.workspace_floats = limits.requests * (shape.modes * hidden_size + shape.between_floats + 6);
      }
      Algorithms::bound_pooling(limits, hidden_size, shape.modes, most);
      most.output_per_request = widest_result + align_slack;
      if (shape.sparse) {
        // A list a request, its count and an entry a column at most, from its row in the workspace.
        most.output_per_request += 1;
        most.records.sparse_lists = static_cast<std::size_t>(limits.requests);
      }
      if (shape.result_bytes < 4 || shape.sparse) most.workspace_floats += limits.requests * (widest_result + 3);
    }
    most.image_bytes = image_bytes(most.records);
    return most;
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
    std::int64_t result = 0;        ///< drafted: the output offset of the first result row
    std::int64_t linear_width = 0;  ///< through_linear: the layer's outputs kept
  };

  planner(const pooler_shape& shape, std::int64_t output_begin, share& into,
          std::span<std::optional<result_slice>> results, planner_scratch& scratch)
      : shape_(shape),
        pooled_decisions_(scratch.pooled_decisions),
        token_decisions_(scratch.token_decisions),
        keys_(scratch.keys),
        windows_(scratch.windows),
        positions_(scratch.positions),
        run_returns_(scratch.run_returns),
        listed_(scratch.listed),
        sorting_(scratch.sorting),
        built_(scratch.built),
        unlike_(scratch.unlike),
        share_(into),
        results_(results),
        output_begin_(output_begin),
        output_end_(output_begin) {
    share_.clear();
    pooled_decisions_.clear();
    token_decisions_.clear();
    windows_.clear();
    positions_.clear();
    run_returns_.clear();
    listed_.clear();
    unlike_.clear();
  }

  /// A token method's decisions hold the columns their requests keep, views of
  /// the caller's batch: they go when the plan is made or refused too, so that
  /// the scratch kept for the next plan holds no view of a batch the caller may
  /// free (their storage stays).
  ~planner() { token_decisions_.clear(); }

  // Checking.

  template <class Method, class Head, class State>
  void decide(const Method& method, const Head& head, const batch& step, std::span<const chunk> chunks,
              std::span<const std::size_t> chosen, const State& state) {
    auto& decisions = decisions_of<Method>();
    decisions.reserve(chosen.size());
    if (keys_.size() < chosen.size()) keys_.resize(chosen.size());
    if constexpr (Method::kind == method_kind::sequence) windows_.reserve(chosen.size());
    for (std::size_t k = 0; k < chosen.size(); ++k) {
      const std::size_t index = chosen[k];
      decide_request(method, head, index, step.requests[index], chunks[index], state, keys_[k],
                     decisions.emplace_back());
    }
  }

  /// Checks request `r` (batch index `index`) and writes what Method makes of
  /// its chunk into `d`, and into `key` what its state is begun with.
  template <class Method, class Head, class State, class Decision>
  void decide_request(const Method& method, const Head& head, std::size_t index, const request& r, const chunk& part,
                      const State& state, state_key& key, Decision& d) {
    d.knobs = knobs_of(r.params);
    if (r.params.top_k) check_top_k(index, r, *r.params.top_k);
    // Before the state's checks: a later chunk short of the ids it reads, lists or drops by hears so, not
    // that its ids differ.
    if constexpr (Method::kind == method_kind::token) {
      check_token_ids(method, index, r);
      token_filter(r).check(index);
    }
    if (part.chunked()) begin_key(method, key, r);
    state.check(index, r, key);
    if constexpr (Method::kind == method_kind::token) {
      decide_tokens(method, head, index, r, part, state, d);
      if (part.chunked()) key.rows_total = d.rows_total;
    } else {
      decide_pooled(method, head, index, r, part, d);
    }
  }

  /// The decisions Method's requests take.
  template <class Method>
  auto& decisions_of() {
    if constexpr (Method::kind == method_kind::token)
      return token_decisions_;
    else
      return pooled_decisions_;
  }

  /// A token method that reads the prompt's ids, or a sparse result, which
  /// lists its rows by them, has all of them.
  template <class Method>
  void check_token_ids(const Method&, std::size_t index, const request& r) const {
    if (std::cmp_greater_equal(r.prompt_token_ids.size(), r.prompt_len)) return;
    if (Method::reads_token_ids)
      fail_request(index, r.id, "prompt_token_ids", "the method reads all ", r.prompt_len, " ids of the prompt, got ",
                   r.prompt_token_ids.size());
    if (shape_.sparse)
      fail_request(index, r.id, "prompt_token_ids", "a sparse result lists its rows by token id: give all ",
                   r.prompt_len, " ids of the prompt, got ", r.prompt_token_ids.size());
  }

  /// A request's top_k, which only a sparse result lists by.
  void check_top_k(std::size_t index, const request& r, std::int64_t top_k) const {
    if (!shape_.sparse)
      fail_request(index, r.id, "top_k", "applies to sparse results only (seqpool::sparse_entry, result_dtype \"sparse\")");
    if (top_k < 1) fail_request(index, r.id, "top_k", "must be at least 1, got ", top_k);
  }

  /// int8 and uint8 results: the calibration ranges cover every column of the result.
  void check_ranges(std::size_t index, const request& r, std::int64_t out_width) const {
    if (shape_.ranged_columns >= 0 && out_width > shape_.ranged_columns)
      fail_request(index, r.id, "ranges", "the calibration ranges cover ", shape_.ranged_columns,
                   " columns; the request's result has ", out_width);
  }

  /// A sequence method pools each span of the prompt (without spans, the whole
  /// prompt, or what follows its instruction, as one) over the window of rows
  /// its chunk has of it.
  template <class Method, class Head>
  void decide_pooled(const Method& method, const Head& head, std::size_t index, const request& r, const chunk& part,
                     request_decision& d) {
    if (const token_filter filter(r); filter.any())
      fail_request(index, r.id, filter.first_knob(), "only token methods drop rows; a sequence method leaves out an "
                   "instruction with instruction_len");
    if (!r.params.spans.empty()) {
      if (shape_.bounded)
        fail_request(index, r.id, "spans", "a pooler with a capacity (a captured step) does not pool spans");
      if (shape_.sparse) fail_request(index, r.id, "spans", "a sparse result lists one row a request: give no spans");
      check_spans(index, r, r.params.spans);
    }
    if (r.params.instruction_len != 0) check_instruction(method, index, r);
    token_span after;
    const std::span<const token_span> spans = pooled_spans(method, r, after);
    d.width = modes_of<Method> * shape_.hidden_size;
    d.out_width = head.output_width(index, r, d.width);
    check_ranges(index, r, d.out_width);
    d.first = windows_.size();
    d.count = spans.empty() ? 1 : spans.size();
    d.one_window = !part.chunked() && spans.empty();
    check_records(index, r, d.count);
    if (spans.empty()) {
      windows_.push_back(method.window(part));  // a chunk has rows (lay_out())
      return;
    }
    for (std::size_t k = 0; k < d.count; ++k) {
      const chunk seen = chunk_of_span(part, spans[k]);
      // A span the chunk has not reached, or has passed, has no rows of it.
      windows_.push_back(seen.num_scheduled > 0 ? method.window(seen) : row_window{seen.first_row(), 0});
    }
  }

  /// A window is a request record, which records index in 32 bits (reached
  /// past 2^31 spans: 32 GiB of them): those built, those decided and not yet
  /// built, and request `r`'s `count`.
  void check_records(std::size_t index, const request& r, std::size_t count) const {
    const std::size_t records = share_.records.entries.size() + windows_.size() + count;
    if (records > static_cast<std::size_t>(most_counted))
      fail_request(index, r.id, "spans", "the step's requests pool ", records,
                   " spans and prompts with this one's, more than their records count in 32 bits");
  }

  /// The spans a sequence method pools of `r`: its own; or, where the method
  /// leaves out the request's instruction, the rows after it as one span, made
  /// in `after`; or none, for the whole prompt.
  template <class Method>
  static std::span<const token_span> pooled_spans(const Method& method, const request& r, token_span& after) {
    if (r.params.instruction_len == 0 || instruction_rule_of(method) != instruction_rule::excluded)
      return r.params.spans;
    after = {r.params.instruction_len, r.prompt_len};
    return {&after, 1};
  }

  /// An instruction leaves at least one row of the prompt, comes without spans
  /// (which choose the rows themselves), and only to a method that says what
  /// it does with one.
  template <class Method>
  static void check_instruction(const Method& method, std::size_t index, const request& r) {
    const std::int64_t length = r.params.instruction_len;
    if (length < 0 || length >= r.prompt_len)
      fail_request(index, r.id, "instruction_len", "must be in [0, prompt_len = ", r.prompt_len,
                   "): at least one row follows the instruction; got ", length);
    if (!r.params.spans.empty())
      fail_request(index, r.id, "instruction_len", "spans choose the rows a request pools: give spans or an "
                   "instruction_len, not both");
    if (instruction_rule_of(method) == instruction_rule::refused) {
      fail_request(index, r.id, "instruction_len", name_of(method, "the method"),
                   " does not leave out an instruction: give 0 (a method that can says so with `static constexpr "
                   "seqpool::instruction_rule instruction`)");
    }
  }

  /// A token method chooses the chunk's positions it returns, less those the
  /// request's filter drops, and the columns. The rows of the request's other
  /// chunks are counted once, by its first chunk: a later one takes what the
  /// chunks before it chose, and what the whole prompt returns, from `state`.
  template <class Method, class Head, class State>
  void decide_tokens(const Method& method, const Head& head, std::size_t index, const request& r, const chunk& part,
                     const State& state, token_decision& d) {
    method.check(index, r, shape_.hidden_size);
    if (!r.params.spans.empty())
      fail_request(index, r.id, "spans", "only sequence methods pool spans; a token method returns rows");
    if (r.params.instruction_len != 0)
      fail_request(index, r.id, "instruction_len",
                   "only sequence methods leave out an instruction; a token method "
                   "returns the rows it chooses");
    const token_filter filter(r);  // checked in decide()
    d.columns = method.columns(r);
    d.width = d.columns.empty() ? shape_.hidden_size : static_cast<std::int64_t>(d.columns.size());
    if (d.width > most_counted)  // records hold widths in 32 bits; columns may repeat
      fail_request(index, r.id, "method", name_of(method, "the method"), " returns ", d.width,
                   " columns a row; a row holds at most ", most_counted, " (its records count columns in 32 bits)");
    d.out_width = head.output_width(index, r, d.width);
    check_ranges(index, r, d.out_width);
    const std::int64_t end = part.num_computed + part.num_scheduled;
    if (keeps_every_row(method, r) && !filter.by_id()) {
      // Every position but a dropped first or last, known without listing one: no loop over the rows.
      const position_range stay = filter.inner(part.num_computed, end);
      d.consecutive = true;
      d.first_position = stay.begin;
      d.count = static_cast<std::size_t>(stay.size());
      d.before.count = filter.inner(0, part.num_computed).size();
      d.rows_total = filter.inner(0, r.prompt_len).size();
    } else {
      d.first = positions_.size();
      method.select(r, part.num_computed, end, positions_);
      check_selection(method, index, r, part.num_computed, end, std::span(positions_).subspan(d.first));
      if (filter.any())
        positions_.erase(std::remove_if(positions_.begin() + static_cast<std::ptrdiff_t>(d.first), positions_.end(),
                                        [&](std::int64_t position) { return !filter.stays(position); }),
                         positions_.end());
      d.count = positions_.size() - d.first;
      const auto count = static_cast<std::int64_t>(d.count);
      if (shape_.sparse && part.chunked() && !part.finished())  // what the store keeps for the last chunk's listing
        for (std::size_t k = d.first; k < positions_.size(); ++k) d.chunk_digest += position_digest(positions_[k]);
      if (part.first_chunk()) {
        d.rows_total = part.finished() ? count : count + count_chosen(method, filter, index, r, end, r.prompt_len);
      } else {
        const held_rows held = state.rows_of(r.id);  // state.check() found the request in progress
        d.before = held.before;
        d.rows_total = held.total;
        const std::int64_t chosen = held.before.count + count;
        if (chosen > held.total || (part.finished() && chosen != held.total))
          fail_request(index, r.id, "method", name_of(method, "the method"), "'s chunks chose ", chosen,
                       " rows of the prompt through position ", end, "; its count() over the prompt said ", held.total,
                       " at the first chunk");
      }
    }
    if (d.rows_total > most_counted)
      fail_request(index, r.id, "prompt_len", r.prompt_len, " returns ", d.rows_total,
                   " rows; a request returns at most ", most_counted, " (its records count rows in 32 bits)");
    // The prompt's rows at this width must be countable in floats, for the state
    // and for the result.
    const std::int64_t widest = std::max(d.width, d.out_width);
    if (d.rows_total > std::numeric_limits<std::int64_t>::max() / widest / 2)
      fail_request(index, r.id, "prompt_len", r.prompt_len, " rows of ", widest,
                   " columns are more floats than a step can count");
    if (shape_.sparse && part.finished()) list_tokens(method, filter, index, r, part, d);
  }

  /// Sparse results: every row a finishing request returns over its whole
  /// prompt, with its token id, which a list entry holds in 32 bits: the rows
  /// of the chunks before chosen again, then this chunk's as decide_tokens()
  /// chose them.
  template <class Method>
  void list_tokens(const Method& method, const token_filter& filter, std::size_t index, const request& r,
                   const chunk& part, token_decision& d) {
    // A share's lists count their rows, and a slot more a request, in 32 bits. (Listing that many rows
    // takes 32 GiB of the host's memory before any is checked: a bound for hosts that have it.)
    if (listed_.size() + static_cast<std::size_t>(d.rows_total) + token_decisions_.size() >
        static_cast<std::size_t>(most_counted))
      fail_request(index, r.id, "prompt_len", "the step's sparse results would list ", listed_.size(),
                   " rows and this request's ", d.rows_total, ", more than their records count in 32 bits");
    d.first_listed = listed_.size();
    std::uint64_t digest = 0;  // of the earlier chunks' positions, chosen again
    const auto list = [&](std::int64_t position) {
      // A listing past the rows the chunks chose is refused at once, before its rows (and their 32-bit
      // places) outgrow what the state holds; one short of them, below, once it is whole.
      if (static_cast<std::int64_t>(listed_.size() - d.first_listed) == d.rows_total)
        fail_request(index, r.id, "method", name_of(method, "the method"), " chooses more than ", d.rows_total,
                     " rows of the prompt listed whole; its chunks chose ", d.rows_total);
      const std::int64_t id = r.prompt_token_ids[static_cast<std::size_t>(position)];
      if (id < 0 || id > std::numeric_limits<std::int32_t>::max())
        fail_request(index, r.id, "prompt_token_ids", "a sparse result lists ids in [0, 2147483647]; position ",
                     position, " has ", id);
      listed_.push_back({id, static_cast<std::int32_t>(listed_.size() - d.first_listed)});
    };
    visit_chosen(method, filter, index, r, 0, part.num_computed, [&](std::int64_t position) {
      list(position);
      digest += position_digest(position);
    });
    for (std::size_t k = 0; k < d.count; ++k) list(chosen_position(d, k));
    // The rows the chunks chose, which the store counted and digested, are listed again: as many, at
    // the same positions (where they are consecutive, the filter alone places them). The earlier
    // chunks' digests are a sparse pooler's: a request's chunks are one pooler's.
    const auto listed = static_cast<std::int64_t>(listed_.size() - d.first_listed);
    if (listed != d.rows_total)
      fail_request(index, r.id, "method", name_of(method, "the method"), " chooses ", listed,
                   " rows of the prompt listed whole; its chunks chose ", d.rows_total);
    if (!d.consecutive && digest != d.before.digest)
      fail_request(index, r.id, "method", name_of(method, "the method"), " chooses other positions of the prompt ",
                   "listed whole than its chunks chose: its select() depends on where a range begins");
  }

  /// The prompt position of the k-th row that decision `d` chose in its chunk.
  std::int64_t chosen_position(const token_decision& d, std::size_t k) const {
    return d.consecutive ? d.first_position + static_cast<std::int64_t>(k) : positions_[d.first + k];
  }

  /// The rows of [begin, end) — another chunk's — that a token method chooses
  /// and the request's filter lets stay: its count() over the range less a
  /// dropped first or last position (which lie at the range's ends), or,
  /// where the filter drops by id, each such row visited and counted.
  template <class Method>
  std::int64_t count_chosen(const Method& method, const token_filter& filter, std::size_t index, const request& r,
                            std::int64_t begin, std::int64_t end) {
    if (!filter.by_id()) {
      const position_range stay = filter.inner(begin, end);
      if (stay.size() == 0) return 0;
      const std::int64_t counted = method.count(r, stay.begin, stay.end);
      if (counted < 0 || counted > stay.size())  // else the rows the prompt returns could wrap, or pass the bound
        fail_request(index, r.id, "method", name_of(method, "the method"), "'s count() says ", counted, " rows in [",
                     stay.begin, ", ", stay.end, "), which holds ", stay.size(), " positions");
      return counted;
    }
    std::int64_t rows = 0;
    visit_chosen(method, filter, index, r, begin, end, [&](std::int64_t) { ++rows; });
    return rows;
  }

  /// Calls `visit` with each position of [begin, end) that a token method
  /// chooses and the request's filter lets stay, in order: where the method
  /// keeps every row, each position the filter lets stay; else its selection
  /// listed a stretch at a time past the positions planned so far (the list
  /// grows by a stretch at most), checked, visited and taken back.
  template <class Method, class Visit>
  void visit_chosen(const Method& method, const token_filter& filter, std::size_t index, const request& r,
                    std::int64_t begin, std::int64_t end, Visit&& visit) {
    if (keeps_every_row(method, r)) {
      const position_range stay = filter.inner(begin, end);
      for (std::int64_t position = stay.begin; position < stay.end; ++position)
        if (filter.stays(position)) visit(position);
      return;
    }
    const std::size_t mark = positions_.size();
    for (std::int64_t from = begin; from < end; from += counted_stretch) {
      const std::int64_t to = std::min(end, from + counted_stretch);
      method.select(r, from, to, positions_);
      const std::span<const std::int64_t> listed = std::span(positions_).subspan(mark);
      check_selection(method, index, r, from, to, listed);
      for (const std::int64_t position : listed)
        if (filter.stays(position)) visit(position);
      positions_.resize(mark);
    }
  }

  /// Whether a token method returns every row of the request (it says so
  /// with keeps_every_row(); a method that does not say lists its positions).
  template <class Method>
  static bool keeps_every_row(const Method& method, const request& r) {
    if constexpr (requires { { method.keeps_every_row(r) } -> std::convertible_to<bool>; })
      return method.keeps_every_row(r);
    else
      return false;
  }

  /// Writes into `key` what a chunked request's state is begun with under
  /// Method (assigned member by member: its knobs keep their storage).
  template <class Method>
  void begin_key(const Method& method, state_key& key, const request& r) const {
    key.method = method_tag_of(method);
    key.method_name = name_of(method, "a user method");
    key.hidden_size = shape_.hidden_size;
    key.params = r.params;
    key.token_ids = 0;
    key.rows_total = 0;
    // Where the rows a chunk returns depend on the prompt's ids, its later chunks must see the same ids.
    if constexpr (Method::kind == method_kind::token) {
      if (Method::reads_token_ids || token_filter(r).by_id() || shape_.sparse)
        key.token_ids = hash_ids(
            r.prompt_token_ids.first(std::min(r.prompt_token_ids.size(), static_cast<std::size_t>(r.prompt_len))));
    }
  }

  /// Spans must lie in the prompt, each non-empty, in order, touching at most.
  static void check_spans(std::size_t index, const request& r, std::span<const token_span> spans) {
    std::int64_t previous_end = 0;
    for (std::size_t k = 0; k < spans.size(); ++k) {
      const token_span span = spans[k];
      if (span.begin < previous_end || span.begin >= span.end || span.end > r.prompt_len)
        fail_request(index, r.id, "spans", "span ", k, " is [", span.begin, ", ", span.end,
                     "); spans must be non-empty, within [0, prompt_len = ", r.prompt_len,
                     "), in order and not overlapping", k > 0 ? " (the one before ends at " : "",
                     k > 0 ? std::to_string(previous_end) + ")" : "");
      previous_end = span.end;
    }
  }

  /// A token method's select() must choose positions of [begin, end) in
  /// ascending order, and its count() agree with it: the gathers and the state
  /// are sized from them.
  template <class Method>
  static void check_selection(const Method& method, std::size_t index, const request& r, std::int64_t begin,
                              std::int64_t end, std::span<const std::int64_t> chosen) {
    const std::string_view name = name_of(method, "the method");
    std::int64_t previous = begin - 1;
    for (const std::int64_t position : chosen) {
      if (position <= previous || position >= end)
        fail_request(index, r.id, "method", name, "'s select() chose position ", position, ", outside [", begin, ", ",
                     end, ") or out of order");
      previous = position;
    }
    const std::int64_t counted = method.count(r, begin, end);
    if (std::cmp_not_equal(counted, chosen.size()))
      fail_request(index, r.id, "method", name, "'s count() says ", counted, " rows in [", begin, ", ", end,
                   "), select() chose ", chosen.size());
  }

  /// What span `k` of a request sees of its chunk: without spans, the chunk.
  static chunk seen_by(const chunk& part, std::span<const token_span> spans, std::size_t k) {
    return spans.empty() ? part : chunk_of_span(part, spans[k]);
  }

  // Building.

  template <class Method>
  void build(const Method& method, const batch& step, std::span<const chunk> chunks,
             std::span<const std::size_t> chosen) {
    const std::int64_t tile_rows = begin_building<Method>(chosen.size());
    for (std::size_t k = 0; k < chosen.size(); ++k) {
      const std::size_t index = chosen[k];
      build_request(method, decisions_of<Method>()[k], keys_[k], index, step.requests[index], chunks[index], tile_rows);
    }
    end_building<Method>();
  }

  /// Sequence methods, where the family's tiles do not depend on the share:
  /// each request decided and built before the next — a run of requests like
  /// the share's model without a decision (add_alike()).
  template <class Method, class Head, class State>
  void plan_in_one_pass(const Method& method, const Head& head, const batch& step, std::span<const chunk> chunks,
                        std::span<const std::size_t> chosen, const State& state) {
    if (keys_.size() < chosen.size()) keys_.resize(chosen.size());
    const std::int64_t tile_rows = begin_building<Method>(chosen.size());
    for (std::size_t k = add_alike(method, head, step, chunks, chosen, 0, state, tile_rows); k < chosen.size();
         k = add_alike(method, head, step, chunks, chosen, k + 1, state, tile_rows)) {
      const std::size_t index = chosen[k];
      const request& r = step.requests[index];
      const chunk& part = chunks[index];
      request_decision d;
      decide_request(method, head, index, r, part, state, keys_[k], d);
      build_request(method, d, keys_[k], index, r, part, tile_rows);
      if (d.one_window && !model_) take_model(d);
      windows_.clear();  // built: check_records() counts them in the entries
    }
    end_building<Method>();
  }

  /// Adds requests chosen[k], chosen[k + 1], … while each is like the share's
  /// model (add_like()), and gives the place of the first that is not (or the
  /// end). Flattened: GCC called the family's cut_whole(), the vectors' growth
  /// and add_like() itself with eight arguments, a request at a time (a sixth
  /// of such a request's planning instructions).
  template <class Method, class Head, class State>
  [[gnu::flatten]] std::size_t add_alike(const Method& method, const Head& head, const batch& step,
                                         std::span<const chunk> chunks, std::span<const std::size_t> chosen,
                                         std::size_t k, const State& state, std::int64_t tile_rows) {
    for (; k < chosen.size(); ++k) {
      const std::size_t index = chosen[k];
      if (!add_like(method, head, index, step.requests[index], chunks[index], state, keys_[k], tile_rows)) break;
    }
    return k;
  }

  /// Makes room for the records of `requests` requests, and gives the rows of
  /// the tiles the family cuts this share's sequence requests into.
  template <class Method>
  std::int64_t begin_building(std::size_t requests) {
    share_.num_requests = requests;
    // A record a window (a sequence method's: all of them decided, or at least
    // one a request) or a request; a vote holds them all in full at once, and
    // may have made every one a detail before.
    const std::size_t records = std::max(windows_.size(), requests);
    share_.records.entries.reserve(records);
    share_.records.details.reserve(records);
    built_.reserve(records);
    unlike_.reserve(records);
    if constexpr (Method::kind == method_kind::sequence) {
      // A tile a request at least, and a work item at most (more only for split requests).
      share_.records.tiles.reserve(requests);
      share_.records.works.reserve(requests);
      // The windows decided (none where they do not set the tiles' rows).
      return Algorithms::tile_rows_for(windows_, modes_of<Method> * shape_.hidden_size, shape_.hidden_size,
                                       shape_.bounded);
    }
    return 0;
  }

  /// Builds the records of request `r`, decided `d`, whose state is begun with
  /// `key`; a sequence method's tiles of `tile_rows` rows.
  template <class Method, class Decision>
  void build_request(const Method& method, const Decision& d, const state_key& key, std::size_t index, const request& r,
                     const chunk& part, std::int64_t tile_rows) {
    if constexpr (Method::kind == method_kind::token)
      add_gathered(d, key, index, r, part);
    else if (d.one_window)
      add_one_window(d, index, r, part, tile_rows);
    else
      add_pooled(method, d, key, index, r, part, tile_rows);
  }

  /// Once every request is built: the entries settled, and the share's output
  /// and image sized.
  template <class Method>
  void end_building() {
    if constexpr (Method::kind == method_kind::token) lay_out_gather_bases();
    settle_entries();
    share_.output_values = output_end_ - output_begin_;
    share_.image_bytes = lay_out_image(share_.records.counts(), share_.header);
  }

  /// Whether `owner` is `common` but for the fields an entry holds. Every
  /// record of a share is compared, just after it is written field by field:
  /// fields lying side by side are compared apart, lest the compiler compare
  /// two with one load, which would wait for both stores to reach the cache.
  static bool same_beyond_entry(const request_record& owner, const request_record& common) {
    // A field added to request_record is compared here: this binding names every field, and stops compiling.
    [[maybe_unused]] const auto& [prompt_len, position_offset, offset, partials, columns, result, width, linear_width,
                                  num_tiles, arrivals, where, flags, knobs] = owner;
    return owner.width == common.width && owner.where == common.where && owner.partials == common.partials &&
           owner.num_tiles == common.num_tiles && owner.columns == common.columns && owner.flags == common.flags &&
           owner.linear_width == common.linear_width && owner.result == common.result && owner.knobs == common.knobs &&
           owner.arrivals == common.arrivals;
  }

  /// Whether record `owner`, entered at `entry`, may be held by its entry
  /// over the common record: it need not be held in full, and the entry's
  /// fields hold its own.
  static bool may_be_compact(const request_record& owner, const request_entry& entry) {
    constexpr std::int64_t most = std::numeric_limits<std::int32_t>::max();
    return entry.detail != request_entry::held_in_full && owner.prompt_len <= most && owner.position_offset >= -most &&
           owner.position_offset <= most && owner.offset >= 0 && owner.offset <= most;
  }

  /// Writes the entry of each of the request's records built, from record
  /// `first` on, as it is built: over the share's common record — the first
  /// that may be compact — where it is that one but for the entry's fields;
  /// else naming its detail, whose index is its entry of the state table. A
  /// record that may be compact but is unlike the common one makes the share
  /// vote for its common record once every request is built (enter_by_vote()).
  void enter_built(std::int32_t first) {
    for (std::size_t k = 0; k < built_.size(); ++k) enter_record(first + static_cast<std::int32_t>(k), built_[k]);
  }

  /// Writes the entry of record `index`, built in full as `owner`, as it is
  /// built (enter_built(), add_one_window()).
  void enter_record(std::int32_t index, const request_record& owner) {
    request_entry& entry = share_.records.entries[static_cast<std::size_t>(index)];
    const bool compact = may_be_compact(owner, entry);
    if (compact && !has_common_) {
      share_.header.common = owner;
      has_common_ = true;
    }
    const bool like = compact && same_beyond_entry(owner, share_.header.common);
    if (compact && !like) unlike_.push_back(index);
    enter(entry, owner, like);
  }

  /// Writes `entry`, record `owner`'s: over the common record where `like`
  /// it, else naming the detail it adds, and holding none of its fields.
  void enter(request_entry& entry, const request_record& owner, bool like) {
    entry.width = owner.width;
    if (like) {
      entry.prompt_len = static_cast<std::int32_t>(owner.prompt_len);
      entry.position_offset = static_cast<std::int32_t>(owner.position_offset);
      entry.offset = static_cast<std::int32_t>(owner.offset);
      entry.detail = -1;
    } else {
      entry.prompt_len = 0;
      entry.position_offset = 0;
      entry.offset = 0;
      entry.detail = static_cast<std::int32_t>(share_.records.details.size());
      share_.records.details.push_back(owner);
    }
  }

  /// Once every request is built: where a record that may be compact was
  /// unlike the first such, enters every record again over the one more than
  /// half of those that may be compact are but for their entries' fields,
  /// where one is (a majority vote; else the vote's last candidate). A family
  /// whose tiles are a split request's alone, held in full, has them name its
  /// detail; runs name their request's.
  void settle_entries() {
    share_records& records = share_.records;
    if (!unlike_.empty()) enter_by_vote();
    if constexpr (Algorithms::tiles_name_details)
      for (tile_record& tile : records.tiles)
        tile.request = records.entries[static_cast<std::size_t>(tile.request)].detail;
    for (gather_record& run : records.gathers)
      run.detail = records.entries[static_cast<std::size_t>(run.request)].detail;
  }

  /// Every record in full again, from its entry — a detail not listed unlike
  /// is held in full — then entered over the common record the vote chooses.
  void enter_by_vote() {
    share_records& records = share_.records;
    const std::size_t count = records.entries.size();
    std::vector<request_record>& all = built_;
    all.clear();
    const request_table entered{records.entries.data(), records.details.data(), &share_.header.common};
    auto unlike = unlike_.begin();
    for (std::size_t k = 0; k < count; ++k) {
      all.push_back(entered[static_cast<std::int64_t>(k)]);
      if (records.entries[k].detail < 0) continue;
      if (unlike != unlike_.end() && std::cmp_equal(*unlike, k))
        ++unlike;
      else
        records.entries[k].detail = request_entry::held_in_full;
    }
    records.details.clear();
    std::size_t common = count;
    std::size_t votes = 0;
    for (std::size_t k = 0; k < count; ++k) {
      if (!may_be_compact(all[k], records.entries[k])) continue;
      if (votes == 0) common = k;
      if (same_beyond_entry(all[k], all[common]))
        ++votes;
      else
        --votes;
    }
    share_.header.common = all[common];
    for (std::size_t k = 0; k < count; ++k) {
      const bool like = may_be_compact(all[k], records.entries[k]) && same_beyond_entry(all[k], share_.header.common);
      enter(records.entries[k], all[k], like);
    }
  }

  /// A sequence method's request: a record per span (one without spans), each
  /// pooling its rows as a prompt of its own (chunk_of_span), with its own part
  /// of the request's state and, when the request finishes, its own result row.
  /// A span that ends before the request does keeps its reduction, unfinished,
  /// in the state, whatever the method keeps otherwise, and is finished from
  /// there with the request. Its split windows are cut into tiles of `tile_rows` rows.
  template <class Method>
  void add_pooled(const Method& method, const request_decision& d, const state_key& key, std::size_t index,
                  const request& r, const chunk& part, std::int64_t tile_rows) {
    constexpr bool keeps_state = Method::keeps_state;
    token_span after;
    const std::span<const token_span> spans = pooled_spans(method, r, after);
    const std::span<const row_window> windows = std::span(windows_).subspan(d.first, d.count);
    const auto count = static_cast<std::int64_t>(d.count);
    const std::int64_t pooled_width = d.width;
    const bool keeps = keeps_state || !spans.empty();  // whether the request's state holds a reduction
    std::int64_t held = Algorithms::policy::held_row_floats;
    for (const row_window window : windows) held = std::min(held, held_width(window, d.out_width));
    const std::int32_t first = add_records(r.prompt_len, d.knobs, count, -1);
    if (part.chunked()) keep_state(first, index, r, keeps ? count * pooled_width : 0, key, count, pooled_width);
    destination to{target::state, 0, pooled_width, 0, 0};
    if (part.finished())
      to = shape_.sparse ? route_row_list(first, index, pooled_width, d.out_width, r.params.top_k)
                         : route_results(first, index, count, pooled_width, d.out_width, held);
    for (std::int64_t k = 0; k < count; ++k) {
      const row_window window = windows[static_cast<std::size_t>(k)];
      // A chunk that does not finish writes only the state of a reduction it adds to.
      if (!part.finished() && (window.count == 0 || !keeps)) continue;
      const chunk seen = seen_by(part, spans, static_cast<std::size_t>(k));
      request_record& owner = built_[static_cast<std::size_t>(k)];
      owner.prompt_len = seen.prompt_len;
      owner.position_offset = seen.num_computed - seen.first_row();
      direct(owner, to, k, starts_from_state(part, seen, keeps_state) ? from_state : 0, values_of(d.out_width));
      // Rows are read up to the columns the pooled row keeps of its first mode's.
      Algorithms::cut(share_, first + static_cast<std::int32_t>(k), owner, window, tile_rows,
                      std::min<std::int64_t>(shape_.hidden_size, owner.width));
    }
    enter_built(first);
  }

  /// add_pooled() for a request decided `one_window`: one record, finishing,
  /// with no state, built where it lies and entered at once, from its decision
  /// and chunk (of the request, a sparse result reads top_k alone) — a step of
  /// thousands of one-row requests plans each in a short pass. Flattened: GCC
  /// called the family's cut() and enter_record() here, passing the record
  /// through memory (a tenth of a one-row request's planning instructions).
  [[gnu::flatten]] void add_one_window(const request_decision& d, std::size_t index, const request& r,
                                       const chunk& part, std::int64_t tile_rows) {
    const row_window window = windows_[d.first];
    const std::int64_t held = held_width(window, d.out_width);
    const auto first = static_cast<std::int32_t>(share_.records.entries.size());
    share_.records.entries.emplace_back();
    request_record owner{};
    begin_record(owner, part.prompt_len, d.knobs, -1);
    const destination to = shape_.sparse ? route_row_list(first, index, d.width, d.out_width, r.params.top_k)
                                         : route_results(first, index, 1, d.width, d.out_width, held);
    owner.position_offset = part.num_computed - part.first_row();
    direct(owner, to, 0, 0, values_of(d.out_width));
    Algorithms::cut(share_, first, owner, window, tile_rows, std::min<std::int64_t>(shape_.hidden_size, owner.width));
    enter_record(first, owner);
  }

  /// Writes the entry and cut of a sequence request like the share's model —
  /// one that arrives in one chunk and pools its prompt whole as one item of
  /// the family's cut, with the model's knobs and result width, and none of the
  /// knobs that plan otherwise (spans, an instruction, a filter, top_k) — and
  /// reserves its result, after the checks decide() makes of such a request.
  /// Its record is the model's but for the entry's fields, so it makes no
  /// decision, window or record, and is entered over the share's common record
  /// at once: the short pass a step of thousands of like requests takes. False,
  /// having written nothing, for any other request.
  template <class Method, class Head, class State>
  bool add_like(const Method& method, const Head& head, std::size_t index, const request& r, const chunk& part,
                const State& state, const state_key& key, std::int64_t tile_rows) {
    if (!model_ || part.chunked()) return false;
    const pooling_params& params = r.params;
    if (!params.spans.empty() || params.instruction_len != 0 || params.top_k || token_filter(r).any() ||
        knobs_of(params) != model_->knobs)
      return false;
    state.check(index, r, key);
    const std::int64_t out_width = head.output_width(index, r, model_->width);
    if (out_width != model_->out_width) return false;
    const row_window window = method.window(part);
    const std::int64_t loaded = std::min(shape_.hidden_size, out_width);
    if (!Algorithms::takes_whole(window, out_width, tile_rows, loaded) ||
        !lands_in_output(out_width, held_width(window, out_width)))
      return false;
    // Its entry holds its fields in 32 bits: its prompt's length, its rows' place, and its result's offset (at
    // most 15 values past the output's end).
    constexpr std::int64_t most = std::numeric_limits<std::int32_t>::max();
    if (part.prompt_len > most || part.first_row() > most || output_end_ > most - 15) return false;
    check_records(index, r, 1);
    const auto first = static_cast<std::int32_t>(share_.records.entries.size());
    const std::int64_t offset = reserve_results(index, 1, out_width).offset;
    share_.records.entries.push_back(
        {0, 0, static_cast<std::int32_t>(out_width), static_cast<std::int32_t>(part.prompt_len),
         static_cast<std::int32_t>(part.num_computed - part.first_row()), static_cast<std::int32_t>(offset), -1});
    Algorithms::cut_whole(share_, first, window, loaded);
    return true;
  }

  /// Makes the request add_one_window() has just built, decided `d`, the
  /// share's model where its record was entered over the common one and its
  /// row goes straight to the output (a record as wide as its result): a
  /// pooled row finished where it is pooled, with no dense layer, list or
  /// draft.
  void take_model(const request_decision& d) {
    if (shape_.sparse || shape_.has_linear || share_.records.entries.back().detail != -1 ||
        share_.header.common.where != target::output)
      return;
    model_ = like_request{d.knobs, d.width, d.out_width};
  }

  /// Whether a record continues a reduction its state holds: a chunk after the
  /// first of a method that keeps state, or a span that ended in an earlier
  /// chunk (it kept its reduction there, unfinished).
  static bool starts_from_state(const chunk& part, const chunk& seen, bool keeps_state) {
    if (!part.chunked()) return false;
    return keeps_state ? seen.num_computed > 0 : seen.num_scheduled == 0 && seen.finished();
  }

  /// A token method's request: a run of the rows earlier chunks stashed in its
  /// state, when it finishes, and a run of this chunk's rows it returns (or,
  /// before it finishes, stashes): every row, or those a mask of a bit a row
  /// keeps.
  void add_gathered(const token_decision& d, const state_key& key, std::size_t index, const request& r,
                    const chunk& part) {
    std::int64_t column_offset = -1;
    if (!d.columns.empty()) {
      column_offset = static_cast<std::int64_t>(share_.records.column_table.size());
      for (const std::int64_t column : d.columns)
        share_.records.column_table.push_back(static_cast<std::int32_t>(column));
    }
    const std::int32_t record = add_records(r.prompt_len, d.knobs, 1, column_offset);
    if (part.chunked())
      keep_state(record, index, r, d.rows_total * d.width, key, 1, 0, d.before,
                 {static_cast<std::int64_t>(d.count), d.chunk_digest});
    const std::int64_t rows = d.before.count + static_cast<std::int64_t>(d.count);
    // A family that projects returned rows where they lie gathers none of a
    // finishing request's rows that a dense layer takes: its linear records say where they are.
    const bool projected = part.finished() && shape_.has_linear && Algorithms::projects_returned_rows;
    const std::size_t first_linear = share_.records.linears.size();
    destination to{target::state, 0, d.width, 0, d.width};
    if (part.finished())
      to = shape_.sparse ? route_weights(record, index, d, r.params.top_k, projected)
                         : route_results(record, index, rows, d.width, d.out_width, Algorithms::policy::held_row_floats,
                                         projected);
    direct(built_[0], to, 0, 0, values_of(d.out_width));
    enter_built(record);
    if (projected) {
      locate_returned_rows(first_linear, d, part);
      return;
    }

    if (part.finished() && d.before.count > 0)
      add_run({-1, to.offset, -1, static_cast<std::int32_t>(d.before.count), record, 0,
               static_cast<std::int32_t>(d.width), static_cast<std::int32_t>(to.row_stride)},
              d.before.count);
    if (d.count == 0) return;
    const std::int64_t offset = to.offset + d.before.count * to.row_stride;
    const auto count = static_cast<std::int64_t>(d.count);
    if (d.consecutive) {
      add_run({hidden_row(part, d.first_position), offset, -1, static_cast<std::int32_t>(count), record, 0, 0,
               static_cast<std::int32_t>(to.row_stride)},
              count);
      return;
    }
    // The chosen positions, from the first to the last: every row of that span,
    // or those its mask keeps.
    const std::span<const std::int64_t> chosen = std::span(positions_).subspan(d.first, d.count);
    const std::int64_t spanned = chosen.back() - chosen.front() + 1;
    const std::int64_t first_row = hidden_row(part, chosen.front());
    if (spanned == count) {
      add_run({first_row, offset, -1, static_cast<std::int32_t>(count), record, 0, 0,
               static_cast<std::int32_t>(to.row_stride)},
              count);
      return;
    }
    const std::int64_t mask = mask_bits_;
    mask_bits_ += spanned;
    std::vector<std::uint32_t>& words = share_.records.masks;
    words.resize(static_cast<std::size_t>((mask_bits_ + 31) / 32), 0);
    for (const std::int64_t position : chosen) {
      const std::int64_t bit = mask + (position - chosen.front());
      words[static_cast<std::size_t>(bit / 32)] |= 1u << (bit % 32);
    }
    add_run({first_row, offset, static_cast<std::int32_t>(mask), static_cast<std::int32_t>(spanned), record, 0, 0,
             static_cast<std::int32_t>(to.row_stride)},
            count);
  }

  /// The hidden row of a chunk's prompt position.
  static std::int64_t hidden_row(const chunk& part, std::int64_t position) {
    return part.first_row() + (position - part.num_computed);
  }

  /// Writes where each returned row of a finishing request lies into its
  /// linear records, from `first` on: the rows earlier chunks stashed in its
  /// state, a width apart, then this chunk's hidden rows.
  void locate_returned_rows(std::size_t first, const token_decision& d, const chunk& part) {
    linear_record* rows = share_.records.linears.data() + first;
    for (std::int64_t k = 0; k < d.before.count; ++k) rows[k].source = -1 - k * d.width;
    rows += d.before.count;
    for (std::size_t k = 0; k < d.count; ++k) rows[k].source = hidden_row(part, chosen_position(d, k));
  }

  /// A run of a request's rows, of which `returned` are returned.
  void add_run(const gather_record& run, std::int64_t returned) {
    check_indexable(static_cast<std::int64_t>(share_.records.gathers.size()) + 1, "runs of gathered rows");
    share_.records.gathers.push_back(run);
    run_returns_.push_back(returned);
  }

  /// An even share of the returned rows for each item or block of the
  /// gathering launch (its base, and one base past the last): as many as the
  /// family's policy launches, or fewer when there are fewer rows — each a
  /// block of layer_unit_rows at least where the rows pass through the head's
  /// dense layer, whose weights are read once a block — and all of them for a
  /// pooler with a capacity, whose launch the capacity sized. A base is found
  /// without walking the rows: runs are skipped whole, a masked run counted a
  /// mask word at a time.
  void lay_out_gather_bases() {
    std::int64_t total = 0;
    for (const std::int64_t returned : run_returns_) total += returned;
    if (total == 0 && !shape_.bounded) return;
    const std::int64_t most = Algorithms::policy::gather_units;
    const std::int64_t least_rows = shape_.has_linear ? Algorithms::policy::layer_unit_rows : 1;
    const std::int64_t units = shape_.bounded ? most : std::min(most, (total + least_rows - 1) / least_rows);
    const std::vector<gather_record>& runs = share_.records.gathers;
    gather_base at{0, 0, 0, 0};
    for (std::int64_t unit = 0; unit <= units; ++unit) {
      const std::int64_t target = units == 0 ? 0 : unit * total / units;
      while (at.first < target) {
        const gather_record& run = runs[static_cast<std::size_t>(at.run)];
        const std::int64_t left = run_returns_[static_cast<std::size_t>(at.run)] - at.returned;
        if (target - at.first >= left) {
          at.first += left;
          at = {at.first, 0, at.run + 1, 0};
          continue;
        }
        const std::int64_t step = target - at.first;
        at.source = run.mask < 0 ? at.source + step : after_kept(run.mask + at.source, step) - run.mask;
        at.returned += static_cast<std::int32_t>(step);
        at.first = target;
      }
      share_.records.gather_bases.push_back(at);
    }
  }

  /// The bit just past the `count`-th set bit of the mask at or after `bit`.
  std::int64_t after_kept(std::int64_t bit, std::int64_t count) const {
    const std::vector<std::uint32_t>& words = share_.records.masks;
    while (true) {
      const std::uint32_t word = words[static_cast<std::size_t>(bit / 32)] >> (bit % 32);
      const std::int64_t set = std::popcount(word);
      if (set < count) {
        count -= set;
        bit += 32 - bit % 32;
        continue;
      }
      std::uint32_t rest = word;
      for (std::int64_t k = 1; k < count; ++k) rest &= rest - 1;  // the count-th set bit is now the lowest
      return bit + std::countr_zero(rest) + 1;
    }
  }

  /// Adds `count` request records of a request of `prompt_len` positions told
  /// `knobs`, their entries to be written once they are built (enter_built());
  /// returns the first's index.
  std::int32_t add_records(std::int64_t prompt_len, request_knobs knobs, std::int64_t count,
                           std::int64_t column_offset) {
    const auto first = static_cast<std::int32_t>(share_.records.entries.size());
    built_.clear();
    for (std::int64_t k = 0; k < count; ++k) {
      share_.records.entries.emplace_back();
      // Written where it lies: a record copied from the stack is loaded 16 bytes at a time over two
      // 8-byte stores, which cannot be forwarded to the load, so the copy waits for them to reach the cache.
      begin_record(built_.emplace_back(), prompt_len, knobs, column_offset);
    }
    return first;
  }

  /// The fields of a request's record known before it is routed.
  static void begin_record(request_record& owner, std::int64_t prompt_len, request_knobs knobs,
                           std::int64_t column_offset) {
    owner.prompt_len = prompt_len;
    owner.columns = column_offset;
    owner.where = target::output;
    owner.knobs = knobs;
  }

  /// Writes where record `k` of a request's records goes and how it finishes.
  static void direct(request_record& owner, const destination& to, std::int64_t k, std::uint8_t flags,
                     std::int64_t out_values) {
    owner.offset = to.offset + k * to.row_stride;  // state: each record's entry of the state table is its own part
    owner.width = static_cast<std::int32_t>(to.row_width);
    owner.where = to.where;
    owner.flags = to.flags | flags;
    owner.linear_width = static_cast<std::int32_t>(to.linear_width);
    if ((to.flags & drafted) != 0) owner.result = to.result + k * out_values;
  }

  /// The request's state, `floats` floats, which `records` request records from
  /// `record` on share, each `record_floats` after the last; a token method's
  /// chunks before chose the rows `before` counts, and this one chooses those
  /// `chunk` counts, which the store adds to them once the step runs.
  void keep_state(std::int32_t record, std::size_t index, const request& r, std::int64_t floats, const state_key& key,
                  std::int64_t records, std::int64_t record_floats, chosen_rows before = {}, chosen_rows chunk = {}) {
    state_use& use = share_.stateful.next();  // assigned member by member: its strings and knobs keep their storage
    use.request = record;
    use.batch_index = index;
    use.owner = r;
    use.owner.prompt_token_ids = {};
    use.floats = static_cast<std::size_t>(floats);
    use.key = key;
    use.records = static_cast<std::int32_t>(records);
    use.record_floats = record_floats;
    use.before = before;
    use.chunk = chunk;
    // Its records are held in full: each one's state is its detail's entry of the state table.
    for (std::int64_t k = 0; k < records; ++k)
      share_.records.entries[static_cast<std::size_t>(record + k)].detail = request_entry::held_in_full;
  }

  /// Reserves a finishing request's `rows` result rows, from a 16-byte boundary.
  /// Without a linear layer the method writes them directly, with the head's
  /// epilogue; 16-bit rows wider than `held_width`, the widest the finishing
  /// kernel holds whole, are drafted in the workspace and encoded into place, as
  /// are quantized rows where the family drafts them all. With one dense layer,
  /// pooled rows are passed through it by the item that pools them where the
  /// family does that; otherwise they go to the workspace and a pass of the
  /// layers writes the result and runs the epilogue, drafting 16-bit rows where
  /// the family says, and quantized rows where it drafts them all; a stack's
  /// outputs of every layer but the last lie in the workspace, a row's
  /// together. Rows `projected` where they lie (a token method's returned
  /// rows, on a family that does so) take no workspace before the layers: the
  /// caller writes where each lies into its linear record. In the output, rows
  /// lie the values they take apart.
  destination route_results(std::int32_t record, std::size_t index, std::int64_t rows, std::int64_t pooled_width,
                            std::int64_t out_width, std::int64_t held_width, bool projected = false) {
    const result_slice& slice = reserve_results(index, rows, out_width);
    const std::int64_t out_values = slice.cols;
    const bool rounding = shape_.result_bytes < 4;
    const bool always_drafted = shape_.quantized && Algorithms::drafts_quantized_rows;
    if (!shape_.has_linear) {
      if (lands_in_output(out_width, held_width))
        return {target::output, slice.offset, out_width, finish | epilogue, out_values};
      return {target::workspace, share_.take_workspace(rows * out_width), out_width, finish | epilogue | drafted,
              out_width, slice.offset};
    }
    const std::int64_t between = shape_.between_floats;
    if (between == 0 && !projected && Algorithms::linear_in_item(pooled_width, out_width, rounding))
      return {target::output, slice.offset, pooled_width, finish | through_linear, out_values, 0, out_width};
    const std::int64_t pooled = projected ? -1 : share_.take_workspace(rows * pooled_width);
    const bool draft = always_drafted || (rounding && Algorithms::drafts_linear_rows(out_width));
    const std::int64_t drafts = draft ? share_.take_workspace(rows * out_width) : -1;
    const std::int64_t betweens = between > 0 ? share_.take_workspace(rows * between) : -1;
    for (std::int64_t k = 0; k < rows; ++k)
      share_.records.linears.push_back({projected ? -1 : pooled + k * pooled_width, -1, slice.offset + k * out_values,
                                        draft ? drafts + k * out_width : -1, between > 0 ? betweens + k * between : -1,
                                        record, static_cast<std::int32_t>(out_width)});
    return {target::workspace, pooled, pooled_width, finish, pooled_width};
  }

  /// A finishing request's `rows` result rows of `out_width` columns, in the
  /// output from a 16-byte boundary.
  const result_slice& reserve_results(std::size_t index, std::int64_t rows, std::int64_t out_width) {
    // Written and read where it lies: a slice copied from the stack, or returned by value, is loaded 16 bytes at a
    // time over two 8-byte stores, which cannot be forwarded to the load.
    result_slice& slice = results_[index].emplace();
    slice.offset = align_values(output_end_, shape_.result_bytes);
    slice.rows = rows;
    slice.cols = values_of(out_width);
    share_.result_rows += rows;
    output_end_ = slice.offset + rows * slice.cols;
    return slice;
  }

  /// The widest result row the item that finishes a pooled window holds whole
  /// (at most held_row_floats), for a result `out_width` wide whose row is
  /// read up to the columns it keeps.
  std::int64_t held_width(row_window window, std::int64_t out_width) const {
    return std::min(Algorithms::policy::held_row_floats,
                    Algorithms::held_width(window, out_width, std::min(shape_.hidden_size, out_width)));
  }

  /// Without a dense layer: whether the method writes a result row of
  /// `out_width` columns into the output itself, rather than drafting it in
  /// the workspace — any float row, a 16-bit one its item holds whole
  /// (`held_width`), and a quantized one where the family drafts none.
  bool lands_in_output(std::int64_t out_width, std::int64_t held_width) const {
    const bool rounding = shape_.result_bytes < 4;
    const bool always_drafted = shape_.quantized && Algorithms::drafts_quantized_rows;
    return !rounding || (!always_drafted && out_width <= held_width);
  }

  /// Sparse results: a finishing token request's returned rows are weighed
  /// by the head's layers (weigh()), and its list — the count, then a pair a
  /// distinct id of its rows, or top_k at most — takes a row of the output;
  /// its slots name each id's rows, sorted here from the rows listed when it
  /// was checked. The weights lie a float a row in the workspace.
  destination route_weights(std::int32_t record, std::size_t index, const token_decision& d,
                            std::optional<std::int64_t> top_k, bool projected) {
    const std::int64_t rows = d.rows_total;
    const auto listed = std::span(listed_).subspan(d.first_listed, static_cast<std::size_t>(rows));
    sort_by_id(listed, sorting_);  // listed in prompt order: each id's rows stay in it
    std::vector<sparse_slot>& slots = share_.records.sparse_slots;
    std::vector<std::int32_t>& order = share_.records.sparse_order;
    const auto first_slot = static_cast<std::int32_t>(slots.size());
    for (std::size_t k = 0; k < listed.size(); ++k) {
      if (k == 0 || listed[k].id != listed[k - 1].id)
        slots.push_back({static_cast<std::int32_t>(listed[k].id), static_cast<std::int32_t>(order.size())});
      order.push_back(listed[k].row);
    }
    const std::int64_t ids = static_cast<std::int64_t>(slots.size()) - first_slot;
    slots.push_back({-1, static_cast<std::int32_t>(order.size())});
    const sparse_list list{0, 0, 0, first_slot, static_cast<std::int32_t>(ids), 0, shape_.floor};
    if (!projected && shape_.between_floats == 0 && Algorithms::linear_in_item(d.width, 1, false)) {
      const std::int64_t weights = share_.take_workspace(rows);
      add_list(index, rows, weights, list, top_k);
      return {target::output, weights, d.width, finish | through_linear, 1, 0, 1};
    }
    const weighed rows_in = weigh(record, rows, d.width, 1, projected);
    add_list(index, rows, rows_in.weights, list, top_k);
    return {target::workspace, rows_in.pooled, d.width, finish, d.width};
  }

  /// Sparse results: a finishing sequence request's row of `out_width`
  /// columns is finished in the workspace — by the method and the head's
  /// epilogue, or through the head's layers, by the item that pooled it where
  /// the family does that — and listed by column.
  destination route_row_list(std::int32_t record, std::size_t index, std::int64_t pooled_width, std::int64_t out_width,
                             std::optional<std::int64_t> top_k) {
    const sparse_list list{0, 0, 0, -1, static_cast<std::int32_t>(out_width), 0, shape_.floor};
    const bool in_item = shape_.between_floats == 0 && Algorithms::linear_in_item(pooled_width, out_width, false);
    if (!shape_.has_linear || in_item) {
      const std::int64_t row = share_.take_workspace(out_width);
      add_list(index, 1, row, list, top_k);
      if (!shape_.has_linear) return {target::output, row, out_width, finish | epilogue, out_width};
      return {target::output, row, pooled_width, finish | through_linear, out_width, 0, out_width};
    }
    const weighed row_in = weigh(record, 1, pooled_width, out_width, false);
    add_list(index, 1, row_in.weights, list, top_k);
    return {target::workspace, row_in.pooled, pooled_width, finish, pooled_width};
  }

  /// Where weigh() put its rows: the pooled rows' first (-1 where they lie)
  /// and their weights' first, in the workspace.
  struct weighed {
    std::int64_t pooled;
    std::int64_t weights;
  };

  /// Linear records for `rows` rows of `pooled_width` floats (in the
  /// workspace, or where they lie when `projected`), whose results of
  /// `out_width` go to the workspace (the passes' output) for the lists.
  weighed weigh(std::int32_t record, std::int64_t rows, std::int64_t pooled_width, std::int64_t out_width,
                bool projected) {
    const std::int64_t pooled = projected ? -1 : share_.take_workspace(rows * pooled_width);
    const std::int64_t weights = share_.take_workspace(rows * out_width);
    const std::int64_t between = shape_.between_floats;
    const std::int64_t betweens = between > 0 ? share_.take_workspace(rows * between) : -1;
    for (std::int64_t k = 0; k < rows; ++k)
      share_.records.linears.push_back({projected ? -1 : pooled + k * pooled_width, -1, weights + k * out_width, -1,
                                        between > 0 ? betweens + k * between : -1, record,
                                        static_cast<std::int32_t>(out_width)});
    return {pooled, weights};
  }

  /// A list of `list.ids` ids at most (or top_k), after its count, in a row
  /// of the output from a 16-byte boundary, of the weights at workspace offset
  /// `weights` (a token method's, with a float a slot after them for its ids'
  /// weights); `rows` rows were weighed for it.
  void add_list(std::size_t index, std::int64_t rows, std::int64_t weights, sparse_list list,
                std::optional<std::int64_t> top_k) {
    list.weights = weights;
    list.slot_weights = list.first_slot < 0 ? weights : share_.take_workspace(list.ids);
    list.top = top_k ? static_cast<std::int32_t>(std::min<std::int64_t>(*top_k, list.ids)) : -1;
    const result_slice slice{align_values(output_end_, shape_.result_bytes), 1, std::int64_t{1} + list.most()};
    list.offset = slice.offset;
    results_[index] = slice;
    share_.result_rows += rows;
    output_end_ = slice.offset + slice.cols;
    share_.records.sparse_lists.push_back(list);
  }

  /// The output values a result row of `width` columns takes.
  std::int64_t values_of(std::int64_t width) const { return detail::values_of(width, shape_.columns_per_value); }

  /// Positions of a range visit_chosen() lists at a time.
  static constexpr std::int64_t counted_stretch = 4096;

  pooler_shape shape_;
  std::vector<request_decision>& pooled_decisions_;
  std::vector<token_decision>& token_decisions_;
  std::vector<state_key>& keys_;
  std::vector<row_window>& windows_;
  std::vector<std::int64_t>& positions_;
  std::vector<std::int64_t>& run_returns_;  ///< rows each run returns
  std::vector<listed_token>& listed_;
  std::vector<listed_token>& sorting_;
  std::vector<request_record>& built_;  ///< the request's records being built, in full (planner_scratch::built)
  std::vector<std::int32_t>& unlike_;   ///< records that may be compact but are unlike the first such
  bool has_common_ = false;             ///< whether a record that may be compact was entered
  /// What add_like() compares a sequence request with: the knobs and widths of
  /// the first request built as one window over the common record.
  struct like_request {
    request_knobs knobs;
    std::int64_t width;      ///< pooled
    std::int64_t out_width;  ///< of the result, and of its record
  };
  std::optional<like_request> model_;
  std::int64_t mask_bits_ = 0;
  share& share_;
  std::span<std::optional<result_slice>> results_;  ///< the step's, at batch indices
  std::int64_t output_begin_;
  std::int64_t output_end_;
};

}  // namespace seqpool::detail
