// docs/TESTS.md case 29 and the refusals of quantized results: int8 and uint8
// on calibration ranges, binary and ubinary sign bits, from sequence and token
// methods, with and without a linear layer, whole and in chunks.
// Defines templated cases; a translation unit applies them to its spaces.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../support/prompts.hpp"
#include "../support/step.hpp"

namespace quantized_cases {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;

constexpr std::int64_t hidden_size = 12;

/// Two rows whose MEAN is [0.5, 1, −1, 3, −3, 0.2, −0.7, 0, 0.25, −0.25, 0, 5]: the
/// first is twice it, the second zero.
inline const std::vector<float> rows{1, 2, -2, 6, -6, 0.4f, -1.4f, 0, 0.5f, -0.5f, 0, 10,
                                     0, 0, 0,  0, 0,  0,    0,     0, 0,    0,     0, 0};

/// lower = −2 and upper = 1.984375 at every column: a step of exactly 1/64, so
/// that a column's level is (value + 2) · 64.
inline const std::vector<float> lower(hidden_size, -2.0f);
inline const std::vector<float> upper(hidden_size, 1.984375f);

/// The result of one request of the two rows, pooled in `chunks`.
template <class Method, class Result, class Space>
test::matrix pooled(Space& space, std::vector<std::int64_t> chunks, head::embed pooling_head = {}) {
  seqpool::pooler<Method, head::embed, Space, Result> pooler(space, hidden_size, {}, pooling_head);
  if constexpr (seqpool::ranged_element<Result>) pooler.set_ranges({lower, upper});
  seqpool::state_store<Space> state(space);
  std::int64_t done = 0;
  test::results out;
  for (const std::int64_t size : chunks) {
    const seqpool::batch step{{test::part("r", pooler.task, 2, done, size, {.use_activation = false})}};
    const std::vector<float> chunk_rows(rows.begin() + done * hidden_size, rows.begin() + (done + size) * hidden_size);
    out = test::run_step(space, pooler, state, step, chunk_rows);
    done += size;
  }
  REQUIRE(out[0].has_value());
  return *out[0];
}

/// The same, checked whole and in chunks against `rows` × `cols` expected values.
template <class Method, class Result, class Space>
void check_pooled(std::int64_t result_rows, std::int64_t cols, const std::vector<float>& expected,
                  head::embed pooling_head = {}) {
  Space space;
  for (const std::vector<std::int64_t>& chunks : std::vector<std::vector<std::int64_t>>{{2}, {1, 1}}) {
    CAPTURE(chunks.size());
    test::check_equal(pooled<Method, Result>(space, chunks, pooling_head), result_rows, cols, expected);
  }
}

/// One request of `prompt` (rows of `columns` floats) pooled in `chunks` by a
/// pooler of Result beside a float pooler of the same method and head; the
/// quantized result must be the float one encoded, bit for bit.
template <class Method, class Result, class Space>
void check_encodes_float(const std::vector<float>& prompt, std::int64_t columns, const head::embed& pooling_head,
                         const std::vector<std::int64_t>& chunks, const seqpool::pooling_params& params) {
  CAPTURE(Method::name);
  CAPTURE(sizeof(Result));
  Space space;
  seqpool::pooler<Method, head::embed, Space, Result> quantized(space, columns, {}, pooling_head);
  seqpool::pooler<Method, head::embed, Space> exact(space, columns, {}, pooling_head);
  const std::int64_t width = pooling_head.layers().present() ? pooling_head.layers().out_features() : columns;
  const std::vector<float> narrow_lower(static_cast<std::size_t>(width), -0.05f);
  const std::vector<float> narrow_upper(narrow_lower.size(), 0.05f);
  const std::vector<float> steps = test::steps_of(narrow_lower, narrow_upper);
  seqpool::detail::result_encoding<Result> encoding{};
  if constexpr (seqpool::ranged_element<Result>) {
    quantized.set_ranges({narrow_lower, narrow_upper});
    encoding = {narrow_lower.data(), steps.data()};
  }
  seqpool::state_store<Space> quantized_state(space), exact_state(space);
  const std::int64_t prompt_len = static_cast<std::int64_t>(prompt.size()) / columns;
  std::int64_t done = 0;
  for (const std::int64_t size : chunks) {
    const seqpool::batch step{{test::part("r", quantized.task, prompt_len, done, size, params)}};
    const std::vector<float> chunk_rows(prompt.begin() + done * columns, prompt.begin() + (done + size) * columns);
    const test::results encoded = test::run_step(space, quantized, quantized_state, step, chunk_rows);
    const test::results floats = test::run_step(space, exact, exact_state, step, chunk_rows);
    done += size;
    REQUIRE(encoded[0].has_value() == (done == prompt_len));
    if (encoded[0]) test::check_encoded<Result>(*encoded[0], *floats[0], encoding, true);
  }
}

}  // namespace quantized_cases

TEST_CASE_TEMPLATE_DEFINE("case 29: quantized results: int8 and uint8 on ranges, binary and ubinary sign bits", Space,
                          case_29_quantized_results) {
  using namespace quantized_cases;
  // Levels (value + 2) · 64: 160, 192, 64, 320, −64, 140.8, 83.2, 128, 144, 112, 128, 448;
  // uint8 truncates them and saturates at 0 and 255, int8 takes 128 off first.
  const std::vector<float> uint8_mean{160, 192, 64, 255, 0, 140, 83, 128, 144, 112, 128, 255};
  const std::vector<float> int8_mean{32, 64, -64, 127, -128, 12, -44, 0, 16, -16, 0, 127};
  check_pooled<method::mean, std::uint8_t, Space>(1, 12, uint8_mean);
  check_pooled<method::mean, std::int8_t, Space>(1, 12, int8_mean);
  // Above 0: columns 0, 1, 3, 5 → 0b11010100 = 212; 8 and 11 → 0b10010000 = 144, padded
  // with clear bits; binary takes 128 off each byte.
  check_pooled<method::mean, seqpool::ubinary, Space>(1, 2, {212, 144});
  check_pooled<method::mean, seqpool::binary, Space>(1, 2, {84, 16});
  // ALL: the first row has the MEAN's signs, the second none above 0.
  check_pooled<method::all, seqpool::ubinary, Space>(2, 2, {212, 144, 0, 0});
  check_pooled<method::all, seqpool::binary, Space>(2, 2, {84, 16, -128, -128});
  check_pooled<method::all, std::int8_t, Space>(
      2, 12, {64, 127, -128, 127, -128, 25, -89, 0, 32, -32, 0, 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  // Through a projector that keeps columns 0 and 3 of the MEAN: [0.5, 3].
  std::vector<float> weight(2 * hidden_size, 0.0f);
  weight[0] = 1;
  weight[hidden_size + 3] = 1;
  Space space;
  const auto projector = test::to_space(space, weight);
  const head::embed projecting(seqpool::linear_layer{projector.data(), nullptr, 2, hidden_size});
  check_pooled<method::mean, std::uint8_t, Space>(1, 2, {160, 255}, projecting);
  check_pooled<method::mean, seqpool::ubinary, Space>(1, 1, {192}, projecting);
}

TEST_CASE_TEMPLATE_DEFINE("quantized results refuse ranges that are missing, malformed or too narrow", Space,
                          quantized_refusals) {
  using namespace quantized_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  const seqpool::batch step{{test::whole("r", task::embed, 2)}};
  seqpool::pooler<method::mean, head::embed, Space, std::int8_t> pooler(space, hidden_size);
  CHECK_THROWS_WITH_AS(pooler.plan(step, state), doctest::Contains("need calibration ranges"), seqpool::error);
  const std::vector<float> three(3, 0.0f);
  CHECK_THROWS_WITH_AS(pooler.set_ranges({lower, three}), doctest::Contains("the same number, got 12 and 3"),
                       seqpool::error);
  CHECK_THROWS_WITH_AS(pooler.set_ranges({{}, {}}), doctest::Contains("one value per result column"), seqpool::error);
  std::vector<float> crossed = upper;
  crossed[5] = -2.0f;
  CHECK_THROWS_WITH_AS(pooler.set_ranges({lower, crossed}), doctest::Contains("column 5 has lower -2 and upper -2"),
                       seqpool::error);
  std::vector<float> endless = upper;
  endless[7] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH_AS(pooler.set_ranges({lower, endless}), doctest::Contains("column 7 has lower -2 and upper inf"),
                       seqpool::error);
  // 1e-44 / 255 is below float's smallest subnormal: a step of 0.
  const std::vector<float> zero(hidden_size, 0.0f);
  std::vector<float> tiny(hidden_size, 1.0f);
  tiny[2] = 1e-44f;
  CHECK_THROWS_WITH_AS(pooler.set_ranges({zero, tiny}), doctest::Contains("a step above 0; column 2 has lower 0"),
                       seqpool::error);
  const std::vector<float> narrow_lower(4, -1.0f), narrow_upper(4, 1.0f);
  pooler.set_ranges({narrow_lower, narrow_upper});
  CHECK_THROWS_WITH_AS(pooler.plan(step, state), doctest::Contains("cover 4 columns; the request's result has 12"),
                       seqpool::error);
  CHECK_THROWS_WITH_AS(pooler.set_ranges({lower, upper}), doctest::Contains("keep their width of 4 columns, got 12"),
                       seqpool::error);
  // A matryoshka prefix the ranges cover is served.
  const seqpool::batch truncated{{test::whole("r", task::embed, 2, {.use_activation = false, .dimensions = 4})}};
  const test::results out = test::run_step(space, pooler, state, truncated, rows);
  // Levels (x + 1) / step of [0.5, 1, −1, 3], step = 2/255 in float (a little above
  // 2/255): 191.24998, 254.99998, 0, 509.99997; less 128 and truncated: 63, 126,
  // −128, and 127 saturated (numpy's astype wraps it to 125).
  test::check_equal(*out[0], 1, 4, {63, 126, -128, 127});
}

TEST_CASE_TEMPLATE_DEFINE(
    "rows finished in memory encode their float results bit for bit: split, wide, through the layer", Space,
    quantized_rows_in_memory) {
  using namespace quantized_cases;
  // A long request the device splits into tiles and slabs (3000 rows of 300
  // columns, whose MEAN lies within ±0.05), in two chunks.
  const std::vector<float> tall = test::drawn_values(3000 * 300, 7);
  check_encodes_float<method::mean, std::int8_t, Space>(tall, 300, {}, {1700, 1300}, {.use_activation = false});
  check_encodes_float<method::mean, seqpool::binary, Space>(tall, 300, {}, {1700, 1300}, {.use_activation = false});
  // Rows wider than the host's scratch row (8200 columns), drafted there too.
  const std::vector<float> wide = test::drawn_values(3 * 8200, 8, 0.01f);
  check_encodes_float<method::all, std::uint8_t, Space>(wide, 8200, {}, {1, 2}, {.use_activation = false});
  check_encodes_float<method::all, seqpool::ubinary, Space>(wide, 8200, {}, {3}, {});
  check_encodes_float<method::max, std::int8_t, Space>(wide, 8200, {}, {2, 1}, {.use_activation = false});
  // A projector of 16 columns to 8200: the layer's pass drafts the row.
  Space space;
  const auto weight = test::to_space(space, test::drawn_values(8200 * 16, 9, 0.01f));
  const head::embed projecting(seqpool::linear_layer{weight.data(), nullptr, 8200, 16});
  const std::vector<float> narrow = test::drawn_values(4 * 16, 10);
  check_encodes_float<method::mean, std::int8_t, Space>(narrow, 16, projecting, {4}, {.use_activation = false});
  check_encodes_float<method::all, seqpool::binary, Space>(narrow, 16, projecting, {3, 1}, {});
}
