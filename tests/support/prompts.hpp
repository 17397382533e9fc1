// Steps of whole or chunked prompts over drawn values, and their results
// checked request by request against the reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
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

/// `count` values of a grid of 1/8 in [-2, 2): a sum of them, with integer
/// weights or weights of the same grid, is exact in float on every space and
/// in double, whatever the order of the additions — so results compare
/// exactly, ties too.
inline std::vector<float> grid_values(std::int64_t count, std::mt19937& engine) {
  std::uniform_int_distribution<int> eighths(-16, 15);
  std::vector<float> drawn(static_cast<std::size_t>(count));
  for (float& value : drawn) value = static_cast<float>(eighths(engine)) / 8.0f;
  return drawn;
}

inline std::vector<float> grid_values(std::int64_t count, std::uint32_t seed) {
  std::mt19937 engine(seed);
  return grid_values(count, engine);
}

/// A prompt of `prompt_len` rows cut into chunks of drawn sizes.
inline std::vector<std::int64_t> drawn_chunks(std::int64_t prompt_len, std::mt19937& engine) {
  std::vector<std::int64_t> chunks;
  for (std::int64_t left = prompt_len; left > 0;) {
    chunks.push_back(std::uniform_int_distribution<std::int64_t>(1, left)(engine));
    left -= chunks.back();
  }
  return chunks;
}

/// A prompt that arrives in chunks: its rows (row-major, a pooler's columns a
/// row), ids, chunk sizes and knobs, and the step its first chunk is in.
struct chunked_prompt {
  std::string id;
  std::vector<float> rows;
  std::vector<std::int64_t> token_ids;
  std::vector<std::int64_t> chunks;
  seqpool::pooling_params params;
  std::size_t first_step = 0;
};

/// A step of chunked prompts: its requests, their rows, and which prompt each request is.
struct step_of_prompts {
  seqpool::batch step;
  std::vector<float> rows;
  std::vector<std::size_t> members;
};

/// Step `turn` of `prompts`, each a request of `pooling_task`: the next chunk
/// of every prompt that has begun and not finished; `done` counts each
/// prompt's rows pooled so far and moves on. None once every prompt has finished.
inline std::optional<step_of_prompts> next_step(const std::vector<chunked_prompt>& prompts, std::size_t turn,
                                                seqpool::task pooling_task, std::int64_t columns,
                                                std::vector<std::int64_t>& done) {
  step_of_prompts next;
  bool left = false;
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    const chunked_prompt& at = prompts[p];
    left = left || turn < at.first_step + at.chunks.size();
    if (turn < at.first_step || turn >= at.first_step + at.chunks.size()) continue;
    const std::int64_t size = at.chunks[turn - at.first_step];
    seqpool::request r =
        part(at.id, pooling_task, static_cast<std::int64_t>(at.token_ids.size()), done[p], size, at.params);
    r.prompt_token_ids = at.token_ids;
    next.step.requests.push_back(std::move(r));
    next.rows.insert(next.rows.end(), at.rows.begin() + done[p] * columns,
                     at.rows.begin() + (done[p] + size) * columns);
    next.members.push_back(p);
    done[p] += size;
  }
  if (!left) return std::nullopt;
  return next;
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
