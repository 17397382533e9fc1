// docs/TESTS.md case 32, sparse results against a plain loop, and their
// refusals, on the host algorithms and on the device kernels run by the OpenMP
// stand-in; the planner's sort of a list's rows by id against the standard
// library's; and the runs of a list's slots the device's threads take.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include <seqpool/detail/device/list_sparse.hpp>
#include <seqpool/detail/sort_by_id.hpp>

#include "cases/sparse.hpp"
#include "support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(case_32_sparse_weights, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(sparse_matches_reference, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(sparse_of_listed_rows, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(sparse_of_many_ids, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(sparse_refusals, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(sparse_capture, std::tuple<seqpool::device_space<seqpool::omp_backend>>);
TEST_CASE_TEMPLATE_APPLY(case_33_row_lists, test::cpu_spaces);
TEST_CASE_TEMPLATE_APPLY(row_lists_match_reference, test::cpu_spaces);

TEST_CASE("a list's rows sorted by id keep each id's rows in order, as a stable sort does") {
  struct entry {
    std::int64_t id;
    std::int32_t row;
    bool operator==(const entry&) const = default;
  };
  std::mt19937_64 random(32);
  std::vector<entry> scratch;
  // Sizes about the insertion sort's bound and far past it; ids of one digit,
  // of a vocabulary, and across every digit up to 2^31 − 1.
  for (const std::size_t size : {0, 1, 2, 31, 32, 33, 100, 5000}) {
    for (const std::int64_t most : {std::int64_t{0}, std::int64_t{7}, std::int64_t{250001}, std::int64_t{2147483647}}) {
      CAPTURE(size);
      CAPTURE(most);
      std::uniform_int_distribution<std::int64_t> draw(0, most);
      std::vector<entry> entries;
      for (std::size_t k = 0; k < size; ++k) entries.push_back({draw(random), static_cast<std::int32_t>(k)});
      if (size > 2) entries[size / 2].id = most;  // the highest digit present
      std::vector<entry> expected = entries;
      std::stable_sort(expected.begin(), expected.end(), [](const entry& a, const entry& b) { return a.id < b.id; });
      seqpool::detail::sort_by_id(std::span(entries), scratch);
      CHECK(entries == expected);
    }
  }
}

TEST_CASE("a list's runs of slots, a thread each, cover it once and in order, up to 2^31 - 1 ids") {
  using seqpool::detail::device::slot_run;
  for (const int threads : {32, 128, 256, 1024}) {
    for (const std::int32_t ids : {0, 1, 31, 256, 257, 100'000, 2'147'483'391, 2'147'483'646, 2'147'483'647}) {
      CAPTURE(threads);
      CAPTURE(ids);
      const std::int64_t most = (std::int64_t{ids} + threads - 1) / threads;
      std::int64_t next = 0;
      for (int thread = 0; thread < threads; ++thread) {
        const slot_run run = slot_run::of(ids, threads, thread);
        REQUIRE(run.begin == next);
        REQUIRE(run.end >= run.begin);
        REQUIRE(run.end - run.begin <= most);
        next = run.end;
      }
      CHECK(next == ids);
    }
  }
}

TEST_CASE_TEMPLATE(
    "a row through a layer of one output weighs the same bits read from the hidden states as "
    "stashed by an earlier chunk",
    T, float, seqpool::bfloat16) {
  // Drawn floats, so that summing the products in another order would change
  // low bits; 1000 columns, so that the lanes' tail is summed too.
  namespace method = seqpool::method;
  namespace head = seqpool::head;
  using seqpool::host_space;
  constexpr std::int64_t columns = 1000;
  constexpr std::int64_t prompt_len = 9;
  std::mt19937 random(5);
  std::normal_distribution<float> draw;
  std::vector<float> weight(columns);
  for (float& w : weight) w = draw(random);
  const float bias = 0.3f;
  std::vector<T> rows(prompt_len * columns);
  for (T& value : rows) value = T(draw(random));
  host_space space;
  seqpool::pooler<method::all, head::classify, host_space> pooler(
      space, columns, {},
      head::classify(seqpool::dense_stack{{{weight.data(), &bias, 1, columns}, seqpool::activation_function::identity}},
                     head::problem_type::regression));
  seqpool::state_store<host_space> state(space);
  const auto run = [&](const seqpool::request& r) {
    const seqpool::batch step{{r}};
    const seqpool::step_plan plan = pooler.plan(step, state);
    pooler.reserve(plan, state);
    std::vector<float> out(static_cast<std::size_t>(plan.output_size));
    const seqpool::audit_scope scope(space.audit());
    pooler.forward(seqpool::make_hidden_view(rows.data() + r.num_computed * columns, r.num_scheduled, columns), plan,
                   state, cuda::std::span<float>(out.data(), out.size()));
    test::check_sync_contract(scope.counts());
    std::vector<std::uint32_t> bits;
    if (plan.results[0])
      for (std::int64_t k = 0; k < plan.results[0]->rows; ++k)
        bits.push_back(std::bit_cast<std::uint32_t>(out[static_cast<std::size_t>(plan.results[0]->offset + k)]));
    return bits;
  };
  const std::vector<std::uint32_t> whole = run(test::whole("whole", seqpool::task::token_classify, prompt_len));
  CHECK(run(test::part("chunked", seqpool::task::token_classify, prompt_len, 0, 5)).empty());
  const std::vector<std::uint32_t> chunked =
      run(test::part("chunked", seqpool::task::token_classify, prompt_len, 5, 4));
  REQUIRE(whole.size() == static_cast<std::size_t>(prompt_len));
  CHECK(chunked == whole);
}
