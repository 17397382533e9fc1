// CLS pooling: the prompt's first row.
#pragma once

#include <cstdint>
#include <string_view>

#include <seqpool/method/concepts.hpp>

namespace seqpool::method {

/// The first chunk reads the prompt's first row; a chunked request latches it in
/// its state until the chunk that finishes it (vLLM refuses CLS under chunked
/// prefill; here later chunks simply read nothing).
struct cls {
  static constexpr method_kind kind = method_kind::sequence;
  static constexpr std::string_view name = "cls";
  static constexpr bool keeps_state = true;
  /// Row 0 stays the first row with an instruction after it, as sentence-transformers reads it.
  static constexpr instruction_rule instruction = instruction_rule::unaffected;

  row_window window(const chunk& part) const { return {part.first_row(), part.first_chunk() ? 1 : 0}; }

  SEQPOOL_HOST_DEVICE float identity() const { return 0.0f; }
  SEQPOOL_HOST_DEVICE float accumulate(float, float row_value) const { return row_value; }
  SEQPOOL_HOST_DEVICE float merge(float, float later) const { return later; }
  SEQPOOL_HOST_DEVICE float finish(float first, std::int64_t) const { return first; }
};

}  // namespace seqpool::method
