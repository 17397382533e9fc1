// What a multi_pooler's part sees of a step: each request with the knobs that
// reach the part, and the part's own states of chunked requests.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>

#include <seqpool/batch.hpp>
#include <seqpool/detail/token_filter.hpp>
#include <seqpool/error.hpp>
#include <seqpool/part.hpp>
#include <seqpool/state_key.hpp>

namespace seqpool::detail {

/// What a part is, which decides the knobs that reach it: the task its pooler
/// serves, and whether it lists sparse weights.
struct part_kind {
  seqpool::task task = task::embed;
  bool sparse = false;

  bool token_wise() const { return is_token_task(task); }
  /// Whether `dimensions` reaches it: a sequence part that embeds, into a dense row.
  bool truncates() const { return task == task::embed && !sparse; }
};

/// Request `asked` (batch index `index`) as part `part`, of kind `kind`, plans
/// it, written into `into` (whose strings and lists keep their storage): the
/// part's task, and of the request's knobs those that apply to the part (SPEC
/// section 5) — use_activation to every part; token filters, step_tag_id and
/// returned_token_ids to token parts, with the part's own filters added (their
/// ids joined to the request's, refused past max_drop_token_ids as the union
/// they make); spans and instruction_len to sequence parts; dimensions to
/// sequence parts that embed into a dense row; top_k to sparse parts.
inline void route_knobs(std::size_t index, const request& asked, std::size_t part, const part_kind& kind,
                        const part_filters& added, request& into) {
  into.id = asked.id;
  into.task = kind.task;
  into.prompt_len = asked.prompt_len;
  into.num_computed = asked.num_computed;
  into.num_scheduled = asked.num_scheduled;
  into.prompt_token_ids = asked.prompt_token_ids;
  const pooling_params& knobs = asked.params;
  pooling_params& routed = into.params;
  const bool tokens = kind.token_wise();
  routed.use_activation = knobs.use_activation;
  routed.dimensions = kind.truncates() ? knobs.dimensions : std::nullopt;
  routed.step_tag_id = tokens ? knobs.step_tag_id : std::nullopt;
  routed.returned_token_ids.clear();
  if (tokens) routed.returned_token_ids.assign(knobs.returned_token_ids.begin(), knobs.returned_token_ids.end());
  routed.spans.clear();
  if (!tokens) routed.spans.assign(knobs.spans.begin(), knobs.spans.end());
  routed.instruction_len = tokens ? 0 : knobs.instruction_len;
  routed.drop_first = tokens && (knobs.drop_first || added.drop_first);
  routed.drop_last = tokens && (knobs.drop_last || added.drop_last);
  routed.drop_token_ids.clear();
  if (tokens)
    std::ranges::set_union(knobs.drop_token_ids, added.drop_token_ids, std::back_inserter(routed.drop_token_ids));
  if (routed.drop_token_ids.size() > max_drop_token_ids)
    fail_request(index, asked.id, "drop_token_ids", "its ", knobs.drop_token_ids.size(), " ids and part ", part, "'s ",
                 added.drop_token_ids.size(), " make ", routed.drop_token_ids.size(),
                 " distinct ids; a part drops at most ", max_drop_token_ids);
  routed.top_k = kind.sparse ? knobs.top_k : std::nullopt;
}

/// Lets go, when it is destroyed, of the token ids of every request in
/// `routed`: the steps route_knobs() wrote for a multi_pooler's parts are kept
/// for their storage, and hold no view of the caller's batch once its plan is
/// made or refused.
struct routed_ids_release {
  std::span<batch> routed;

  ~routed_ids_release() {
    for (batch& step : routed)
      for (request& r : step.requests) r.prompt_token_ids = {};
  }
};

/// Throws seqpool::error for request `index`'s first knob that no part of
/// `kinds` takes (route_knobs): a knob set is never dropped unheard. A request's
/// own drop_token_ids are checked first as a token part's planner checks them
/// (check_drop_list()), so that a list too long, negative or out of order is
/// refused as such, not as the union route_knobs() makes of it.
inline void check_knobs_reach(std::size_t index, const request& asked, std::span<const part_kind> kinds) {
  const auto any = [&](auto takes) { return std::ranges::any_of(kinds, takes); };
  const bool token_parts = any([](const part_kind& kind) { return kind.token_wise(); });
  const bool sequence_parts = any([](const part_kind& kind) { return !kind.token_wise(); });
  const pooling_params& knobs = asked.params;
  const auto refuse = [&](std::string_view knob, std::string_view taker) {
    fail_request(index, asked.id, knob, "no part of this multi_pooler takes it (", taker, ")");
  };
  if (!token_parts) {
    if (knobs.drop_first) refuse("drop_first", "token parts do");
    if (knobs.drop_last) refuse("drop_last", "token parts do");
    if (!knobs.drop_token_ids.empty()) refuse("drop_token_ids", "token parts do");
    if (knobs.step_tag_id) refuse("step_tag_id", "token parts do");
    if (!knobs.returned_token_ids.empty()) refuse("returned_token_ids", "token parts do");
  }
  if (!sequence_parts) {
    if (!knobs.spans.empty()) refuse("spans", "sequence parts do");
    if (knobs.instruction_len != 0) refuse("instruction_len", "sequence parts do");
  }
  if (knobs.dimensions && !any([](const part_kind& kind) { return kind.truncates(); }))
    refuse("dimensions", "sequence parts that embed into dense rows do");
  if (knobs.top_k && !any([](const part_kind& kind) { return kind.sparse; })) refuse("top_k", "sparse parts do");
  check_drop_list(index, asked);
}

/// Throws seqpool::error unless part `part`'s filters are a token part's, and
/// its ids ascending, distinct and ≥ 0.
inline void check_part_filters(std::size_t part, bool token_wise, const part_filters& filters) {
  const auto& ids = filters.drop_token_ids;
  if (!token_wise && (filters.drop_first || filters.drop_last || !ids.empty()))
    fail("part_filters", "part ", part, " pools a sequence method; only token parts drop rows");
  if (ids.size() > max_drop_token_ids)
    fail("part_filters", "part ", part, " drops ", ids.size(), " ids; at most ", max_drop_token_ids, " may be dropped");
  check_drop_order(ids,
                   [&](const auto&... said) { fail("part_filters", "part ", part, "'s drop_token_ids: ", said...); });
}

/// A part's view of the state store, as its planner checks a chunk against
/// it: part `part` of a runner of `parts`.
template <class Store>
struct part_states {
  const Store& store;
  std::uint32_t part;
  std::uint32_t parts;

  void check(std::size_t index, const request& r, const state_key& key) const {
    store.check(index, r, key, part, parts);
  }
  held_rows rows_of(const request_id& id) const { return store.rows_of(id, part); }
};

}  // namespace seqpool::detail
