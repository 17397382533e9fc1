// Randomized batches, one-shot and chunked over several steps, compared with the
// plain reference of support/reference.hpp: every method × head × dtype, and
// 16-bit results against the float results of the same steps.
// Defines templated cases; a translation unit applies them to its spaces.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../support/reference.hpp"
#include "../support/step.hpp"

namespace random_cases {

namespace method = seqpool::method;
namespace head = seqpool::head;

struct batch_shape {
  std::int64_t hidden_size;
  std::int64_t max_prompt_len;
  int requests;
};

// Hidden sizes 1, odd and past 1024; prompts from one token to a few thousand;
// on the device, requests pooled whole by a warp and split into tiles and slabs,
// several of each (300 columns are two slabs, 3000 rows three tiles).
inline constexpr batch_shape shapes[] = {{1, 40, 16}, {7, 300, 10}, {64, 3000, 3}, {300, 1500, 3}, {1030, 500, 4}};

template <class T, class Result>
constexpr double tolerance = std::is_same_v<T, float>&& std::is_same_v<Result, float> ? 1e-5 : 1e-2;

/// A request in flight and what the engine knows of it.
struct prompt {
  seqpool::request r;
  std::vector<float> rows;  ///< as the library reads them: rounded to the element type
  std::vector<std::int64_t> token_ids;
  std::vector<std::int32_t> narrow_token_ids;  ///< the same ids, handed over in 32 bits for half the prompts
  std::int64_t done = 0;
  std::optional<test::matrix> result;
};

class generator {
 public:
  explicit generator(std::uint32_t seed) : engine_(seed) {}

  std::int64_t between(std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(engine_);
  }
  float value() { return std::uniform_real_distribution<float>(-2.0f, 2.0f)(engine_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(engine_); }
  /// Ascending spans of [0, prompt_len), some touching, some with gaps between.
  std::vector<seqpool::token_span> spans(std::int64_t prompt_len) {
    std::vector<seqpool::token_span> drawn;
    for (std::int64_t begin = between(0, prompt_len - 1); begin < prompt_len;) {
      const std::int64_t end = between(begin + 1, std::min(prompt_len, begin + 1 + prompt_len / 3));
      drawn.push_back({begin, end});
      begin = chance(0.5) ? end : end + between(0, prompt_len / 4);
    }
    return drawn;
  }
  std::vector<float> values(std::int64_t count) {
    std::vector<float> drawn(count);
    for (float& v : drawn) v = value();
    return drawn;
  }

 private:
  std::mt19937 engine_;
};

/// Draws a head of kind Head over rows of `in_features` columns, with its weights in `space`:
/// none, one dense layer, or a stack of two or three, each with an activation function
/// and from 1 to its inputs + 3 outputs, at most `widest_layer`.
template <class Head, class Space>
struct drawn_head {
  test::head_spec spec;
  std::vector<seqpool::buffer<float, Space>> weights;  ///< each layer's weight, and bias where it has one
  Head policy;
  std::int64_t out_features;

  drawn_head(Space& space, generator& draw, std::int64_t in_features, std::int64_t widest_layer)
      : out_features(in_features) {
    spec.classify = Head::kind == seqpool::head_kind::classify;
    const int count = !draw.chance(spec.classify ? 0.5 : 0.35) ? 0 : draw.chance(0.6) ? 1 : draw.chance(0.6) ? 2 : 3;
    std::vector<seqpool::dense_layer> layers;
    weights.reserve(2 * static_cast<std::size_t>(count));
    for (int k = 0; k < count; ++k) {
      const bool last = k + 1 == count;
      test::layer_spec& layer = spec.layers.emplace_back();
      layer.out_features = spec.classify && last ? std::vector<std::int64_t>{1, 2, 5}[draw.between(0, 2)]
                                                 : draw.between(1, std::min(in_features + 3, widest_layer));
      layer.weight = draw.values(layer.out_features * in_features);
      for (float& w : layer.weight) w /= std::sqrt(static_cast<float>(in_features));
      layer.activation = count == 1 && draw.chance(0.5) ? seqpool::activation_function::identity
                                                        : static_cast<seqpool::activation_function>(draw.between(0, 3));
      const float* weight = weights.emplace_back(test::to_space(space, layer.weight)).data();
      const float* bias = nullptr;
      if (draw.chance(0.5)) {
        layer.bias = draw.values(layer.out_features);
        bias = weights.emplace_back(test::to_space(space, layer.bias)).data();
      }
      layers.push_back({{weight, bias, layer.out_features, in_features}, layer.activation});
      in_features = layer.out_features;
    }
    if (count > 0) out_features = in_features;
    if constexpr (Head::kind == seqpool::head_kind::classify) {
      spec.problem = static_cast<head::problem_type>(draw.between(0, 2));
      if (draw.chance(0.5)) spec.platt = head::platt_scaling{draw.value(), draw.chance(0.5) ? 0.5f : -1.5f};
      policy = Head(seqpool::dense_stack(layers), spec.problem, spec.platt);
    } else {
      policy = Head(seqpool::dense_stack(layers));
    }
  }
};

/// Whether Method pools a request with an instruction (SPEC section 3).
template <class Method>
constexpr bool takes_instruction = [] {
  if constexpr (Method::kind == seqpool::method_kind::sequence)
    return seqpool::detail::instruction_rule_of<Method>() != seqpool::instruction_rule::refused;
  else
    return false;
}();

/// The reference result of a prompt: pooled whole, or, over spans, each span
/// pooled as a prompt of its own, one row each.
template <class Method>
test::matrix reference_of(const prompt& p, std::int64_t hidden_size, const test::head_spec& spec, std::int64_t kept) {
  if (p.r.params.spans.empty()) return test::reference(Method::name, p.rows, hidden_size, p.r, spec, kept);
  test::matrix rows{static_cast<std::int64_t>(p.r.params.spans.size()), kept, {}};
  for (const seqpool::token_span span : p.r.params.spans) {
    seqpool::request alone = p.r;
    alone.prompt_len = span.end - span.begin;
    alone.params.spans.clear();
    const std::vector<float> span_rows(p.rows.begin() + span.begin * hidden_size,
                                       p.rows.begin() + span.end * hidden_size);
    const test::matrix pooled = test::reference(Method::name, span_rows, hidden_size, alone, spec, kept);
    rows.values.insert(rows.values.end(), pooled.values.begin(), pooled.values.end());
  }
  return rows;
}

/// One randomized run: draws a batch, pools it in one step or chunk by chunk over
/// several steps, and checks every request against the reference. With 16-bit
/// or quantized results, a float pooler pools the same steps beside the pooler
/// under test, whose results must be its results rounded, or encoded.
template <class Method, class Head, class T, class Space, class Result = float>
void compare_with_reference(std::uint32_t seed, const batch_shape& shape, bool chunked) {
  CAPTURE(Method::name);
  CAPTURE(sizeof(Result));
  CAPTURE(seed);
  CAPTURE(shape.hidden_size);
  CAPTURE(chunked);
  generator draw(seed);
  Space space;
  const std::int64_t hidden_size = shape.hidden_size;

  // A STEP group may return fewer columns, a concat pools more; a linear layer must then take that many.
  const std::int64_t columns = Method::name == "step" && draw.chance(0.5)
                                   ? draw.between(1, std::min<std::int64_t>(hidden_size, 8))
                                   : seqpool::detail::modes_of<Method> * hidden_size;
  // A token method's head runs on every row it keeps, thousands a run: narrow
  // layers (wider than the device's warps, which each take every 8th output) keep
  // the reference's products few. A sequence method's rows reach past 1024 outputs.
  const std::int64_t widest_layer = Method::kind == seqpool::method_kind::token ? 24 : columns + 3;
  drawn_head<Head, Space> pooling_head(space, draw, columns, widest_layer);
  seqpool::pooler<Method, Head, Space, Result> pooler(space, hidden_size, {}, pooling_head.policy);
  seqpool::state_store<Space> state(space);
  constexpr bool rounds = !std::is_same_v<Result, float>;
  constexpr bool quantized = seqpool::quantized_element<Result>;
  // int8 and uint8: ranges as wide as the widest result, around the values a head gives.
  std::vector<float> lower, upper, steps;
  seqpool::detail::result_encoding<Result> encoding{};
  if constexpr (seqpool::ranged_element<Result>) {
    for (std::int64_t c = 0; c < std::max(hidden_size, pooling_head.out_features); ++c) {
      lower.push_back(-1.0f - std::abs(draw.value()));
      upper.push_back(1.0f + std::abs(draw.value()));
    }
    pooler.set_ranges({lower, upper});
    steps = test::steps_of(lower, upper);
    encoding = {lower.data(), steps.data()};
  }
  seqpool::pooler<Method, Head, Space> float_pooler(space, hidden_size, {}, pooling_head.policy);
  seqpool::state_store<Space> float_state(space);

  std::vector<prompt> prompts(shape.requests);
  for (int i = 0; i < shape.requests; ++i) {
    prompt& p = prompts[i];
    const std::int64_t prompt_len = draw.between(1, shape.max_prompt_len);
    p.rows = test::round_trip<T>(draw.values(prompt_len * hidden_size));
    for (std::int64_t t = 0; t < prompt_len; ++t) p.token_ids.push_back(draw.between(1, 5));
    seqpool::pooling_params params{.use_activation = draw.chance(0.75)};
    if (Head::kind == seqpool::head_kind::embed && draw.chance(0.5))
      params.dimensions = draw.between(1, pooling_head.out_features);
    if (draw.chance(0.6)) params.step_tag_id = draw.between(1, 6);  // 6 never matches
    if (columns < hidden_size)
      for (std::int64_t c = 0; c < columns; ++c) params.returned_token_ids.push_back(draw.between(0, hidden_size - 1));
    if (Method::kind == seqpool::method_kind::sequence && draw.chance(0.4)) params.spans = draw.spans(prompt_len);
    else if (takes_instruction<Method> && prompt_len > 1 && draw.chance(0.3))
      params.instruction_len = draw.between(1, prompt_len - 1);
    if (Method::kind == seqpool::method_kind::token && draw.chance(0.4)) {  // token filters
      params.drop_first = draw.chance(0.5);
      params.drop_last = draw.chance(0.5);
      for (std::int64_t id = 1; id <= 5; ++id)
        if (draw.chance(0.2)) params.drop_token_ids.push_back(id);
    }
    p.r = test::whole(test::id("r", i), pooler.task, prompt_len, params);
    if (draw.chance(0.5)) {
      p.narrow_token_ids.assign(p.token_ids.begin(), p.token_ids.end());
      p.r.prompt_token_ids = p.narrow_token_ids;
    } else {
      p.r.prompt_token_ids = p.token_ids;
    }
  }

  for (int step = 0; std::any_of(prompts.begin(), prompts.end(), [](const prompt& p) { return !p.result; }); ++step) {
    REQUIRE(step < 10000);
    // Some steps have rows further apart than hidden_size, with NaN in between that must never be read.
    const std::int64_t row_stride = hidden_size + (draw.chance(0.3) ? draw.between(1, 5) : 0);
    seqpool::batch batch;
    std::vector<prompt*> scheduled;
    std::vector<float> rows;
    for (prompt& p : prompts) {
      if (p.result) continue;
      const std::int64_t remaining = p.r.prompt_len - p.done;
      const std::int64_t size = chunked && draw.chance(0.7) ? draw.between(1, remaining) : remaining;
      seqpool::request r = p.r;
      r.num_computed = p.done;
      r.num_scheduled = size;
      batch.requests.push_back(r);
      scheduled.push_back(&p);
      for (std::int64_t t = p.done; t < p.done + size; ++t) {
        rows.insert(rows.end(), p.rows.begin() + t * hidden_size, p.rows.begin() + (t + 1) * hidden_size);
        rows.insert(rows.end(), row_stride - hidden_size, std::numeric_limits<float>::quiet_NaN());
      }
      p.done += size;
    }
    const std::vector<T> step_rows = test::convert<T>(rows);
    const test::results out = test::run_step(space, pooler, state, batch, step_rows, row_stride);
    test::results exact;
    if constexpr (rounds) exact = test::run_step(space, float_pooler, float_state, batch, step_rows, row_stride);
    for (std::size_t i = 0; i < scheduled.size(); ++i) {
      prompt& p = *scheduled[i];
      CHECK(out[i].has_value() == (p.done == p.r.prompt_len));
      if (!out[i]) continue;
      // Quantized results are checked against the float ones, which the reference checks.
      p.result = quantized ? exact[i] : out[i];
      if constexpr (quantized)
        test::check_encoded<Result>(*out[i], *exact[i], encoding, std::is_same_v<Space, seqpool::host_space>);
      else if constexpr (rounds)
        test::check_rounded<Result>(*out[i], *exact[i]);
    }
  }
  CHECK(state.size() == 0);

  for (const prompt& p : prompts) {
    CAPTURE(p.r.id);
    const auto& chosen = p.r.params.returned_token_ids;
    const std::int64_t pooled_width = chosen.empty() ? seqpool::detail::modes_of<Method> * hidden_size
                                                     : static_cast<std::int64_t>(chosen.size());
    const std::int64_t head_width = pooling_head.spec.layers.empty() ? pooled_width : pooling_head.out_features;
    const std::int64_t kept = p.r.params.dimensions.value_or(head_width);
    // A quantized combination's results are the float pooler's, checked as float results are.
    // Float results through a layer: its sums of up to a few hundred float
    // products, in the kernel's order (a warp's lanes, then their shuffles), may
    // stray ten times further from the sums in double than pooling alone does.
    using checked = std::conditional_t<quantized, float, Result>;
    constexpr bool in_float = std::is_same_v<T, float> && std::is_same_v<checked, float>;
    const double allowed = in_float && !pooling_head.spec.layers.empty() ? 1e-4 : tolerance<T, checked>;
    test::check_close(*p.result, reference_of<Method>(p, hidden_size, pooling_head.spec, kept), allowed);
  }
}

/// One combination of head, hidden type and result type a method is compared in.
template <class Head, class T, class Result = float>
struct combination {
  template <class Method, class Space>
  static void compare(std::uint32_t seed) {
    for (const batch_shape& shape : shapes)
      for (const bool chunked : {false, true}) compare_with_reference<Method, Head, T, Space, Result>(seed++, shape, chunked);
  }
};

/// Every method is compared in each: both heads, float and 16-bit hidden
/// states of both families (seqpool's and CUDA's), float, 16-bit and quantized
/// results (ranged and packed).
using combinations =
    std::tuple<combination<head::embed, float>, combination<head::classify, float>, combination<head::embed, __half>,
               combination<head::classify, __nv_bfloat16>, combination<head::embed, seqpool::bfloat16>,
               combination<head::classify, seqpool::half>, combination<head::embed, __nv_bfloat16, seqpool::bfloat16>,
               combination<head::classify, float, __half>, combination<head::embed, float, std::int8_t>,
               combination<head::embed, seqpool::bfloat16, seqpool::binary>,
               combination<head::classify, float, std::uint8_t>>;
inline constexpr std::size_t combination_count = std::tuple_size_v<combinations>;

/// The methods compared: every built-in one, sequence methods then a concat
/// (sentence-transformers' CLS ‖ MEAN ‖ MAX), then token methods
/// (seqpool/method/builtin.hpp). A concat named at run time (runtime_concat)
/// pools as the concat of its modes, bit for bit (case 35), so it is not compared again.
template <class Runtime>
struct alternatives;
template <class... Methods>
struct alternatives<seqpool::method::runtime_method<Methods...>> {
  template <class M>
  static constexpr bool named_by_type = !requires {
    M::from_name(std::string_view());
  };
  using types =
      decltype(std::tuple_cat(std::conditional_t<named_by_type<Methods>, std::tuple<Methods>, std::tuple<>>{}...));
};
using methods = decltype(std::tuple_cat(typename alternatives<seqpool::method::any_sequence>::types{},
                                        std::tuple<method::concat<method::cls, method::mean, method::max>>{},
                                        typename alternatives<seqpool::method::any_token>::types{}));

/// The test is compiled in parts (tests/meson.build): this translation unit
/// compares every SEQPOOL_TEST_PARTS-th pair of method and combination, from
/// pair SEQPOOL_TEST_PART, so that none instantiates every kernel.
#if !defined(SEQPOOL_TEST_PARTS)
#define SEQPOOL_TEST_PARTS 1
#define SEQPOOL_TEST_PART 0
#endif

/// The part is a template argument, so that each part's instantiation has a
/// name of its own: with one name, the linker would keep one part's body for
/// every part of the program.
template <class Space, std::size_t Parts, std::size_t Part, std::size_t... Pairs>
void compare_pairs(std::index_sequence<Pairs...>) {
  const auto one = []<std::size_t Pair>(std::integral_constant<std::size_t, Pair>) {
    if constexpr (Pair % Parts == Part) {
      using method = std::tuple_element_t<Pair / combination_count, methods>;
      using chosen = std::tuple_element_t<Pair % combination_count, combinations>;
      CAPTURE(method::name);
      chosen::template compare<method, Space>(static_cast<std::uint32_t>(Pair * 100 + 1));
    }
  };
  (one(std::integral_constant<std::size_t, Pairs>{}), ...);
}

}  // namespace random_cases

#define SEQPOOL_TEST_STRING(text) #text
#define SEQPOOL_TEST_PART_NAME(part) SEQPOOL_TEST_STRING(part)

TEST_CASE_TEMPLATE_DEFINE("random batches match the reference: every built-in method in every combination, part "
                          SEQPOOL_TEST_PART_NAME(SEQPOOL_TEST_PART),
                          Space, random_batches) {
  random_cases::compare_pairs<Space, SEQPOOL_TEST_PARTS, SEQPOOL_TEST_PART>(
      std::make_index_sequence<std::tuple_size_v<random_cases::methods> * random_cases::combination_count>());
}
