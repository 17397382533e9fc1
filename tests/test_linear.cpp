// host_space passes each pooled row through the head's linear layer in the item
// that pools it (gathered rows a block at a time); rows wider than its scratch
// row take the device's path, through the workspace and a pass of the layer.
// The device's layer reads a token method's rows where they lie. Each against
// the reference.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "support/prompts.hpp"

namespace {

namespace method = seqpool::method;
namespace head = seqpool::head;
using device_omp = seqpool::device_space<seqpool::omp_backend>;
constexpr std::int64_t scratch_row_floats = seqpool::detail::host::launch_policy::scratch_row_floats;

/// A layer of `out_features` outputs over `in_features` columns, with a bias, in
/// the space's memory, and the reference's description of the head around it.
template <class Space>
struct drawn_layer {
  test::head_spec spec;
  seqpool::buffer<float, Space> weight;
  seqpool::buffer<float, Space> bias;

  drawn_layer(Space& space, bool classify, std::int64_t out_features, std::int64_t in_features)
      : spec{.classify = classify,
             .layers = {{.weight = test::drawn_values(out_features * in_features, 3,
                                                      1.0f / std::sqrt(static_cast<float>(in_features))),
                         .bias = test::drawn_values(out_features, 4),
                         .out_features = out_features}}},
        weight(test::to_space(space, spec.layers[0].weight)),
        bias(test::to_space(space, spec.layers[0].bias)) {}

  seqpool::linear_layer layer() const {
    return {weight.data(), bias.data(), spec.layers[0].out_features,
            static_cast<std::int64_t>(spec.layers[0].weight.size()) / spec.layers[0].out_features};
  }
};

/// Pools one request per prompt length with Method and a head around `layer`,
/// checks whether the plan left the layer to a pass of its own, and compares
/// every result with the reference. A request of 300 rows spans three tiles.
template <class Method, class Head>
void check_through_layer(std::string_view name, std::int64_t hidden_size, bool classify, bool separate_pass) {
  CAPTURE(name);
  CAPTURE(hidden_size);
  const std::vector<std::int64_t> lens{1, 7, 300};
  const std::vector<float> hidden = test::drawn_values(test::total_rows(lens) * hidden_size, 5);
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const drawn_layer layer(space, classify, 3, hidden_size);
  seqpool::pooler<Method, Head, seqpool::host_space> pooler(space, hidden_size, {}, Head(layer.layer()));
  const seqpool::batch step = test::whole_prompts(pooler.task, lens);

  const seqpool::step_plan plan = pooler.plan(step, state);
  CHECK(seqpool::detail::plan_access::program(plan).shares[0].records.linears.empty() != separate_pass);
  test::check_prompts(test::run_step(space, pooler, state, step, hidden), step, hidden, hidden_size,
                      std::vector<std::string_view>(lens.size(), name), layer.spec, 3, 1e-5);
}

}  // namespace

TEST_CASE("pooled rows go through the linear layer in the item that pools them") {
  constexpr std::int64_t hidden_size = 1030;
  SUBCASE("cls, classifier") { check_through_layer<method::cls, head::classify>("cls", hidden_size, true, false); }
  SUBCASE("mean, classifier, one tile and three") {
    check_through_layer<method::mean, head::classify>("mean", hidden_size, true, false);
  }
  SUBCASE("max, projector") { check_through_layer<method::max, head::embed>("max", hidden_size, false, false); }
  SUBCASE("all, projector on every row") {
    check_through_layer<method::all, head::embed>("all", hidden_size, false, false);
  }
}

TEST_CASE("rows wider than the scratch row go through the workspace and a pass of the layer") {
  constexpr std::int64_t hidden_size = scratch_row_floats + 8;
  SUBCASE("mean, classifier") { check_through_layer<method::mean, head::classify>("mean", hidden_size, true, true); }
  SUBCASE("all, projector") { check_through_layer<method::all, head::embed>("all", hidden_size, false, true); }
}

TEST_CASE("a chunked request finishes through the layer from its running state") {
  constexpr std::int64_t hidden_size = 1030;
  const std::vector<float> hidden = test::drawn_values(330 * hidden_size, 6);
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const drawn_layer layer(space, true, 3, hidden_size);
  const auto check_chunks = [&]<class Method>(std::string_view name, Method chosen) {
    CAPTURE(name);
    seqpool::pooler<Method, head::classify, seqpool::host_space> pooler(space, hidden_size, chosen,
                                                                        head::classify(layer.layer()));
    const test::results results = test::pool_in_two_chunks(space, pooler, state, std::string(name), hidden, 130);
    REQUIRE(results[0].has_value());
    test::check_close(
        *results[0],
        test::reference(name, hidden, hidden_size, test::whole(std::string(name), pooler.task, 330), layer.spec, 3),
        1e-5);
  };
  // MEAN finishes from its state and this chunk's tiles; CLS from its state alone.
  check_chunks("mean", method::mean{});
  check_chunks("cls", method::cls{});
}

TEST_CASE("returned rows pass through the layer, whatever shares the block") {
  // Ten thousand rows over the gathering pass's items (host_space, which passes
  // them a block at a time), about ten an item, or over the layer's blocks
  // (the device's, which reads them where they lie): blocks hold rows of
  // neighbouring requests of other kept widths (dimensions), and rows a first
  // chunk left in the state beside rows of this step.
  constexpr std::int64_t hidden_size = 24;
  const std::vector<float> hidden = test::drawn_values(10000 * hidden_size, 7);
  const std::vector<std::int64_t> lens{5, 3, 2001, 7, 6184};
  const std::vector<std::optional<std::int64_t>> kept{std::nullopt, 2, 4, std::nullopt, 3};
  const auto check = [&]<class Space, class Result>(Space& space, Result, double tolerance) {
    CAPTURE(sizeof(Result));
    seqpool::state_store<Space> state(space);
    const drawn_layer layer(space, false, 5, hidden_size);
    seqpool::pooler<method::all, head::embed, Space, Result> pooler(space, hidden_size, {}, head::embed(layer.layer()));
    const auto rows = [&](std::int64_t begin, std::int64_t end) {
      return std::vector<float>(hidden.begin() + begin * hidden_size, hidden.begin() + end * hidden_size);
    };
    // "c" (1800 rows) arrives as 1000 rows, then 800 beside five whole prompts.
    const seqpool::batch first{{test::part("c", seqpool::task::token_embed, 1800, 0, 1000)}};
    CHECK_FALSE(test::run_step(space, pooler, state, first, rows(0, 1000))[0].has_value());
    seqpool::batch second{{test::part("c", seqpool::task::token_embed, 1800, 1000, 800)}};
    for (std::size_t i = 0; i < lens.size(); ++i)
      second.requests.push_back(
          test::whole(test::id("r", i), seqpool::task::token_embed, lens[i], {.dimensions = kept[i]}));
    const test::results results = test::run_step(space, pooler, state, second, rows(1000, 10000));
    std::int64_t begin = 1800;
    for (std::size_t i = 0; i < second.requests.size(); ++i) {
      const seqpool::request& r = second.requests[i];
      CAPTURE(r.id);
      const std::int64_t length = i == 0 ? 1800 : r.prompt_len;
      const std::vector<float> prompt = i == 0 ? rows(0, 1800) : rows(begin, begin + length);
      if (i > 0) begin += length;
      seqpool::request alone = r;
      alone.prompt_len = length;
      REQUIRE(results[i].has_value());
      test::check_close(*results[i],
                        test::reference("all", prompt, hidden_size, alone, layer.spec, r.params.dimensions.value_or(5)),
                        tolerance);
    }
  };
  seqpool::host_space host;
  check(host, float{}, 1e-5);
  check(host, seqpool::bfloat16{}, 1e-2);
  device_omp device;
  check(device, float{}, 1e-5);
  check(device, seqpool::bfloat16{}, 1e-2);
}

TEST_CASE("on the device a token method's first layer reads each returned row where it lies") {
  // No run gathers a row, and no row waits in the workspace; rows wider than
  // the layer's shared memory (8200 floats) are read once an output.
  for (const std::int64_t hidden_size : {std::int64_t{24}, std::int64_t{8200}}) {
    CAPTURE(hidden_size);
    const std::vector<std::int64_t> lens{1, 7, 30};
    const std::vector<float> hidden = test::drawn_values(test::total_rows(lens) * hidden_size, 8);
    device_omp space;
    seqpool::state_store<device_omp> state(space);
    const drawn_layer layer(space, false, 3, hidden_size);
    seqpool::pooler<method::all, head::embed, device_omp> pooler(space, hidden_size, {}, head::embed(layer.layer()));
    const seqpool::batch step = test::whole_prompts(pooler.task, lens);
    const seqpool::step_plan plan = pooler.plan(step, state);
    const auto& records = seqpool::detail::plan_access::program(plan).shares[0].records;
    CHECK(records.gathers.empty());
    REQUIRE(records.linears.size() == 38);
    for (const seqpool::detail::linear_record& row : records.linears) CHECK(row.input == -1);
    test::check_prompts(test::run_step(space, pooler, state, step, hidden), step, hidden, hidden_size,
                        std::vector<std::string_view>(lens.size(), "all"), layer.spec, 3, 1e-5);
  }
}

TEST_CASE("the host gathers the rows a dense layer takes a block to an item, however few the rows") {
  // Each item reads every weight row once for its block: an item a row would
  // read the weights once a row. Without a layer, an item takes a row.
  constexpr std::int64_t hidden_size = 24;
  constexpr std::int64_t block = seqpool::detail::host::launch_policy::linear_block_rows;
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const drawn_layer layer(space, false, 3, hidden_size);
  seqpool::pooler<method::all, head::embed, seqpool::host_space> plain(space, hidden_size);
  seqpool::pooler<method::all, head::embed, seqpool::host_space> projected(space, hidden_size, {},
                                                                           head::embed(layer.layer()));
  for (const std::int64_t rows : {1, 3, 4, 9, 33}) {
    CAPTURE(rows);
    const std::vector<std::int64_t> lens{rows};
    const seqpool::batch step = test::whole_prompts(projected.task, lens);
    const auto items = [&](const auto& pooler) {
      const seqpool::step_plan plan = pooler.plan(step, state);
      return seqpool::detail::plan_access::program(plan).shares[0].records.gather_bases.size() - 1;
    };
    CHECK(items(plain) == static_cast<std::size_t>(rows));
    CHECK(items(projected) == static_cast<std::size_t>((rows + block - 1) / block));
    const std::vector<float> hidden = test::drawn_values(rows * hidden_size, 9);
    test::check_prompts(test::run_step(space, projected, state, step, hidden), step, hidden, hidden_size,
                        std::vector<std::string_view>(lens.size(), "all"), layer.spec, 3, 1e-5);
  }
}

TEST_CASE(
    "the host's dense loops, for the baseline and for AVX2, against a plain loop, a row's bits "
    "whatever shares its block") {
  namespace loops = seqpool::detail::host::dense_loops;
  using rows_loop = void (*)(const seqpool::dense_layer&, const float* const*, float* const*, const std::int64_t*, int);
  using row_loop = void (*)(const seqpool::dense_layer&, const float*, float*, std::int64_t);
  struct variant {
    std::string name;
    rows_loop of_rows;
    row_loop of_row;
  };
  std::vector<variant> variants{
      {"baseline", [](const auto& d, auto p, auto o, auto n, int c) { loops::outputs_of_rows(d, p, o, n, c); },
       [](const auto& d, auto p, auto o, std::int64_t n) { loops::outputs(d, p, o, n); }}};
  // SEQPOOL_HOST_VECTORS chooses what a pooler runs, not what this test may.
  const char* const chosen = std::getenv("SEQPOOL_HOST_VECTORS");
  const bool baseline = chosen != nullptr && std::string_view(chosen) == "baseline";
  CHECK(seqpool::detail::host::has_wide_vectors() == (!baseline && seqpool::detail::host::cpu_has_wide_vectors()));
#if SEQPOOL_WIDE_VECTORS
  if (seqpool::detail::host::cpu_has_wide_vectors())
    variants.push_back({"avx2", loops::wide_outputs_of_rows, loops::wide_outputs});
  else
#endif
    MESSAGE("this CPU has no AVX2: its loops are not run");
  for (const auto& [in_features, out_features] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {1, 1}, {2, 3}, {5, 2}, {7, 2}, {12, 5}, {14, 3}, {64, 3}, {1000, 129}, {1003, 4}, {1024, 128}}) {
    const std::vector<float> weights = test::drawn_values(out_features * in_features, 5, 0.5f);
    const std::vector<float> bias = test::drawn_values(out_features, 6);
    const std::vector<float> inputs = test::drawn_values(4 * in_features, 7);
    const seqpool::dense_layer layer{{weights.data(), bias.data(), out_features, in_features},
                                     seqpool::activation_function::tanh};
    for (const variant& loop : variants) {
      CAPTURE(loop.name);
      CAPTURE(in_features);
      CAPTURE(out_features);
      // Four rows, each keeping fewer of the outputs than the one before.
      const std::int64_t kept[4] = {out_features, std::max<std::int64_t>(out_features - 1, 1),
                                    std::max<std::int64_t>(out_features / 2, 1), 1};
      std::vector<float> together(4 * out_features, -7.0f);
      const float* pooled[4];
      float* out[4];
      for (int b = 0; b < 4; ++b) {
        pooled[b] = inputs.data() + b * in_features;
        out[b] = together.data() + b * out_features;
      }
      loop.of_rows(layer, pooled, out, kept, 4);
      for (int b = 0; b < 4; ++b) {
        CAPTURE(b);
        for (std::int64_t o = 0; o < out_features; ++o) {
          if (o >= kept[b]) {
            CHECK(together[b * out_features + o] == -7.0f);  // past the outputs the row keeps: untouched
            continue;
          }
          double total = bias[o], magnitude = std::abs(bias[o]);
          for (std::int64_t k = 0; k < in_features; ++k) {
            const double term = static_cast<double>(weights[o * in_features + k]) * inputs[b * in_features + k];
            total += term;
            magnitude += std::abs(term);
          }
          // Float sums in any order lie within a few ulps of the terms' magnitude; tanh shrinks the error.
          CHECK(std::abs(together[b * out_features + o] - std::tanh(total)) <= 1e-6 * magnitude);
        }
        // The same row alone, and first of a block of two: the same bits; linear_outputs' within rounding.
        std::vector<float> alone(out_features), paired(2 * out_features), single(out_features);
        float* alone_out[1] = {alone.data()};
        loop.of_rows(layer, &pooled[b], alone_out, &kept[b], 1);
        const float* pair_in[2] = {pooled[b], pooled[(b + 1) % 4]};
        float* pair_out[2] = {paired.data(), paired.data() + out_features};
        const std::int64_t pair_kept[2] = {kept[b], out_features};
        loop.of_rows(layer, pair_in, pair_out, pair_kept, 2);
        loop.of_row(layer, pooled[b], single.data(), kept[b]);
        for (std::int64_t o = 0; o < kept[b]; ++o) {
          CHECK(std::bit_cast<std::uint32_t>(alone[o]) == std::bit_cast<std::uint32_t>(together[b * out_features + o]));
          CHECK(std::bit_cast<std::uint32_t>(paired[o]) ==
                std::bit_cast<std::uint32_t>(together[b * out_features + o]));
          CHECK(single[o] == doctest::Approx(together[b * out_features + o]).epsilon(1e-5));
        }
      }
    }
  }
}
