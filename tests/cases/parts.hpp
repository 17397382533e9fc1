// docs/TESTS.md case 34 and the multi_pooler: several results of every request
// from one step, each equal to its pooler's alone, chunked as whole, eager as
// captured, and the knobs that reach each part; each case with the parts fixed
// at compile time (multi_pooler) and chosen at run time (runtime_multi_pooler).
// Defines templated cases; a translation unit applies them to its spaces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/runtime_multi_pooler.hpp>
#include <seqpool/seqpool.hpp>

#include "../support/graph.hpp"
#include "../support/prompts.hpp"
#include "../support/step.hpp"

namespace parts_cases {

namespace method = seqpool::method;
namespace head = seqpool::head;
using seqpool::sparse_entry;

template <class Space>
using dense_pooler = seqpool::pooler<method::cls, head::embed, Space>;
template <class Space>
using sparse_pooler = seqpool::pooler<method::all, head::classify, Space, sparse_entry>;
template <class Space>
using colbert_pooler = seqpool::pooler<method::all, head::embed, Space>;
/// BGE-M3's three outputs: the dense CLS embedding, sparse weights by token id, ColBERT vectors.
template <class Space>
using three_outputs = seqpool::multi_pooler<dense_pooler<Space>, sparse_pooler<Space>, colbert_pooler<Space>>;
/// The same three chosen at run time.
template <class Space>
using chosen_outputs = seqpool::runtime_multi_pooler<Space>;

/// A case's space and how its outputs are assembled (three_outputs or chosen_outputs).
template <class Space, template <class> class Outputs>
struct assembled {
  using space = Space;
  using outputs = Outputs<Space>;
};

/// Each space of a list with each assembly.
template <class Spaces>
struct assemblies;
template <class... Spaces>
struct assemblies<std::tuple<Spaces...>> {
  using type = std::tuple<assembled<Spaces, three_outputs>..., assembled<Spaces, chosen_outputs>...>;
};

/// The layers of a BGE-M3-like model in the space's memory: sparse_linear
/// [1, columns] and colbert_linear [dims, columns], each with its bias.
template <class Space>
struct model {
  std::int64_t columns;
  std::int64_t dims;
  seqpool::buffer<float, Space> sparse_weight;
  seqpool::buffer<float, Space> sparse_bias;
  seqpool::buffer<float, Space> colbert_weight;
  seqpool::buffer<float, Space> colbert_bias;

  model(Space& space, std::int64_t hidden, std::int64_t colbert_dims, const std::vector<float>& sparse_row,
        float sparse_offset, const std::vector<float>& colbert_rows, const std::vector<float>& colbert_offsets)
      : columns(hidden),
        dims(colbert_dims),
        sparse_weight(test::to_space(space, sparse_row)),
        sparse_bias(test::to_space(space, std::vector<float>{sparse_offset})),
        colbert_weight(test::to_space(space, colbert_rows)),
        colbert_bias(test::to_space(space, colbert_offsets)) {}

  dense_pooler<Space> dense(Space& space) const { return {space, columns}; }
  sparse_pooler<Space> sparse(Space& space) const {
    return {space,
            columns,
            {},
            head::classify(seqpool::dense_stack{{{sparse_weight.data(), sparse_bias.data(), 1, columns},
                                                 seqpool::activation_function::relu}},
                           head::problem_type::regression)};
  }
  colbert_pooler<Space> colbert(Space& space) const {
    return {space,
            columns,
            {},
            head::embed(seqpool::dense_stack{{{colbert_weight.data(), colbert_bias.data(), dims, columns},
                                              seqpool::activation_function::identity}})};
  }

  /// The three outputs, with BGE-M3's filters: its sparse weights leave out the
  /// ids `special`, its ColBERT vectors the first token.
  template <class Outputs = three_outputs<Space>>
  Outputs outputs(Space& space, std::vector<std::int64_t> special) const {
    const seqpool::part_filters sparse_filters{.drop_first = false, .drop_last = false, .drop_token_ids = special};
    const seqpool::part_filters colbert_filters{.drop_first = true, .drop_last = false, .drop_token_ids = {}};
    if constexpr (std::is_same_v<Outputs, chosen_outputs<Space>>) {
      std::vector<seqpool::runtime_part<Space>> parts;
      parts.emplace_back(dense(space));
      parts.emplace_back(sparse(space), sparse_filters);
      parts.emplace_back(colbert(space), colbert_filters);
      return chosen_outputs<Space>(space, std::move(parts));
    } else {
      return three_outputs<Space>(space, {dense(space)}, {sparse(space), sparse_filters},
                                  {colbert(space), colbert_filters});
    }
  }
};

/// Each request's result as the output holds its values, or none.
template <class Result>
using raw_results = std::vector<std::optional<std::vector<Result>>>;

template <class Result>
raw_results<Result> cut(const std::vector<std::optional<seqpool::result_slice>>& results,
                        const std::vector<Result>& output) {
  raw_results<Result> cut_out;
  for (const auto& result : results) {
    if (!result) {
      cut_out.emplace_back();
      continue;
    }
    const auto begin = output.begin() + result->offset;
    cut_out.emplace_back(std::vector<Result>(begin, begin + result->rows * result->cols));
  }
  return cut_out;
}

/// A step's three results a request, in batch order.
struct step_results {
  raw_results<float> dense;
  raw_results<sparse_entry> sparse;
  raw_results<float> colbert;
};

template <class Space>
struct output_buffers {
  seqpool::buffer<float, Space> dense;
  seqpool::buffer<sparse_entry, Space> sparse;
  seqpool::buffer<float, Space> colbert;

  output_buffers(Space& space, std::int64_t dense_values, std::int64_t sparse_values, std::int64_t colbert_values)
      : dense(space, static_cast<std::size_t>(dense_values)),
        sparse(space, static_cast<std::size_t>(sparse_values)),
        colbert(space, static_cast<std::size_t>(colbert_values)) {}

  step_results cut_by(Space& space, const seqpool::parts_plan& plan) const {
    return {cut(plan.parts[0].results, test::to_host(space, dense)),
            cut(plan.parts[1].results, test::to_host(space, sparse)),
            cut(plan.parts[2].results, test::to_host(space, colbert))};
  }

  /// Calls `step(outputs...)` with the buffers as `Outputs` takes them: a span
  /// each, or one list of part_outputs.
  template <class Outputs, class Step>
  void pass(Step&& step) const {
    if constexpr (std::is_same_v<Outputs, chosen_outputs<Space>>) {
      const std::vector<seqpool::part_output> each{dense.span(), sparse.span(), colbert.span()};
      step(std::span<const seqpool::part_output>(each));
    } else {
      step(dense.span(), sparse.span(), colbert.span());
    }
  }
};

/// Runs the step planned into `plan` through the three outputs, under the
/// audit, which must show the sync contract kept.
template <class Space, class Outputs>
step_results run_planned(Space& space, Outputs& outputs, seqpool::state_store<Space>& state,
                         const std::vector<float>& rows, const seqpool::parts_plan& plan) {
  const auto hidden = test::to_space(space, rows);
  REQUIRE(plan.parts.size() == 3);
  outputs.reserve(plan, state);
  const output_buffers<Space> out(space, plan.parts[0].output_size, plan.parts[1].output_size,
                                  plan.parts[2].output_size);
  {
    const seqpool::audit_scope scope(space.audit());
    out.template pass<Outputs>([&](auto... each) {
      outputs.forward(seqpool::make_hidden_view(hidden.data(), plan.num_rows, outputs.hidden_size()), plan, state,
                      each...);
    });
    test::check_sync_contract(scope.counts());
  }
  return out.cut_by(space, plan);
}

/// One step through the three outputs, planned into `plan` (run_planned()).
template <class Space, class Outputs>
step_results forward(Space& space, Outputs& outputs, seqpool::state_store<Space>& state, const seqpool::batch& step,
                     const std::vector<float>& rows, seqpool::parts_plan& plan) {
  outputs.plan(step, state, plan);
  return run_planned(space, outputs, state, rows, plan);
}

using prompt = test::chunked_prompt;
using test::grid_values;

/// `step` as a pooler of `pooling_task` alone is given it to pool one part:
/// knobs written out by hand as SPEC section 5 routes them, the part's
/// filters added (`drop_first`, `drop_ids`).
inline seqpool::batch alone(const seqpool::batch& step, seqpool::task pooling_task, bool sparse, bool drop_first,
                            const std::vector<std::int64_t>& drop_ids) {
  seqpool::batch routed = step;
  for (seqpool::request& r : routed.requests) {
    seqpool::pooling_params& knobs = r.params;
    r.task = pooling_task;
    if (seqpool::is_token_task(pooling_task)) {
      knobs.drop_first = knobs.drop_first || drop_first;
      std::vector<std::int64_t> ids = knobs.drop_token_ids;
      ids.insert(ids.end(), drop_ids.begin(), drop_ids.end());
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      knobs.drop_token_ids = ids;
      knobs.dimensions.reset();
    } else {
      knobs.drop_first = knobs.drop_last = false;
      knobs.drop_token_ids.clear();
    }
    if (!sparse) knobs.top_k.reset();
  }
  return routed;
}

/// Runs `prompts` step by step through `outputs` and, beside it, through
/// separate poolers of each part with the knobs routed by hand; checks every
/// step's results of each part equal the pooler's alone, bit for bit, and
/// returns each prompt's results from the step it finished in.
template <class Outputs, class Space>
step_results run_beside_poolers(Space& space, const model<Space>& weights, const std::vector<prompt>& prompts,
                                const std::vector<std::int64_t>& special) {
  Outputs outputs = weights.template outputs<Outputs>(space, special);
  dense_pooler<Space> dense = weights.dense(space);
  sparse_pooler<Space> sparse = weights.sparse(space);
  colbert_pooler<Space> colbert = weights.colbert(space);
  seqpool::state_store<Space> state(space);
  seqpool::state_store<Space> dense_state(space);
  seqpool::state_store<Space> sparse_state(space);
  seqpool::state_store<Space> colbert_state(space);
  seqpool::parts_plan plan;
  seqpool::step_plan alone_plan;
  std::vector<std::int64_t> done(prompts.size(), 0);
  step_results finished{raw_results<float>(prompts.size()), raw_results<sparse_entry>(prompts.size()),
                        raw_results<float>(prompts.size())};
  for (std::size_t turn = 0;; ++turn) {
    CAPTURE(turn);
    const std::optional<test::step_of_prompts> next =
        test::next_step(prompts, turn, seqpool::task::embed, weights.columns, done);
    if (!next) break;
    const step_results got = forward(space, outputs, state, next->step, next->rows, plan);
    const auto pooled_alone = [&](auto& pooler, auto& own_state, const seqpool::batch& routed) {
      const auto output = test::forward_step(space, pooler, own_state, routed, next->rows, weights.columns, alone_plan);
      return cut(alone_plan.results, output);
    };
    CHECK(got.dense == pooled_alone(dense, dense_state, alone(next->step, seqpool::task::embed, false, false, {})));
    CHECK(got.sparse ==
          pooled_alone(sparse, sparse_state, alone(next->step, seqpool::task::token_classify, true, false, special)));
    CHECK(got.colbert ==
          pooled_alone(colbert, colbert_state, alone(next->step, seqpool::task::token_embed, false, true, {})));
    for (std::size_t k = 0; k < next->members.size(); ++k) {
      const std::size_t p = next->members[k];
      const bool finishes = done[p] == static_cast<std::int64_t>(prompts[p].token_ids.size());
      CHECK(got.dense[k].has_value() == finishes);
      if (!finishes) continue;
      finished.dense[p] = got.dense[k];
      finished.sparse[p] = got.sparse[k];
      finished.colbert[p] = got.colbert[k];
    }
  }
  CHECK(state.size() == 0);
  return finished;
}

/// `count` prompts of `columns` columns, ids in [0, 12), drawn chunks and
/// knobs, each first scheduled at a drawn step.
inline std::vector<prompt> drawn_prompts(std::size_t count, std::int64_t columns, std::mt19937& engine) {
  std::vector<prompt> prompts;
  std::uniform_int_distribution<std::int64_t> lengths(1, 9);
  std::uniform_int_distribution<std::int64_t> ids(0, 11);
  std::uniform_int_distribution<int> coin(0, 1);
  for (std::size_t p = 0; p < count; ++p) {
    prompt drawn;
    drawn.id = test::id("p", static_cast<std::int64_t>(p));
    const std::int64_t length = lengths(engine);
    drawn.rows = grid_values(length * columns, engine);
    for (std::int64_t t = 0; t < length; ++t) drawn.token_ids.push_back(t == 0 ? 0 : ids(engine));
    drawn.chunks = test::drawn_chunks(length, engine);
    if (coin(engine)) drawn.params.dimensions = std::uniform_int_distribution<std::int64_t>(1, columns)(engine);
    if (coin(engine)) drawn.params.top_k = std::uniform_int_distribution<std::int64_t>(1, 4)(engine);
    if (coin(engine)) drawn.params.drop_token_ids = {2, 5};
    drawn.params.drop_last = coin(engine) == 1;
    drawn.first_step = std::uniform_int_distribution<std::size_t>(0, 2)(engine);
    prompts.push_back(std::move(drawn));
  }
  return prompts;
}

}  // namespace parts_cases

TEST_CASE_TEMPLATE_DEFINE("case 34: BGE-M3's dense, sparse and ColBERT outputs from one step", Setup,
                          case_34_three_outputs) {
  using namespace parts_cases;
  using Space = typename Setup::space;
  Space space;
  // Two columns; sparse_linear v = [1, −1], b = 0.5; colbert_linear [[1, 1], [1, −1]], no offset.
  const model<Space> weights(space, 2, 2, {1, -1}, 0.5f, {1, 1, 1, -1}, {0, 0});
  auto outputs = weights.template outputs<typename Setup::outputs>(space, {0, 2});
  seqpool::state_store<Space> state(space);
  seqpool::parts_plan plan;
  const std::vector<std::int64_t> ids{0, 7, 9, 7, 2};
  const std::vector<float> rows{3, 4, 0, 1, 1, 1, 2, 0, 0, 3};
  seqpool::batch step{{test::whole("q", seqpool::task::embed, 5)}};
  step.requests[0].prompt_token_ids = ids;
  const float half = 0.70710678f;
  const auto check = [&](const step_results& got) {
    // Dense: the CLS row [3, 4] over its norm 5.
    REQUIRE(got.dense[0].has_value());
    test::check_close({1, 2, *got.dense[0]}, {1, 2, {0.6f, 0.8f}}, 1e-6);
    // Sparse: relu(h0 − h1 + 0.5) = −0.5 → 0 (id 7), 0.5 (9), 2.5 (7); ids 0 and 2 left out.
    CHECK(got.sparse[0] == std::vector<sparse_entry>{{2, 0}, {7, 2.5f}, {9, 0.5f}});
    // ColBERT: rows 1-4 (the first left out) through [[1, 1], [1, −1]], each over its norm.
    REQUIRE(got.colbert[0].has_value());
    test::check_close({4, 2, *got.colbert[0]}, {4, 2, {half, -half, 1, 0, half, half, half, -half}}, 1e-6);
  };
  check(forward(space, outputs, state, step, rows, plan));
  CHECK(plan.parts[0].results[0]->rows == 1);
  CHECK(plan.parts[1].results[0]->cols == 3);  // the count and a pair for each of the 2 distinct ids kept
  CHECK(plan.parts[2].results[0]->rows == 4);
  // In chunks of 2, 2 and 1: the same results, from the step the request finishes in.
  const std::vector<std::int64_t> chunks{2, 2, 1};
  std::int64_t done = 0;
  for (const std::int64_t size : chunks) {
    seqpool::batch chunk{{test::part("q", seqpool::task::embed, 5, done, size)}};
    chunk.requests[0].prompt_token_ids = ids;
    const std::vector<float> chunk_rows(rows.begin() + 2 * done, rows.begin() + 2 * (done + size));
    const step_results got = forward(space, outputs, state, chunk, chunk_rows, plan);
    done += size;
    if (done < 5) {
      CHECK_FALSE(got.dense[0].has_value());
      CHECK_FALSE(got.sparse[0].has_value());
      CHECK_FALSE(got.colbert[0].has_value());
      CHECK(state.contains("q"));
      CHECK(state.num_computed("q") == done);
      CHECK(state.size() == 3);  // one state a part
    } else {
      check(got);
    }
  }
  CHECK(state.size() == 0);
}

TEST_CASE_TEMPLATE_DEFINE("a plan reads nothing of its batch once plan() returns: the batch and its ids freed then",
                          Setup, plan_reads_no_batch) {
  using namespace parts_cases;
  using Space = typename Setup::space;
  Space space;
  // Case 34's step: its sparse part lists rows by id and leaves ids out, and its ColBERT part's filter drops a row.
  const model<Space> weights(space, 2, 2, {1, -1}, 0.5f, {1, 1, 1, -1}, {0, 0});
  auto outputs = weights.template outputs<typename Setup::outputs>(space, {0, 2});
  const std::vector<std::int64_t> ids{0, 7, 9, 7, 2};
  const std::vector<float> rows{3, 4, 0, 1, 1, 1, 2, 0, 0, 3};
  seqpool::parts_plan plan;
  seqpool::state_store<Space> kept_state(space);
  seqpool::batch whole{{test::whole("q", seqpool::task::embed, 5)}};
  whole.requests[0].prompt_token_ids = ids;
  const step_results wanted = forward(space, outputs, kept_state, whole, rows, plan);
  // Chunked 2, 2 and 1 (the later chunks continue a state keyed by the ids), each chunk's batch, its id's text and
  // its ids (others written over them first) freed before the step runs: under ASan a read of them would fault.
  seqpool::state_store<Space> state(space);
  std::int64_t done = 0;
  step_results got;
  for (const std::int64_t size : {2, 2, 1}) {
    {
      auto chunk_ids = std::make_unique<std::vector<std::int64_t>>(ids);
      auto chunk = std::make_unique<seqpool::batch>(seqpool::batch{
          {test::part("a request id too long for a short string's storage", seqpool::task::embed, 5, done, size)}});
      chunk->requests[0].prompt_token_ids = *chunk_ids;
      outputs.plan(*chunk, state, plan);
      CHECK(test::keeps_no_view_of_batch(seqpool::detail::plan_access::program(plan)));
      std::fill(chunk_ids->begin(), chunk_ids->end(), 1);
    }
    got = run_planned(space, outputs, state,
                      std::vector<float>(rows.begin() + 2 * done, rows.begin() + 2 * (done + size)), plan);
    done += size;
  }
  CHECK(got.dense == wanted.dense);
  CHECK(got.sparse == wanted.sparse);
  CHECK(got.colbert == wanted.colbert);
  CHECK(state.size() == 0);
  // Refused by the sparse part at the last request, once the first was routed to the parts before it: what
  // planning works in lets go of the ids it was given all the same.
  seqpool::batch refused{{test::whole("a", seqpool::task::embed, 5), test::whole("b", seqpool::task::embed, 5)}};
  refused.requests[0].prompt_token_ids = ids;
  refused.requests[1].prompt_token_ids = std::span(ids).first(2);
  CHECK_THROWS_WITH_AS(outputs.plan(refused, state, plan),
                       "request 1 (id \"b\"): prompt_token_ids: a sparse result lists its rows by token id: give all 5 "
                       "ids of the prompt, got 2",
                       seqpool::error);
  CHECK(test::keeps_no_view_of_batch(seqpool::detail::plan_access::program(plan)));
}

TEST_CASE_TEMPLATE_DEFINE("a multi_pooler's parts equal their poolers alone, step by step, chunked as whole", Setup,
                          parts_match_poolers) {
  using namespace parts_cases;
  using Space = typename Setup::space;
  Space space;
  std::mt19937 engine(34);
  for (int draw = 0; draw < 12; ++draw) {
    CAPTURE(draw);
    const std::int64_t columns = std::uniform_int_distribution<std::int64_t>(1, 6)(engine);
    const std::int64_t dims = std::uniform_int_distribution<std::int64_t>(1, 5)(engine);
    const model<Space> weights(space, columns, dims, grid_values(columns, engine), 0.25f,
                               grid_values(dims * columns, engine), grid_values(dims, engine));
    std::vector<prompt> prompts =
        drawn_prompts(std::uniform_int_distribution<std::size_t>(1, 7)(engine), columns, engine);
    const std::vector<std::int64_t> special{0, 1, 3};
    const step_results chunked = run_beside_poolers<typename Setup::outputs>(space, weights, prompts, special);
    for (prompt& whole : prompts) {
      whole.chunks = {static_cast<std::int64_t>(whole.token_ids.size())};
      whole.first_step = 0;
    }
    const step_results at_once = run_beside_poolers<typename Setup::outputs>(space, weights, prompts, special);
    CHECK(chunked.dense == at_once.dense);
    CHECK(chunked.sparse == at_once.sparse);
    CHECK(chunked.colbert == at_once.colbert);
  }
}

TEST_CASE_TEMPLATE_DEFINE("a multi_pooler refuses knobs no part takes, filters on sequence parts, and bad filters",
                          Space, parts_refuse_bad_input) {
  using namespace parts_cases;
  Space space;
  const model<Space> weights(space, 2, 2, {1, -1}, 0.5f, {1, 1, 1, -1}, {0, 0});
  const std::vector<float> rows{3, 4, 0, 1, 1, 1};
  const std::vector<std::int64_t> ids{0, 7, 9};
  const auto refuses = [&](auto& outputs, seqpool::pooling_params knobs, const std::string& message) {
    seqpool::state_store<Space> state(space);
    seqpool::batch step{{test::whole("r", seqpool::task::embed, 3, std::move(knobs))}};
    step.requests[0].prompt_token_ids = ids;
    CHECK_THROWS_WITH_AS(outputs.plan(step, state), message.c_str(), seqpool::error);
  };
  // Only a dense part and a ColBERT part: top_k reaches none.
  seqpool::multi_pooler<dense_pooler<Space>, colbert_pooler<Space>> dense_and_colbert(
      space, {weights.dense(space)}, {weights.colbert(space), {.drop_first = true}});
  refuses(dense_and_colbert, {.top_k = 2},
          "request 0 (id \"r\"): top_k: no part of this multi_pooler takes it (sparse parts do)");
  refuses(dense_and_colbert, {.drop_token_ids = {5, 3}},
          "request 0 (id \"r\"): drop_token_ids: id 1 is 3 after 5; the ids must be strictly ascending");
  // A part that drops the even ids below 2048: a request's ids joined with them make at most max_drop_token_ids.
  std::vector<std::int64_t> evens(seqpool::max_drop_token_ids);
  std::vector<std::int64_t> odds(seqpool::max_drop_token_ids);
  for (std::size_t k = 0; k < evens.size(); ++k) {
    evens[k] = 2 * static_cast<std::int64_t>(k);
    odds[k] = evens[k] + 1;
  }
  seqpool::multi_pooler<dense_pooler<Space>, colbert_pooler<Space>> evens_dropped(
      space, {weights.dense(space)}, {weights.colbert(space), {.drop_token_ids = evens}});
  refuses(evens_dropped, {.drop_token_ids = odds},
          "request 0 (id \"r\"): drop_token_ids: its 1024 ids and part 1's 1024 make 2048 distinct ids; a part drops "
          "at most 1024");
  refuses(evens_dropped, {.drop_token_ids = {1, 2}},
          "request 0 (id \"r\"): drop_token_ids: its 2 ids and part 1's 1024 make 1025 distinct ids; a part drops at "
          "most 1024");
  // A list too long or negative is refused as such, as its pooler alone refuses it, not as the union made of it.
  std::vector<std::int64_t> too_many(seqpool::max_drop_token_ids + 1);
  for (std::size_t k = 0; k < too_many.size(); ++k) too_many[k] = 2 * static_cast<std::int64_t>(k);
  refuses(evens_dropped, {.drop_token_ids = too_many},
          "request 0 (id \"r\"): drop_token_ids: holds 1025 ids; at most 1024 may be dropped");
  refuses(evens_dropped, {.drop_token_ids = {-1, 2}},
          "request 0 (id \"r\"): drop_token_ids: id 0 is -1; token ids are ≥ 0");
  {
    seqpool::state_store<Space> state(space);
    seqpool::batch step{{test::whole("r", seqpool::task::embed, 3, {.drop_token_ids = {0, 2046}})}};
    step.requests[0].prompt_token_ids = ids;
    CHECK_NOTHROW(evens_dropped.plan(step, state));  // ids the part drops already: the union is the part's 1024
  }
  // Only token parts: dimensions, spans and instruction_len reach none.
  seqpool::multi_pooler<sparse_pooler<Space>, colbert_pooler<Space>> tokens(space, {weights.sparse(space)},
                                                                            {weights.colbert(space)});
  refuses(tokens, {.dimensions = 1},
          "request 0 (id \"r\"): dimensions: no part of this multi_pooler takes it (sequence parts that embed into "
          "dense rows do)");
  refuses(tokens, {.spans = {{0, 2}}},
          "request 0 (id \"r\"): spans: no part of this multi_pooler takes it (sequence "
          "parts do)");
  refuses(tokens, {.instruction_len = 1},
          "request 0 (id \"r\"): instruction_len: no part of this multi_pooler takes it (sequence parts do)");
  // Only a sequence part: token filters reach none.
  seqpool::multi_pooler<dense_pooler<Space>> dense_only(space, {weights.dense(space)});
  refuses(dense_only, {.drop_first = true},
          "request 0 (id \"r\"): drop_first: no part of this multi_pooler takes it (token parts do)");
  // A knob a part takes but refuses is refused as its pooler refuses it.
  refuses(dense_and_colbert, {.dimensions = 3}, "request 0 (id \"r\"): dimensions: must be in [1, 2], got 3");
  // A part made on another space, whose launches would go to that space's stream.
  Space other;
  CHECK_THROWS_WITH_AS((seqpool::multi_pooler<dense_pooler<Space>, colbert_pooler<Space>>(space, {weights.dense(space)},
                                                                                          {weights.colbert(other)})),
                       "space: the parts of one multi_pooler run on the space it runs on, and its part 1 was made on "
                       "another",
                       seqpool::error);
  // Moved into itself, a multi_pooler holds none: its parts' filters may be emptied.
  decltype(dense_and_colbert)& alias = dense_and_colbert;
  dense_and_colbert = std::move(alias);
  refuses(dense_and_colbert, {},
          "runner: it holds no units (it was moved from, or its unit was given to a "
          "dispatcher or multi_pooler): plan and run with the runner that holds them");
  // A sparse pooler given to a multi_pooler: a weight floor set on it would go nowhere.
  sparse_pooler<Space> given = weights.sparse(space);
  const seqpool::multi_pooler<sparse_pooler<Space>> holder(space, {std::move(given)});
  CHECK_THROWS_WITH_AS(given.set_weight_floor(0.5f),
                       "runner: it holds no units (it was moved from, or its unit was given to a "
                       "dispatcher or multi_pooler): plan and run with the runner that holds them",
                       seqpool::error);
  // Filters: on a sequence part, out of order, negative, too many.
  CHECK_THROWS_WITH_AS(seqpool::multi_pooler<dense_pooler<Space>>(space, {weights.dense(space), {.drop_first = true}}),
                       "part_filters: part 0 pools a sequence method; only token parts drop rows", seqpool::error);
  CHECK_THROWS_WITH_AS((seqpool::multi_pooler<dense_pooler<Space>, colbert_pooler<Space>>(
                           space, {weights.dense(space)}, {weights.colbert(space), {.drop_token_ids = {4, 4}}})),
                       "part_filters: part 1's drop_token_ids: id 1 is 4 after 4; the ids must be strictly ascending",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(
      (seqpool::multi_pooler<colbert_pooler<Space>>(space, {weights.colbert(space), {.drop_token_ids = {-1}}})),
      "part_filters: part 0's drop_token_ids: id 0 is -1; token ids are ≥ 0", seqpool::error);
  std::vector<std::int64_t> many(seqpool::max_drop_token_ids + 1);
  for (std::size_t k = 0; k < many.size(); ++k) many[k] = static_cast<std::int64_t>(k);
  CHECK_THROWS_WITH_AS(
      (seqpool::multi_pooler<colbert_pooler<Space>>(space, {weights.colbert(space), {.drop_token_ids = many}})),
      "part_filters: part 0 drops 1025 ids; at most 1024 may be dropped", seqpool::error);
  // Parts of two widths read no one hidden states.
  const model<Space> wider(space, 3, 1, {1, 1, 1}, 0.0f, {1, 1, 1}, {0});
  CHECK_THROWS_WITH_AS((seqpool::multi_pooler<dense_pooler<Space>, colbert_pooler<Space>>(space, {weights.dense(space)},
                                                                                          {wider.colbert(space)})),
                       "hidden_size: the parts of one multi_pooler read the same hidden states, but one has 3 "
                       "columns and another 2",
                       seqpool::error);
  // An output of a part too small for the step.
  three_outputs<Space> outputs = weights.outputs(space, {0});
  seqpool::state_store<Space> state(space);
  seqpool::batch step{{test::whole("r", seqpool::task::embed, 3)}};
  step.requests[0].prompt_token_ids = ids;
  const seqpool::parts_plan plan = outputs.plan(step, state);
  outputs.reserve(plan, state);
  const auto hidden = test::to_space(space, rows);
  const output_buffers<Space> out(space, plan.parts[0].output_size, plan.parts[1].output_size,
                                  plan.parts[2].output_size - 1);
  CHECK_THROWS_WITH_AS(outputs.forward(seqpool::make_hidden_view(hidden.data(), 3, 2), plan, state, out.dense.span(),
                                       out.sparse.span(), out.colbert.span()),
                       ("output of part 2: holds " + std::to_string(plan.parts[2].output_size - 1) +
                        " values but the step writes " + std::to_string(plan.parts[2].output_size))
                           .c_str(),
                       seqpool::error);
  // Outputs over the rows or over each other; side by side in one buffer they are apart.
  const auto dense_size = static_cast<std::size_t>(plan.parts[0].output_size);
  const auto colbert_size = static_cast<std::size_t>(plan.parts[2].output_size);
  seqpool::buffer<float, Space> floats(space, dense_size + colbert_size);
  const auto view = seqpool::make_hidden_view(hidden.data(), 3, 2);
  const cuda::std::span<float> dense(floats.data(), dense_size);
  CHECK_THROWS_WITH_AS(outputs.forward(view, plan, state, dense, out.sparse.span(),
                                       cuda::std::span<float>(floats.data() + dense_size - 1, colbert_size)),
                       "output of part 2: overlaps the output of part 0: give each part an output of its own",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(
      outputs.forward(view, plan, state, cuda::std::span<float>(hidden.data(), dense_size), out.sparse.span(),
                      cuda::std::span<float>(floats.data() + dense_size, colbert_size)),
      "output of part 0: overlaps the hidden states, which the step reads while it writes: give it "
      "memory of its own",
      seqpool::error);
  outputs.forward(view, plan, state, dense, out.sparse.span(),
                  cuda::std::span<float>(floats.data() + dense_size, colbert_size));
  CHECK(test::to_host(space, floats)[0] == doctest::Approx(0.6f));  // CLS row [3, 4], normalised
}

TEST_CASE_TEMPLATE_DEFINE("a chunked request's states, one a part, are released together", Setup, parts_release) {
  using namespace parts_cases;
  using Space = typename Setup::space;
  Space space;
  const model<Space> weights(space, 2, 2, {1, -1}, 0.5f, {1, 1, 1, -1}, {0, 0});
  auto outputs = weights.template outputs<typename Setup::outputs>(space, {0});
  seqpool::state_store<Space> state(space);
  seqpool::parts_plan plan;
  const std::vector<std::int64_t> ids{0, 7, 9};
  seqpool::batch first{{test::part("r", seqpool::task::embed, 3, 0, 2)}};
  first.requests[0].prompt_token_ids = ids;
  forward(space, outputs, state, first, {3, 4, 0, 1}, plan);
  CHECK(state.size() == 3);
  state.release("r");
  CHECK(state.size() == 0);
  CHECK_FALSE(state.contains("r"));
  // Begun again after the release, the request pools its whole prompt.
  seqpool::batch again{{test::whole("r", seqpool::task::embed, 3)}};
  again.requests[0].prompt_token_ids = ids;
  const step_results got = forward(space, outputs, state, again, {3, 4, 0, 1, 1, 1}, plan);
  CHECK(got.colbert[0]->size() == 4);
}

TEST_CASE_TEMPLATE_DEFINE(
    "a multi_pooler's chunked request continues only with a multi_pooler, a pooler's with a pooler", Setup,
    parts_continue_alike) {
  using namespace parts_cases;
  using Space = typename Setup::space;
  Space space;
  const model<Space> weights(space, 2, 2, {1, -1}, 0.5f, {1, 1, 1, -1}, {0, 0});
  auto outputs = weights.template outputs<typename Setup::outputs>(space, {0});
  dense_pooler<Space> dense = weights.dense(space);  // the multi_pooler's first part, alone
  seqpool::state_store<Space> state(space);
  seqpool::parts_plan plan;
  const std::vector<std::int64_t> ids{0, 7, 9};
  const auto chunk = [&](const char* id, std::int64_t done, std::int64_t scheduled) {
    seqpool::batch step{{test::part(id, seqpool::task::embed, 3, done, scheduled)}};
    step.requests[0].prompt_token_ids = ids;
    return step;
  };
  forward(space, outputs, state, chunk("r", 0, 2), {3, 4, 0, 1}, plan);
  CHECK(state.size() == 3);
  // Its last chunk through the first part's pooler alone would leave the other parts' states behind.
  CHECK_THROWS_WITH_AS(dense.plan(chunk("r", 2, 1), state),
                       "request 0 (id \"r\"): state: begun by a multi_pooler of 3 parts, it continues with a pooler, a "
                       "dispatcher or a multi_pooler of 1 part: continue a request with the kind of runner that "
                       "began it",
                       seqpool::error);
  CHECK(state.size() == 3);
  CHECK(state.num_computed("r") == 2);
  // A pooler's chunked request, the other way round.
  test::run_step(space, dense, state, chunk("s", 0, 2), std::vector<float>{3, 4, 0, 1});
  CHECK_THROWS_WITH_AS(outputs.plan(chunk("s", 2, 1), state),
                       "request 0 (id \"s\"): state: begun by a pooler, a dispatcher or a multi_pooler of 1 part, it "
                       "continues with a multi_pooler of 3 parts: continue a request with the kind of runner that "
                       "began it",
                       seqpool::error);
  CHECK(state.num_computed("s") == 2);
  // Each continued by its own kind finishes, and no state is left.
  forward(space, outputs, state, chunk("r", 2, 1), {1, 1}, plan);
  test::run_step(space, dense, state, chunk("s", 2, 1), std::vector<float>{1, 1});
  CHECK(state.size() == 0);
}

TEST_CASE_TEMPLATE_DEFINE("a multi_pooler captured once gives every batch it replays for the eager results", Setup,
                          parts_captured) {
  using namespace parts_cases;
  using Space = typename Setup::space;
  using Outputs = typename Setup::outputs;
  Space space(test::captured_graph<Space>::backend());
  std::mt19937 engine(340);
  const std::int64_t columns = 4;
  const model<Space> weights(space, columns, 3, grid_values(4, engine), 0.25f, grid_values(12, engine),
                             grid_values(3, engine));
  const std::vector<prompt> prompts = drawn_prompts(6, columns, engine);
  const std::vector<std::int64_t> special{0, 1};
  Outputs eager = weights.template outputs<Outputs>(space, special);
  Outputs captured = weights.template outputs<Outputs>(space, special);
  const seqpool::capacity limits{.requests = 8, .rows = 40, .result_rows = 40, .columns = 0};
  captured.reserve_capacity(limits);
  const output_buffers<Space> out(space, captured.output_capacity(0), captured.output_capacity(1),
                                  captured.output_capacity(2));
  seqpool::buffer<float, Space> hidden(space, static_cast<std::size_t>(limits.rows * columns));
  test::graph_replay<Space, Outputs> graph(captured);
  seqpool::state_store<Space> eager_state(space);
  seqpool::state_store<Space> captured_state(space);
  seqpool::parts_plan eager_plan;
  seqpool::parts_plan captured_plan;
  std::vector<std::int64_t> done(prompts.size(), 0);
  for (std::size_t turn = 0;; ++turn) {
    CAPTURE(turn);
    std::vector<std::int64_t> eager_done = done;
    const std::optional<test::step_of_prompts> next =
        test::next_step(prompts, turn, seqpool::task::embed, columns, done);
    if (!next) break;
    const step_results expected = forward(space, eager, eager_state, next->step, next->rows, eager_plan);
    captured.plan(next->step, captured_state, captured_plan);
    space.copy_in(std::span<const float>(next->rows), hidden.span().first(next->rows.size()));
    out.template pass<Outputs>([&](auto... each) {
      graph.run(space, seqpool::make_hidden_view(hidden.data(), limits.rows, columns), captured_plan, captured_state,
                each...);
    });
    const step_results got = out.cut_by(space, captured_plan);
    CHECK(got.dense == expected.dense);
    CHECK(got.sparse == expected.sparse);
    CHECK(got.colbert == expected.colbert);
  }
}

namespace parts_cases {

/// Each result's bytes, so that results of any type compare exactly.
template <class Result>
std::vector<std::optional<std::vector<unsigned char>>> bytes_of(const raw_results<Result>& results) {
  std::vector<std::optional<std::vector<unsigned char>>> bytes;
  for (const auto& result : results) {
    if (!result) {
      bytes.emplace_back();
      continue;
    }
    std::vector<unsigned char> copy(result->size() * sizeof(Result));
    if (!copy.empty()) std::memcpy(copy.data(), result->data(), copy.size());
    bytes.emplace_back(std::move(copy));
  }
  return bytes;
}

}  // namespace parts_cases

TEST_CASE_TEMPLATE_DEFINE(
    "a runtime_multi_pooler's parts, of any method, head and result type, equal their poolers "
    "alone, step by step",
    Space, chosen_parts_of_any_type) {
  using namespace parts_cases;
  using concat_pooler = seqpool::pooler<method::any_sequence, head::embed, Space, seqpool::half>;
  using bits_pooler = seqpool::pooler<method::any_token, head::embed, Space, seqpool::binary>;
  using scores_pooler = seqpool::pooler<method::mean_sqrt_len, head::classify, Space>;
  Space space;
  std::mt19937 engine(35);
  const std::int64_t columns = 5;
  const model<Space> weights(space, columns, 2, grid_values(columns, engine), 0.25f, grid_values(2 * columns, engine),
                             grid_values(2, engine));
  const auto concat = [&] { return concat_pooler(space, columns, *method::any_sequence::from_name("cls+mean")); };
  const auto bits = [&] { return bits_pooler(space, columns, *method::any_token::from_name("all")); };
  const auto scores = [&] {
    return scores_pooler(space, columns, {}, head::classify(seqpool::dense_stack{}, head::problem_type::multi_label));
  };
  const std::vector<std::int64_t> special{0, 1};
  const seqpool::part_filters first_dropped{.drop_first = true, .drop_last = false, .drop_token_ids = {}};
  const seqpool::part_filters special_dropped{.drop_first = false, .drop_last = false, .drop_token_ids = special};
  std::vector<seqpool::runtime_part<Space>> parts;
  parts.emplace_back(concat());
  parts.emplace_back(bits(), first_dropped);
  parts.emplace_back(scores());
  parts.emplace_back(weights.sparse(space), special_dropped);
  seqpool::runtime_multi_pooler<Space> outputs(space, std::move(parts));
  CHECK(outputs.parts() == 4);
  CHECK(outputs.result_type_name(0) == "half");
  CHECK(outputs.result_type_name(1) == "binary");
  CHECK(outputs.result_type_name(2) == "float");
  CHECK(outputs.result_type_name(3) == "sparse_entry");
  CHECK_THROWS_WITH_AS(outputs.result_type_name(4), "result_type_name: part 4 of 4", seqpool::error);
  concat_pooler concat_alone = concat();
  bits_pooler bits_alone = bits();
  scores_pooler scores_alone = scores();
  sparse_pooler<Space> sparse_alone = weights.sparse(space);
  seqpool::state_store<Space> state(space);
  seqpool::state_store<Space> concat_state(space);
  seqpool::state_store<Space> bits_state(space);
  seqpool::state_store<Space> scores_state(space);
  seqpool::state_store<Space> sparse_state(space);
  const std::vector<prompt> prompts = drawn_prompts(7, columns, engine);
  std::vector<std::int64_t> done(prompts.size(), 0);
  seqpool::parts_plan plan;
  seqpool::step_plan alone_plan;
  for (std::size_t turn = 0;; ++turn) {
    CAPTURE(turn);
    const std::optional<test::step_of_prompts> next =
        test::next_step(prompts, turn, seqpool::task::embed, columns, done);
    if (!next) break;
    const auto hidden = test::to_space(space, next->rows);
    outputs.plan(next->step, state, plan);
    outputs.reserve(plan, state);
    seqpool::buffer<seqpool::half, Space> concat_out(space, static_cast<std::size_t>(plan.parts[0].output_size));
    seqpool::buffer<seqpool::binary, Space> bits_out(space, static_cast<std::size_t>(plan.parts[1].output_size));
    seqpool::buffer<float, Space> scores_out(space, static_cast<std::size_t>(plan.parts[2].output_size));
    seqpool::buffer<sparse_entry, Space> sparse_out(space, static_cast<std::size_t>(plan.parts[3].output_size));
    const std::vector<seqpool::part_output> each{concat_out.span(), bits_out.span(), scores_out.span(),
                                                 sparse_out.span()};
    {
      const seqpool::audit_scope scope(space.audit());
      outputs.forward(seqpool::make_hidden_view(hidden.data(), plan.num_rows, columns), plan, state,
                      std::span<const seqpool::part_output>(each));
      test::check_sync_contract(scope.counts());
    }
    const auto alone_of = [&](auto& pooler, auto& own_state, const seqpool::batch& routed) {
      const auto output = test::forward_step(space, pooler, own_state, routed, next->rows, columns, alone_plan);
      return bytes_of(cut(alone_plan.results, output));
    };
    seqpool::batch as_scores = alone(next->step, seqpool::task::classify, false, false, {});
    for (seqpool::request& r : as_scores.requests) r.params.dimensions.reset();  // reaches embedding parts only
    CHECK(bytes_of(cut(plan.parts[0].results, test::to_host(space, concat_out))) ==
          alone_of(concat_alone, concat_state, alone(next->step, seqpool::task::embed, false, false, {})));
    CHECK(bytes_of(cut(plan.parts[1].results, test::to_host(space, bits_out))) ==
          alone_of(bits_alone, bits_state, alone(next->step, seqpool::task::token_embed, false, true, {})));
    CHECK(bytes_of(cut(plan.parts[2].results, test::to_host(space, scores_out))) ==
          alone_of(scores_alone, scores_state, as_scores));
    CHECK(bytes_of(cut(plan.parts[3].results, test::to_host(space, sparse_out))) ==
          alone_of(sparse_alone, sparse_state, alone(next->step, seqpool::task::token_classify, true, false, special)));
  }
  CHECK(state.size() == 0);
}

TEST_CASE_TEMPLATE_DEFINE("a runtime_multi_pooler refuses no parts, and outputs of another count or type", Space,
                          chosen_parts_refuse_bad_input) {
  using namespace parts_cases;
  Space space;
  const model<Space> weights(space, 2, 2, {1, -1}, 0.5f, {1, 1, 1, -1}, {0, 0});
  CHECK_THROWS_WITH_AS(chosen_outputs<Space>(space, {}), "parts: a multi_pooler needs at least one part",
                       seqpool::error);
  std::vector<seqpool::runtime_part<Space>> filtered;
  filtered.emplace_back(weights.dense(space),
                        seqpool::part_filters{.drop_first = true, .drop_last = false, .drop_token_ids = {}});
  CHECK_THROWS_WITH_AS(chosen_outputs<Space>(space, std::move(filtered)),
                       "part_filters: part 0 pools a sequence method; only token parts drop rows", seqpool::error);
  // The same part twice: the second was moved from.
  seqpool::runtime_part<Space> once(weights.dense(space));
  std::vector<seqpool::runtime_part<Space>> twice;
  twice.push_back(std::move(once));
  twice.push_back(std::move(once));
  CHECK_THROWS_WITH_AS(chosen_outputs<Space>(space, std::move(twice)),
                       "parts: part 1 holds no pooler: it was moved from (into another list, or a "
                       "runtime_multi_pooler)",
                       seqpool::error);
  Space other;
  std::vector<seqpool::runtime_part<Space>> elsewhere;
  elsewhere.emplace_back(weights.dense(space));
  elsewhere.emplace_back(weights.colbert(other));
  CHECK_THROWS_WITH_AS(chosen_outputs<Space>(space, std::move(elsewhere)),
                       "space: the parts of one multi_pooler run on the space it runs on, and its part 1 was made on "
                       "another",
                       seqpool::error);
  chosen_outputs<Space> outputs = weights.template outputs<chosen_outputs<Space>>(space, {0});
  seqpool::state_store<Space> state(space);
  seqpool::batch step{{test::whole("r", seqpool::task::embed, 3)}};
  const std::vector<std::int64_t> ids{0, 7, 9};
  step.requests[0].prompt_token_ids = ids;
  const seqpool::parts_plan plan = outputs.plan(step, state);
  outputs.reserve(plan, state);
  const auto hidden = test::to_space(space, std::vector<float>{3, 4, 0, 1, 1, 1});
  const auto view = seqpool::make_hidden_view(hidden.data(), 3, 2);
  const output_buffers<Space> out(space, plan.parts[0].output_size, plan.parts[1].output_size,
                                  plan.parts[2].output_size);
  const std::vector<seqpool::part_output> two{out.dense.span(), out.sparse.span()};
  CHECK_THROWS_WITH_AS(outputs.forward(view, plan, state, std::span<const seqpool::part_output>(two)),
                       "outputs: the multi_pooler has 3 parts, an output each; given 2", seqpool::error);
  const std::vector<seqpool::part_output> swapped{out.dense.span(), out.colbert.span(), out.sparse.span()};
  CHECK_THROWS_WITH_AS(outputs.forward(view, plan, state, std::span<const seqpool::part_output>(swapped)),
                       "output of part 1: holds float values; the part writes sparse_entry", seqpool::error);
  seqpool::buffer<float, Space> short_colbert(space, static_cast<std::size_t>(plan.parts[2].output_size - 1));
  const std::vector<seqpool::part_output> too_small{out.dense.span(), out.sparse.span(), short_colbert.span()};
  CHECK_THROWS_WITH_AS(outputs.forward(view, plan, state, std::span<const seqpool::part_output>(too_small)),
                       ("output of part 2: holds " + std::to_string(plan.parts[2].output_size - 1) +
                        " values but the step writes " + std::to_string(plan.parts[2].output_size))
                           .c_str(),
                       seqpool::error);
  const auto dense_size = static_cast<std::size_t>(plan.parts[0].output_size);
  const auto colbert_size = static_cast<std::size_t>(plan.parts[2].output_size);
  seqpool::buffer<float, Space> floats(space, dense_size + colbert_size);
  const std::vector<seqpool::part_output> over{cuda::std::span<float>(floats.data(), dense_size), out.sparse.span(),
                                               cuda::std::span<float>(floats.data() + dense_size - 1, colbert_size)};
  CHECK_THROWS_WITH_AS(outputs.forward(view, plan, state, std::span<const seqpool::part_output>(over)),
                       "output of part 2: overlaps the output of part 0: give each part an output of its own",
                       seqpool::error);
  // Refused before anything ran: the plan still runs.
  const std::vector<seqpool::part_output> right{out.dense.span(), out.sparse.span(), out.colbert.span()};
  outputs.forward(view, plan, state, std::span<const seqpool::part_output>(right));
  CHECK(cut(plan.parts[0].results, test::to_host(space, out.dense))[0]->size() == 2);
  // Moved into itself, it holds none: its list of parts may be emptied.
  chosen_outputs<Space>& alias = outputs;
  outputs = std::move(alias);
  CHECK_THROWS_WITH_AS(outputs.plan(step, state),
                       "runner: it holds no units (it was moved from, or its unit was given to a "
                       "dispatcher or multi_pooler): plan and run with the runner that holds them",
                       seqpool::error);
}

TEST_CASE_TEMPLATE_DEFINE("a runtime_multi_pooler reads CUDA's 16-bit rows as seqpool's of the same bits", Space,
                          chosen_parts_read_cuda_16_bit_rows) {
#if SEQPOOL_HAS_CUDA_FLOAT16
  using namespace parts_cases;
  Space space;
  std::mt19937 engine(36);
  const std::int64_t columns = 4;
  const model<Space> weights(space, columns, 2, grid_values(columns, engine), 0.25f, grid_values(2 * columns, engine),
                             grid_values(2, engine));
  const std::vector<std::int64_t> ids_a{0, 3, 5};
  const std::vector<std::int64_t> ids_b{0, 5, 2, 5, 1};
  seqpool::batch step{{test::whole("a", seqpool::task::embed, 3), test::whole("b", seqpool::task::embed, 5)}};
  step.requests[0].prompt_token_ids = ids_a;
  step.requests[1].prompt_token_ids = ids_b;
  const std::vector<float> rows = grid_values(8 * columns, engine);
  // The step over rows of element type T, through parts chosen at run time, under the audit.
  const auto pooled = [&]<class T>(const std::vector<T>& values) {
    chosen_outputs<Space> outputs = weights.template outputs<chosen_outputs<Space>>(space, {0});
    seqpool::state_store<Space> state(space);
    seqpool::parts_plan plan;
    const auto hidden = test::to_space(space, values);
    outputs.plan(step, state, plan);
    outputs.reserve(plan, state);
    const output_buffers<Space> out(space, plan.parts[0].output_size, plan.parts[1].output_size,
                                    plan.parts[2].output_size);
    const seqpool::audit_scope scope(space.audit());
    out.template pass<chosen_outputs<Space>>([&](auto... each) {
      outputs.forward(seqpool::make_hidden_view(hidden.data(), plan.num_rows, columns), plan, state, each...);
    });
    test::check_sync_contract(scope.counts());
    return out.cut_by(space, plan);
  };
  const auto same_bits = [&]<class Cuda, class Own>() {
    const std::vector<Own> own = test::convert<Own>(rows);
    std::vector<Cuda> cuda(own.size());
    std::memcpy(static_cast<void*>(cuda.data()), own.data(), own.size() * sizeof(Own));  // the same bits
    const step_results from_own = pooled(own);
    const step_results from_cuda = pooled(cuda);
    REQUIRE(from_own.dense[1].has_value());
    CHECK(from_cuda.dense == from_own.dense);
    CHECK(from_cuda.sparse == from_own.sparse);
    CHECK(from_cuda.colbert == from_own.colbert);
  };
  same_bits.template operator()<__half, seqpool::half>();
  same_bits.template operator()<__nv_bfloat16, seqpool::bfloat16>();
#else
  MESSAGE("built without CUDA's 16-bit types: nothing to read");
#endif
}
