// docs/TESTS.md case 29 and the refusals of quantized results on the host
// algorithms and on the device kernels run by the OpenMP stand-in; and the
// encoding of one value, against sentence-transformers' arithmetic; ranges set
// again reach a captured step.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cases/quantized.hpp"
#include "support/graph.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(case_29_quantized_results, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(quantized_refusals, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(quantized_rows_in_memory, test::cpu_spaces);

TEST_CASE("an int8 or uint8 value is truncated toward zero and saturates; NaN is 0 and no sign bit") {
  const std::vector<float> lower{-1.0f, 0.0f}, steps = test::steps_of(lower, {1.0f, 2.55f});
  const seqpool::detail::result_encoding<std::int8_t> signed_levels{lower.data(), steps.data()};
  const seqpool::detail::result_encoding<std::uint8_t> levels{lower.data(), steps.data()};
  constexpr float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr float infinity = std::numeric_limits<float>::infinity();
  // Column 1: a step of 0.01 (in float); 1.005 is level 100.5, −0.005 level −0.5.
  CHECK(levels.encode(1.005f, 1) == 100);
  CHECK(signed_levels.encode(1.005f, 1) == -27);  // −27.5 truncates toward zero, not to −28
  CHECK(levels.encode(-0.005f, 1) == 0);
  CHECK(levels.encode(infinity, 0) == 255);
  CHECK(signed_levels.encode(-infinity, 0) == -128);
  CHECK(signed_levels.encode(infinity, 0) == 127);
  CHECK(levels.encode(nan, 0) == 0);
  CHECK(signed_levels.encode(nan, 0) == 0);
  // Sign bits: the first column in the high bit; NaN, 0 and −0 set none.
  const seqpool::detail::result_encoding<seqpool::ubinary> bits;
  const float columns[8]{1, nan, 0.0f, -0.0f, 1e-30f, -1, infinity, 2};
  CHECK(bits.pack(columns, 8).bits == 0b10001011);
  CHECK(bits.pack(columns, 3).bits == 0b10000000);  // the rest of a row's last byte is clear
  CHECK(seqpool::detail::result_encoding<seqpool::binary>{}.pack(columns, 8).bits == 0b10001011 - 128);
  // store_row packs whole bytes, then a last one of the row's remaining columns.
  std::vector<float> row(21, -1.0f);
  for (const int set : {0, 7, 9, 16, 20}) row[set] = 1.0f;
  for (const std::int64_t width : {0, 8, 13, 21}) {
    CAPTURE(width);
    std::vector<seqpool::ubinary> packed(4, seqpool::ubinary{0x5a});
    seqpool::detail::host::store_row(packed.data(), row.data(), width, false, bits);
    // Columns 0 and 7; 9 (of 8-15, or of 8-12); 16 and 20 (of 16-20); the rest untouched.
    const std::vector<unsigned> expected{0b10000001, 0b01000000, 0b10001000};
    for (std::size_t v = 0; v < packed.size(); ++v)
      CHECK(packed[v].bits == (v < static_cast<std::size_t>((width + 7) / 8) ? expected[v] : 0x5au));
  }
}

TEST_CASE("ranges are copied into the space at once: their lower bounds and steps, one upload and one wait") {
  using namespace quantized_cases;
  using device_omp = seqpool::device_space<seqpool::omp_backend>;
  device_omp space;
  seqpool::pooler<method::mean, head::embed, device_omp, std::uint8_t> pooler(space, hidden_size);
  const seqpool::audit_scope scope(space.audit());
  pooler.set_ranges({lower, upper});
  CHECK(scope.counts().uploads == 1);
  CHECK(scope.counts().upload_bytes == static_cast<std::int64_t>(2 * lower.size() * sizeof(float)));
  CHECK(scope.counts().waits == 1);
}

TEST_CASE("ranges set again are copied where a captured step's kernels read them") {
  using namespace quantized_cases;
  using device_omp = seqpool::device_space<seqpool::omp_backend>;
  using graph = test::captured_graph<device_omp>;
  device_omp space(graph::backend());
  seqpool::state_store<device_omp> state(space);
  seqpool::pooler<method::mean, head::embed, device_omp, std::int8_t> pooler(space, hidden_size);
  pooler.set_ranges({lower, upper});
  pooler.reserve_capacity({.requests = 2, .rows = 4});
  auto home = pooler.reserve_graph();
  std::vector<float> capacity_rows(4 * hidden_size, 0.0f);
  std::copy(rows.begin(), rows.end(), capacity_rows.begin());
  const auto all_rows = test::to_space(space, capacity_rows);
  const auto view = seqpool::make_hidden_view(all_rows.data(), 4, hidden_size);
  seqpool::buffer<std::int8_t, device_omp> output(space, static_cast<std::size_t>(pooler.output_capacity()));
  const auto result_of = [&](const seqpool::step_plan& plan) {
    return *test::slice(plan, test::to_host(space, output))[0];
  };

  seqpool::step_plan plan = pooler.plan({{test::whole("a", task::embed, 2, {.use_activation = false})}}, state);
  pooler.reserve(plan, state);
  graph::begin(space);
  pooler.capture(view, plan, state, output.span(), home);
  const graph replays(space);
  replays.launch();
  home.mark_launched();
  test::check_equal(result_of(plan), 1, 12, {32, 64, -64, 127, -128, 12, -44, 0, 16, -16, 0, 127});

  // A step of 1/32: levels (x + 4) · 32, less 128, are 32·x.
  const std::vector<float> wider_lower(hidden_size, -4.0f), wider_upper(hidden_size, 3.96875f);
  pooler.set_ranges({wider_lower, wider_upper});
  plan = pooler.plan({{test::whole("b", task::embed, 2, {.use_activation = false})}}, state);
  pooler.reserve(plan, state);
  pooler.restage(plan, state, home);
  replays.launch();
  home.mark_launched();
  test::check_equal(result_of(plan), 1, 12, {16, 32, -32, 96, -96, 6, -22, 0, 8, -8, 0, 127});
}
