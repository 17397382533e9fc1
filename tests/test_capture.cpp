// Steps captured once into a graph and replayed for every batch that fits, on the
// capture-checking stand-in, whose capture refuses what CUDA's Global mode
// refuses; and the launches each pooler makes.
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "cases/capture.hpp"
#include "support/prompts.hpp"
#include "support/spaces.hpp"
#include "support/step.hpp"

namespace {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;
using device_omp = seqpool::device_space<seqpool::omp_backend>;
/// The candidate policy whose captured pooling launch runs on one wave.
using one_wave_omp = seqpool::device_space<
    seqpool::with_policy<seqpool::omp_backend, seqpool::detail::device::one_wave_capture_policy>>;
/// The candidate policy that puts a dispatcher's poolers on branches of the stream.
using branched_omp =
    seqpool::device_space<seqpool::with_policy<seqpool::omp_backend, seqpool::detail::device::branched_entries_policy>>;
/// The candidate policy whose captured upload copies the capacity's whole image.
using whole_image_omp = seqpool::device_space<
    seqpool::with_policy<seqpool::omp_backend, seqpool::detail::device::whole_image_capture_policy>>;
using capture_cases::hidden_size;
using capture_cases::labels;

}  // namespace

TEST_CASE_TEMPLATE_APPLY(dispatcher_capture, std::tuple<device_omp, one_wave_omp, branched_omp>);
TEST_CASE_TEMPLATE_APPLY(pooler_capture, std::tuple<device_omp, one_wave_omp>);
// The one-wave candidate changes only a captured pooling launch, which a token pooler never makes.
TEST_CASE_TEMPLATE_APPLY(token_stack_capture, std::tuple<device_omp>);
TEST_CASE_TEMPLATE_APPLY(any_wave, std::tuple<device_omp, one_wave_omp>);
TEST_CASE_TEMPLATE_APPLY(whole_image_capture, std::tuple<whole_image_omp>);

TEST_CASE_TEMPLATE("a dispatcher's step puts each pooler it runs on a branch of its own where the policy says so",
                   Space, device_omp, branched_omp) {
  constexpr bool branched = Space::entries_on_branches;
  capture_cases::engine<Space> device(capture_cases::classifier_weights(), method::mean{}, method::step{});
  const auto rows_of = [](std::int64_t rows) { return test::drawn_values(rows * hidden_size, 5); };
  // One pooler's requests: nothing to fork.
  const seqpool::batch embeds{{test::whole("a", task::embed, 3), test::whole("b", task::embed, 5)}};
  test::run_step(device.space, device.dispatcher, device.state, embeds, rows_of(8));
  CHECK(device.space.backend().busiest_fork() == 0);
  // Two poolers' requests: two branches.
  const seqpool::batch two{{test::whole("c", task::embed, 3), test::whole("d", task::token_classify, 4)}};
  test::run_step(device.space, device.dispatcher, device.state, two, rows_of(7));
  CHECK(device.space.backend().busiest_fork() == (branched ? 2 : 0));
  // A captured step launches every pooler the dispatcher has: four branches.
  device.dispatcher.reserve_capacity({.requests = 4, .rows = 16, .result_rows = 16});
  auto home = device.dispatcher.reserve_graph();
  seqpool::buffer<float, Space> hidden(device.space, 16 * hidden_size);
  seqpool::buffer<float, Space> output(device.space, static_cast<std::size_t>(device.dispatcher.output_capacity()));
  const seqpool::step_plan plan = device.dispatcher.plan(embeds, device.state);
  device.dispatcher.reserve(plan, device.state);
  device.space.backend().begin_capture();
  device.dispatcher.capture(seqpool::make_hidden_view(hidden.data(), 16, hidden_size), plan, device.state,
                            output.span(), home);
  CHECK(device.space.backend().end_capture().size() > 0);
  CHECK(device.space.backend().busiest_fork() == (branched ? 4 : 0));
}

TEST_CASE("a captured STEP step whose rows return more columns than H writes within output_capacity()") {
  // returned_token_ids may repeat a column: 8 columns a row of H = 2, within the capacity's 8 columns.
  constexpr std::int64_t width = 2;
  const seqpool::capacity limits{.requests = 1, .rows = 4, .result_rows = 4, .columns = 8};
  device_omp space;
  seqpool::state_store<device_omp> state(space);
  seqpool::pooler<method::step, head::embed, device_omp> pooler(space, width);
  pooler.reserve_capacity(limits);
  const std::vector<std::int64_t> ids{5, 5, 5, 5};
  seqpool::request r = test::whole("s", task::token_embed, 4);
  r.prompt_token_ids = ids;
  r.params.use_activation = false;
  r.params.returned_token_ids = {0, 1, 0, 1, 1, 0, 0, 1};
  const seqpool::batch step{{r}};
  const seqpool::step_plan plan = pooler.plan(step, state);
  CHECK(plan.output_size <= pooler.output_capacity());
  const std::vector<float> rows = test::drawn_values(4 * width, 3);
  seqpool::buffer<float, device_omp> hidden = test::to_space(space, rows);
  seqpool::buffer<float, device_omp> output(space, static_cast<std::size_t>(pooler.output_capacity()));
  test::graph_replay<device_omp, decltype(pooler)> graph(pooler);
  graph.run(space, seqpool::make_hidden_view(hidden.data(), 4, width), plan, state, output.span());
  const test::results found = test::slice(plan, test::to_host(space, output));
  REQUIRE(found.size() == 1);
  REQUIRE(found[0].has_value());
  REQUIRE(found[0]->rows == 4);
  REQUIRE(found[0]->cols == 8);
  for (std::int64_t row = 0; row < 4; ++row)
    for (std::int64_t c = 0; c < 8; ++c)
      CHECK(found[0]->at(row, c) ==
            rows[static_cast<std::size_t>(row * width + r.params.returned_token_ids[static_cast<std::size_t>(c)])]);
}

TEST_CASE("a step beyond the capacity's result rows is refused naming the limit") {
  const seqpool::capacity limits{.requests = 1, .rows = 4, .result_rows = 4};
  device_omp space;
  seqpool::state_store<device_omp> state(space);
  const seqpool::buffer<float, device_omp> dense = test::to_space(space, test::drawn_values(3 * hidden_size, 7));
  seqpool::pooler<method::all, head::embed, device_omp> pooler(
      space, hidden_size, method::all{}, head::embed(seqpool::linear_layer{dense.data(), nullptr, 3, hidden_size}));
  pooler.reserve_capacity(limits);
  const seqpool::batch first{{test::part("p", task::token_embed, 8, 0, 4)}};
  test::run_step(space, pooler, state, first, test::drawn_values(4 * hidden_size, 5));
  const seqpool::batch last{{test::part("p", task::token_embed, 8, 4, 4)}};
  CHECK_THROWS_WITH_AS(pooler.plan(last, state), "capacity: the step has 8 result_rows, more than the capacity's 4",
                       seqpool::error);
}

TEST_CASE("capture and replay refuse what would break the graph, before anything is queued") {
  const seqpool::capacity limits{.requests = 2, .rows = 16};
  device_omp space;
  seqpool::state_store<device_omp> state(space);
  seqpool::pooler<method::mean, head::embed, device_omp> pooler(space, 4);
  seqpool::buffer<float, device_omp> hidden(space, 16 * 4);
  const auto view = seqpool::make_hidden_view(hidden.data(), 16, 4);
  const seqpool::batch step{{test::whole("a", task::embed, 3)}};

  CHECK_THROWS_WITH_AS(pooler.reserve_graph(), "reserve_graph: needs a capacity: call reserve_capacity() first",
                       seqpool::error);
  const seqpool::step_plan too_long = pooler.plan(seqpool::batch{{test::whole("long", task::embed, 20)}}, state);
  pooler.reserve_capacity(limits);
  seqpool::buffer<float, device_omp> output(space, static_cast<std::size_t>(pooler.output_capacity()));
  auto home = pooler.reserve_graph();
  CHECK_THROWS_WITH_AS(pooler.plan(seqpool::batch{{test::whole("a", task::embed, 17)}}, state),
                       "capacity: the step has 17 rows, more than the capacity's 16", seqpool::error);
  CHECK_THROWS_WITH_AS(pooler.plan(seqpool::batch{{test::whole("a", task::embed, 1), test::whole("b", task::embed, 1),
                                                   test::whole("c", task::embed, 1)}},
                                   state),
                       "capacity: the step has 3 requests, more than the capacity's 2", seqpool::error);

  const seqpool::step_plan plan = pooler.plan(step, state);
  pooler.reserve(plan, state);
  const seqpool::audit_counts before = space.audit().counts();
  CHECK_THROWS_WITH_AS(pooler.restage(too_long, state, home), "capacity: the step has 20 rows, more than the capacity's 16",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(pooler.capture(view, plan, state, output.span(), home),
                       doctest::Contains("the stream is not being captured"), seqpool::error);
  space.backend().begin_capture();
  CHECK_THROWS_WITH_AS(pooler.forward(seqpool::make_hidden_view(hidden.data(), 3, 4), plan, state, output.span()),
                       doctest::Contains("a captured step goes through capture()"), seqpool::error);
  CHECK_THROWS_WITH_AS(pooler.reserve(plan, state), doctest::Contains("must run outside stream capture"),
                       seqpool::error);
  CHECK_THROWS_WITH_AS(pooler.reserve(pooler.plan(seqpool::batch{}, state), state),
                       doctest::Contains("must run outside stream capture"), seqpool::error);
  CHECK_THROWS_WITH_AS(pooler.capture(seqpool::make_hidden_view(hidden.data(), 3, 4), plan, state, output.span(), home),
                       doctest::Contains("give it all 16 rows of the capacity, not 3"), seqpool::error);
  CHECK_THROWS_WITH_AS(pooler.capture(view, plan, state, output.span().first(1), home),
                       doctest::Contains("it must hold output_capacity()"), seqpool::error);
  // Every replay reads the rows while it writes the output: one laid over the other is refused.
  CHECK_THROWS_WITH_AS(pooler.capture(view, plan, state, cuda::std::span<float>(hidden.data(), output.size()), home),
                       "output: overlaps the hidden states, which the step reads while it writes: give it memory of "
                       "its own",
                       seqpool::error);
  CHECK(space.audit().counts() == before);
  pooler.capture(view, plan, state, output.span(), home);
  CHECK_THROWS_WITH_AS(home.mark_launched(), doctest::Contains("outside stream capture"), seqpool::error);
  const seqpool::omp_backend::graph graph = space.backend().end_capture();

  const seqpool::step_plan next = pooler.plan(step, state);
  pooler.reserve(next, state);
  CHECK_THROWS_WITH_AS(pooler.restage(next, state, home),
                       doctest::Contains("the graph was not launched since it was last staged"), seqpool::error);
  graph.launch();
  home.mark_launched();
  pooler.restage(next, state, home);
  const seqpool::step_plan third = pooler.plan(step, state);
  pooler.reserve(third, state);
  space.backend().begin_capture();
  CHECK_THROWS_WITH_AS(pooler.capture(view, third, state, output.span(), home),
                       doctest::Contains("already serves a graph"), seqpool::error);
  (void)space.backend().end_capture();

  // A graph_upload kept elsewhere once captured: the one moved from refuses, naming the move.
  graph.launch();
  auto kept = std::move(home);
  CHECK_THROWS_WITH_AS(home.mark_launched(),
                       "mark_launched: the graph_upload was moved from: call it on the one it moved into",
                       seqpool::error);
  kept.mark_launched();
  CHECK_THROWS_WITH_AS(pooler.restage(third, state, home),
                       "graph_upload: it was moved from: capture and restage with the one it moved into",
                       seqpool::error);
  pooler.restage(third, state, kept);
  graph.launch();
  kept.mark_launched();
}

TEST_CASE("a pooler captures and restages only with the graph_upload its own reserve_graph() made") {
  device_omp space;
  seqpool::state_store<device_omp> state(space);
  seqpool::pooler<method::mean, head::embed, device_omp> small(space, 4);
  small.reserve_capacity({.requests = 1, .rows = 4});
  auto small_home = small.reserve_graph();
  seqpool::pooler<method::mean, head::embed, device_omp> big(space, 4);
  big.reserve_capacity({.requests = 64, .rows = 4096});
  seqpool::buffer<float, device_omp> hidden(space, 4096 * 4);
  seqpool::buffer<float, device_omp> output(space, static_cast<std::size_t>(big.output_capacity()));
  seqpool::batch step;
  for (int i = 0; i < 60; ++i) step.requests.push_back(test::whole(test::id("r", i), task::embed, 2));
  const seqpool::step_plan plan = big.plan(step, state);
  big.reserve(plan, state);
  // The smaller pooler's slot holds a fraction of this step's image.
  space.backend().begin_capture();
  CHECK_THROWS_WITH_AS(
      big.capture(seqpool::make_hidden_view(hidden.data(), 4096, 4), plan, state, output.span(), small_home),
      doctest::Contains("graph_upload: it was made by another pooler's reserve_graph()"), seqpool::error);
  CHECK(space.backend().end_capture().size() == 0);

  // A dispatcher's step restaged with a pooler's upload.
  seqpool::dispatcher<seqpool::configurable_table<device_omp>> engine(
      space, seqpool::pooler<method::any_sequence, head::embed, device_omp>(space, 4, method::mean{}), std::nullopt,
      std::nullopt, std::nullopt);
  engine.reserve_capacity({.requests = 64, .rows = 4096});
  const seqpool::step_plan dispatched = engine.plan(step, state);
  engine.reserve(dispatched, state);
  CHECK_THROWS_WITH_AS(engine.restage(dispatched, state, small_home),
                       doctest::Contains("graph_upload: it was made by another pooler's reserve_graph()"),
                       seqpool::error);
}

TEST_CASE("a capacity is fixed once: the memory a captured step reads never moves") {
  device_omp space;
  seqpool::pooler<method::mean, head::embed, device_omp> pooler(space, 4);
  pooler.reserve_capacity({.requests = 1, .rows = 4});
  pooler.reserve_capacity({.requests = 1, .rows = 4});  // the same again changes nothing
  const seqpool::audit_counts before = space.audit().counts();
  CHECK_THROWS_WITH_AS(pooler.reserve_capacity({.requests = 8, .rows = 64}),
                       "capacity: it is fixed once, at requests 1, rows 4, result_rows 0, columns 0: graphs captured "
                       "with it read the memory it sized",
                       seqpool::error);
  CHECK(space.audit().counts() == before);
}

TEST_CASE("a capacity too large to count or to allocate is an error that names it") {
  device_omp space;
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  const auto refused = [&]<class Method>(Method, const seqpool::capacity& limits, const std::string& message) {
    seqpool::pooler<Method, head::embed, device_omp> pooler(space, 8);
    CHECK_THROWS_WITH_AS(pooler.reserve_capacity(limits), doctest::Contains(message.c_str()), seqpool::error);
  };
  const std::string out_of_range = "capacity: requests and rows must be in [1, 2^30]";
  refused(method::mean{}, {.requests = most, .rows = 8}, out_of_range);
  refused(method::mean{}, {.requests = 8, .rows = std::int64_t{1} << 62}, out_of_range);
  refused(method::mean{}, {.requests = 8, .rows = std::int64_t{1} << 40}, out_of_range);
  refused(method::all{}, {.requests = 8, .rows = 8, .result_rows = most}, out_of_range);
  // Within range, more workspace (to draft 16-bit rows in) than can be allocated.
  seqpool::pooler<method::all, head::embed, device_omp, seqpool::bfloat16> wide(space, std::int64_t{1} << 30);
  CHECK_THROWS_WITH_AS(wide.reserve_capacity({.requests = 8, .rows = 8, .result_rows = std::int64_t{1} << 30}),
                       doctest::Contains("is more than can be allocated"), seqpool::error);
}

TEST_CASE("a dispatcher refuses to capture or restage a plan made before its capacity") {
  device_omp space;
  seqpool::state_store<device_omp> state(space);
  seqpool::dispatcher<seqpool::configurable_table<device_omp>> engine(
      space, seqpool::pooler<method::any_sequence, head::embed, device_omp>(space, 4, method::mean{}), std::nullopt,
      std::nullopt, std::nullopt);
  const seqpool::batch step{{test::whole("a", task::embed, 3)}};
  const seqpool::step_plan early = engine.plan(step, state);
  engine.reserve_capacity({.requests = 2, .rows = 8});
  auto home = engine.reserve_graph();
  seqpool::buffer<float, device_omp> hidden(space, 8 * 4);
  seqpool::buffer<float, device_omp> output(space, static_cast<std::size_t>(engine.output_capacity()));
  engine.reserve(early, state);
  space.backend().begin_capture();
  CHECK_THROWS_WITH_AS(
      engine.capture(seqpool::make_hidden_view(hidden.data(), 8, 4), early, state, output.span(), home),
      "capacity: the plan was made before reserve_capacity(): plan the step again", seqpool::error);
  const seqpool::omp_backend::graph nothing = space.backend().end_capture();
  CHECK(nothing.size() == 0);
}

TEST_CASE("forward runs the plan the last reserve() was for, once, and throws before it queues anything otherwise") {
  const auto check_space = [&]<class Space>(Space& space) {
    seqpool::state_store<Space> state(space);
    seqpool::pooler<method::mean, head::embed, Space> pooler(space, 4);
    const auto hidden = test::to_space(space, std::vector<float>(4 * 5, 1.0f));
    const auto view = seqpool::make_hidden_view(hidden.data(), 5, 4);
    seqpool::buffer<float, Space> output(space, 8);
    const seqpool::step_plan plan =
        pooler.plan(seqpool::batch{{test::part("c", task::embed, 9, 0, 3), test::whole("w", task::embed, 2)}}, state);
    const seqpool::audit_counts before = space.audit().counts();
    CHECK_THROWS_WITH_AS(pooler.forward(view, plan, state, output.span()),
                         doctest::Contains("call reserve() with this step's plan before"), seqpool::error);
    CHECK(space.audit().counts() == before);
    CHECK_FALSE(state.contains("c"));

    // Whole requests too, after an earlier step that had its reserve().
    const seqpool::batch whole{{test::whole("w", task::embed, 5)}};
    const seqpool::step_plan first = pooler.plan(whole, state);
    pooler.reserve(first, state);
    pooler.forward(view, first, state, output.span());
    const seqpool::step_plan second = pooler.plan(whole, state);
    CHECK_THROWS_WITH_AS(pooler.forward(view, second, state, output.span()),
                         doctest::Contains("call reserve() with this step's plan before"), seqpool::error);
    // A plan of whole requests runs once: reserve() refuses it again, and
    // forward() after the reserve() of another plan.
    CHECK_THROWS_WITH_AS(pooler.reserve(first, state), doctest::Contains("plan: it ran already"), seqpool::error);
    pooler.reserve(second, state);
    CHECK_THROWS_WITH_AS(pooler.forward(view, first, state, output.span()), doctest::Contains("plan: it ran already"),
                         seqpool::error);
  };
  seqpool::host_space host;
  check_space(host);
  device_omp device;
  check_space(device);
}

TEST_CASE("each pooler makes one launch, one more with a linear layer (but a token pooler), none with nothing to do") {
  // A token method's layer reads the rows it returns where they lie: no launch gathers them first.
  device_omp space;
  seqpool::state_store<device_omp> state(space);
  const std::vector<float> weights = capture_cases::classifier_weights();
  const auto layer_memory = test::to_space(space, weights);
  const seqpool::linear_layer layer{layer_memory.data(), nullptr, labels, hidden_size};
  const std::vector<float> rows(30 * hidden_size, 0.5f);
  const auto launches = [&](auto& pooler, const seqpool::batch& step) {
    const seqpool::audit_scope scope(space.audit());
    test::run_step(space, pooler, state, step, std::vector<float>(rows.begin(), rows.begin() + hidden_size * [&] {
      std::int64_t total = 0;
      for (const seqpool::request& r : step.requests) total += r.num_scheduled;
      return total;
    }()));
    return scope.counts().launches;
  };
  const seqpool::batch mixed{{test::whole("a", task::embed, 3), test::whole("b", task::embed, 20),
                              test::part("c", task::embed, 40, 0, 7)}};
  seqpool::pooler<method::mean, head::embed, device_omp> mean(space, hidden_size);
  CHECK(launches(mean, mixed) == 1);
  seqpool::pooler<method::mean, head::embed, device_omp> projected(space, hidden_size, {}, head::embed(layer));
  seqpool::batch again = mixed;
  again.requests[2] = test::part("d", task::embed, 40, 0, 7);
  CHECK(launches(projected, again) == 2);
  seqpool::pooler<method::all, head::embed, device_omp> all(space, hidden_size);
  const seqpool::batch tokens{{test::whole("t", task::token_embed, 4)}};
  CHECK(launches(all, tokens) == 1);
  seqpool::pooler<method::all, head::classify, device_omp> scored(space, hidden_size, {}, head::classify(layer));
  const seqpool::batch scored_tokens{{test::whole("u", task::token_classify, 4)}};
  CHECK(launches(scored, scored_tokens) == 1);
  // A chunk that stashes its rows gathers them into the state; the last projects them from there.
  const auto stashed = [&](std::int64_t begin, std::int64_t count) {
    return seqpool::batch{{test::part("v", task::token_classify, 9, begin, count)}};
  };
  CHECK(launches(scored, stashed(0, 5)) == 1);
  CHECK(launches(scored, stashed(5, 4)) == 1);
  // LAST before a prompt's last chunk reads nothing and keeps nothing.
  seqpool::pooler<method::last, head::embed, device_omp> last(space, hidden_size);
  CHECK(launches(last, seqpool::batch{{test::part("l", task::embed, 9, 0, 4)}}) == 0);
}

TEST_CASE_TEMPLATE("a captured step's pooling runs on a block an index, or one wave as the policy says", Policy,
                   seqpool::detail::device::launch_policy, seqpool::detail::device::one_wave_capture_policy) {
  using Space = seqpool::device_space<seqpool::with_policy<seqpool::omp_backend, Policy>>;
  // 64 prompts of 2,000 rows of 40 columns: each split into tiles of one slab, a block each in the pooling
  // launch (128 at tiles of 1024 rows), where the stand-in's wave is 16 blocks; the capacity bounds the blocks
  // by one a request, one a split request and one a tile_rows of the capacity's rows (253 at 1024).
  constexpr std::int64_t tile = Policy::tile_rows;
  const std::int64_t eager_blocks = 64 * ((2000 + tile - 1) / tile);
  const std::int64_t bound = 64 + 64 + 64 * 2000 / tile;
  const seqpool::capacity limits{.requests = 64, .rows = 64 * 2000};
  seqpool::batch full;
  for (int i = 0; i < 64; ++i) full.requests.push_back(test::whole(test::id("r", i), task::embed, 2000));
  const std::vector<float> rows = test::drawn_values(limits.rows * hidden_size, 9);
  const auto pooler_in = [](Space& space) { return seqpool::pooler<method::mean, head::embed, Space>(space, hidden_size); };

  Space eager_space;
  seqpool::state_store<Space> eager_state(eager_space);
  auto eager = pooler_in(eager_space);
  const test::results expected = test::run_step(eager_space, eager, eager_state, full, rows);
  CHECK(eager_space.backend().largest_grid() == eager_blocks);

  Space space;
  seqpool::state_store<Space> state(space);
  auto captured = pooler_in(space);
  captured.reserve_capacity(limits);
  const auto hidden = test::to_space(space, rows);
  seqpool::buffer<float, Space> output(space, static_cast<std::size_t>(captured.output_capacity()));
  auto home = captured.reserve_graph();
  const seqpool::step_plan plan = captured.plan(full, state);
  captured.reserve(plan, state);
  space.backend().begin_capture();
  captured.capture(seqpool::make_hidden_view(hidden.data(), limits.rows, hidden_size), plan, state, output.span(),
                   home);
  const seqpool::omp_backend::graph graph = space.backend().end_capture();
  CHECK(space.backend().largest_grid() == (Policy::captured_pooling_in_one_wave ? 16 : bound));
  graph.launch();
  home.mark_launched();
  const test::results actual = capture_cases::results_of(space, plan, output);
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    REQUIRE(actual[i].has_value());
    CHECK(actual[i]->values == expected[i]->values);
  }
}
