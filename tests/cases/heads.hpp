// docs/TESTS.md cases 12-19 and 30, and the head errors: projector, truncation, normalisation,
// classifier, Platt scaling and activations, per request within one group; stacks of dense layers.
// Defines templated cases; a translation unit applies them to its spaces.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../support/prompts.hpp"
#include "../support/step.hpp"

namespace heads_cases {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;

/// A linear layer's weights in the space's memory.
template <class Space>
struct layer_memory {
  seqpool::buffer<float, Space> weight;
  std::optional<seqpool::buffer<float, Space>> bias;
  std::int64_t out_features;
  std::int64_t in_features;

  seqpool::linear_layer layer() const {
    return {weight.data(), bias ? bias->data() : nullptr, out_features, in_features};
  }
};

template <class Space>
layer_memory<Space> load_layer(Space& space, std::int64_t out_features, const std::vector<float>& weight,
                               std::optional<std::vector<float>> bias = std::nullopt) {
  layer_memory<Space> loaded{test::to_space(space, weight), std::nullopt, out_features,
                             static_cast<std::int64_t>(weight.size()) / out_features};
  if (bias) loaded.bias = test::to_space(space, *bias);
  return loaded;
}

/// One request per row of `hidden` (CLS of a one-token prompt is that row), each with its params.
template <class Head, class Space>
test::results pool_rows(Space& space, const Head& pooling_head, std::int64_t hidden_size,
                        const std::vector<float>& hidden, const std::vector<seqpool::pooling_params>& params) {
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::cls, Head, Space> pooler(space, hidden_size, {}, pooling_head);
  seqpool::batch step;
  for (std::size_t i = 0; i < params.size(); ++i)
    step.requests.push_back(test::whole(test::id("r", i), pooler.task, 1, params[i]));
  return test::run_step(space, pooler, state, step, hidden);
}

template <class Space>
std::vector<float> classify_row(const head::classify& classifier, std::vector<float> logits,
                                bool use_activation = true) {
  Space space;
  const auto width = static_cast<std::int64_t>(logits.size());
  return pool_rows(space, classifier, width, logits, {{.use_activation = use_activation}})[0]->values;
}

inline void check_values(const std::vector<float>& actual, const std::vector<float>& expected, double tolerance) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) CHECK(actual[i] == doctest::Approx(expected[i]).epsilon(tolerance));
}

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace heads_cases

TEST_CASE_TEMPLATE_DEFINE("case 12: normalisation, and a zero vector stays zero", Space, case_12_normalisation) {
  using namespace heads_cases;
  Space space;
  const auto out = pool_rows(space, head::embed{}, 2, {3, 4, 0, 0}, {{}, {}});
  check_values(out[0]->values, {0.6f, 0.8f}, 1e-6);
  test::check_equal(*out[1], 1, 2, {0, 0});
}

TEST_CASE_TEMPLATE_DEFINE("case 12: a row holding NaN normalises to NaN throughout, one past float's range to 0s",
                          Space, case_12_nan_row) {
  // As PyTorch's F.normalize: a NaN norm is kept by the max with 1e-12. One-row requests of widths a
  // warp holds in registers and finishes in memory on the device family, each row's NaN at one
  // column; and a request of many rows, which the device family splits and a block finishes.
  using namespace heads_cases;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto all_nan = [](const test::matrix& r) {
    return std::all_of(r.values.begin(), r.values.end(), [](float v) { return std::isnan(v); });
  };
  for (const std::int64_t width : {2, 1024, 4096}) {
    CAPTURE(width);
    Space space;
    std::vector<float> rows(static_cast<std::size_t>(2 * width), 1.0f);
    rows[static_cast<std::size_t>(width - 1)] = nan;
    // A third row of 1e20: its squares' sum passes float's range, its norm is inf, and its values over it are 0.
    rows.resize(static_cast<std::size_t>(3 * width), 1e20f);
    const auto out = pool_rows(space, head::embed{}, width, rows, {{}, {}, {}});
    CHECK(all_nan(*out[0]));
    const float each = 1.0f / std::sqrt(static_cast<float>(width));
    check_values(out[1]->values, std::vector<float>(static_cast<std::size_t>(width), each), 1e-6);
    CHECK(out[2]->values == std::vector<float>(static_cast<std::size_t>(width), 0.0f));
  }
  Space space;
  constexpr std::int64_t width = 4096;
  constexpr std::int64_t rows = 300;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> mean(space, width);
  std::vector<float> hidden(static_cast<std::size_t>(rows * width), 1.0f);
  hidden[static_cast<std::size_t>(123 * width + 4000)] = nan;
  const auto out = test::run_step(space, mean, state, {{test::whole("long", mean.task, rows)}}, hidden);
  CHECK(all_nan(*out[0]));
}

TEST_CASE_TEMPLATE_DEFINE("case 13: matryoshka truncation comes before normalisation", Space, case_13_truncation_then_normalisation) {
  using namespace heads_cases;
  Space space;
  const auto out = pool_rows(space, head::embed{}, 3, {3, 4, 12}, {{.dimensions = 2}});
  CHECK(out[0]->cols == 2);
  check_values(out[0]->values, {0.6f, 0.8f}, 1e-6);
}

TEST_CASE_TEMPLATE_DEFINE("case 14: mixed knobs in one group give each request its own result", Space, case_14_mixed_knobs) {
  using namespace heads_cases;
  Space space;
  const std::vector<float> rows{3, 4, 12, 3, 4, 12, 3, 4, 12, 3, 4, 12};
  const auto out =
      pool_rows(space, head::embed{}, 3, rows,
                {{.dimensions = 2}, {}, {.use_activation = false, .dimensions = 2}, {.use_activation = false}});
  check_values(out[0]->values, {0.6f, 0.8f}, 1e-6);
  check_values(out[1]->values, {3.0f / 13, 4.0f / 13, 12.0f / 13}, 1e-6);
  test::check_equal(*out[2], 1, 2, {3, 4});
  test::check_equal(*out[3], 1, 3, {3, 4, 12});
}

TEST_CASE_TEMPLATE_DEFINE("case 15: one label is a sigmoid score", Space, case_15_sigmoid) {
  using namespace heads_cases;
  const head::classify classifier;
  check_values(classify_row<Space>(classifier, {0}), {0.5f}, 1e-6);
  CHECK(classify_row<Space>(classifier, {100})[0] == doctest::Approx(1.0).epsilon(1e-4));
  CHECK(classify_row<Space>(classifier, {-100})[0] == doctest::Approx(0.0).epsilon(1e-4));
}

TEST_CASE_TEMPLATE_DEFINE("case 16: several labels are a softmax", Space, case_16_softmax) {
  using namespace heads_cases;
  const head::classify classifier;
  check_values(classify_row<Space>(classifier, {0, 0, 0, 0}), {0.25f, 0.25f, 0.25f, 0.25f}, 1e-6);
  const std::vector<float> probabilities = classify_row<Space>(classifier, {1, -2, 50, 0.5f});
  float total = 0;
  for (const float p : probabilities) total += p;
  CHECK(total == doctest::Approx(1.0).epsilon(1e-6));
  CHECK(probabilities[2] == doctest::Approx(1.0).epsilon(1e-6));
}

TEST_CASE_TEMPLATE_DEFINE("case 17: Platt scaling comes before the activation", Space, case_17_platt) {
  using namespace heads_cases;
  const std::vector<float> logits{3, -1};
  const auto scaled = [](head::platt_scaling platt) {
    return head::classify({}, head::problem_type::single_label, platt);
  };
  check_values(classify_row<Space>(scaled({.logit_mean = 2}), logits, false), {1, -3}, 1e-6);
  check_values(classify_row<Space>(scaled({.logit_sigma = 0.5f}), logits, false), {6, -2}, 1e-6);
  check_values(classify_row<Space>(scaled({.logit_mean = 1, .logit_sigma = 2}), logits, false), {1, -1}, 1e-6);
  check_values(classify_row<Space>(scaled({.logit_mean = 1, .logit_sigma = 2}), {3}, true), {sigmoid(1)}, 1e-6);
}

TEST_CASE_TEMPLATE_DEFINE("case 18: regression is the identity, multi-label a sigmoid per label", Space, case_18_problem_types) {
  using namespace heads_cases;
  check_values(classify_row<Space>(head::classify({}, head::problem_type::regression), {2.5f, -7}),
               {2.5f, -7}, 1e-6);
  check_values(classify_row<Space>(head::classify({}, head::problem_type::multi_label), {0, 2, -1}),
               {0.5f, sigmoid(2), sigmoid(-1)}, 1e-6);
}

TEST_CASE_TEMPLATE_DEFINE("case 19: without activation the logits stay raw", Space, case_19_raw_logits) {
  using namespace heads_cases;
  CHECK(classify_row<Space>(head::classify{}, {0, 0, 0, 0}, false) == std::vector<float>{0, 0, 0, 0});
  CHECK(classify_row<Space>(head::classify{}, {4}, false) == std::vector<float>{4});
}

TEST_CASE_TEMPLATE_DEFINE("a classifier with bias scores the pooled row", Space, classifier_with_bias) {
  using namespace heads_cases;
  Space space;
  // Two labels over H = 3: logits [1+2+3 + 0.5, -(1) + 1] = [6.5, 0].
  const auto weights = load_layer(space, 2, {1, 1, 1, -1, 0, 0}, std::vector<float>{0.5f, 1});
  const auto out =
      pool_rows(space, head::classify(weights.layer()), 3, {1, 2, 3, 1, 2, 3}, {{.use_activation = false}, {}});
  test::check_equal(*out[0], 1, 2, {6.5f, 0});
  const float e = std::exp(-6.5f);
  check_values(out[1]->values, {1 / (1 + e), e / (1 + e)}, 1e-6);
}

TEST_CASE_TEMPLATE_DEFINE("a projector runs before truncation and normalisation", Space, projector_before_truncation) {
  using namespace heads_cases;
  Space space;
  // W[3, 2] maps [1, 2] to [3, 4, 12] before the bias [0, 0, 1]: [3, 4, 13].
  const auto projector = load_layer(space, 3, {1, 1, 0, 2, 10, 1}, std::vector<float>{0, 0, 1});
  const auto out = pool_rows(space, head::embed(projector.layer()), 2, {1, 2, 1, 2, 1, 2},
                             {{.dimensions = 2}, {.use_activation = false}, {}});
  check_values(out[0]->values, {0.6f, 0.8f}, 1e-6);
  test::check_equal(*out[1], 1, 3, {3, 4, 13});
  check_values(out[2]->values, {3 / std::sqrt(194.0f), 4 / std::sqrt(194.0f), 13 / std::sqrt(194.0f)}, 1e-6);
}

TEST_CASE_TEMPLATE_DEFINE("token heads run on every returned row", Space, token_heads_every_row) {
  using namespace heads_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::all, head::embed, Space> embedder(space, 2);
  const auto embedded = test::run_step(space, embedder, state, seqpool::batch{{test::whole("e", task::token_embed, 2)}},
                                       std::vector<float>{3, 4, 0, 2});
  check_values(embedded[0]->values, {0.6f, 0.8f, 0, 1}, 1e-6);

  const auto weights = load_layer(space, 2, {1, 0, 0, 1});
  seqpool::pooler<method::step, head::classify, Space> scorer(space, 2, {}, head::classify(weights.layer()));
  seqpool::request tagged = test::whole("c", task::token_classify, 3, {.step_tag_id = 7});
  const std::vector<std::int64_t> ids{7, 1, 7};
  tagged.prompt_token_ids = ids;
  const auto scored =
      test::run_step(space, scorer, state, seqpool::batch{{tagged}}, std::vector<float>{0, 0, 5, 5, 1, -1});
  REQUIRE(scored[0]->rows == 2);
  check_values(scored[0]->values, {0.5f, 0.5f, 1 / (1 + std::exp(-2.0f)), 1 / (1 + std::exp(2.0f))}, 1e-6);
}

TEST_CASE_TEMPLATE_DEFINE("head knobs that do not fit are rejected before anything runs", Space, head_knobs_that_do_not_fit) {
  using namespace heads_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> embedder(space, 3);
  const auto plan_one = [&](auto& pooler, seqpool::request r) { return pooler.plan(seqpool::batch{{r}}, state); };
  CHECK_THROWS_WITH_AS(plan_one(embedder, test::whole("a", task::embed, 2, {.dimensions = 4})),
                       "request 0 (id \"a\"): dimensions: must be in [1, 3], got 4", seqpool::error);
  CHECK_THROWS_WITH_AS(plan_one(embedder, test::whole("a", task::embed, 2, {.dimensions = 0})),
                       "request 0 (id \"a\"): dimensions: must be in [1, 3], got 0", seqpool::error);

  const auto narrow = load_layer(space, 2, {1, 1, 1, 1});
  seqpool::pooler<method::mean, head::classify, Space> classifier(space, 3, {}, head::classify(narrow.layer()));
  CHECK_THROWS_WITH_AS(plan_one(classifier, test::whole("b", task::classify, 2)),
                       "request 0 (id \"b\"): classifier: takes 2 columns but the method returns 3", seqpool::error);
  seqpool::pooler<method::mean, head::classify, Space> plain(space, 3);
  CHECK_THROWS_WITH_AS(plan_one(plain, test::whole("c", task::classify, 2, {.dimensions = 2})),
                       "request 0 (id \"c\"): dimensions: applies to embed tasks only, not classify", seqpool::error);
  CHECK_THROWS_WITH_AS(head::classify({}, head::problem_type::single_label, head::platt_scaling{0, 0}),
                       "logit_sigma: must not be 0", seqpool::error);
  constexpr float infinity = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(head::classify({}, head::problem_type::single_label, head::platt_scaling{nan, 1}),
                       "logit_mean: must be finite, got nan", seqpool::error);
  CHECK_THROWS_WITH_AS(head::classify({}, head::problem_type::single_label, head::platt_scaling{0, infinity}),
                       "logit_sigma: must be finite, got inf", seqpool::error);
  CHECK_THROWS_WITH_AS(head::embed(seqpool::linear_layer{}), "projector: the weight is null", seqpool::error);
}

TEST_CASE_TEMPLATE_DEFINE("case 30: a stack of dense layers, each output through its activation function", Space,
                          case_30_dense_stacks) {
  using namespace heads_cases;
  using seqpool::activation_function;
  Space space;
  seqpool::state_store<Space> state(space);
  // [1, 2] → W0 [[1, 0], [0, 1], [1, 1]] + [0, 0, −4] = [1, 2, −1] → relu [1, 2, 0]
  //        → W1 [[1, 1, 1], [2, 0, −1]] + [1, 0] = [4, 2].
  const auto first = load_layer(space, 3, {1, 0, 0, 1, 1, 1}, std::vector<float>{0, 0, -4});
  const auto second = load_layer(space, 2, {1, 1, 1, 2, 0, -1}, std::vector<float>{1, 0});
  const seqpool::dense_stack stack{{first.layer(), activation_function::relu}, {second.layer()}};
  const auto out = pool_rows(space, head::embed(stack), 2, {1, 2, 1, 2, 1, 2},
                             {{.use_activation = false}, {}, {.use_activation = false, .dimensions = 1}});
  test::check_equal(*out[0], 1, 2, {4, 2});
  check_values(out[1]->values, {4 / std::sqrt(20.0f), 2 / std::sqrt(20.0f)}, 1e-6);
  test::check_equal(*out[2], 1, 1, {4});

  // Every returned row, whole and in chunks 1 + 1: [3, −1] → [3, −1, −2] → relu [3, 0, 0] → [4, 6].
  seqpool::pooler<method::all, head::embed, Space> multi_vector(space, 2, {}, head::embed(stack));
  const std::vector<float> rows{1, 2, 3, -1};
  const auto whole = test::run_step(space, multi_vector, state,
                                    seqpool::batch{{test::whole("w", task::token_embed, 2, {.use_activation = false})}},
                                    rows);
  test::check_equal(*whole[0], 2, 2, {4, 2, 4, 6});
  const seqpool::pooling_params raw{.use_activation = false};
  const auto begun = test::run_step(space, multi_vector, state,
                                    seqpool::batch{{test::part("c", task::token_embed, 2, 0, 1, raw)}},
                                    std::vector<float>(rows.begin(), rows.begin() + 2));
  CHECK_FALSE(begun[0].has_value());
  const auto ended = test::run_step(space, multi_vector, state,
                                    seqpool::batch{{test::part("c", task::token_embed, 2, 1, 1, raw)}},
                                    std::vector<float>(rows.begin() + 2, rows.end()));
  test::check_equal(*ended[0], 2, 2, {4, 2, 4, 6});

  // BERT's pooler before a classifier: [tanh 1, tanh 2] → [[1, −1]] → tanh 1 − tanh 2, then sigmoid.
  const auto identity = load_layer(space, 2, {1, 0, 0, 1});
  const auto difference = load_layer(space, 1, {1, -1});
  const head::classify bert({{identity.layer(), activation_function::tanh}, {difference.layer()}});
  const auto scored = pool_rows(space, bert, 2, {1, 2, 1, 2}, {{.use_activation = false}, {}});
  const float logit = std::tanh(1.0f) - std::tanh(2.0f);
  check_values(scored[0]->values, {logit}, 1e-6);
  check_values(scored[1]->values, {1 / (1 + std::exp(-logit))}, 1e-6);

  // GELU (erf form): gelu(1) = Φ(1) = 0.8413447, gelu(2) = 2·Φ(2) = 1.9544997.
  const head::embed gelu(seqpool::dense_stack{{identity.layer(), activation_function::gelu}});
  const auto smoothed = pool_rows(space, gelu, 2, {1, 2}, {{.use_activation = false}});
  check_values(smoothed[0]->values, {0.8413447f, 1.9544997f}, 1e-6);
}

TEST_CASE_TEMPLATE_DEFINE("stacks that do not chain are refused", Space, stacks_that_do_not_chain) {
  using namespace heads_cases;
  Space space;
  seqpool::state_store<Space> state(space);
  const auto wide = load_layer(space, 3, {1, 0, 0, 1, 1, 1});
  const auto narrow = load_layer(space, 1, {1, 1});
  CHECK_THROWS_WITH_AS(head::embed(seqpool::dense_stack{{wide.layer()}, {narrow.layer()}}),
                       "projector: layer 1 takes 2 inputs but layer 0 gives 3", seqpool::error);
  CHECK_THROWS_WITH_AS(head::classify(seqpool::dense_stack{{wide.layer()}, {seqpool::linear_layer{}}}),
                       "classifier: the weight is null", seqpool::error);
  CHECK_THROWS_WITH_AS(seqpool::dense_stack({{wide.layer()}, {wide.layer()}, {wide.layer()}, {wide.layer()},
                                             {wide.layer()}}),
                       "layers: a head runs at most 4 dense layers, got 5", seqpool::error);
  seqpool::pooler<method::mean, head::embed, Space> embedder(space, 3, {},
                                                             head::embed(seqpool::dense_stack{{narrow.layer()}}));
  CHECK_THROWS_WITH_AS(embedder.plan(seqpool::batch{{test::whole("a", task::embed, 2)}}, state),
                       "request 0 (id \"a\"): projector: takes 2 columns but the method returns 3", seqpool::error);
}

/// A user's head: its layers, and an epilogue that doubles every value. It
/// offers no kernel_head(), so device kernels carry it whole.
struct doubling_head {
  static constexpr seqpool::head_kind kind = seqpool::head_kind::embed;
  seqpool::dense_stack projector;

  seqpool::dense_stack layers() const { return projector; }
  std::int64_t output_width(std::size_t, const seqpool::request&, std::int64_t width) const {
    return projector.present() ? projector.out_features() : width;
  }
  template <class Row>
  SEQPOOL_HOST_DEVICE void epilogue(Row& row, const seqpool::request_knobs&) const {
    row.transform([](float x) { return 2 * x; });
  }
};

// What device kernels carry of a head: the built-in heads' epilogues alone, a user's head whole.
static_assert(std::is_same_v<decltype(seqpool::detail::kernel_head_of(seqpool::head::embed{})), seqpool::head::normalize>);
static_assert(std::is_same_v<decltype(seqpool::detail::kernel_head_of(seqpool::head::classify{})), seqpool::head::score>);
static_assert(std::is_same_v<decltype(seqpool::detail::kernel_head_of(doubling_head{})), doubling_head>);

TEST_CASE_TEMPLATE_DEFINE("a user's head runs its stack and epilogue, and its layers are checked", Space,
                          user_head_stacks) {
  using namespace heads_cases;
  using seqpool::activation_function;
  Space space;
  // [1, 2] → [1, 2, −1] → relu [1, 2, 0] → [4, 2] (case 30), doubled: [8, 4].
  const auto first = load_layer(space, 3, {1, 0, 0, 1, 1, 1}, std::vector<float>{0, 0, -4});
  const auto second = load_layer(space, 2, {1, 1, 1, 2, 0, -1}, std::vector<float>{1, 0});
  const doubling_head doubling{{{first.layer(), activation_function::relu}, {second.layer()}}};
  test::check_equal(*pool_rows(space, doubling, 2, {1, 2}, {{}})[0], 1, 2, {8, 4});
  // Layers that do not chain, and a layer without a weight, are refused when the pooler is made.
  using user_pooler = seqpool::pooler<method::cls, doubling_head, Space>;
  CHECK_THROWS_WITH_AS(user_pooler(space, 2, {}, doubling_head{{{first.layer()}, {first.layer()}}}),
                       "layers: layer 1 takes 2 inputs but layer 0 gives 3", seqpool::error);
  CHECK_THROWS_WITH_AS(user_pooler(space, 2, {}, doubling_head{{seqpool::linear_layer{}}}),
                       "layers: the weight is null", seqpool::error);
}

TEST_CASE_TEMPLATE_DEFINE("a stack's layer wider than shared memory reads its inputs from the workspace", Space,
                          stack_through_wide_layer) {
  using namespace heads_cases;
  using seqpool::activation_function;
  Space space;
  seqpool::state_store<Space> state(space);
  // [x0, x1] → 8200 outputs x0 + (o % 3)·x1, relu → 2 outputs: their sum over
  // 8192, and the sum of every seventh (small integers and a power of two: exact
  // in float, in any order); for rows [1, −1] and [2, 1] of ALL, whole.
  constexpr std::int64_t wide = 8200;
  std::vector<float> up, down(2 * wide, 0.0f);
  for (std::int64_t o = 0; o < wide; ++o) {
    up.push_back(1.0f);
    up.push_back(static_cast<float>(o % 3));
    down[o] = 1.0f / 8192;
    if (o % 7 == 0) down[wide + o] = 1.0f;
  }
  const auto first = load_layer(space, wide, up);
  const auto second = load_layer(space, 2, down);
  seqpool::pooler<method::all, head::embed, Space> pooler(
      space, 2, {}, head::embed({{first.layer(), activation_function::relu}, {second.layer()}}));
  const std::vector<float> rows{1, -1, 2, 1};
  const auto out = test::run_step(
      space, pooler, state, seqpool::batch{{test::whole("w", task::token_embed, 2, {.use_activation = false})}}, rows);
  std::vector<float> expected;
  for (int r = 0; r < 2; ++r) {
    double scaled = 0, sevenths = 0;
    for (std::int64_t o = 0; o < wide; ++o) {
      const double value = std::max(0.0, double(rows[2 * r]) + double(o % 3) * rows[2 * r + 1]);
      scaled += value / 8192;
      if (o % 7 == 0) sevenths += value;
    }
    expected.push_back(static_cast<float>(scaled));
    expected.push_back(static_cast<float>(sevenths));
  }
  REQUIRE(out[0]->rows == 2);
  test::check_equal(*out[0], 2, 2, expected);
}

namespace heads_cases {

/// Checks one ALL step of a head of one layer of `out_features` outputs over
/// hidden states of T, `hidden_size` wide, against the reference: a request of
/// 180 rows whose first chunk of 100 stashed its rows, beside five whole
/// prompts of which three keep fewer outputs (dimensions); then MEAN's pooled
/// rows of the same prompts through the same layer.
template <class Space, class T>
void check_wide_layer(Space& space, std::int64_t hidden_size, std::int64_t out_features) {
  CAPTURE(hidden_size);
  CAPTURE(out_features);
  CAPTURE(sizeof(T));
  const std::vector<float> hidden = test::round_trip<T>(test::drawn_values(480 * hidden_size, 9));
  const test::head_spec spec{
      .layers = {{.weight = test::drawn_values(out_features * hidden_size, 10,
                                               1.0f / std::sqrt(static_cast<float>(hidden_size))),
                  .bias = test::drawn_values(out_features, 11),
                  .out_features = out_features,
                  .activation = seqpool::activation_function::gelu}}};
  const layer_memory<Space> layer = load_layer(space, out_features, spec.layers[0].weight, spec.layers[0].bias);
  const head::embed embedding({{layer.layer(), seqpool::activation_function::gelu}});
  const auto rows = [&](std::int64_t begin, std::int64_t end) {
    return std::vector<float>(hidden.begin() + begin * hidden_size, hidden.begin() + end * hidden_size);
  };
  const std::vector<std::int64_t> lens{5, 3, 201, 7, 84};
  const std::vector<std::optional<std::int64_t>> kept{std::nullopt, 2, out_features - 7, std::nullopt, 33};
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-4;
  {
    seqpool::state_store<Space> state(space);
    seqpool::pooler<method::all, head::embed, Space> pooler(space, hidden_size, {}, embedding);
    const seqpool::batch first{{test::part("c", task::token_embed, 180, 0, 100)}};
    CHECK_FALSE(test::run_step(space, pooler, state, first, test::convert<T>(rows(0, 100)))[0].has_value());
    seqpool::batch second{{test::part("c", task::token_embed, 180, 100, 80)}};
    for (std::size_t i = 0; i < lens.size(); ++i)
      second.requests.push_back(test::whole(test::id("r", i), task::token_embed, lens[i], {.dimensions = kept[i]}));
    const test::results results = test::run_step(space, pooler, state, second, test::convert<T>(rows(100, 480)));
    std::int64_t begin = 180;
    for (std::size_t i = 0; i < second.requests.size(); ++i) {
      const seqpool::request& r = second.requests[i];
      CAPTURE(r.id);
      seqpool::request alone = r;
      alone.prompt_len = i == 0 ? 180 : r.prompt_len;
      const std::vector<float> prompt = i == 0 ? rows(0, 180) : rows(begin, begin + r.prompt_len);
      if (i > 0) begin += r.prompt_len;
      REQUIRE(results[i].has_value());
      test::check_close(
          *results[i],
          test::reference("all", prompt, hidden_size, alone, spec, r.params.dimensions.value_or(out_features)),
          tolerance);
    }
  }
  seqpool::state_store<Space> state(space);
  seqpool::pooler<method::mean, head::embed, Space> pooler(space, hidden_size, {}, embedding);
  seqpool::batch step;
  for (std::size_t i = 0; i < lens.size(); ++i)
    step.requests.push_back(test::whole(test::id("m", i), task::embed, lens[i], {.dimensions = kept[i]}));
  const test::results results = test::run_step(space, pooler, state, step, test::convert<T>(rows(180, 480)));
  std::int64_t begin = 180;
  for (std::size_t i = 0; i < step.requests.size(); ++i) {
    const seqpool::request& r = step.requests[i];
    CAPTURE(r.id);
    REQUIRE(results[i].has_value());
    test::check_close(*results[i],
                      test::reference("mean", rows(begin, begin + r.prompt_len), hidden_size, r, spec,
                                      r.params.dimensions.value_or(out_features)),
                      tolerance);
    begin += r.prompt_len;
  }
}

}  // namespace heads_cases

TEST_CASE_TEMPLATE_DEFINE("a layer of 32 outputs or more passes rows through tiles of rows and outputs", Space,
                          wide_layer_tiles) {
  // On a device a layer of 40 outputs is one tile of outputs, whose blocks
  // finish their rows, and one of 300 three, finished by a launch of their
  // own; ALL's rows are read where they lie, whole runs of one load where the
  // rows lie on 16-byte boundaries (24 floats or bf16 a row), element by element
  // where they do not (25), or from the state, where a first chunk left them.
  Space space;
  for (const std::int64_t hidden_size : {std::int64_t{24}, std::int64_t{25}}) {
    for (const std::int64_t out_features : {std::int64_t{40}, std::int64_t{300}}) {
      heads_cases::check_wide_layer<Space, float>(space, hidden_size, out_features);
      heads_cases::check_wide_layer<Space, __nv_bfloat16>(space, hidden_size, out_features);
    }
  }
}
