// host_space reduces a tile's rows a sweep of columns at a time: MEAN and MAX at
// the widths where sweeps split a row and the lengths where sweeps and tiles end.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "support/prompts.hpp"

namespace {

namespace method = seqpool::method;

// One row each, fewer than a sweep's four, exactly one and one more than a
// sweep, either side of a tile, and three tiles and a part.
constexpr std::int64_t tile_rows = seqpool::detail::host::launch_policy::tile_rows;
const std::vector<std::int64_t> prompt_lens{1, 4, 5, 8, 9, tile_rows - 1, tile_rows, tile_rows + 1, 3 * tile_rows + 9};

template <class T>
constexpr double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-4;

/// Pools every prompt of `lens` in one step and compares each result with the
/// reference over its rows.
template <class Method, class T>
void check_sweeps(std::string_view name, std::int64_t hidden_size, const std::vector<std::int64_t>& lens) {
  CAPTURE(name);
  CAPTURE(hidden_size);
  const std::vector<float> hidden = test::round_trip<T>(test::drawn_values(test::total_rows(lens) * hidden_size, 11));
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  using pooler_type = seqpool::pooler<Method, seqpool::head::embed, seqpool::host_space>;
  pooler_type pooler(space, hidden_size);
  const seqpool::batch step = test::whole_prompts(pooler_type::task, lens);
  test::check_prompts(test::run_step(space, pooler, state, step, test::convert<T>(hidden)), step, hidden, hidden_size,
                      std::vector<std::string_view>(lens.size(), name), {}, hidden_size, tolerance<T>);
}

}  // namespace

TEST_CASE("MEAN and MAX reduce every column of every sweep of a row") {
  // fp32 rows of 1024 are one 4 KiB sweep; 1025 are two sweeps of 528 and 497
  // columns, 3000 three and 4100 five. bf16 rows hold twice the columns a sweep.
  SUBCASE("mean, fp32, one sweep") { check_sweeps<method::mean, float>("mean", 1024, prompt_lens); }
  SUBCASE("mean, fp32, two sweeps") { check_sweeps<method::mean, float>("mean", 1025, prompt_lens); }
  SUBCASE("max, fp32, three sweeps") { check_sweeps<method::max, float>("max", 3000, prompt_lens); }
  SUBCASE("max, fp32, five sweeps") { check_sweeps<method::max, float>("max", 4100, prompt_lens); }
  SUBCASE("mean, bf16, one sweep") { check_sweeps<method::mean, __nv_bfloat16>("mean", 2048, prompt_lens); }
  SUBCASE("max, bf16, two sweeps") { check_sweeps<method::max, __nv_bfloat16>("max", 2049, prompt_lens); }
  SUBCASE("mean, fp16, three sweeps") { check_sweeps<method::mean, __half>("mean", 5000, prompt_lens); }
  SUBCASE("mean, bf16, three sweeps, results streamed") {
    // 250 results of 5000 floats pass the streaming threshold: each is reduced
    // in a scratch row, sweep by sweep, before it is written out.
    const std::vector<std::int64_t> lens(250, 6);
    REQUIRE(static_cast<std::size_t>(lens.size() * 5000) * sizeof(float) >=
            seqpool::detail::host::launch_policy::streamed_output_bytes);
    check_sweeps<method::mean, __nv_bfloat16>("mean", 5000, lens);
  }
}

TEST_CASE("a chunked request continues every sweep of its running state") {
  constexpr std::int64_t hidden_size = 3000;
  const std::vector<float> hidden = test::drawn_values(330 * hidden_size, 5);
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  using pooler_type = seqpool::pooler<method::mean, seqpool::head::embed, seqpool::host_space>;
  pooler_type pooler(space, hidden_size);
  const test::results results = test::pool_in_two_chunks(space, pooler, state, "r", hidden, 130);
  REQUIRE(results[0].has_value());
  test::check_close(
      *results[0],
      test::reference("mean", hidden, hidden_size, test::whole("r", pooler_type::task, 330), {}, hidden_size), 1e-5);
}
