// LAST pooling: the prompt's last row.
#pragma once

#include <cstdint>
#include <string_view>

#include <seqpool/method/concepts.hpp>

namespace seqpool::method {

/// Only the chunk that finishes a prompt holds its last row, so nothing is kept
/// across chunks and earlier chunks read nothing.
struct last {
  static constexpr method_kind kind = method_kind::sequence;
  static constexpr std::string_view name = "last";
  static constexpr bool keeps_state = false;
  static constexpr instruction_rule instruction = instruction_rule::unaffected;

  row_window window(const chunk& part) const { return {part.last_row(), part.finished() ? 1 : 0}; }

  SEQPOOL_HOST_DEVICE float identity() const { return 0.0f; }
  SEQPOOL_HOST_DEVICE float accumulate(float, float row_value) const { return row_value; }
  SEQPOOL_HOST_DEVICE float merge(float, float later) const { return later; }
  SEQPOOL_HOST_DEVICE float finish(float final_row, std::int64_t) const { return final_row; }
};

}  // namespace seqpool::method

namespace seqpool::detail {

template <>
inline constexpr rows_read rows_read_of<method::last> = rows_read::last;

}  // namespace seqpool::detail
