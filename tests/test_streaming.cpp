// Results written past the caches: store_row itself (float, 16-bit and quantized), and steps on host_space
// whose results are large enough to be streamed, against the plain reference.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "support/prompts.hpp"

namespace {

namespace method = seqpool::method;
constexpr std::int64_t scratch_row_floats = seqpool::detail::host::launch_policy::scratch_row_floats;
constexpr std::size_t streamed_output_bytes = seqpool::detail::host::launch_policy::streamed_output_bytes;

/// Pools `prompt_lens` (one request each) with Method and the normalising embed
/// head on host_space, checks that the results were large enough to be streamed,
/// and compares every result with the reference; 16-bit results also with the
/// float results of the same step, rounded.
template <class Method, class T, class Result = float>
void check_streamed(std::string_view name, std::int64_t hidden_size, const std::vector<std::int64_t>& prompt_lens) {
  const std::vector<float> hidden =
      test::round_trip<T>(test::drawn_values(test::total_rows(prompt_lens) * hidden_size, 7));
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  using pooler_type = seqpool::pooler<Method, seqpool::head::embed, seqpool::host_space, Result>;
  pooler_type pooler(space, hidden_size);
  const seqpool::batch step = test::whole_prompts(pooler_type::task, prompt_lens);

  const auto plan = pooler.plan(step, state);
  REQUIRE(static_cast<std::size_t>(plan.output_size) * sizeof(Result) >= streamed_output_bytes);
  const test::results results = test::run_step(space, pooler, state, step, test::convert<T>(hidden));
  test::check_prompts(results, step, hidden, hidden_size, std::vector<std::string_view>(prompt_lens.size(), name), {},
                      hidden_size, std::is_same_v<Result, float> ? 1e-5 : 1e-2);
  if constexpr (!std::is_same_v<Result, float>) {
    seqpool::pooler<Method, seqpool::head::embed, seqpool::host_space> float_pooler(space, hidden_size);
    const test::results exact = test::run_step(space, float_pooler, state, step, test::convert<T>(hidden));
    for (std::size_t i = 0; i < results.size(); ++i) test::check_rounded<Result>(*results[i], *exact[i]);
  }
}

}  // namespace

/// Stores rows of every width to every alignment through store_row<Result>
/// and checks that each value is the float encoded once (rounded, or quantized
/// on its column's range) and nothing else moved.
template <class Result>
void check_store_row(bool stream, const seqpool::detail::result_encoding<Result>& encoding = {}) {
  constexpr std::int64_t slack = 32;
  const std::vector<float> from = test::drawn_values(scratch_row_floats + slack, 1);
  seqpool::host_space space;  // its buffers start on a 64-byte boundary
  const Result untouched = encoding.encode(-1.0f, 0);
  for (std::int64_t offset = 0; offset < 33; ++offset)
    for (const std::int64_t width : {0, 1, 3, 4, 15, 16, 17, 31, 33, 64, 100, 1031, 8192}) {
      CAPTURE(offset);
      CAPTURE(width);
      const seqpool::buffer<Result, seqpool::host_space> to(space, static_cast<std::size_t>(width + slack));
      std::fill(to.data(), to.data() + to.size(), untouched);
      seqpool::detail::host::store_row(to.data() + offset, from.data(), width, stream, encoding);
      for (std::int64_t i = 0; i < width + slack; ++i) {
        const bool inside = i >= offset && i < offset + width;
        const Result wanted = inside ? encoding.encode(from[i - offset], i - offset) : untouched;
        if (std::memcmp(to.data() + i, &wanted, sizeof(Result)) != 0) FAIL("value " << i << " differs");
      }
    }
}

TEST_CASE("store_row writes every width to every alignment, encoded once, and touches nothing else") {
  SUBCASE("float, streamed") { check_store_row<float>(true); }
  SUBCASE("bfloat16, streamed") { check_store_row<seqpool::bfloat16>(true); }
  SUBCASE("half, streamed") { check_store_row<seqpool::half>(true); }
  SUBCASE("half, plain") { check_store_row<seqpool::half>(false); }
  const std::vector<float> lower(8192, -2.0f), steps = test::steps_of(lower, std::vector<float>(8192, 2.0f));
  SUBCASE("int8, streamed") { check_store_row<std::int8_t>(true, {lower.data(), steps.data()}); }
  SUBCASE("uint8, plain") { check_store_row<std::uint8_t>(false, {lower.data(), steps.data()}); }
}

TEST_CASE("results past the streaming threshold equal the reference") {
  // 1031 columns put most result rows off a 64-byte boundary; 8200 is wider
  // than the scratch row and is written in place.
  SUBCASE("all, fp32") { check_streamed<method::all, float>("all", 1031, {700, 400}); }
  SUBCASE("all, bf16") { check_streamed<method::all, __nv_bfloat16>("all", 1031, {1100}); }
  SUBCASE("all, wider than the scratch row") { check_streamed<method::all, float>("all", 8200, {140}); }
  SUBCASE("cls, bf16") { check_streamed<method::cls, __nv_bfloat16>("cls", 1031, std::vector<std::int64_t>(1100, 2)); }
  SUBCASE("mean, fp32") { check_streamed<method::mean, float>("mean", 1031, std::vector<std::int64_t>(1100, 3)); }
  SUBCASE("max, wider than the scratch row") {
    check_streamed<method::max, float>("max", 8200, std::vector<std::int64_t>(140, 2));
  }
  // 16-bit results: half as many bytes, so twice the rows to pass the threshold.
  SUBCASE("all, bf16 to bf16") {
    check_streamed<method::all, seqpool::bfloat16, seqpool::bfloat16>("all", 1031, {2200});
  }
  SUBCASE("all, to half, wider than the scratch row") {
    check_streamed<method::all, float, seqpool::half>("all", 8200, {280});
  }
  SUBCASE("max, to half, wider than the scratch row") {
    check_streamed<method::max, float, seqpool::half>("max", 8200, std::vector<std::int64_t>(280, 2));
  }
}

TEST_CASE("a dispatcher's results are streamed wherever its pooler's slice starts") {
  // Three MEAN rows of 1031 floats come first in the output, so the ALL rows
  // after them, 4.5 MB of results, start off a 64-byte boundary.
  constexpr std::int64_t hidden_size = 1031;
  using mean_pooler = seqpool::pooler<method::mean, seqpool::head::embed, seqpool::host_space>;
  using all_pooler = seqpool::pooler<method::all, seqpool::head::embed, seqpool::host_space>;
  using table = seqpool::dispatch_table<seqpool::task_entry<seqpool::task::embed, mean_pooler>,
                                        seqpool::task_entry<seqpool::task::token_embed, all_pooler>>;
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  seqpool::dispatcher<table> engine(space, mean_pooler(space, hidden_size), all_pooler(space, hidden_size));
  const std::vector<std::int64_t> prompt_lens{5, 1100, 7, 9};
  const seqpool::batch step{{test::whole("m0", seqpool::task::embed, prompt_lens[0]),
                             test::whole("a", seqpool::task::token_embed, prompt_lens[1]),
                             test::whole("m1", seqpool::task::embed, prompt_lens[2]),
                             test::whole("m2", seqpool::task::embed, prompt_lens[3])}};
  const std::vector<float> hidden = test::drawn_values(test::total_rows(prompt_lens) * hidden_size, 3);

  const auto plan = engine.plan(step, state);
  REQUIRE(plan.results[1].has_value());
  CHECK(plan.results[1]->offset * sizeof(float) % 64 != 0);
  CHECK(static_cast<std::size_t>(plan.results[1]->rows * plan.results[1]->cols) * sizeof(float) >=
        streamed_output_bytes);
  test::check_prompts(test::run_step(space, engine, state, step, hidden), step, hidden, hidden_size,
                      {"mean", "all", "mean", "mean"}, {}, hidden_size, 1e-5);
}
