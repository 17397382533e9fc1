// capacity: the most one step may hold, which a captured step is sized by.
#pragma once

#include <cstdint>

#include <seqpool/error.hpp>

namespace seqpool {

/// The largest step a pooler or dispatcher takes once given a capacity
/// (reserve_capacity()). Every launch of a captured step is sized by it, so
/// that the graph replays for any batch that fits; plan() refuses a batch that
/// does not fit, naming the limit it exceeds. An engine knows these from its
/// scheduler: requests and rows are its most sequences and batched tokens a
/// step; result_rows and columns matter for token tasks only.
struct capacity {
  std::int64_t requests = 0;     ///< requests in one step
  std::int64_t rows = 0;         ///< rows of hidden states in one step
  /// Token tasks: result rows one step returns (the rows of the prompts it
  /// finishes); for sparse results, the rows it weighs for the lists.
  std::int64_t result_rows = 0;
  std::int64_t columns = 0;      ///< token tasks: returned_token_ids entries over one step's requests

  /// The most each count may be, 2^30: a step's records index requests, rows
  /// and tiles in 32 bits, and every size a capacity bounds (a count times a
  /// row's width of at most 2^31 − 1, summed over a few terms) then fits a
  /// 64-bit count.
  static constexpr std::int64_t most = std::int64_t{1} << 30;

  friend bool operator==(const capacity&, const capacity&) = default;
};

namespace detail {

inline void check_capacity(const capacity& limits) {
  const auto within = [](std::int64_t count, std::int64_t least) { return count >= least && count <= capacity::most; };
  if (!within(limits.requests, 1) || !within(limits.rows, 1) || !within(limits.result_rows, 0) ||
      !within(limits.columns, 0))
    fail("capacity", "requests and rows must be in [1, 2^30], result_rows and columns in [0, 2^30]; got requests ",
         limits.requests, ", rows ", limits.rows, ", result_rows ", limits.result_rows, ", columns ", limits.columns);
}

/// Throws seqpool::error naming the limit a step exceeds.
inline void check_limit(const char* limit, std::int64_t needed, std::int64_t most) {
  if (needed > most) fail("capacity", "the step has ", needed, " ", limit, ", more than the capacity's ", most);
}

}  // namespace detail
}  // namespace seqpool
