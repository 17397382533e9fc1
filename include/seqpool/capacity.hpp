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
  std::int64_t result_rows = 0;  ///< token tasks: result rows one step returns (the rows of the prompts it finishes)
  std::int64_t columns = 0;      ///< token tasks: returned_token_ids entries over one step's requests
};

namespace detail {

inline void check_capacity(const capacity& limits) {
  if (limits.requests < 1 || limits.rows < 1 || limits.result_rows < 0 || limits.columns < 0)
    fail("capacity", "requests and rows must be at least 1, result_rows and columns at least 0; got requests ",
         limits.requests, ", rows ", limits.rows, ", result_rows ", limits.result_rows, ", columns ", limits.columns);
}

/// Throws seqpool::error naming the limit a step exceeds.
inline void check_limit(const char* limit, std::int64_t needed, std::int64_t most) {
  if (needed > most) fail("capacity", "the step has ", needed, " ", limit, ", more than the capacity's ", most);
}

inline void check_rows_fit(const capacity& limits, std::int64_t rows) { check_limit("rows", rows, limits.rows); }

}  // namespace detail
}  // namespace seqpool
