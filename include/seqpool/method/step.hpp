// STEP pooling: the rows at step-tag tokens, restricted to chosen columns.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <seqpool/error.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/token_ids.hpp>

namespace seqpool::method {

/// Keeps the rows whose prompt token id equals `step_tag_id` (all rows when it is
/// absent), then the columns in `returned_token_ids` (all when absent or empty):
/// the per-step scores of process-reward models. Positions come from the host
/// copy of the prompt's token ids, as vLLM does, so no device mask is read back;
/// a prompt without the tag gives a [0, C] result.
struct step {
  static constexpr method_kind kind = method_kind::token;
  static constexpr std::string_view name = "step";
  static constexpr bool reads_token_ids = true;

  void check(std::size_t index, const request& r, std::int64_t hidden_size) const {
    for (const std::int64_t column : r.params.returned_token_ids)
      if (column < 0 || column >= hidden_size)
        detail::fail_request(index, r.id, "returned_token_ids", "column ", column, " is outside [0, ", hidden_size,
                             ")");
  }

  /// Without a tag, every row: the planner needs no positions listed.
  bool keeps_every_row(const request& r) const { return !r.params.step_tag_id; }

  /// The tag and the ids are read once a call, into locals: each position's
  /// store would otherwise make the compiler read both again for the next.
  void select(const request& r, std::int64_t begin, std::int64_t end, std::vector<std::int64_t>& positions) const {
    if (!r.params.step_tag_id) {
      for (std::int64_t position = begin; position < end; ++position) positions.push_back(position);
      return;
    }
    const std::int64_t tag = *r.params.step_tag_id;
    const token_ids ids = r.prompt_token_ids;
    for (std::int64_t position = begin; position < end; ++position)
      if (ids[static_cast<std::size_t>(position)] == tag) positions.push_back(position);
  }

  std::int64_t count(const request& r, std::int64_t begin, std::int64_t end) const {
    if (!r.params.step_tag_id) return end - begin;
    const std::int64_t tag = *r.params.step_tag_id;
    const token_ids ids = r.prompt_token_ids;
    std::int64_t matches = 0;
    for (std::int64_t position = begin; position < end; ++position)
      matches += ids[static_cast<std::size_t>(position)] == tag;
    return matches;
  }

  std::span<const std::int64_t> columns(const request& r) const { return r.params.returned_token_ids; }
};

}  // namespace seqpool::method
