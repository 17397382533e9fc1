// Every candidate launch policy of the device kernels (detail/device/policy.hpp),
// run through the stand-in against host_space: whichever a sweep on the GPU
// chooses pools as the default does, across its own packed, tile and slab
// boundaries; the one that reads rows in bulk, over its rings' edges, bit for
// bit as the default (cases/bulk_rows.hpp, which the CUDA twins run too).
// (one_wave_capture_policy and whole_image_capture_policy change captured steps
// alone, branched_entries_policy the streams of a dispatcher's step alone:
// tests/test_capture.cpp runs them.)
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "cases/bulk_rows.hpp"
#include "support/prompts.hpp"
#include "support/step.hpp"

namespace {

using seqpool::task;
using seqpool::task_entry;
namespace method = seqpool::method;
namespace head = seqpool::head;
namespace device = seqpool::detail::device;

// Two slabs of 256 columns a split row; a request of more than 109 rows is split.
constexpr std::int64_t hidden_size = 300;
constexpr std::int64_t labels = 3;
constexpr std::int64_t step_tag = 7;

/// A pooler for every task, two with a linear layer: each kernel of the family.
template <class Space>
struct every_kernel {
  using table = seqpool::dispatch_table<
      task_entry<task::embed, seqpool::pooler<method::mean, head::embed, Space>>,
      task_entry<task::classify, seqpool::pooler<method::max, head::classify, Space>>,
      task_entry<task::token_embed, seqpool::pooler<method::step, head::embed, Space>>,
      task_entry<task::token_classify, seqpool::pooler<method::all, head::classify, Space>>>;

  Space space;
  seqpool::state_store<Space> state{space};
  seqpool::buffer<float, Space> classifier;
  seqpool::dispatcher<table> dispatcher;

  explicit every_kernel(const std::vector<float>& weights)
      : classifier(test::to_space(space, weights)),
        dispatcher(space, seqpool::pooler<method::mean, head::embed, Space>(space, hidden_size),
                   seqpool::pooler<method::max, head::classify, Space>(space, hidden_size, method::max{},
                                                                      head::classify(layer())),
                   seqpool::pooler<method::step, head::embed, Space>(space, hidden_size),
                   seqpool::pooler<method::all, head::classify, Space>(space, hidden_size, method::all{},
                                                                      head::classify(layer()))) {}

  seqpool::linear_layer layer() const { return {classifier.data(), nullptr, labels, hidden_size}; }
};

/// Two steps: short and long requests of every task, one of 2500 rows in two chunks.
std::vector<seqpool::batch> steps(const std::vector<std::int64_t>& ids) {
  const seqpool::pooling_params tagged{.step_tag_id = step_tag};
  std::vector<seqpool::batch> planned{
      {{test::whole("a", task::embed, 1), test::whole("b", task::classify, 700),
        test::part("c", task::embed, 2500, 0, 1300), test::whole("d", task::token_embed, 90, tagged),
        test::whole("e", task::token_classify, 40)}},
      {{test::part("c", task::embed, 2500, 1300, 1200), test::whole("f", task::classify, 2100),
        test::whole("g", task::embed, 109), test::whole("h", task::token_embed, 1500, tagged)}}};
  for (seqpool::batch& step : planned)
    for (seqpool::request& r : step.requests) r.prompt_token_ids = std::span(ids).first(r.prompt_len);
  return planned;
}

}  // namespace

TEST_CASE_TEMPLATE("every candidate launch policy pools as the host does", Policy, device::launch_policy,
                   device::deep_loads_policy, device::pipelined_loads_policy, device::small_blocks_policy,
                   device::long_tiles_policy, device::wave_tiles_policy, device::bulk_rows_policy) {
  using Space = seqpool::device_space<seqpool::with_policy<seqpool::omp_backend, Policy>>;
  static_assert(std::is_same_v<typename seqpool::detail::algorithms_of<Space>::policy, Policy>);
  const std::vector<float> weights = test::drawn_values(labels * hidden_size, 3, 0.1f);
  every_kernel<Space> candidate(weights);
  every_kernel<seqpool::host_space> host(weights);
  std::vector<std::int64_t> ids;
  for (std::int64_t t = 0; t < 2500; ++t) ids.push_back(t % 8 == 7 ? step_tag : t % 5);
  std::uint32_t seed = 11;
  for (const seqpool::batch& step : steps(ids)) {
    std::int64_t rows = 0;
    for (const seqpool::request& r : step.requests) rows += r.num_scheduled;
    const std::vector<float> hidden = test::drawn_values(rows * hidden_size, seed++);
    const test::results expected = test::run_step(host.space, host.dispatcher, host.state, step, hidden);
    const test::results actual = test::run_step(candidate.space, candidate.dispatcher, candidate.state, step, hidden);
    REQUIRE(actual.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CAPTURE(i);
      REQUIRE(actual[i].has_value() == expected[i].has_value());
      if (expected[i]) test::check_close(*actual[i], *expected[i], 1e-5);
    }
  }
}

namespace {

/// A pooler of rows 301 columns wide, 304 apart (two slabs, the second's last
/// lane past the row; partial rows 304 floats apart in the workspace).
template <class Method, class Space>
struct odd_rows {
  static constexpr std::int64_t width = 301;
  static constexpr std::int64_t stride = 304;
  Space space;
  seqpool::state_store<Space> state{space};
  seqpool::pooler<Method, head::embed, Space> pooler{space, width};
};

}  // namespace

TEST_CASE_TEMPLATE("every candidate launch policy merges many partials of a long request as the host pools it", Policy,
                   device::launch_policy, device::deep_loads_policy, device::pipelined_loads_policy,
                   device::small_blocks_policy, device::long_tiles_policy, device::wave_tiles_policy,
                   device::bulk_rows_policy) {
  using Space = seqpool::device_space<seqpool::with_policy<seqpool::omp_backend, Policy>>;
  using default_space = seqpool::device_space<seqpool::omp_backend>;
  // A candidate that cuts tiles and blocks as the default does merges in the
  // same order: its MEAN (without the normalisation, whose sum a lane's width
  // orders) is the default's bit for bit.
  constexpr bool same_order = Policy::tile_rows == device::launch_policy::tile_rows &&
                              Policy::warps == device::launch_policy::warps && !Policy::split_tiles_fill_a_wave;
  // 70,000 rows are 69 tiles of 1024 (35 of 2048; 127 of 552 to fill a wave
  // beside the short request's 5): each warp of the merging block takes nine
  // (five of 2048; eighteen with four warps; sixteen of 552), more than a group
  // of partials in flight, and a chunk of 30,001 rows leaves the rest to a state.
  const seqpool::pooling_params raw{.use_activation = false};
  const std::vector<seqpool::batch> steps{
      {{test::whole("long", task::embed, 70000, raw), test::whole("short", task::embed, 2500, raw)}},
      {{test::part("chunked", task::embed, 70000, 0, 30001, raw)}},
      {{test::part("chunked", task::embed, 70000, 30001, 39999, raw)}}};
  const auto check = [&]<class Method>(Method) {
    odd_rows<Method, Space> candidate;
    odd_rows<Method, default_space> chosen;
    odd_rows<Method, seqpool::host_space> host;
    std::uint32_t seed = 5;
    for (const seqpool::batch& step : steps) {
      std::int64_t rows = 0;
      for (const seqpool::request& r : step.requests) rows += r.num_scheduled;
      std::vector<float> hidden = test::drawn_values(rows * host.stride, seed++);
      const test::results expected = test::run_step(host.space, host.pooler, host.state, step, hidden, host.stride);
      const test::results actual =
          test::run_step(candidate.space, candidate.pooler, candidate.state, step, hidden, candidate.stride);
      const test::results by_default =
          test::run_step(chosen.space, chosen.pooler, chosen.state, step, hidden, chosen.stride);
      test::check_candidate(actual, expected, by_default, 1e-5, same_order);
    }
  };
  check(method::mean{});
  check(method::max{});
}

namespace {

/// The split blocks (works of a slab) of each share of a plan of `step` made by
/// `Pooler` in `Space` over rows of `width` columns.
template <class Space, class Pooler>
std::vector<std::size_t> split_blocks(const seqpool::batch& step, std::optional<seqpool::capacity> limits = {},
                                      std::int64_t width = 4096) {
  Space space;
  const seqpool::state_store<Space> state(space);
  Pooler pooler(space, width);
  if (limits) pooler.reserve_capacity(*limits);
  const seqpool::step_plan plan = pooler.plan(step, state);
  std::vector<std::size_t> blocks;
  for (const seqpool::detail::share& planned : seqpool::detail::plan_access::program(plan).shares) {
    std::size_t split = 0;
    for (const seqpool::detail::work_record& work : planned.records.works) split += work.slab >= 0 ? 1 : 0;
    blocks.push_back(split);
  }
  return blocks;
}

}  // namespace

TEST_CASE("the wave candidate cuts a step's few split requests into the most blocks a wave holds, and no others") {
  using wave = seqpool::device_space<seqpool::with_policy<seqpool::omp_backend, device::wave_tiles_policy>>;
  using chosen = seqpool::device_space<seqpool::omp_backend>;
  using mean_of = seqpool::pooler<method::mean, head::embed, wave>;
  using mean_by_default = seqpool::pooler<method::mean, head::embed, chosen>;
  // Eight prompts of 512 rows of 4096 columns (16 slabs), as LLM embedders'
  // batches of a few documents: a tile each, 128 blocks, half of the H200's
  // 264; tiles of 256 rows make 256.
  seqpool::batch few;
  for (int i = 0; i < 8; ++i) few.requests.push_back(test::whole(test::id("doc", i), task::embed, 512));
  CHECK(split_blocks<chosen, mean_by_default>(few) == std::vector<std::size_t>{128});
  CHECK(split_blocks<wave, mean_of>(few) == std::vector<std::size_t>{256});
  // Beside 16 short prompts (2 packed blocks) as well.
  seqpool::batch mixed = few;
  for (int i = 0; i < 16; ++i) mixed.requests.push_back(test::whole(test::id("short", i), task::embed, 4));
  CHECK(split_blocks<wave, mean_of>(mixed) == std::vector<std::size_t>{256});
  // Short prompts between long ones each end a block: 16 prompts of 1000
  // rows of 256 columns (a slab) each followed by one of 4 rows fill 16
  // packed blocks, so the split ones get 248 of the wave: tiles of 67 rows,
  // 15 a prompt (tiles of 63 would make 16, and a wave and 8 blocks beside them).
  seqpool::batch alternating;
  for (int i = 0; i < 16; ++i) {
    alternating.requests.push_back(test::whole(test::id("long", i), task::embed, 1000));
    alternating.requests.push_back(test::whole(test::id("short", i), task::embed, 4));
  }
  CHECK(split_blocks<wave, mean_of>(alternating, {}, 256) == std::vector<std::size_t>{16 * 15});
  // Tiles never shorter than 64 rows: three prompts of 100 rows make two tiles each.
  seqpool::batch short_split;
  for (int i = 0; i < 3; ++i) short_split.requests.push_back(test::whole(test::id("s", i), task::embed, 100));
  CHECK(split_blocks<wave, mean_of>(short_split) == std::vector<std::size_t>{3 * 2 * 16});
  // A step whose split blocks fill a wave already, and a pooler with a
  // capacity (whose bounds count tiles of tile_rows), keep tile_rows.
  seqpool::batch many;
  for (int i = 0; i < 20; ++i) many.requests.push_back(test::whole(test::id("doc", i), task::embed, 512));
  CHECK(split_blocks<wave, mean_of>(many) == split_blocks<chosen, mean_by_default>(many));
  const seqpool::capacity limits{.requests = 8, .rows = 8 * 512, .result_rows = 8, .columns = 0};
  CHECK(split_blocks<wave, mean_of>(few, limits) == std::vector<std::size_t>{128});
}

TEST_CASE(
    "the wave candidate's tiles are the shortest whose blocks fit beside the packed ones, as a plain scan finds") {
  using wave = device::algorithms<device::wave_tiles_policy>;
  using policy = device::wave_tiles_policy;
  std::mt19937 engine(21);
  int shortened = 0;
  for (int draw = 0; draw < 300; ++draw) {
    CAPTURE(draw);
    const std::int64_t width = std::uniform_int_distribution<std::int64_t>(1, 5000)(engine);
    std::vector<seqpool::row_window> windows;
    const int count = std::uniform_int_distribution<int>(1, 60)(engine);
    for (int w = 0; w < count; ++w) {
      const bool long_one = engine() % 4 == 0;
      const std::int64_t rows = std::uniform_int_distribution<std::int64_t>(0, long_one ? 9000 : 40)(engine);
      windows.push_back({static_cast<std::int64_t>(w) * 10000, rows});
    }
    // Packed blocks as cut() fills them: a run of consecutive short requests
    // a block of `warps` at a time, a split one between ending a run.
    std::int64_t packed = 0;
    std::int64_t packed_blocks = 0;
    std::int64_t run = 0;
    for (const auto window : windows) {
      const bool whole = wave::pooled_whole(window, width, width);
      packed += whole ? 1 : 0;
      if (whole && run++ % policy::warps == 0) ++packed_blocks;
      if (!whole) run = 0;
    }
    const std::int64_t slabs = (width + policy::slab_columns - 1) / policy::slab_columns;
    const std::int64_t room = policy::pooling_wave_blocks - packed_blocks;
    const auto blocks = [&](std::int64_t tile_rows) {
      std::int64_t tiles = 0;
      for (const auto window : windows)
        if (!wave::pooled_whole(window, width, width))
          tiles += std::max<std::int64_t>(1, (window.count + tile_rows - 1) / tile_rows);
      return tiles * slabs;
    };
    std::int64_t expected = policy::tile_rows;
    if (packed < count && room > 0 && blocks(policy::tile_rows) < room)
      for (std::int64_t rows = policy::shortest_tile_rows; rows < policy::tile_rows; ++rows)
        if (blocks(rows) <= room) {
          expected = rows;
          break;
        }
    shortened += expected < policy::tile_rows ? 1 : 0;
    CHECK(wave::tile_rows_for(windows, width, width, false) == expected);
    CHECK(wave::tile_rows_for(windows, width, width, true) == policy::tile_rows);
    CHECK(device::algorithms<>::tile_rows_for(windows, width, width, false) == device::launch_policy::tile_rows);
  }
  // The draws take both ways: tile_rows kept, and a search.
  CHECK(shortened > 30);
  CHECK(shortened < 270);
}

TYPE_TO_STRING(seqpool::omp_backend);
TEST_CASE_TEMPLATE_INVOKE(bulk_rows_candidate, seqpool::omp_backend);

TEST_CASE("a ring's slots hand each row over in order, and the stand-in refuses a wait that would hang the GPU") {
  using ring = device::bulk_ring<3, 128>;
  const auto slots = std::make_unique<ring>();
  // Ten rows of 128 bytes, 160 apart, through three slots: rows 3 to 9 reuse them.
  std::vector<std::byte> rows(10 * 160);
  for (std::size_t b = 0; b < rows.size(); ++b) rows[b] = static_cast<std::byte>(b * 7 % 251);
  std::vector<std::int64_t> taken;
  device::bulk_rows(device::host_warp{0}, *slots, rows.data(), 160, 128, 0, 10,
                    [&](int lane, std::int64_t r, const std::byte* slot) {
                      CHECK(std::memcmp(slot, rows.data() + r * 160, 128) == 0);
                      if (lane == 31) taken.push_back(r);
                    });
  CHECK(taken == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});

  device::slot_barrier barrier;
  device::make_barrier(barrier);
  CHECK_THROWS_WITH_AS(device::wait_for_slot(barrier, 0), doctest::Contains("no copy has completed"), std::logic_error);
  device::copy_into_slot(slots->slot[0], rows.data(), 128, barrier);
  device::wait_for_slot(barrier, 0);  // the first turn's copy has landed
  CHECK_THROWS_WITH_AS(device::wait_for_slot(barrier, 1), doctest::Contains("no copy has completed"), std::logic_error);
  // A second copy into the slot before its first turn was waited for: that
  // turn's phase is passed, and the slot is being written again.
  device::copy_into_slot(slots->slot[0], rows.data() + 160, 128, barrier);
  CHECK_THROWS_WITH_AS(device::wait_for_slot(barrier, 0), doctest::Contains("after 2 copies"), std::logic_error);
  CHECK_THROWS_WITH_AS(device::copy_into_slot(slots->slot[1], rows.data(), 120, barrier),
                       doctest::Contains("16-byte pieces"), std::logic_error);
}
