// docs/TESTS.md cases 1-11, 23-28, 31 and 35: every method on small inputs checked by eye.
// Defines templated cases; a translation unit applies them to its spaces.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../support/prompts.hpp"
#include "../support/step.hpp"

namespace methods_cases {

using seqpool::task;
namespace method = seqpool::method;

/// Raw pooled values: the embed head without normalisation.
inline const seqpool::pooling_params raw{.use_activation = false};

template <class Method, class Space, class Result = float>
using raw_pooler = seqpool::pooler<Method, seqpool::head::embed, Space, Result>;

/// Pools whole prompts of the given lengths in one step.
template <class Method, class Space, class T = float, class Result = float>
test::results pool_whole(const std::vector<float>& hidden, std::int64_t hidden_size,
                         const std::vector<std::int64_t>& lengths, seqpool::pooling_params params = raw) {
  Space space;
  seqpool::state_store<Space> state(space);
  raw_pooler<Method, Space, Result> pooler(space, hidden_size);
  seqpool::batch step;
  for (std::size_t i = 0; i < lengths.size(); ++i)
    step.requests.push_back(test::whole(test::id("r", i), pooler.task, lengths[i], params));
  return test::run_step(space, pooler, state, step, test::convert<T>(hidden));
}

/// Chunk sizes as "1+3+1", for messages.
inline std::string joined(const std::vector<std::int64_t>& sizes) {
  std::string text;
  for (const std::int64_t size : sizes) {
    if (!text.empty()) text += '+';
    text += std::to_string(size);
  }
  return text;
}

/// Pools one prompt of `rows` rows in chunks of the given sizes, its token ids
/// `ids`; the last step's result.
template <class Method, class Space, class Result = float, class T = float>
test::results pool_chunked(const std::vector<float>& prompt, std::int64_t hidden_size,
                           const std::vector<std::int64_t>& chunk_sizes, const seqpool::pooling_params& params = raw,
                           const std::vector<std::int64_t>& ids = {}, const Method& method = Method{}) {
  Space space;
  seqpool::state_store<Space> state(space);
  raw_pooler<Method, Space, Result> pooler(space, hidden_size, method);
  const auto prompt_len = static_cast<std::int64_t>(prompt.size()) / hidden_size;
  std::int64_t done = 0;
  test::results last;
  for (const std::int64_t size : chunk_sizes) {
    seqpool::batch step{{test::part("p", pooler.task, prompt_len, done, size, params)}};
    step.requests[0].prompt_token_ids = ids;
    const std::vector<float> rows(prompt.begin() + done * hidden_size, prompt.begin() + (done + size) * hidden_size);
    last = test::run_step(space, pooler, state, step, test::convert<T>(rows));
    done += size;
    if (done < prompt_len) CHECK_FALSE(last[0].has_value());
  }
  CHECK(state.size() == 0);
  return last;
}

inline const std::vector<float> ten{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // rows [1,2] … [9,10]

/// A user's method that reads only a chunk's first row: no mode of a concat.
struct first_row_only : seqpool::method::mean {
  static constexpr std::string_view name = "first_row_only";
  seqpool::row_window window(const seqpool::chunk& part) const { return {part.first_row(), 1}; }
};

/// Raw pooled values of the given spans of a prompt, one row each, whole and chunked alike.
template <class Method, class Space>
test::matrix pool_spans(const std::vector<float>& prompt, std::int64_t hidden_size,
                        std::vector<seqpool::token_span> spans, const std::vector<std::int64_t>& chunk_sizes) {
  seqpool::pooling_params params = raw;
  params.spans = std::move(spans);
  return *pool_chunked<Method, Space>(prompt, hidden_size, chunk_sizes, params)[0];
}

}  // namespace methods_cases

TEST_CASE_TEMPLATE_DEFINE("case 1: CLS takes each prompt's first row", Space, case_1_cls) {
  using namespace methods_cases;
  const auto out = pool_whole<method::cls, Space>(ten, 2, {2, 3});
  test::check_equal(*out[0], 1, 2, {1, 2});
  test::check_equal(*out[1], 1, 2, {5, 6});
}

TEST_CASE_TEMPLATE_DEFINE("case 2: LAST takes each prompt's last row", Space, case_2_last) {
  using namespace methods_cases;
  const auto out = pool_whole<method::last, Space>(ten, 2, {2, 3});
  test::check_equal(*out[0], 1, 2, {3, 4});
  test::check_equal(*out[1], 1, 2, {9, 10});
}

TEST_CASE_TEMPLATE_DEFINE("case 3: MEAN averages each prompt's rows", Space, case_3_mean) {
  using namespace methods_cases;
  const auto out = pool_whole<method::mean, Space>(ten, 2, {2, 3});
  test::check_equal(*out[0], 1, 2, {2, 3});
  test::check_equal(*out[1], 1, 2, {7, 8});
}

TEST_CASE_TEMPLATE_DEFINE("case 4: MAX takes the column-wise maximum", Space, case_4_max) {
  using namespace methods_cases;
  const auto out = pool_whole<method::max, Space>({1, -5, 3, -4, 0, 9}, 2, {2, 1});
  test::check_equal(*out[0], 1, 2, {3, -4});
  test::check_equal(*out[1], 1, 2, {0, 9});
}

TEST_CASE_TEMPLATE_DEFINE("case 5: MEAN of one token is the token, of identical rows the row", Space, case_5_mean_of_one_and_identical_rows) {
  using namespace methods_cases;
  test::check_equal(*pool_whole<method::mean, Space>({0.25f, -3, 7}, 3, {1})[0], 1, 3, {0.25f, -3, 7});
  test::check_equal(*pool_whole<method::mean, Space>({0.1f, 2, 0.1f, 2, 0.1f, 2}, 2, {3})[0], 1, 2, {0.1f, 2});
}

TEST_CASE_TEMPLATE_DEFINE("case 6: MEAN of an empty batch is an empty result, no error", Space, case_6_empty_batch) {
  using namespace methods_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  raw_pooler<method::mean, Space> pooler(space, 4);
  const seqpool::step_plan plan = pooler.plan(seqpool::batch{}, state);
  CHECK(plan.results.empty());
  CHECK(plan.output_size == 0);
  CHECK(plan.num_rows == 0);
  pooler.reserve(plan, state);
  const seqpool::audit_scope scope(space.audit());
  pooler.forward(seqpool::make_hidden_view<float>(nullptr, 0, 4), plan, state, {});
  CHECK(scope.counts() == seqpool::audit_counts{});
}

TEST_CASE_TEMPLATE_DEFINE("case 7: MEAN of fp16 rows is float and exact on small integers", Space, case_7_fp16_mean) {
  using namespace methods_cases;
  test::check_equal(*pool_whole<method::mean, Space, __half>({1, 2, 3, 4}, 2, {2})[0], 1, 2, {2, 3});
  test::check_equal(*pool_whole<method::mean, Space, __nv_bfloat16>({1, 2, 3, 4}, 2, {2})[0], 1, 2, {2, 3});
  test::check_equal(*pool_whole<method::mean, Space, seqpool::half>({1, 2, 3, 4}, 2, {2})[0], 1, 2, {2, 3});
  test::check_equal(*pool_whole<method::mean, Space, seqpool::bfloat16>({1, 2, 3, 4}, 2, {2})[0], 1, 2, {2, 3});
}

TEST_CASE_TEMPLATE_DEFINE("case 23: weighted MEAN weighs row t by t + 1, chunked or whole", Space,
                          case_23_weighted_mean) {
  using namespace methods_cases;
  // Rows [6, 0], [0, 3], [2, 1]: ([6, 0] + 2·[0, 3] + 3·[2, 1]) / 6 = [2, 1.5].
  const std::vector<float> rows{6, 0, 0, 3, 2, 1};
  test::check_equal(*pool_whole<method::weighted_mean, Space>(rows, 2, {3})[0], 1, 2, {2, 1.5f});
  // The same prompt in two chunks of 2 and 1 rows: positions count from the prompt's start.
  Space space;
  seqpool::state_store<Space> state(space);
  raw_pooler<method::weighted_mean, Space> pooler(space, 2);
  const auto first = test::run_step(space, pooler, state,
                                    seqpool::batch{{test::part("w", task::embed, 3, 0, 2, raw)}},
                                    std::vector<float>(rows.begin(), rows.begin() + 4));
  CHECK_FALSE(first[0].has_value());
  const auto second = test::run_step(space, pooler, state, seqpool::batch{{test::part("w", task::embed, 3, 2, 1, raw)}},
                                     std::vector<float>(rows.begin() + 4, rows.end()));
  test::check_equal(*second[0], 1, 2, {2, 1.5f});
}

TEST_CASE_TEMPLATE_DEFINE("case 26: MEAN_SQRT_LEN divides the sum by the square root of the length, chunked or whole",
                          Space, case_26_mean_sqrt_len) {
  using namespace methods_cases;
  // Rows [1, 2], [3, 4], [5, 6], [7, 8]: [16, 20] / √4 = [8, 10]; one row [3, -4]: itself.
  const std::vector<float> rows{1, 2, 3, 4, 5, 6, 7, 8};
  test::check_equal(*pool_whole<method::mean_sqrt_len, Space>(rows, 2, {4})[0], 1, 2, {8, 10});
  test::check_equal(*pool_whole<method::mean_sqrt_len, Space>({3, -4}, 2, {1})[0], 1, 2, {3, -4});
  // The same four rows in chunks of 1 and 3: the sum is kept, √4 taken at the end.
  Space space;
  seqpool::state_store<Space> state(space);
  raw_pooler<method::mean_sqrt_len, Space> pooler(space, 2);
  const auto first = test::run_step(space, pooler, state, seqpool::batch{{test::part("s", task::embed, 4, 0, 1, raw)}},
                                    std::vector<float>(rows.begin(), rows.begin() + 2));
  CHECK_FALSE(first[0].has_value());
  const auto second = test::run_step(space, pooler, state, seqpool::batch{{test::part("s", task::embed, 4, 1, 3, raw)}},
                                     std::vector<float>(rows.begin() + 2, rows.end()));
  test::check_equal(*second[0], 1, 2, {8, 10});
}

TEST_CASE_TEMPLATE_DEFINE("case 24: 16-bit results are rounded once, to nearest even", Space, case_24_16_bit_results) {
  using namespace methods_cases;
  // Each mean lies halfway between two 16-bit values and rounds to the even one.
  const float b = 0x1p-7f;
  const std::vector<float> to_bfloat16{1, 1, 1 + b, 1 + 3 * b};
  const std::vector<float> bfloat16_means{1, 1 + 4 * b / 2};
  const float h = 0x1p-10f;
  const std::vector<float> to_half{1, 1, 1 + h, 1 + 3 * h};
  const std::vector<float> half_means{1, 1 + 2 * h};
  // 65520 lies halfway between half's largest value, 65504, and 2^16: it rounds to +inf.
  const std::vector<float> large{65519, 1, 1, 65520};
  const std::vector<float> half_maxima{65504, std::numeric_limits<float>::infinity()};

  test::check_equal(*pool_whole<method::mean, Space, float, seqpool::bfloat16>(to_bfloat16, 2, {2})[0], 1, 2,
                    bfloat16_means);
  test::check_equal(*pool_whole<method::mean, Space, float, __nv_bfloat16>(to_bfloat16, 2, {2})[0], 1, 2,
                    bfloat16_means);
  test::check_equal(*pool_whole<method::mean, Space, float, seqpool::half>(to_half, 2, {2})[0], 1, 2, half_means);
  test::check_equal(*pool_whole<method::max, Space, float, __half>(large, 2, {2})[0], 1, 2, half_maxima);
  test::check_equal(*pool_chunked<method::mean, Space, seqpool::bfloat16>(to_bfloat16, 2, {1, 1})[0], 1, 2,
                    bfloat16_means);
  test::check_equal(*pool_chunked<method::max, Space, seqpool::half>(large, 2, {1, 1})[0], 1, 2, half_maxima);
}

TEST_CASE_TEMPLATE_DEFINE("case 25: spans of one prompt pool as prompts of their own, across chunks", Space,
                          case_25_spans) {
  using namespace methods_cases;
  // Rows [1,2] … [9,10] as one prompt with spans [0, 2) and [2, 5): case 1-4's two prompts.
  const std::vector<seqpool::token_span> halves{{0, 2}, {2, 5}};
  for (const std::vector<std::int64_t>& chunks :
       std::vector<std::vector<std::int64_t>>{{5}, {1, 3, 1}, {2, 3}, {4, 1}}) {
    CAPTURE(chunks.size());
    test::check_equal(pool_spans<method::cls, Space>(ten, 2, halves, chunks), 2, 2, {1, 2, 5, 6});
    test::check_equal(pool_spans<method::last, Space>(ten, 2, halves, chunks), 2, 2, {3, 4, 9, 10});
    test::check_equal(pool_spans<method::mean, Space>(ten, 2, halves, chunks), 2, 2, {2, 3, 7, 8});
    test::check_equal(pool_spans<method::max, Space>(ten, 2, halves, chunks), 2, 2, {3, 4, 9, 10});
    // Weighted MEAN weighs a span's rows from 1: ([3,4] + 2·[5,6] + 3·[7,8]) / 6 = [17/3, 20/3].
    test::check_equal(pool_spans<method::weighted_mean, Space>(ten, 2, {{1, 4}}, chunks), 1, 2, {34.0f / 6, 40.0f / 6});
  }
  // Spans need not cover the prompt: [1, 2) and [3, 5) leave rows 0 and 2 out.
  test::check_equal(pool_spans<method::mean, Space>(ten, 2, {{1, 2}, {3, 5}}, {2, 2, 1}), 2, 2, {3, 4, 8, 9});
}

TEST_CASE_TEMPLATE_DEFINE("case 27: MEAN, MAX and MEAN_SQRT_LEN leave out an instruction, CLS and LAST read as before",
                          Space, case_27_instruction) {
  using namespace methods_cases;
  // Rows [1,2] … [9,10] as one prompt whose first two rows are an instruction.
  seqpool::pooling_params params = raw;
  params.instruction_len = 2;
  for (const std::vector<std::int64_t>& chunks :
       std::vector<std::vector<std::int64_t>>{{5}, {1, 3, 1}, {1, 1, 3}, {2, 3}, {4, 1}}) {
    CAPTURE(chunks.size());
    // ([5,6] + [7,8] + [9,10]) / 3; the max of the same rows; CLS's row 0 and LAST's row 4.
    test::check_equal(*pool_chunked<method::mean, Space>(ten, 2, chunks, params)[0], 1, 2, {7, 8});
    test::check_equal(*pool_chunked<method::max, Space>(ten, 2, chunks, params)[0], 1, 2, {9, 10});
    test::check_equal(*pool_chunked<method::cls, Space>(ten, 2, chunks, params)[0], 1, 2, {1, 2});
    test::check_equal(*pool_chunked<method::last, Space>(ten, 2, chunks, params)[0], 1, 2, {9, 10});
  }
  // MAX leaves out an instruction that holds the largest values.
  test::check_equal(*pool_chunked<method::max, Space>({9, 9, 9, 9, 1, 2, 3, 1}, 2, {1, 3}, params)[0], 1, 2, {3, 2});
  // An instruction of one row: ([3,4] + [5,6] + [7,8] + [9,10]) / √4 = [12, 14].
  params.instruction_len = 1;
  test::check_equal(*pool_chunked<method::mean_sqrt_len, Space>(ten, 2, {1, 4}, params)[0], 1, 2, {12, 14});

  // Refused: no row left, a negative length, spans as well, a method that cannot, a token method.
  Space space;
  seqpool::state_store<Space> state(space);
  raw_pooler<method::mean, Space> means(space, 2);
  const auto refused = [&](auto& pooler, task pooling_task, seqpool::pooling_params knobs, const std::string& message) {
    const seqpool::request r = test::whole("i", pooling_task, 5, knobs);
    CHECK_THROWS_WITH_AS(pooler.plan(seqpool::batch{{r}}, state),
                         ("request 0 (id \"i\"): instruction_len: " + message).c_str(), seqpool::error);
  };
  refused(means, task::embed, {.instruction_len = 5},
          "must be in [0, prompt_len = 5): at least one row follows the instruction; got 5");
  refused(means, task::embed, {.instruction_len = -1},
          "must be in [0, prompt_len = 5): at least one row follows the instruction; got -1");
  refused(means, task::embed, {.spans = {{0, 2}}, .instruction_len = 1},
          "spans choose the rows a request pools: give spans or an instruction_len, not both");
  raw_pooler<method::weighted_mean, Space> weighted(space, 2);
  refused(weighted, task::embed, {.instruction_len = 1},
          "weighted_mean does not leave out an instruction: give 0 (a method that can says so with `static constexpr "
          "seqpool::instruction_rule instruction`)");
  seqpool::pooler<method::all, seqpool::head::embed, Space> rows(space, 2);
  refused(rows, task::token_embed, {.instruction_len = 1},
          "only sequence methods leave out an instruction; a token method returns the rows it chooses");
  // A chunk repeats the first chunk's instruction; a captured step pools one (a record a request, as without).
  CHECK_FALSE(test::run_step(space, means, state,
                             seqpool::batch{{test::part("c", task::embed, 5, 0, 2, {.instruction_len = 1})}},
                             std::vector<float>(4, 1.0f))[0]);
  CHECK_THROWS_WITH_AS(means.plan(seqpool::batch{{test::part("c", task::embed, 5, 2, 3, {.instruction_len = 2})}},
                                  state),
                       "request 0 (id \"c\"): params: instruction_len differs from the first chunk's", seqpool::error);
  state.release("c");
  means.reserve_capacity({.requests = 2, .rows = 8});
  CHECK(means.plan(seqpool::batch{{test::whole("s", task::embed, 5, {.instruction_len = 2})}}, state).results[0]);
}

TEST_CASE_TEMPLATE_DEFINE("case 31: a concat pools several methods side by side, whole, chunked and over spans",
                          Space, case_31_concat) {
  using namespace methods_cases;
  using cls_mean_max = method::concat<method::cls, method::mean, method::max>;
  // Rows [1,2] … [9,10] as prompts of 2 and 3 rows: CLS ‖ MEAN ‖ MAX of case 1, 3 and 4's rows.
  const auto whole = pool_whole<cls_mean_max, Space>(ten, 2, {2, 3});
  test::check_equal(*whole[0], 1, 6, {1, 2, 2, 3, 3, 4});
  test::check_equal(*whole[1], 1, 6, {5, 6, 7, 8, 9, 10});
  for (const std::vector<std::int64_t>& chunks :
       std::vector<std::vector<std::int64_t>>{{5}, {1, 3, 1}, {1, 1, 3}, {2, 3}, {4, 1}}) {
    CAPTURE(joined(chunks));
    // One prompt of five rows: CLS [1,2], MEAN [5,6], MAX [9,10]; LAST [9,10] and weighted MEAN
    // ([1,2] + 2·[3,4] + 3·[5,6] + 4·[7,8] + 5·[9,10]) / 15 = [95, 110] / 15.
    test::check_equal(*pool_chunked<cls_mean_max, Space>(ten, 2, chunks)[0], 1, 6, {1, 2, 5, 6, 9, 10});
    test::check_close(
        *pool_chunked<method::concat<method::last, method::weighted_mean, method::cls>, Space>(ten, 2, chunks)[0],
        test::matrix{1, 6, {9, 10, 95.0f / 15, 110.0f / 15, 1, 2}}, 1e-6);
    // Spans [0, 2) and [2, 5): each its own CLS and MEAN.
    test::check_equal(pool_spans<method::concat<method::cls, method::mean>, Space>(ten, 2, {{0, 2}, {2, 5}}, chunks),
                      2, 4, {1, 2, 2, 3, 5, 6, 7, 8});
    // Modes that all leave out an instruction of two rows: MEAN and MAX of [5,6], [7,8], [9,10].
    seqpool::pooling_params instructed = raw;
    instructed.instruction_len = 2;
    test::check_equal(*pool_chunked<method::concat<method::mean, method::max>, Space>(ten, 2, chunks, instructed)[0], 1,
                      4, {7, 8, 9, 10});
  }

  // A long prompt, split over tiles and slabs on the device: row t is [t, t + 1, …, t + 63], so
  // CLS is [0 … 63], MEAN 549.5 + c (sums of integers, exact in float) and MAX 1099 + c.
  constexpr std::int64_t columns = 64;
  constexpr std::int64_t rows = 1100;
  std::vector<float> prompt;
  for (std::int64_t t = 0; t < rows; ++t)
    for (std::int64_t c = 0; c < columns; ++c) prompt.push_back(static_cast<float>(t + c));
  std::vector<float> expected;
  for (const float base : {0.0f, 549.5f, 1099.0f})
    for (std::int64_t c = 0; c < columns; ++c) expected.push_back(base + static_cast<float>(c));
  for (const std::vector<std::int64_t>& chunks : std::vector<std::vector<std::int64_t>>{{rows}, {700, 400}, {1, 1099}}) {
    CAPTURE(joined(chunks));
    test::check_equal(*pool_chunked<cls_mean_max, Space>(prompt, columns, chunks)[0], 1, 3 * columns, expected);
    // Cut to 100 columns: CLS whole and the first 36 of MEAN; to 40, CLS's first 40.
    seqpool::pooling_params cut = raw;
    cut.dimensions = 100;
    test::check_equal(*pool_chunked<cls_mean_max, Space>(prompt, columns, chunks, cut)[0], 1, 100,
                      std::vector<float>(expected.begin(), expected.begin() + 100));
    cut.dimensions = 40;
    test::check_equal(*pool_chunked<cls_mean_max, Space>(prompt, columns, chunks, cut)[0], 1, 40,
                      std::vector<float>(expected.begin(), expected.begin() + 40));
    // LAST beside CLS and MEAN: on the host, CLS and LAST take only a tile's first and last rows.
    std::vector<float> with_last(expected.begin(), expected.begin() + 2 * columns);
    for (std::int64_t c = 0; c < columns; ++c) with_last.push_back(1099.0f + static_cast<float>(c));
    test::check_equal(
        *pool_chunked<method::concat<method::cls, method::mean, method::last>, Space>(prompt, columns, chunks)[0], 1,
        3 * columns, with_last);
    // A first row whose value has exactly the bits CLS marks "no row read yet" with (a NaN no
    // arithmetic and no 16-bit value makes) is read as the NaN it is, not taken for no row.
    std::vector<float> marked = prompt;
    marked[0] = std::bit_cast<float>(std::uint32_t{0x7fd5a5a5u});
    const test::matrix pooled =
        *pool_chunked<method::concat<method::cls, method::max>, Space>(marked, columns, chunks)[0];
    CHECK(std::isnan(pooled.at(0, 0)));
    for (std::int64_t c = 1; c < columns; ++c) CHECK(pooled.at(0, c) == static_cast<float>(c));
    for (std::int64_t c = 0; c < columns; ++c) CHECK(pooled.at(0, columns + c) == 1099.0f + static_cast<float>(c));
  }
  // The embed head normalises the whole row: [1,2,2,3,3,4] / √43.
  const auto normalised = pool_whole<cls_mean_max, Space>({1, 2, 3, 4}, 2, {2}, {});
  const float norm = std::sqrt(43.0f);
  test::check_close(*normalised[0], test::matrix{1, 6, {1 / norm, 2 / norm, 2 / norm, 3 / norm, 3 / norm, 4 / norm}},
                    1e-6);

  Space space;
  seqpool::state_store<Space> state(space);
  // Modes given by value, as a user's method that holds parameters is.
  using cls_max = method::concat<method::cls, method::max>;
  raw_pooler<cls_max, Space> given(space, 2, cls_max(method::cls{}, method::max{}));
  test::check_equal(*test::run_step(space, given, state, seqpool::batch{{test::whole("g", task::embed, 2, raw)}},
                                    std::vector<float>{1, -5, 3, -4})[0],
                    1, 4, {1, -5, 3, -4});

  // Refused: an instruction that its modes treat differently (CLS reads row 0 of it).
  raw_pooler<method::concat<method::cls, method::mean>, Space> cls_mean(space, 2);
  CHECK_THROWS_WITH_AS(cls_mean.plan(seqpool::batch{{test::whole("i", task::embed, 5, {.instruction_len = 1})}}, state),
                       "request 0 (id \"i\"): instruction_len: cls+mean does not leave out an instruction: give 0 (a "
                       "method that can says so with `static constexpr seqpool::instruction_rule instruction`)",
                       seqpool::error);
  // A mode that reads fewer rows than the chunk has.
  raw_pooler<method::concat<method::mean, first_row_only>, Space> narrow(space, 2);
  CHECK_THROWS_WITH_AS(narrow.plan(seqpool::batch{{test::whole("n", task::embed, 5, raw)}}, state),
                       "method: mean+first_row_only: its mode first_row_only reads rows [0, 1) of a chunk of rows "
                       "[0, 5); a concat's modes read every row (or are CLS or LAST)",
                       seqpool::error);
}

TEST_CASE_TEMPLATE_DEFINE("case 35: a concat named at run time pools as the concat of its modes", Space,
                          case_35_runtime_concat) {
  using namespace methods_cases;
  using any = method::any_sequence;
  const auto named = [](std::string_view name) {
    const std::optional<any> found = any::from_name(name);
    REQUIRE(found.has_value());
    CHECK(found->name() == name);
    return *found;
  };
  const std::vector<std::vector<std::int64_t>> chunkings{{5}, {1, 3, 1}, {2, 3}, {4, 1}};
  // Every set of two or three modes, in sentence-transformers' order: each mode's columns
  // are what the method alone gives (case 1's rows, whose sums are exact in float).
  const std::array<std::string_view, 6> order{"cls", "max", "mean", "mean_sqrt_len", "weighted_mean", "last"};
  const std::array<any, 6> alone{named("cls"),           named("max"),           named("mean"),
                                 named("mean_sqrt_len"), named("weighted_mean"), named("last")};
  std::array<std::vector<float>, 6> single;
  for (std::size_t code = 0; code < order.size(); ++code)
    single[code] = pool_chunked<any, Space>(ten, 2, {5}, raw, {}, alone[code])[0]->values;
  for (unsigned set = 0; set < 64; ++set) {
    if (std::popcount(set) < 2 || std::popcount(set) > 3) continue;
    std::string name;
    std::vector<float> expected;
    for (std::size_t code = 0; code < order.size(); ++code)
      if ((set >> code & 1u) != 0) {
        name.append(name.empty() ? "" : "+").append(order[code]);
        expected.insert(expected.end(), single[code].begin(), single[code].end());
      }
    CAPTURE(name);
    const any joined = named(name);
    for (const std::vector<std::int64_t>& chunks : chunkings) {
      CAPTURE(methods_cases::joined(chunks));
      const auto width = static_cast<std::int64_t>(expected.size());
      test::check_equal(*pool_chunked<any, Space>(ten, 2, chunks, raw, {}, joined)[0], 1, width, expected);
    }
  }

  // Five and six modes, through runtime_concat<5> and <6> (a table of its own names them). A
  // device block merges at most five modes' runs in its shared memory (SPEC section 2).
  const auto check_all = [&]<int Modes>(std::string_view name) {
    CAPTURE(name);
    const std::optional joined = method::runtime_concat<Modes>::from_name(name);
    REQUIRE(joined.has_value());
    std::vector<float> expected;
    for (const std::vector<float>& columns : std::span(single).first(Modes))
      expected.insert(expected.end(), columns.begin(), columns.end());
    for (const std::vector<std::int64_t>& chunks : chunkings) {
      CAPTURE(methods_cases::joined(chunks));
      test::check_equal(*pool_chunked<method::runtime_concat<Modes>, Space>(ten, 2, chunks, raw, {}, *joined)[0], 1,
                        2 * Modes, expected);
    }
  };
  check_all.template operator()<5>("cls+max+mean+mean_sqrt_len+weighted_mean");
  if constexpr (std::is_same_v<Space, seqpool::host_space>)
    check_all.template operator()<6>("cls+max+mean+mean_sqrt_len+weighted_mean+last");

  // Drawn rows, chunked anywhere: bit for bit the compile-time concat of the same modes, whose
  // randomized comparison with the plain loop is tests/cases/random.hpp's. Rows of 48 columns
  // (three whole lines) and of 50 (a line in part), float and bfloat16, the row cut to 100
  // columns (MEAN's first four), and modes that weigh rows by position.
  const auto compare = [&]<class Compiled, class T>(std::string_view name, std::int64_t columns,
                                                    const seqpool::pooling_params& params) {
    CAPTURE(name);
    CAPTURE(columns);
    CAPTURE(params.dimensions.value_or(0));
    const std::vector<float> drawn = test::drawn_values(700 * columns, 35);
    for (const std::vector<std::int64_t>& chunks :
         std::vector<std::vector<std::int64_t>>{{700}, {333, 367}, {1, 698, 1}}) {
      CAPTURE(methods_cases::joined(chunks));
      const test::matrix at_run_time =
          *pool_chunked<any, Space, float, T>(drawn, columns, chunks, params, {}, named(name))[0];
      const test::matrix at_compile_time = *pool_chunked<Compiled, Space, float, T>(drawn, columns, chunks, params)[0];
      CHECK(at_run_time.cols == at_compile_time.cols);
      test::check_equal(at_run_time, 1, at_compile_time.cols, at_compile_time.values);
    }
  };
  using cls_max_mean = method::concat<method::cls, method::max, method::mean>;
  using weighted = method::concat<method::mean_sqrt_len, method::weighted_mean, method::last>;
  seqpool::pooling_params cut = raw;
  cut.dimensions = 100;
  for (const std::int64_t columns : {48, 50}) {
    compare.template operator()<cls_max_mean, float>("cls+max+mean", columns, raw);
    compare.template operator()<cls_max_mean, seqpool::bfloat16>("cls+max+mean", columns, raw);
    compare.template operator()<weighted, seqpool::bfloat16>("mean_sqrt_len+weighted_mean+last", columns, raw);
  }
  compare.template operator()<cls_max_mean, seqpool::bfloat16>("cls+max+mean", 48, cut);

  // An instruction of two rows: MEAN ‖ MAX leave it out, CLS ‖ LAST read as without one.
  seqpool::pooling_params instructed = raw;
  instructed.instruction_len = 2;
  for (const std::vector<std::int64_t>& chunks : chunkings) {
    CAPTURE(methods_cases::joined(chunks));
    test::check_equal(*pool_chunked<any, Space>(ten, 2, chunks, instructed, {}, named("max+mean"))[0], 1, 4,
                      {9, 10, 7, 8});
    test::check_equal(*pool_chunked<any, Space>(ten, 2, chunks, instructed, {}, named("cls+last"))[0], 1, 4,
                      {1, 2, 9, 10});
  }

  // Names out of order, repeated, unknown or empty are no method's.
  for (const std::string_view wrong :
       {"mean+cls", "mean+mean", "cls+", "+cls", "cls+bogus", "cls++max", "", "CLS+MAX"}) {
    CAPTURE(wrong);
    CHECK_FALSE(any::from_name(wrong).has_value());
  }
  // Four modes and more are runtime_concat<4> and on, which the built-in choice leaves out.
  CHECK_FALSE(any::from_name("cls+max+mean+last").has_value());
  CHECK(any::listed_names() ==
        "cls, last, mean, max, weighted_mean, mean_sqrt_len or two or three of cls, max, mean, mean_sqrt_len, "
        "weighted_mean and last, in that order, joined by '+' (\"cls+max+mean\")");
  // A table of its own may take other counts, each listed.
  using other_counts = method::runtime_method<method::mean, method::runtime_concat<2>, method::runtime_concat<4>,
                                              method::runtime_concat<6>>;
  CHECK(other_counts::listed_names() ==
        "mean or two, four or six of cls, max, mean, mean_sqrt_len, weighted_mean "
        "and last, in that order, joined by '+' (\"cls+max+mean\")");
  CHECK_FALSE(other_counts::from_name("cls+max+mean").has_value());
  CHECK(other_counts::from_name("cls+max+mean+mean_sqrt_len+weighted_mean+last")->name() ==
        "cls+max+mean+mean_sqrt_len+weighted_mean+last");

  Space space;
  seqpool::state_store<Space> state(space);
  // Refused: an instruction that its modes treat differently, and one weighted MEAN refuses.
  for (const std::string_view name : {"cls+mean", "mean+weighted_mean"}) {
    raw_pooler<any, Space> refusing(space, 2, named(name));
    CHECK_THROWS_WITH_AS(refusing.plan(seqpool::batch{{test::whole("i", task::embed, 5, instructed)}}, state),
                         ("request 0 (id \"i\"): instruction_len: " + std::string(name) +
                          " does not leave out an instruction: give 0 (a method that can says so with `static "
                          "constexpr seqpool::instruction_rule instruction`)")
                             .c_str(),
                         seqpool::error);
  }
  // A state begun by one set of modes is not continued by another of as many.
  raw_pooler<any, Space> began(space, 2, named("cls+mean"));
  raw_pooler<any, Space> other(space, 2, named("cls+max"));
  test::run_step(space, began, state, seqpool::batch{{test::part("s", task::embed, 5, 0, 2, raw)}},
                 std::vector<float>{1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(other.plan(seqpool::batch{{test::part("s", task::embed, 5, 2, 3, raw)}}, state),
                       "request 0 (id \"s\"): method: cls+max continues a state begun by cls+mean", seqpool::error);
  state.release("s");
}

TEST_CASE_TEMPLATE_DEFINE("case 28: token filters drop the first row, the last, and rows of listed ids", Space,
                          case_28_token_filters) {
  using namespace methods_cases;
  // Case 1's five rows as one prompt of ids CLS, a word, a full stop, a word, SEP.
  const std::vector<std::int64_t> ids{101, 7, 1012, 7, 102};
  for (const std::vector<std::int64_t>& chunks :
       std::vector<std::vector<std::int64_t>>{{5}, {1, 3, 1}, {1, 1, 3}, {2, 3}, {4, 1}}) {
    const std::string sizes = joined(chunks);
    CAPTURE(sizes);
    const auto pool_marked = [&]<class Method>(Method, seqpool::pooling_params params) {
      params.use_activation = false;
      return *pool_chunked<Method, Space>(ten, 2, chunks, params, ids)[0];
    };
    test::check_equal(pool_marked(method::all{}, {.drop_first = true}), 4, 2, {3, 4, 5, 6, 7, 8, 9, 10});
    test::check_equal(pool_marked(method::all{}, {.drop_last = true}), 4, 2, {1, 2, 3, 4, 5, 6, 7, 8});
    test::check_equal(pool_marked(method::all{}, {.drop_first = true, .drop_last = true}), 3, 2, {3, 4, 5, 6, 7, 8});
    test::check_equal(pool_marked(method::all{}, {.drop_token_ids = {1012}}), 4, 2, {1, 2, 3, 4, 7, 8, 9, 10});
    test::check_equal(pool_marked(method::all{}, {.drop_first = true, .drop_token_ids = {7, 1012}}), 1, 2, {9, 10});
    // STEP chooses, then the filters drop: rows 1 and 3 are 7s; without a tag, rows 1, 3 and 4 stay.
    test::check_equal(pool_marked(method::step{}, {.step_tag_id = 7, .drop_last = true}), 2, 2, {3, 4, 7, 8});
    test::check_equal(pool_marked(method::step{}, {.drop_first = true, .drop_token_ids = {1012}}), 3, 2,
                      {3, 4, 7, 8, 9, 10});
    test::check_equal(pool_marked(method::step{}, {.step_tag_id = 7, .drop_token_ids = {7}}), 0, 2, {});
  }
  // A one-row prompt whose row is both first and last: dropping either, or both, leaves nothing.
  Space space;
  seqpool::state_store<Space> state(space);
  raw_pooler<method::all, Space> rows(space, 2);
  for (const seqpool::pooling_params& drops : std::vector<seqpool::pooling_params>{
           {.drop_first = true}, {.drop_last = true}, {.drop_first = true, .drop_last = true}}) {
    const auto one = test::run_step(space, rows, state, seqpool::batch{{test::whole("o", task::token_embed, 1, drops)}},
                                    std::vector<float>{1, 2});
    test::check_equal(*one[0], 0, 2, {});
  }

  // Refused: ids out of order, repeated, negative, too many; no prompt ids to look them up in; a sequence method.
  const auto refused = [&](auto& pooler, task pooling_task, seqpool::pooling_params knobs, bool with_ids,
                           const std::string& message) {
    seqpool::request r = test::whole("f", pooling_task, 5, knobs);
    if (with_ids) r.prompt_token_ids = ids;
    CHECK_THROWS_WITH_AS(pooler.plan(seqpool::batch{{r}}, state), ("request 0 (id \"f\"): " + message).c_str(),
                         seqpool::error);
  };
  refused(rows, task::token_embed, {.drop_token_ids = {1012, 7}}, true,
          "drop_token_ids: id 1 is 7 after 1012; the ids must be strictly ascending");
  refused(rows, task::token_embed, {.drop_token_ids = {7, 7}}, true,
          "drop_token_ids: id 1 is 7 after 7; the ids must be strictly ascending");
  refused(rows, task::token_embed, {.drop_token_ids = {-1}}, true, "drop_token_ids: id 0 is -1; token ids are ≥ 0");
  seqpool::pooling_params many;
  for (std::int64_t id = 0; id <= static_cast<std::int64_t>(seqpool::max_drop_token_ids); ++id)
    many.drop_token_ids.push_back(id);
  refused(rows, task::token_embed, many, true, "drop_token_ids: holds 1025 ids; at most 1024 may be dropped");
  refused(rows, task::token_embed, {.drop_token_ids = {7}}, false,
          "prompt_token_ids: drop_token_ids are looked up in all 5 ids of the prompt, got 0");
  seqpool::request short_ids = test::whole("f", task::token_embed, 5, {.drop_token_ids = {7}});
  short_ids.prompt_token_ids = std::span(ids).first(4);
  CHECK_THROWS_WITH_AS(rows.plan(seqpool::batch{{short_ids}}, state),
                       "request 0 (id \"f\"): prompt_token_ids: drop_token_ids are looked up in all 5 ids of the "
                       "prompt, got 4",
                       seqpool::error);
  raw_pooler<method::mean, Space> means(space, 2);
  for (const auto& [knobs, knob] : std::vector<std::pair<seqpool::pooling_params, std::string>>{
           {{.drop_first = true}, "drop_first"},
           {{.drop_last = true}, "drop_last"},
           {{.drop_token_ids = {7}}, "drop_token_ids"}})
    refused(means, task::embed, knobs, true,
            knob + ": only token methods drop rows; a sequence method leaves out an instruction with instruction_len");
  // A later chunk keeps the first's filters and brings its ids; a captured step takes filters.
  seqpool::request first = test::part("c", task::token_embed, 5, 0, 2, {.drop_token_ids = {7}});
  first.prompt_token_ids = ids;
  CHECK_FALSE(test::run_step(space, rows, state, seqpool::batch{{first}}, std::vector<float>(4, 1.0f))[0]);
  seqpool::request changed = test::part("c", task::token_embed, 5, 2, 3, {.drop_last = true, .drop_token_ids = {7}});
  changed.prompt_token_ids = ids;
  CHECK_THROWS_WITH_AS(rows.plan(seqpool::batch{{changed}}, state),
                       "request 0 (id \"c\"): params: drop_last differs from the first chunk's", seqpool::error);
  const std::vector<std::int64_t> other_ids{101, 7, 1012, 8, 102};
  seqpool::request other = test::part("c", task::token_embed, 5, 2, 3, {.drop_token_ids = {7}});
  other.prompt_token_ids = other_ids;
  CHECK_THROWS_WITH_AS(rows.plan(seqpool::batch{{other}}, state),
                       "request 0 (id \"c\"): prompt_token_ids: differ from those of the first chunk", seqpool::error);
  seqpool::request without_ids = test::part("c", task::token_embed, 5, 2, 3, {.drop_token_ids = {7}});
  CHECK_THROWS_WITH_AS(rows.plan(seqpool::batch{{without_ids}}, state),
                       "request 0 (id \"c\"): prompt_token_ids: drop_token_ids are looked up in all 5 ids of the "
                       "prompt, got 0",
                       seqpool::error);
  state.release("c");
  rows.reserve_capacity({.requests = 2, .rows = 8, .result_rows = 8});
  seqpool::request captured = test::whole("s", task::token_embed, 5, {.drop_first = true, .drop_token_ids = {1012}});
  captured.prompt_token_ids = ids;
  CHECK(rows.plan(seqpool::batch{{captured}}, state).results[0]->rows == 3);
}

TEST_CASE_TEMPLATE_DEFINE("case 8: ALL returns every row of each prompt", Space, case_8_all) {
  using namespace methods_cases;
  const auto out = pool_whole<method::all, Space>(ten, 2, {2, 3});
  test::check_equal(*out[0], 2, 2, {1, 2, 3, 4});
  test::check_equal(*out[1], 3, 2, {5, 6, 7, 8, 9, 10});
}

TEST_CASE_TEMPLATE_DEFINE("case 9: ALL under chunked prefill", Space, case_9_chunked_all) {
  using namespace methods_cases;
  test::check_equal(*pool_chunked<method::all, Space>({1, 2, 3, 4}, 1, {2, 2})[0], 4, 1, {1, 2, 3, 4});

  // One request finishes while another is still in its first chunk.
  Space space;
  seqpool::state_store<Space> state(space);
  raw_pooler<method::all, Space> pooler(space, 1);
  const seqpool::batch step{
      {test::whole("done", task::token_embed, 2, raw), test::part("later", task::token_embed, 4, 0, 2, raw)}};
  const auto out = test::run_step(space, pooler, state, step, std::vector<float>{1, 2, 3, 4});
  REQUIRE(out.size() == 2);
  test::check_equal(*out[0], 2, 1, {1, 2});
  CHECK_FALSE(out[1].has_value());
  CHECK(state.num_computed("later") == 2);
}

namespace methods_cases {

template <class Space, class Id = std::int64_t>
test::matrix pool_steps(seqpool::pooling_params params) {
  const std::vector<Id> ids{10, 99, 10, 20};
  Space space;
  seqpool::state_store<Space> state(space);
  raw_pooler<method::step, Space> pooler(space, 3);
  params.use_activation = false;
  seqpool::request r = test::whole("s", task::token_embed, 4, params);
  r.prompt_token_ids = ids;
  const auto out = test::run_step(space, pooler, state, seqpool::batch{{r}},
                                  std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  return *out[0];
}

}  // namespace methods_cases

TEST_CASE_TEMPLATE_DEFINE("case 10: STEP keeps tagged rows, then chosen columns", Space, case_10_step) {
  using namespace methods_cases;
  test::check_equal(pool_steps<Space>({.step_tag_id = 10}), 2, 3, {1, 2, 3, 7, 8, 9});
  test::check_equal(pool_steps<Space>({.step_tag_id = 10, .returned_token_ids = {0, 2}}), 2, 2, {1, 3, 7, 9});
  test::check_equal(pool_steps<Space>({.returned_token_ids = {0, 2}}), 4, 2, {1, 3, 4, 6, 7, 9, 10, 12});
  test::check_equal(pool_steps<Space>({.step_tag_id = 5}), 0, 3, {});
  test::check_equal(pool_steps<Space>({}), 4, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  // Ids held in 32 bits, as vLLM and llama.cpp hold them.
  test::check_equal(pool_steps<Space, std::int32_t>({.step_tag_id = 10}), 2, 3, {1, 2, 3, 7, 8, 9});
}

TEST_CASE_TEMPLATE_DEFINE("case 11: chunked CLS, MEAN, MAX equal one-shot", Space, case_11_chunked_equals_one_shot) {
  using namespace methods_cases;
  const std::vector<float> prompt{3, -1, 4, 1, -5, 9, 2, 6, 5, -3};  // 5 rows of 2
  for (const std::vector<std::int64_t>& chunks : {std::vector<std::int64_t>{2, 3}, {1, 1, 3}, {4, 1}}) {
    CAPTURE(chunks.size());
    test::check_equal(*pool_chunked<method::cls, Space>(prompt, 2, chunks)[0], 1, 2, {3, -1});
    test::check_equal(*pool_chunked<method::max, Space>(prompt, 2, chunks)[0], 1, 2, {5, 9});
    test::check_close(*pool_chunked<method::mean, Space>(prompt, 2, chunks)[0],
                      *pool_whole<method::mean, Space>(prompt, 2, {5})[0], 1e-6);
    test::check_equal(*pool_chunked<method::last, Space>(prompt, 2, chunks)[0], 1, 2, {5, -3});
  }
}
