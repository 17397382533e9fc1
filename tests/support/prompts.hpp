// Steps of whole prompts over drawn values, and their results checked request by
// request against the reference.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "reference.hpp"
#include "step.hpp"

namespace test {

/// `count` values drawn uniformly from [-2, 2), times `scale`.
inline std::vector<float> drawn_values(std::int64_t count, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> drawn(count);
  for (float& v : drawn) v = value(engine) * scale;
  return drawn;
}

inline std::int64_t total_rows(const std::vector<std::int64_t>& prompt_lens) {
  std::int64_t rows = 0;
  for (const std::int64_t len : prompt_lens) rows += len;
  return rows;
}

/// One whole request of `pooling_task` per prompt length, named r0, r1, …
inline seqpool::batch whole_prompts(seqpool::task pooling_task, const std::vector<std::int64_t>& prompt_lens) {
  seqpool::batch step;
  for (std::size_t i = 0; i < prompt_lens.size(); ++i)
    step.requests.push_back(whole(test::id("r", i), pooling_task, prompt_lens[i]));
  return step;
}

/// Pools the rows of `hidden` as one prompt in two chunks, its first `split` rows
/// and then the rest, checks that the first chunk returns nothing, and returns
/// what the second does.
template <class Pooler>
results pool_in_two_chunks(typename Pooler::space_type& space, Pooler& pooler,
                           seqpool::state_store<typename Pooler::space_type>& state, const std::string& id,
                           const std::vector<float>& hidden, std::int64_t split) {
  const std::int64_t hidden_size = pooler.hidden_size();
  const std::int64_t prompt_len = static_cast<std::int64_t>(hidden.size()) / hidden_size;
  const seqpool::batch first{{part(id, Pooler::task, prompt_len, 0, split)}};
  const seqpool::batch second{{part(id, Pooler::task, prompt_len, split, prompt_len - split)}};
  const std::vector<float> first_rows(hidden.begin(), hidden.begin() + split * hidden_size);
  CHECK_FALSE(run_step(space, pooler, state, first, first_rows)[0].has_value());
  return run_step(space, pooler, state, second, std::vector<float>(hidden.begin() + split * hidden_size, hidden.end()));
}

/// Compares every request's result with the reference, request i having pooled
/// the next prompt_len rows of `hidden` with methods[i] and `head` into `out_cols`
/// columns.
inline void check_prompts(const results& results, const seqpool::batch& step, const std::vector<float>& hidden,
                          std::int64_t hidden_size, const std::vector<std::string_view>& methods, const head_spec& head,
                          std::int64_t out_cols, double tolerance) {
  std::int64_t row_begin = 0;
  for (std::size_t i = 0; i < step.requests.size(); ++i) {
    const seqpool::request& r = step.requests[i];
    CAPTURE(r.id);
    const std::vector<float> prompt(hidden.begin() + row_begin * hidden_size,
                                    hidden.begin() + (row_begin + r.prompt_len) * hidden_size);
    row_begin += r.prompt_len;
    REQUIRE(results[i].has_value());
    check_close(*results[i], reference(methods[i], prompt, hidden_size, r, head, out_cols), tolerance);
  }
}

}  // namespace test
