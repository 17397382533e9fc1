// docs/TESTS.md case 32, sparse results against a plain loop, and their
// refusals, on the host algorithms and on the device kernels run by the OpenMP
// stand-in; and the planner's sort of a list's rows by id against the standard
// library's.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

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
