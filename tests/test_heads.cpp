// docs/TESTS.md cases 12-19 and 30 and the head errors on the host algorithms and on the device
// kernels run by the OpenMP stand-in; and the host epilogue row's NaN rules.
#include <cmath>
#include <limits>
#include <vector>

#include <seqpool/head/activation.hpp>
#include <seqpool/head/row.hpp>

#include "cases/heads.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(case_12_normalisation, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_12_nan_row, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_13_truncation_then_normalisation, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_14_mixed_knobs, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_15_sigmoid, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_16_softmax, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_17_platt, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_18_problem_types, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_19_raw_logits, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(classifier_with_bias, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(projector_before_truncation, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(token_heads_every_row, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(head_knobs_that_do_not_fit, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(case_30_dense_stacks, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(stacks_that_do_not_chain, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(user_head_stacks, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(stack_through_wide_layer, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(wide_layer_tiles, test::cpu_spaces);

// The host's epilogue row: the rules its loops keep where they avoid libm's calls.
TEST_CASE("a host row's largest value takes a NaN as missing, as fmaxf does") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> rows = {{nan, 1, 3, 2}, {1, nan, 3}, {3, nan},         {nan, nan},
                                                {-inf, -1},     {nan},       {-2, -5, nan, -3}};
  for (std::vector<float> row : rows) {
    float expected = row[0];
    for (std::size_t c = 1; c < row.size(); ++c) expected = std::fmax(expected, row[c]);
    const seqpool::head::plain_row plain{row.data(), static_cast<std::int64_t>(row.size())};
    const float largest = plain.max([](float x) { return x; });
    CAPTURE(row.size());
    if (std::isnan(expected))
      CHECK(std::isnan(largest));
    else
      CHECK(largest == expected);
  }
}

TEST_CASE("L2 normalisation divides by the norm, at least 1e-12: a zero row stays zero, a NaN stays NaN") {
  const auto normalized = [](std::vector<float> row) {
    seqpool::head::plain_row plain{row.data(), static_cast<std::int64_t>(row.size())};
    seqpool::head::l2_normalize(plain);
    return row;
  };
  CHECK(normalized({3, 4}) == std::vector<float>{3 * (1.0f / 5), 4 * (1.0f / 5)});
  CHECK(normalized({0, 0, 0}) == std::vector<float>{0, 0, 0});
  CHECK(normalized({1e-13f, 0}) == std::vector<float>{1e-13f * (1.0f / 1e-12f), 0});
  // As PyTorch's F.normalize: clamp_min keeps a NaN norm, and so every value is NaN.
  for (const float value : normalized({1, std::numeric_limits<float>::quiet_NaN(), 2})) CHECK(std::isnan(value));
}
