// docs/TESTS.md cases 32 and 33 and the refusals of sparse results: a token
// method's rows weighed by the head's one output and listed by token id
// (BGE-M3's lexical weights), a sequence method's row listed by column
// (SPLADE's), whole, in chunks and captured, against a plain reference loop.
// Defines templated cases; a translation unit applies them to its spaces.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>
#include <seqpool/sparse.hpp>

#include "../support/graph.hpp"
#include "../support/prompts.hpp"
#include "../support/reference.hpp"
#include "../support/step.hpp"

namespace sparse_cases {

using seqpool::sparse_entry;
namespace method = seqpool::method;
namespace head = seqpool::head;

/// A weight layer [1, columns] with its bias, in the space's memory, and the
/// head that applies it with relu and no activation after (regression). Or,
/// `stacked`, the same weight through a stack of two layers: [v; −v; v] with
/// the bias on the first output, then [1, 0, 0] with relu, which weighs a row
/// as the one layer does.
template <class Space>
struct weigher {
  seqpool::buffer<float, Space> weight;
  seqpool::buffer<float, Space> bias;
  seqpool::buffer<float, Space> pick;
  std::int64_t columns;
  bool stacked;

  weigher(Space& space, const std::vector<float>& row, float offset, bool stack = false)
      : weight(test::to_space(space, stack ? stacked_rows(row) : row)),
        bias(test::to_space(space, stack ? std::vector<float>{offset, 0, 0} : std::vector<float>{offset})),
        pick(test::to_space(space, std::vector<float>{1, 0, 0})),
        columns(static_cast<std::int64_t>(row.size())),
        stacked(stack) {}

  head::classify head() const {
    using seqpool::activation_function;
    if (!stacked)
      return head::classify(seqpool::dense_stack{{{weight.data(), bias.data(), 1, columns}, activation_function::relu}},
                            head::problem_type::regression);
    return head::classify(
        seqpool::dense_stack{{{weight.data(), bias.data(), 3, columns}, activation_function::identity},
                             {{pick.data(), nullptr, 1, 3}, activation_function::relu}},
        head::problem_type::regression);
  }

 private:
  static std::vector<float> stacked_rows(const std::vector<float>& row) {
    std::vector<float> rows(row);
    for (const float value : row) rows.push_back(-value);
    rows.insert(rows.end(), row.begin(), row.end());
    return rows;
  }
};

template <class Space>
using sparse_pooler = seqpool::pooler<method::all, head::classify, Space, sparse_entry>;

/// A request's list: its entries, the count first, as the output holds them.
using listing = std::vector<sparse_entry>;

using prompt = test::chunked_prompt;
using test::drawn_chunks;
using test::grid_values;

/// A captured step's graph and the memory it reads and writes.
template <class Space, class Pooler>
struct captured_step {
  seqpool::buffer<float, Space> hidden;
  seqpool::buffer<sparse_entry, Space> output;
  seqpool::hidden_view<float> rows_view;  ///< the capacity's rows, in `hidden`
  test::graph_replay<Space, Pooler> graph;

  captured_step(Space& space, Pooler& pooler, const seqpool::capacity& limits)
      : hidden(space, static_cast<std::size_t>(limits.rows * pooler.hidden_size())),
        output(space, (pooler.reserve_capacity(limits), static_cast<std::size_t>(pooler.output_capacity()))),
        rows_view(seqpool::make_hidden_view(hidden.data(), limits.rows, pooler.hidden_size())),
        graph(pooler) {}

  /// Captures the first step, restages the others, and replays; the output, copied back.
  std::vector<sparse_entry> replay(Space& space, seqpool::state_store<Space>& state, const seqpool::step_plan& plan,
                                   const std::vector<float>& rows) {
    space.copy_in(std::span<const float>(rows), hidden.span().first(rows.size()));
    graph.run(space, rows_view, plan, state, output.span());
    return test::to_host(space, output);
  }
};

/// Runs `prompts` through `pooler` step by step, each step taking the next
/// chunk of every prompt that has begun and not finished, and returns each
/// prompt's list from the step it finished in. Given a capacity, the pooler
/// captures the first step and replays it for the others. `before` runs
/// before each step is planned, told its number.
template <class Space, class Pooler>
std::vector<listing> run(Space& space, Pooler& pooler, const std::vector<prompt>& prompts,
                         std::optional<seqpool::capacity> captured = std::nullopt,
                         const std::function<void(std::size_t)>& before = {}) {
  const std::int64_t columns = pooler.hidden_size();
  seqpool::state_store<Space> state(space);
  seqpool::step_plan plan;
  constexpr bool capturable = Space::family == seqpool::algorithm_family::device;
  std::optional<std::conditional_t<capturable, captured_step<Space, Pooler>, std::monostate>> replayed;
  if constexpr (capturable)
    if (captured) replayed.emplace(space, pooler, *captured);
  REQUIRE(replayed.has_value() == captured.has_value());
  std::vector<listing> lists(prompts.size());
  std::vector<std::int64_t> done(prompts.size(), 0);
  for (std::size_t turn = 0;; ++turn) {
    const std::optional<test::step_of_prompts> next = test::next_step(prompts, turn, Pooler::task, columns, done);
    if (!next) return lists;
    const auto& [step, rows, members] = *next;
    if (before) before(turn);
    std::vector<sparse_entry> output;
    if constexpr (capturable) {
      if (replayed) {
        pooler.plan(step, state, plan);
        output = replayed->replay(space, state, plan, rows);
      }
    }
    if (!replayed) output = test::forward_step(space, pooler, state, step, rows, columns, plan);
    for (std::size_t k = 0; k < members.size(); ++k) {
      const std::size_t p = members[k];
      const auto& result = plan.results[k];
      REQUIRE(result.has_value() == (done[p] == static_cast<std::int64_t>(prompts[p].token_ids.size())));
      if (!result) continue;
      CHECK(result->rows == 1);
      lists[p].assign(output.begin() + result->offset, output.begin() + result->offset + result->cols);
    }
  }
}

/// A listing as text, for a failed check's message.
inline std::string shown(const listing& list) {
  std::string text;
  for (const sparse_entry& e : list)
    text.append("{").append(std::to_string(e.id)).append(", ").append(std::to_string(e.weight)).append("} ");
  return text;
}

/// The head that leaves a pooled row as it is: a sequence method's row listed by column.
inline head::classify row_as_it_is() { return head::classify(seqpool::dense_stack{}, head::problem_type::regression); }

/// A user's token method that lists its positions (it does not say it keeps
/// every row): every third row of the prompt, from its first.
struct every_third {
  static constexpr seqpool::method_kind kind = seqpool::method_kind::token;
  static constexpr std::string_view name = "every_third";
  static constexpr bool reads_token_ids = false;

  void check(std::size_t, const seqpool::request&, std::int64_t) const {}
  void select(const seqpool::request&, std::int64_t begin, std::int64_t end, std::vector<std::int64_t>& positions) const {
    for (std::int64_t position = (begin + 2) / 3 * 3; position < end; position += 3) positions.push_back(position);
  }
  std::int64_t count(const seqpool::request&, std::int64_t begin, std::int64_t end) const {
    return (end + 2) / 3 - (begin + 2) / 3;
  }
  std::span<const std::int64_t> columns(const seqpool::request&) const { return {}; }
};

/// A user's token method whose choice depends on where a range starts: it
/// skips position 2 of a range from 0 and chooses every position of any other
/// (or, `listed_more`, the reverse). Its count() agrees with its select() over
/// every range, and a prompt's chunks of two rows add up to what its first
/// chunk counts, but listed from 0 at once its earlier chunks give a row fewer
/// (more) than they chose.
struct range_bound {
  static constexpr seqpool::method_kind kind = seqpool::method_kind::token;
  static constexpr std::string_view name = "range_bound";
  static constexpr bool reads_token_ids = false;
  bool listed_more = false;

  void check(std::size_t, const seqpool::request&, std::int64_t) const {}
  void select(const seqpool::request&, std::int64_t begin, std::int64_t end,
              std::vector<std::int64_t>& positions) const {
    for (std::int64_t position = begin; position < end; ++position)
      if (!skips(begin) || position != 2) positions.push_back(position);
  }
  std::int64_t count(const seqpool::request&, std::int64_t begin, std::int64_t end) const {
    return end - begin - (skips(begin) && begin <= 2 && end > 2 ? 1 : 0);
  }
  bool skips(std::int64_t begin) const { return (begin == 0) != listed_more; }
  std::span<const std::int64_t> columns(const seqpool::request&) const { return {}; }
};

/// A user's token method whose choice depends on where a range starts, whose
/// counts all add up: every other position of a range, from its first where
/// the range starts at a multiple of 4, else from its second. A prompt's chunks
/// of two rows choose positions 0, 3 and 4, which its first chunk counts (1,
/// then 2 over [2, 6)); listed from 0 at once, its earlier chunks give 0 and 2:
/// as many rows, at other positions.
struct range_parity {
  static constexpr seqpool::method_kind kind = seqpool::method_kind::token;
  static constexpr std::string_view name = "range_parity";
  static constexpr bool reads_token_ids = false;

  void check(std::size_t, const seqpool::request&, std::int64_t) const {}
  void select(const seqpool::request&, std::int64_t begin, std::int64_t end,
              std::vector<std::int64_t>& positions) const {
    for (std::int64_t position = begin + (begin % 4 == 0 ? 0 : 1); position < end; position += 2)
      positions.push_back(position);
  }
  std::int64_t count(const seqpool::request&, std::int64_t begin, std::int64_t end) const {
    return begin % 4 == 0 ? (end - begin + 1) / 2 : (end - begin) / 2;
  }
  std::span<const std::int64_t> columns(const seqpool::request&) const { return {}; }
};

/// A prompt's list, as test::reference_list() states it.
inline listing expected_list(const prompt& p, const std::vector<float>& v, float b, float floor, bool relu = true,
                             std::int64_t stride = 1) {
  return test::reference_list(p.rows, p.token_ids, p.params, v, b, floor, relu, stride);
}

/// Case 32's two prompts of two columns; the layer is v = [1, −1], b = −0.5.
inline std::vector<prompt> case_32_prompts(std::vector<std::int64_t> a_chunks, std::vector<std::int64_t> b_chunks) {
  return {{"a",
           {3, 0, 2, 0, 0, 1, 4, 0.5f, 1, 0.25f, 5, 0},
           {0, 7, 5, 7, 9, 2},
           std::move(a_chunks),
           {.use_activation = true, .drop_token_ids = {0, 2}}},
          {"b", {1, 0, 2, 0, 0, 0}, {9, 9, 4}, std::move(b_chunks), {}}};
}

}  // namespace sparse_cases

TEST_CASE_TEMPLATE_DEFINE("case 32: sparse lexical weights: the largest weight of each id, listed above the floor",
                          Space, case_32_sparse_weights) {
  using namespace sparse_cases;
  Space space;
  const weigher<Space> layer(space, {1, -1}, -0.5f);
  sparse_pooler<Space> pooler(space, 2, {}, layer.head());
  // Weights relu(h0 − h1 − 0.5): a: 2.5 (id 0, dropped), 1.5 (7), 0 (5), 3 (7), 0.25 (9), 4.5 (id 2, dropped);
  // b: 0.5 (9), 1.5 (9), 0 (4). Ids 5 and 4 weigh 0, which is not above the floor.
  const listing a{{2, 0}, {7, 3.0f}, {9, 0.25f}, {-1, 0}};
  const listing b{{1, 0}, {9, 1.5f}, {-1, 0}};
  for (const auto& [a_chunks, b_chunks] : std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>>{
           {{6}, {3}}, {{2, 3, 1}, {3}}, {{1, 1, 1, 1, 1, 1}, {1, 2}}}) {
    CAPTURE(a_chunks.size());
    const std::vector<listing> lists = run(space, pooler, case_32_prompts(a_chunks, b_chunks));
    CHECK(lists[0] == a);
    CHECK(lists[1] == b);
  }
  pooler.set_weight_floor(0.5f);  // 0.25 and 0.5 are not above it
  std::vector<listing> lists = run(space, pooler, case_32_prompts({6}, {2, 1}));
  CHECK(lists[0] == listing{{1, 0}, {7, 3.0f}, {-1, 0}, {-1, 0}});
  CHECK(lists[1] == listing{{1, 0}, {9, 1.5f}, {-1, 0}});
  pooler.set_weight_floor(-1.0f);  // every id
  lists = run(space, pooler, case_32_prompts({4, 2}, {3}));
  CHECK(lists[0] == listing{{3, 0}, {5, 0}, {7, 3.0f}, {9, 0.25f}});
  CHECK(lists[1] == listing{{2, 0}, {4, 0}, {9, 1.5f}});
  // top_k (floor −1: every id is a candidate): the largest weights, of equal ones the smaller ids.
  std::vector<prompt> top = case_32_prompts({6}, {3});
  top[0].params.top_k = 2;                                                          // 7 (3) and 9 (0.25), not 5 (0)
  top[1].params.top_k = 5;                                                          // more than its two ids: both
  top.push_back({"c", {1.5f, 0, 1.5f, 0, 1.5f, 0}, {8, 3, 5}, {3}, {.top_k = 2}});  // each weighs 1: 3 and 5
  lists = run(space, pooler, top);
  CHECK(lists[0] == listing{{2, 0}, {7, 3.0f}, {9, 0.25f}});
  CHECK(lists[1] == listing{{2, 0}, {4, 0}, {9, 1.5f}});
  CHECK(lists[2] == listing{{2, 0}, {3, 1.0f}, {5, 1.0f}});
  pooler.set_weight_floor(0.0f);
  top[0].params.top_k = 1;
  CHECK(run(space, pooler, top)[0] == listing{{1, 0}, {7, 3.0f}});
  // STEP: the rows of the tagged id (7) only.
  seqpool::pooler<method::step, head::classify, Space, sparse_entry> steps(space, 2, {}, layer.head());
  std::vector<prompt> tagged = case_32_prompts({2, 4}, {3});
  tagged[0].params.step_tag_id = 7;
  tagged[1].params.step_tag_id = 8;
  lists = run(space, steps, tagged);
  CHECK(lists[0] == listing{{1, 0}, {7, 3.0f}});
  CHECK(lists[1] == listing{{0, 0}});
  // Every row dropped: an empty list, its count alone.
  std::vector<prompt> dropped = case_32_prompts({6}, {3});
  dropped[1].params.drop_token_ids = {4, 9};
  CHECK(run(space, pooler, dropped)[1] == listing{{0, 0}});
}

TEST_CASE_TEMPLATE_DEFINE(
    "sparse results match a plain loop, chunked as whole, every token filter, one layer or a stack", Space,
    sparse_matches_reference) {
  using namespace sparse_cases;
  Space space;
  std::mt19937 engine(32);
  for (int draw = 0; draw < 12; ++draw) {
    CAPTURE(draw);
    const std::int64_t columns = std::uniform_int_distribution<std::int64_t>(1, 70)(engine);
    std::vector<float> v(static_cast<std::size_t>(columns));
    for (float& weight : v) weight = static_cast<float>(std::uniform_int_distribution<int>(-3, 3)(engine));
    const float b = static_cast<float>(std::uniform_int_distribution<int>(-8, 8)(engine)) / 8.0f;
    const weigher<Space> layer(space, v, b, draw % 2 == 1);
    sparse_pooler<Space> pooler(space, columns, {}, layer.head());
    const float floor =
        draw % 3 == 0 ? 0.0f : static_cast<float>(std::uniform_int_distribution<int>(-4, 16)(engine)) / 8.0f;
    pooler.set_weight_floor(floor);
    const std::int64_t vocabulary = std::uniform_int_distribution<std::int64_t>(1, 40)(engine);
    std::uniform_int_distribution<std::int64_t> id(0, vocabulary - 1);
    std::vector<prompt> prompts;
    const int count = std::uniform_int_distribution<int>(1, 6)(engine);
    for (int p = 0; p < count; ++p) {
      const std::int64_t prompt_len = std::uniform_int_distribution<std::int64_t>(1, 600)(engine);
      prompt at{test::id("r", p), grid_values(prompt_len * columns, 1000 * draw + p), {}, {}, {}};
      for (std::int64_t t = 0; t < prompt_len; ++t) at.token_ids.push_back(id(engine));
      at.params.drop_first = engine() % 2 == 0;
      at.params.drop_last = engine() % 3 == 0;
      if (engine() % 2 == 0) at.params.drop_token_ids = {0, vocabulary / 2};
      if (at.params.drop_token_ids.size() == 2 && vocabulary / 2 == 0) at.params.drop_token_ids.pop_back();
      if (engine() % 2 == 0) at.params.top_k = std::uniform_int_distribution<std::int64_t>(1, vocabulary + 2)(engine);
      prompts.push_back(std::move(at));
    }
    std::vector<prompt> chunked = prompts;
    for (prompt& at : prompts) at.chunks = {static_cast<std::int64_t>(at.token_ids.size())};
    for (prompt& at : chunked) at.chunks = drawn_chunks(static_cast<std::int64_t>(at.token_ids.size()), engine);
    const std::vector<listing> whole = run(space, pooler, prompts);
    const std::vector<listing> in_chunks = run(space, pooler, chunked);
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      CAPTURE(p);
      const listing expected = expected_list(prompts[p], v, b, floor);
      CAPTURE(shown(expected));
      CAPTURE(shown(whole[p]));
      CHECK(whole[p] == expected);
      CHECK(in_chunks[p] == expected);
    }
  }
}

TEST_CASE_TEMPLATE_DEFINE("a method that lists its rows gives the list of every row it chooses, past many stretches",
                          Space, sparse_of_listed_rows) {
  // 10,000 rows: the planner lists a finishing prompt's chosen positions 4096
  // at a time, and the method's every third row lies in each stretch.
  using namespace sparse_cases;
  Space space;
  const std::vector<float> v{1, -2, 3};
  const weigher<Space> layer(space, v, 0.25f);
  seqpool::pooler<every_third, head::classify, Space, sparse_entry> pooler(space, 3, {}, layer.head());
  std::mt19937 engine(33);
  std::uniform_int_distribution<std::int64_t> id(0, 299);
  constexpr std::int64_t prompt_len = 10000;
  for (const std::vector<std::int64_t>& chunks : {std::vector<std::int64_t>{prompt_len}, {4100, 5000, 900}}) {
    CAPTURE(chunks.size());
    prompt long_prompt{"long", grid_values(prompt_len * 3, 33), {}, chunks, {.drop_token_ids = {0, 7}}};
    for (std::int64_t t = 0; t < prompt_len; ++t) long_prompt.token_ids.push_back(id(engine));
    const std::vector<listing> lists = run(space, pooler, {long_prompt});
    const listing expected = expected_list(long_prompt, v, 0.25f, 0.0f, true, 3);
    CHECK(lists[0].size() > 100);
    CHECK_MESSAGE(lists[0] == expected, shown(lists[0]), " against ", shown(expected));
  }
}

TEST_CASE_TEMPLATE_DEFINE(
    "a list of more ids than the listing weighs at once gives every one, whole, chunked and top_k", Space,
    sparse_of_many_ids) {
  // About 2,600 distinct ids over 6,000 rows: the device's listing block
  // weighs its slots 256 threads × 4 at a time, so it goes round three times,
  // the last time in part; the top 500 of them need its four rounds of select.
  using namespace sparse_cases;
  Space space;
  const std::vector<float> v{2, -1, 1};
  const weigher<Space> layer(space, v, -0.5f);
  sparse_pooler<Space> pooler(space, 3, {}, layer.head());
  std::mt19937 engine(34);
  std::uniform_int_distribution<std::int64_t> id(0, 2999);
  constexpr std::int64_t prompt_len = 6000;
  for (const std::optional<std::int64_t> top_k : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{500}}) {
    for (const std::vector<std::int64_t>& chunks : {std::vector<std::int64_t>{prompt_len}, {2500, 3500}}) {
      CAPTURE(top_k.has_value());
      CAPTURE(chunks.size());
      prompt many{"many", grid_values(prompt_len * 3, 34), {}, chunks, {.drop_first = true, .top_k = top_k}};
      for (std::int64_t t = 0; t < prompt_len; ++t) many.token_ids.push_back(id(engine));
      const std::vector<listing> lists = run(space, pooler, {many});
      const listing expected = expected_list(many, v, -0.5f, 0.0f);
      // The count: about 1,700 weights above 0, and with top_k the select's 500.
      CHECK(lists[0][0].id == (top_k ? 500 : expected[0].id));
      CHECK(lists[0][0].id > (top_k ? 499 : 1500));
      CHECK_MESSAGE(lists[0] == expected, shown(lists[0]), " against ", shown(expected));
    }
  }
}

TEST_CASE_TEMPLATE_DEFINE("sparse results refuse a head without one weight, missing or wide ids, a NaN floor, top_k 0",
                          Space, sparse_refusals) {
  using namespace sparse_cases;
  Space space;
  const weigher<Space> layer(space, {1, -1}, 0.0f);
  const seqpool::buffer<float, Space> two = test::to_space(space, std::vector<float>{1, 0, 0, 1});
  CHECK_THROWS_WITH_AS(sparse_pooler<Space>(space, 2),
                       "head: a sparse result weighs each row with the head's last "
                       "dense layer, of one output (BGE-M3's sparse_linear: [1, hidden_size] with relu); this head's "
                       "has no dense layer",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(
      sparse_pooler<Space>(space, 2, {}, head::classify(seqpool::linear_layer{two.data(), nullptr, 2, 2})),
      "head: a sparse result weighs each row with the head's last dense layer, of one output "
      "(BGE-M3's sparse_linear: [1, hidden_size] with relu); this head's last layer has 2 outputs",
      seqpool::error);
  sparse_pooler<Space> pooler(space, 2, {}, layer.head());
  CHECK_THROWS_WITH_AS(pooler.set_weight_floor(std::numeric_limits<float>::quiet_NaN()),
                       "floor: must be a number, got NaN", seqpool::error);
  seqpool::state_store<Space> state(space);
  seqpool::batch step{{test::whole("r", seqpool::task::token_classify, 3)}};
  CHECK_THROWS_WITH_AS(pooler.plan(step, state),
                       "request 0 (id \"r\"): prompt_token_ids: a sparse result lists its rows by token id: give all 3 "
                       "ids of the prompt, got 0",
                       seqpool::error);
  const std::vector<std::int64_t> ids{4, -2, 2};
  step.requests[0].prompt_token_ids = ids;
  CHECK_THROWS_WITH_AS(pooler.plan(step, state),
                       "request 0 (id \"r\"): prompt_token_ids: a sparse result lists ids in [0, 2147483647]; position "
                       "1 has -2",
                       seqpool::error);
  const std::vector<std::int64_t> wide{4, std::int64_t{1} << 40, 2};
  step.requests[0].prompt_token_ids = wide;
  CHECK_THROWS_WITH_AS(pooler.plan(step, state),
                       "request 0 (id \"r\"): prompt_token_ids: a sparse result lists ids in [0, 2147483647]; position "
                       "1 has 1099511627776",
                       seqpool::error);
  step.requests[0].prompt_token_ids = {};
  step.requests[0].params.top_k = 0;
  CHECK_THROWS_WITH_AS(pooler.plan(step, state), "request 0 (id \"r\"): top_k: must be at least 1, got 0",
                       seqpool::error);
  seqpool::pooler<method::all, head::classify, Space> floats(space, 2, {}, layer.head());
  step.requests[0].params.top_k = 3;
  CHECK_THROWS_WITH_AS(floats.plan(step, state),
                       "request 0 (id \"r\"): top_k: applies to sparse results only (seqpool::sparse_entry, "
                       "result_dtype \"sparse\")",
                       seqpool::error);
  step.requests[0].params.top_k.reset();
  // The last chunk lists its request's rows by id, the earlier chunks' chosen again: a method whose
  // listing differs from what its chunks chose is refused, not listed past the rows it stashed.
  seqpool::pooler<range_bound, head::classify, Space, sparse_entry> bound(space, 2, {}, layer.head());
  prompt chunked{"b", grid_values(6 * 2, 35), {1, 2, 3, 4, 5, 6}, {2, 2, 2}, {}};
  CHECK_THROWS_WITH_AS(run(space, bound, {chunked}),
                       "request 0 (id \"b\"): method: range_bound chooses 5 rows of the prompt listed whole; its "
                       "chunks chose 6",
                       seqpool::error);
  // One that lists more is refused at the first row past them, before it outgrows the state.
  seqpool::pooler<range_bound, head::classify, Space, sparse_entry> beyond(space, 2, {.listed_more = true},
                                                                           layer.head());
  CHECK_THROWS_WITH_AS(run(space, beyond, {chunked}),
                       "request 0 (id \"b\"): method: range_bound chooses more than 5 rows of the prompt listed "
                       "whole; its chunks chose 5",
                       seqpool::error);
  // As many rows at other positions would list the stashed rows under other rows' ids.
  seqpool::pooler<range_parity, head::classify, Space, sparse_entry> parity(space, 2, {}, layer.head());
  CHECK_THROWS_WITH_AS(run(space, parity, {chunked}),
                       "request 0 (id \"b\"): method: range_parity chooses other positions of the prompt listed "
                       "whole than its chunks chose: its select() depends on where a range begins",
                       seqpool::error);
  // A chunk that does not finish lists no id, so it checks none.
  step.requests[0] = test::part("r", seqpool::task::token_classify, 3, 0, 1);
  step.requests[0].prompt_token_ids = ids;
  CHECK_NOTHROW(pooler.plan(step, state));
  // A later chunk short of the ids hears so, not that its ids differ from the first chunk's.
  seqpool::step_plan first;
  test::forward_step(space, pooler, state, step, grid_values(2, 36), 2, first);
  step.requests[0] = test::part("r", seqpool::task::token_classify, 3, 1, 2);
  step.requests[0].prompt_token_ids = std::span<const std::int64_t>(ids).first(2);
  CHECK_THROWS_WITH_AS(pooler.plan(step, state),
                       "request 0 (id \"r\"): prompt_token_ids: a sparse result lists its rows by token id: give all 3 "
                       "ids of the prompt, got 2",
                       seqpool::error);
}

TEST_CASE_TEMPLATE_DEFINE("sparse poolers captured once list every batch they replay for, as eager ones do", Space,
                          sparse_capture) {
  using namespace sparse_cases;
  Space space{test::captured_graph<Space>::backend(1)};  // a block takes every list in turn
  constexpr std::int64_t columns = 24;
  std::vector<float> v(columns);
  for (std::size_t c = 0; c < v.size(); ++c) v[c] = static_cast<float>(static_cast<int>(c % 7) - 3);
  const weigher<Space> layer(space, v, 0.125f);
  sparse_pooler<Space> eager(space, columns, {}, layer.head());
  sparse_pooler<Space> captured(space, columns, {}, layer.head());
  std::mt19937 engine(7);
  std::uniform_int_distribution<std::int64_t> id(0, 300);
  // A long prompt in chunks of 500, 100 and 500 rows beside short whole ones,
  // then whole prompts up to the capacity's rows; a step with no rows left
  // to pool between them.
  std::vector<prompt> prompts{{"long", {}, {}, {500, 100, 500}, {.drop_first = true}, 0},
                              {"a", {}, {}, {3}, {.drop_token_ids = {0, 7}}, 0},
                              {"b", {}, {}, {1}, {}, 1},
                              {"c", {}, {}, {90}, {.drop_last = true}, 1},
                              {"d", {}, {}, {700}, {.top_k = 10}, 3},
                              {"e", {}, {}, {4}, {.drop_first = true, .drop_last = true}, 3},
                              {"f", {}, {}, {300}, {}, 3},
                              {"g", {}, {}, {1200}, {}, 4},
                              {"h", {}, {}, {5}, {}, 5}};
  for (prompt& at : prompts) {
    std::int64_t prompt_len = 0;
    for (const std::int64_t size : at.chunks) prompt_len += size;
    at.rows = grid_values(prompt_len * columns, static_cast<std::uint32_t>(at.id[0]));
    for (std::int64_t t = 0; t < prompt_len; ++t) at.token_ids.push_back(id(engine));
  }
  // From step 3 on the floor is 0.5: a restaged capture lists on the floor of its plan.
  const auto raise_floor = [](auto& pooler) {
    return [&pooler](std::size_t turn) { pooler.set_weight_floor(turn < 3 ? 0.0f : 0.5f); };
  };
  const std::vector<listing> replayed = run(space, captured, prompts,
                                            seqpool::capacity{.requests = 4, .rows = 1200, .result_rows = 1200},
                                            raise_floor(captured));
  const std::vector<listing> expected = run(space, eager, prompts, std::nullopt, raise_floor(eager));
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    CAPTURE(prompts[p].id);
    CHECK(replayed[p].size() > 1);
    CHECK(replayed[p] == expected[p]);
    const float floor = prompts[p].first_step + prompts[p].chunks.size() > 3 ? 0.5f : 0.0f;
    CHECK(replayed[p] == expected_list(prompts[p], v, 0.125f, floor));
  }
  // A sequence method's rows, listed by column, through the same steps.
  const auto maxima = [&] {
    return seqpool::pooler<method::max, head::classify, Space, sparse_entry>(space, columns, {}, row_as_it_is());
  };
  auto eager_rows = maxima();
  auto captured_rows = maxima();
  for (prompt& at : prompts) at.params = {.top_k = at.params.top_k};  // no token filters
  const std::vector<listing> rows_replayed =
      run(space, captured_rows, prompts, seqpool::capacity{.requests = 4, .rows = 1200});
  CHECK(rows_replayed == run(space, eager_rows, prompts));
  CHECK(rows_replayed[0].size() == columns + 1);
  CHECK(rows_replayed[4].size() == 11);  // d's top_k
}

TEST_CASE_TEMPLATE_DEFINE("case 33: a sequence method's row listed by column (SPLADE's sparse vector)", Space,
                          case_33_row_lists) {
  using namespace sparse_cases;
  Space space;
  // MAX of [0, 2, −1, 0.5] and [1, 0, −2, 0.25] is [1, 2, −1, 0.5]; the regression head leaves it.
  seqpool::pooler<method::max, head::classify, Space, sparse_entry> maxima(space, 4, {}, row_as_it_is());
  const std::vector<float> rows{0, 2, -1, 0.5f, 1, 0, -2, 0.25f};
  const auto listed = [&](auto& pooler, std::vector<std::int64_t> chunks, seqpool::pooling_params params) {
    return run(space, pooler, {{"r", rows, {101, 102}, std::move(chunks), std::move(params)}})[0];
  };
  for (const std::vector<std::int64_t>& chunks : std::vector<std::vector<std::int64_t>>{{2}, {1, 1}}) {
    CAPTURE(chunks.size());
    CHECK(listed(maxima, chunks, {}) == listing{{3, 0}, {0, 1.0f}, {1, 2.0f}, {3, 0.5f}, {-1, 0}});
    CHECK(listed(maxima, chunks, {.top_k = 2}) == listing{{2, 0}, {0, 1.0f}, {1, 2.0f}});
  }
  // Through a layer: W = [[1,1,0,0], [0,0,1,1], [1,0,0,0]] with relu gives [3, 0, 1].
  const seqpool::buffer<float, Space> w = test::to_space(space, std::vector<float>{1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0});
  seqpool::pooler<method::max, head::classify, Space, sparse_entry> projected(
      space, 4, {},
      head::classify(seqpool::dense_stack{{{w.data(), nullptr, 3, 4}, seqpool::activation_function::relu}},
                     head::problem_type::regression));
  CHECK(listed(projected, {1, 1}, {}) == listing{{2, 0}, {0, 3.0f}, {2, 1.0f}, {-1, 0}});
  // Both zeros weigh the same: of equal weights, the smaller id.
  maxima.set_weight_floor(-1.0f);
  const std::vector<float> zeros{-0.0f, 0.0f, -0.0f, -2.0f};
  CHECK(run(space, maxima, {{"z", zeros, {101}, {1}, {.top_k = 1}}})[0] == listing{{1, 0}, {0, 0.0f}});
  CHECK(run(space, maxima, {{"z", zeros, {101}, {1}, {.top_k = 2}}})[0] == listing{{2, 0}, {0, 0.0f}, {1, 0.0f}});
  CHECK_THROWS_WITH_AS(listed(maxima, {2}, {.spans = {{0, 1}, {1, 2}}}),
                       "request 0 (id \"r\"): spans: a sparse result lists one row a request: give no spans",
                       seqpool::error);
}

TEST_CASE_TEMPLATE_DEFINE("a sequence method's sparse rows match a plain loop, chunked as whole", Space,
                          row_lists_match_reference) {
  using namespace sparse_cases;
  Space space;
  std::mt19937 engine(33);
  for (int draw = 0; draw < 10; ++draw) {
    CAPTURE(draw);
    const std::int64_t columns = std::uniform_int_distribution<std::int64_t>(1, 400)(engine);
    seqpool::pooler<method::max, head::classify, Space, sparse_entry> pooler(space, columns, {}, row_as_it_is());
    const float floor = static_cast<float>(std::uniform_int_distribution<int>(-8, 12)(engine)) / 8.0f;
    pooler.set_weight_floor(floor);
    std::vector<prompt> prompts;
    const int count = std::uniform_int_distribution<int>(1, 5)(engine);
    for (int p = 0; p < count; ++p) {
      const std::int64_t prompt_len = std::uniform_int_distribution<std::int64_t>(1, 700)(engine);
      prompt at{test::id("r", p), grid_values(prompt_len * columns, 500 * draw + p), {}, {}, {}};
      at.token_ids.assign(static_cast<std::size_t>(prompt_len), 5);
      if (engine() % 2 == 0) at.params.top_k = std::uniform_int_distribution<std::int64_t>(1, columns + 3)(engine);
      at.chunks = drawn_chunks(prompt_len, engine);
      prompts.push_back(std::move(at));
    }
    const std::vector<listing> lists = run(space, pooler, prompts);
    for (std::size_t p = 0; p < prompts.size(); ++p) {
      CAPTURE(p);
      // The reference: each column's maximum as the weight of the id that is its index.
      prompt columnwise = prompts[p];
      const auto prompt_len = static_cast<std::int64_t>(columnwise.token_ids.size());
      columnwise.rows.clear();
      columnwise.token_ids.clear();
      for (std::int64_t c = 0; c < columns; ++c) {
        float largest = prompts[p].rows[static_cast<std::size_t>(c)];
        for (std::int64_t t = 1; t < prompt_len; ++t) largest = std::max(largest, prompts[p].rows[t * columns + c]);
        columnwise.rows.push_back(largest);
        columnwise.token_ids.push_back(c);
      }
      // A row a column, of one value, weighed by 1.
      const listing expected = expected_list(columnwise, {1.0f}, 0.0f, floor, false);
      CAPTURE(shown(expected));
      CAPTURE(shown(lists[p]));
      CHECK(lists[p] == expected);
    }
  }
}
