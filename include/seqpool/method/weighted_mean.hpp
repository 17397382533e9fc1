// Position-weighted MEAN (SGPT): later rows weigh more.
#pragma once

#include <cstdint>
#include <string_view>

#include <seqpool/method/concepts.hpp>

namespace seqpool::method {

/// Row t of the prompt (from 0) weighs t + 1: the result is Σ (t + 1)·x_t over
/// Σ (t + 1) = n(n + 1)/2, SGPT's weighted mean for decoder embeddings. The weight
/// is the row's prompt position, so a prompt pooled in chunks gives what it gives
/// whole.
struct weighted_mean {
  static constexpr method_kind kind = method_kind::sequence;
  static constexpr std::string_view name = "weighted_mean";
  static constexpr bool keeps_state = true;
  /// sentence-transformers weighs the rows after an instruction by their place
  /// in the whole prompt; their weights' sum then needs the instruction's
  /// length, which finish() is not told: a request with an instruction is refused.
  static constexpr instruction_rule instruction = instruction_rule::refused;

  row_window window(const chunk& part) const { return {part.first_row(), part.num_scheduled}; }

  SEQPOOL_HOST_DEVICE float identity() const { return 0.0f; }
  SEQPOOL_HOST_DEVICE float accumulate(float sum, float row_value, std::int64_t position) const {
    return sum + static_cast<float>(position + 1) * row_value;
  }
  SEQPOOL_HOST_DEVICE float merge(float sum, float partial_sum) const { return sum + partial_sum; }
  /// The weights' sum in double: n(n + 1)/2 outgrows float's exact integers past n ≈ 5800.
  SEQPOOL_HOST_DEVICE float finish(float sum, std::int64_t prompt_len) const {
    const double weights = 0.5 * static_cast<double>(prompt_len) * static_cast<double>(prompt_len + 1);
    return static_cast<float>(static_cast<double>(sum) / weights);
  }
};

}  // namespace seqpool::method
