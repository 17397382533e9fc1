// The candidate whose split blocks read rows through rings that bulk copies
// fill (bulk_rows_policy) against the default and host_space. Defines a
// templated case; a translation unit applies it to its device backends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../support/prompts.hpp"
#include "../support/step.hpp"

namespace bulk_rows_cases {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;
namespace device = seqpool::detail::device;

template <class Method, class T>
using bulk_pooling = device::pool_rows<Method, head::normalize, T, float, device::bulk_rows_policy>;
using cls_mean_max = method::concat<method::cls, method::mean, method::max>;

// What static shared memory leaves a warp's ring beside the merge of the runs:
// four slots of a 1 KB fp32 slab, nine of a 512-byte bf16 one; for a concat of
// three modes, whose merge takes three times the room, two and five.
static_assert(bulk_pooling<method::mean, float>::ring_slots == 4);
static_assert(bulk_pooling<method::mean, seqpool::bfloat16>::ring_slots == 9);
static_assert(bulk_pooling<cls_mean_max, float>::ring_slots == 2);
static_assert(bulk_pooling<cls_mean_max, seqpool::bfloat16>::ring_slots == 5);
static_assert(sizeof(bulk_pooling<method::mean, seqpool::bfloat16>::shared_storage) <= 48 * 1024 - 512);
static_assert(!device::pool_rows<method::mean, head::normalize, float, float, device::launch_policy>::reads_in_bulk);

/// A pooler of one method over rows of `width` columns, with its space and state.
template <class Method, class Space>
struct pooler_of {
  Space space;
  seqpool::state_store<Space> state{space};
  seqpool::pooler<Method, head::embed, Space> pooler;
  explicit pooler_of(std::int64_t width) : pooler(space, width) {}
};

}  // namespace bulk_rows_cases

TEST_CASE_TEMPLATE_DEFINE(
    "the bulk-copy candidate reads split rows through its rings as the default reads them "
    "through registers",
    Backend, bulk_rows_candidate) {
  using namespace bulk_rows_cases;
  using bulk_space = seqpool::device_space<seqpool::with_policy<Backend, device::bulk_rows_policy>>;
  using default_space = seqpool::device_space<Backend>;
  // Requests of more than 32768 values are split. Each warp's run of a tile
  // goes through a ring that turns many times (2500 rows: runs of 128), a few
  // times (140 rows of 260 fp32 columns: runs of 18 over four slots; 40 of
  // 4096: runs of 5; a concat's 33 rows: runs of 5 over two), or not at all
  // (9 rows of 4096 columns: runs of 2 and 1, then warps without rows; 33 bf16
  // rows of 1024: runs of 5 over nine slots), and a chunked request continues
  // from its state; shorter requests are packed, beside them. A last slab of 4
  // fp32 columns leaves lane 0 one of its two vectors, one of 8 bf16 columns a
  // vector; rows 301 columns wide, 304 apart, copy the first slab in bulk and
  // read the second (45 columns, not whole 16-byte pieces) through registers.
  // The candidate adds the same rows in the same order as the default: bit for bit.
  const seqpool::pooling_params raw{.use_activation = false};
  const auto check = [&]<class Method, class T>(Method, T, std::int64_t width, std::int64_t stride,
                                                const std::vector<std::int64_t>& prompt_lens) {
    CAPTURE(width);
    CAPTURE(sizeof(T));
    pooler_of<Method, bulk_space> candidate(width);
    pooler_of<Method, default_space> chosen(width);
    pooler_of<Method, seqpool::host_space> host(width);
    std::vector<seqpool::batch> steps(1);
    for (std::size_t i = 0; i < prompt_lens.size(); ++i)
      steps[0].requests.push_back(test::whole("r" + std::to_string(i), task::embed, prompt_lens[i], raw));
    steps.push_back({{test::part("chunked", task::embed, 3000, 0, 1700, raw)}});
    steps.push_back({{test::part("chunked", task::embed, 3000, 1700, 1300, raw)}});
    std::uint32_t seed = 17;
    for (const seqpool::batch& step : steps) {
      std::int64_t rows = 0;
      for (const seqpool::request& r : step.requests) rows += r.num_scheduled;
      const std::vector<T> hidden = test::convert<T>(test::drawn_values(rows * stride, seed++));
      const test::results expected = test::run_step(host.space, host.pooler, host.state, step, hidden, stride);
      const test::results actual =
          test::run_step(candidate.space, candidate.pooler, candidate.state, step, hidden, stride);
      const test::results by_default = test::run_step(chosen.space, chosen.pooler, chosen.state, step, hidden, stride);
      test::check_candidate(actual, expected, by_default, 1e-5, true);
    }
  };
  check(method::mean{}, float{}, 260, 260, {2500, 33, 140});
  check(method::max{}, seqpool::bfloat16{}, 264, 264, {2500, 33, 140});
  check(method::mean{}, float{}, 4096, 4096, {9, 40});
  check(method::mean{}, seqpool::bfloat16{}, 1024, 1024, {2500, 33});
  check(method::max{}, float{}, 301, 304, {2500, 140});
  check(cls_mean_max{}, float{}, 256, 256, {2500, 33, 1});
  check(cls_mean_max{}, seqpool::bfloat16{}, 512, 512, {2500, 7});
}
