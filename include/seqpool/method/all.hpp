// ALL pooling: every row of the prompt.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <seqpool/method/concepts.hpp>

namespace seqpool::method {

/// A finished request returns its prompt_len rows, [prompt_len, H]. A chunked
/// request copies each chunk's rows into its state at offset num_computed, so the
/// finishing step reads earlier rows from the state, never from an earlier
/// step's buffer (the view caching behind vLLM's buffer races).
struct all {
  static constexpr method_kind kind = method_kind::token;
  static constexpr std::string_view name = "all";
  static constexpr bool reads_token_ids = false;

  void check(std::size_t, const request&, std::int64_t) const {}

  /// Every row: the planner needs no positions listed.
  bool keeps_every_row(const request&) const { return true; }

  void select(const request&, std::int64_t begin, std::int64_t end, std::vector<std::int64_t>& positions) const {
    for (std::int64_t position = begin; position < end; ++position) positions.push_back(position);
  }

  std::int64_t count(const request&, std::int64_t begin, std::int64_t end) const { return end - begin; }

  std::span<const std::int64_t> columns(const request&) const { return {}; }
};

}  // namespace seqpool::method
