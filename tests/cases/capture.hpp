// Steps captured once into a graph and replayed for every batch that fits,
// compared with host_space step by step. Defines templated cases over device
// spaces; test::captured_graph says how each captures and replays.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

#include "../support/graph.hpp"
#include "../support/prompts.hpp"
#include "../support/step.hpp"

namespace capture_cases {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;

constexpr std::int64_t hidden_size = 40;
constexpr std::int64_t labels = 3;

/// Every task served in one space: the classify heads with a classifier of
/// `weights`, the embed heads with a stack of two dense layers (40 → 23, tanh,
/// then 23 → 16), whose outputs between them the workspace holds (23 apart:
/// each request's from a 16-byte boundary, as the capacity's bound allows for).
template <class Space>
struct engine {
  static constexpr std::int64_t between = 23;
  static constexpr std::int64_t embedded = 16;

  Space space;
  seqpool::state_store<Space> state{space};
  seqpool::buffer<float, Space> classifier;
  seqpool::buffer<float, Space> dense;
  seqpool::dispatcher<seqpool::configurable_table<Space>> dispatcher;

  template <class... SpaceArguments>
  engine(const std::vector<float>& weights, method::any_sequence embed, method::any_token tokens,
         SpaceArguments&&... arguments)
      : space(std::forward<SpaceArguments>(arguments)...),
        classifier(test::to_space(space, weights)),
        dense(test::to_space(space, test::drawn_values(between * (hidden_size + embedded), 7, 0.2f))),
        dispatcher(space,
                   seqpool::pooler<method::any_sequence, head::embed, Space>(space, hidden_size, embed,
                                                                            head::embed(stack())),
                   seqpool::pooler<method::any_sequence, head::classify, Space>(
                       space, hidden_size, method::max{}, head::classify(layer())),
                   seqpool::pooler<method::any_token, head::embed, Space>(space, hidden_size, tokens,
                                                                         head::embed(stack())),
                   seqpool::pooler<method::any_token, head::classify, Space>(space, hidden_size, method::all{},
                                                                            head::classify(layer()))) {}

  seqpool::linear_layer layer() const { return {classifier.data(), nullptr, labels, hidden_size}; }
  seqpool::dense_stack stack() const {
    return {{{dense.data(), nullptr, between, hidden_size}, seqpool::activation_function::tanh},
            {{dense.data() + between * hidden_size, nullptr, embedded, between}}};
  }
};

/// A request of the drawn batches: its prompt, and how far it has come.
struct flight {
  seqpool::request r;
  std::vector<float> prompt;
  std::vector<std::int64_t> ids;
  std::int64_t done = 0;
};

/// Batches of different sizes and tasks, with prompts that continue across
/// steps (chunked prefill), drawn reproducibly.
class batches {
 public:
  explicit batches(std::uint32_t seed) : random_(seed) {}

  /// The next step: requests in flight continue, new ones join; rows and
  /// requests stay within `limits`.
  std::pair<seqpool::batch, std::vector<float>> next(const seqpool::capacity& limits) {
    std::erase_if(flights_, [](const flight& f) { return f.done == f.r.prompt_len; });
    const std::int64_t fresh = between(1, 4);
    for (std::int64_t k = 0; k < fresh && std::ssize(flights_) < limits.requests; ++k) {
      flight& f = flights_.emplace_back();
      const std::int64_t prompt_len = between(1, 700);
      std::uniform_real_distribution<float> value(-2.0f, 2.0f);
      for (std::int64_t i = 0; i < prompt_len * hidden_size; ++i) f.prompt.push_back(value(random_));
      for (std::int64_t t = 0; t < prompt_len; ++t) f.ids.push_back(between(0, 3));
      f.r = test::whole(test::id("q", serial_++), static_cast<task>(between(0, 3)), prompt_len,
                        {.use_activation = between(0, 3) != 0, .step_tag_id = 2});
      // Sequence requests (MEAN and MAX here) may begin with an instruction they leave out.
      if (!seqpool::is_token_task(f.r.task) && prompt_len > 1 && between(0, 3) == 0)
        f.r.params.instruction_len = between(1, prompt_len - 1);
      // Token requests (ALL and STEP here) may drop their first and last rows and rows of id 3.
      if (seqpool::is_token_task(f.r.task) && between(0, 2) == 0) {
        f.r.params.drop_first = between(0, 1) == 1;
        f.r.params.drop_last = between(0, 1) == 1;
        if (between(0, 1) == 1) f.r.params.drop_token_ids = {3};
      }
      f.r.prompt_token_ids = f.ids;
    }
    seqpool::batch step;
    std::vector<float> hidden;
    std::int64_t rows = 0;
    for (flight& f : flights_) {
      const std::int64_t left = f.r.prompt_len - f.done;
      const std::int64_t size = std::min(left, std::min(limits.rows - rows, between(1, 400)));
      if (size == 0) break;
      seqpool::request r = f.r;
      r.num_computed = f.done;
      r.num_scheduled = size;
      step.requests.push_back(r);
      hidden.insert(hidden.end(), f.prompt.begin() + f.done * hidden_size,
                    f.prompt.begin() + (f.done + size) * hidden_size);
      f.done += size;
      rows += size;
    }
    return {step, hidden};
  }

 private:
  std::int64_t between(std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random_);
  }

  std::mt19937 random_;
  std::vector<flight> flights_;
  int serial_ = 0;
};

/// Results of one step, copied back, one per request.
template <class Space>
test::results results_of(Space& space, const seqpool::step_plan& plan, const seqpool::buffer<float, Space>& output) {
  return test::slice(plan, test::to_host(space, output));
}

void check_same(const test::results& actual, const test::results& expected) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    REQUIRE(actual[i].has_value() == expected[i].has_value());
    if (expected[i]) test::check_close(*actual[i], *expected[i], 1e-5);
  }
}

std::vector<float> classifier_weights() {
  std::vector<float> weights(labels * hidden_size);
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>(static_cast<int>(i % 7) - 3) / 10;
  return weights;
}

}  // namespace capture_cases

TEST_CASE_TEMPLATE_DEFINE("a dispatcher step captured after the ring wrapped replays for every batch that fits", Space,
                          dispatcher_capture) {
  using namespace capture_cases;
  using graph = test::captured_graph<Space>;
  const seqpool::capacity limits{.requests = 8, .rows = 1600, .result_rows = 6000, .columns = 0};
  const std::vector<float> weights = classifier_weights();
  engine<Space> device(weights, method::mean{}, method::step{}, graph::backend());
  engine<seqpool::host_space> host(weights, method::mean{}, method::step{});
  device.dispatcher.reserve_capacity(limits);
  batches drawn(20261130);

  // Steps run on both spaces alike; the host's results are the reference.
  seqpool::buffer<float, Space> output(device.space, static_cast<std::size_t>(device.dispatcher.output_capacity()));
  seqpool::buffer<float, Space> hidden(device.space, static_cast<std::size_t>(limits.rows * hidden_size));
  const auto reference = [&](const seqpool::batch& step, const std::vector<float>& rows) {
    return test::run_step(host.space, host.dispatcher, host.state, step, rows);
  };
  const auto load = [&](const std::vector<float>& rows) {
    device.space.copy_in(std::span<const float>(rows), hidden.span().first(rows.size()));
  };

  // Six eager steps: the staging ring of four slots wraps.
  for (int step = 0; step < 6; ++step) {
    const auto [batch, rows] = drawn.next(limits);
    check_same(test::run_step(device.space, device.dispatcher, device.state, batch, rows), reference(batch, rows));
  }

  auto home = device.dispatcher.reserve_graph();
  const seqpool::hidden_view<float> captured_hidden = seqpool::make_hidden_view(hidden.data(), limits.rows, hidden_size);
  {
    const auto [batch, rows] = drawn.next(limits);
    const seqpool::step_plan plan = device.dispatcher.plan(batch, device.state);
    device.dispatcher.reserve(plan, device.state);
    load(rows);
    const seqpool::audit_scope scope(device.space.audit());
    graph::begin(device.space);
    device.dispatcher.capture(captured_hidden, plan, device.state, output.span(), home);
    const graph replays(device.space);
    // One upload, of what the batch uses of the capacity's image (or all of it), and every
    // pooler's launches sized by the capacity: MEAN with its two dense layers
    // 3, MAX with its classifier 2, STEP with its two layers 3, ALL with its
    // classifier 2.
    CHECK(scope.counts().uploads == 1);
    CHECK(scope.counts().upload_bytes > 0);
    if constexpr (Space::uploads_in_pieces)
      CHECK(scope.counts().upload_bytes < static_cast<std::int64_t>(home.bytes()));
    else
      CHECK(scope.counts().upload_bytes == static_cast<std::int64_t>(home.bytes()));
    CHECK(scope.counts().launches == 10);
    CHECK(seqpool::keeps_sync_contract(scope.counts()));
    replays.launch();
    home.mark_launched();
    check_same(results_of(device.space, plan, output), reference(batch, rows));

    for (int replay = 0; replay < 8; ++replay) {
      CAPTURE(replay);
      const auto [next, next_rows] = drawn.next(limits);
      const seqpool::step_plan planned = device.dispatcher.plan(next, device.state);
      device.dispatcher.reserve(planned, device.state);
      const seqpool::audit_scope between(device.space.audit());
      device.dispatcher.restage(planned, device.state, home);
      CHECK(seqpool::keeps_sync_contract(between.counts()));
      load(next_rows);
      replays.launch();
      home.mark_launched();
      check_same(results_of(device.space, planned, output), reference(next, next_rows));
    }
  }
}

namespace capture_cases {

/// Steps of the pooler cases: a long prompt in chunks of 500, 100 and 500 rows
/// beside short whole prompts, then whole prompts up to the capacity's rows.
inline std::vector<std::vector<seqpool::request>> replayed_steps(task pooling_task) {
  return {
      {test::part("long", pooling_task, 1100, 0, 500), test::whole("a", pooling_task, 3)},
      {test::whole("b", pooling_task, 1), test::part("long", pooling_task, 1100, 500, 100),
       test::whole("c", pooling_task, 90)},
      {test::part("long", pooling_task, 1100, 600, 500)},
      {test::whole("d", pooling_task, 700), test::whole("e", pooling_task, 2), test::whole("f", pooling_task, 300)},
      {test::whole("g", pooling_task, 1200)},
      {test::whole("h", pooling_task, 5)},
  };
}

/// `pooler`, sized for `limits`, captured at the first of `steps` and replayed
/// for the others, each step equal to `reference`'s in `host` (float results)
/// within `tolerance`. Request "long" continues across the steps.
template <class Space, class Pooler, class Reference>
void replay_against(Space& space, Pooler& pooler, seqpool::host_space& host, Reference& reference,
                    const seqpool::capacity& limits, const std::vector<std::vector<seqpool::request>>& steps,
                    double tolerance) {
  using Result = typename Pooler::result_type;
  seqpool::state_store<Space> state(space);
  seqpool::state_store<seqpool::host_space> host_state(host);
  pooler.reserve_capacity(limits);
  seqpool::buffer<Result, Space> output(space, static_cast<std::size_t>(pooler.output_capacity()));
  seqpool::buffer<float, Space> hidden(space, static_cast<std::size_t>(limits.rows * hidden_size));
  test::graph_replay<Space, Pooler> graph(pooler);
  const std::vector<float> prompt = [&] {
    std::vector<float> values(static_cast<std::size_t>(limits.rows * hidden_size));  // the longest prompt's rows
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i % 29) - 14) / 7;
    return values;
  }();
  std::int64_t long_done = 0;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    CAPTURE(s);
    const seqpool::batch step{steps[s]};
    std::vector<float> rows;
    for (const seqpool::request& r : step.requests) {
      const std::int64_t first = r.id == "long" ? long_done : 0;
      rows.insert(rows.end(), prompt.begin() + first * hidden_size,
                  prompt.begin() + (first + r.num_scheduled) * hidden_size);
      if (r.id == "long") long_done += r.num_scheduled;
    }
    const seqpool::step_plan plan = pooler.plan(step, state);
    space.copy_in(std::span<const float>(rows), hidden.span().first(rows.size()));
    graph.run(space, seqpool::make_hidden_view(hidden.data(), limits.rows, hidden_size), plan, state, output.span());
    {
      // A captured step stages in its graph's slot, so after capture() and
      // each restage() the pooler holds none of the space's staging ring.
      std::vector<typename Space::upload_reservation> others(seqpool::detail::device::staging_policy::slots);
      for (typename Space::upload_reservation& other : others) space.reserve_upload(16, other);
    }
    const test::results expected = test::run_step(host, reference, host_state, step, rows);
    const test::results actual = test::slice(plan, test::to_host(space, output));
    REQUIRE(actual.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      REQUIRE(actual[i].has_value() == expected[i].has_value());
      if (expected[i]) test::check_close(*actual[i], *expected[i], tolerance);
    }
  }
  CHECK(state.size() == 0);
}

/// A pooler of Method (MEAN, or a concat, whose requests are all split) and
/// Result results captured once and replayed for steps of other sizes and
/// chunks (16-bit results: within one step of the 16-bit type, since host and
/// device add in other orders).
template <class Space, class Result, class Method = method::mean>
void pooler_capture_with() {
  CAPTURE(sizeof(Result));
  CAPTURE(Method::name);
  Space space{test::captured_graph<Space>::backend()};
  seqpool::pooler<Method, head::embed, Space, Result> pooler(space, hidden_size);
  seqpool::host_space host;
  seqpool::pooler<Method, head::embed, seqpool::host_space> reference(host, hidden_size);
  replay_against(space, pooler, host, reference, {.requests = 4, .rows = 1200}, replayed_steps(task::embed),
                 std::is_same_v<Result, float> ? 1e-5 : 1e-2);
}

/// An ALL pooler whose embed head is a stack of two dense layers (40 → 36, tanh,
/// then 36 → 136: on a device a tile of outputs, then two, finished by a launch
/// of their own), of Result results, captured once and replayed: the long
/// prompt's first chunks stash their rows in its state, and its last chunk
/// passes them through the stack with its own, 1100 result rows. The
/// capacity's workspace counts no gathered rows for a family that projects
/// returned rows where they lie: the outputs between the layers and the
/// drafts, for every result row the capacity allows, must still fit.
template <class Space, class Result>
void token_stack_capture_with() {
  CAPTURE(sizeof(Result));
  constexpr std::int64_t between = 36;
  constexpr std::int64_t embedded = 136;
  const std::vector<float> weights = test::drawn_values(between * (hidden_size + embedded), 7, 0.2f);
  const auto stack = [](const float* dense) {
    return seqpool::dense_stack{{{dense, nullptr, between, hidden_size}, seqpool::activation_function::tanh},
                                {{dense + between * hidden_size, nullptr, embedded, between}}};
  };
  Space space{test::captured_graph<Space>::backend()};
  const seqpool::buffer<float, Space> dense = test::to_space(space, weights);
  seqpool::pooler<method::all, head::embed, Space, Result> pooler(space, hidden_size, method::all{},
                                                                  head::embed(stack(dense.data())));
  seqpool::host_space host;
  seqpool::pooler<method::all, head::embed, seqpool::host_space> reference(host, hidden_size, method::all{},
                                                                           head::embed(stack(weights.data())));
  replay_against(space, pooler, host, reference, {.requests = 4, .rows = 1200, .result_rows = 1200},
                 replayed_steps(task::token_embed), std::is_same_v<Result, float> ? 1e-5 : 1e-2);
}

}  // namespace capture_cases

TEST_CASE_TEMPLATE_DEFINE("a pooler step captured once replays for batches of other sizes and chunks", Space,
                          pooler_capture) {
  capture_cases::pooler_capture_with<Space, float>();
  capture_cases::pooler_capture_with<Space, seqpool::bfloat16>();
  namespace method = seqpool::method;
  capture_cases::pooler_capture_with<Space, float, method::concat<method::cls, method::mean, method::max>>();
}

TEST_CASE_TEMPLATE_DEFINE("a token pooler with a stack of layers, captured once, projects stashed and fresh rows on replay",
                          Space, token_stack_capture) {
  capture_cases::token_stack_capture_with<Space, float>();
  capture_cases::token_stack_capture_with<Space, seqpool::bfloat16>();
}

TEST_CASE_TEMPLATE_DEFINE(
    "a captured step whose upload copies the capacity's whole image replays as one that copies pieces", Space,
    whole_image_capture) {
  capture_cases::pooler_capture_with<Space, float>();
  capture_cases::token_stack_capture_with<Space, float>();
}

TEST_CASE_TEMPLATE_DEFINE("the device kernels give the same results, bit for bit, whatever the wave their grids are cut to",
                          Space, any_wave) {
  using namespace capture_cases;
  using graph = test::captured_graph<Space>;
  const seqpool::capacity limits{.requests = 8, .rows = 1600};
  const std::vector<float> weights = classifier_weights();
  engine<Space> one(weights, method::mean{}, method::step{}, graph::backend(1));
  engine<Space> few(weights, method::mean{}, method::step{}, graph::backend(3));
  engine<Space> all(weights, method::mean{}, method::step{}, graph::backend(100000));
  batches drawn(20261201);
  for (int step = 0; step < 8; ++step) {
    CAPTURE(step);
    const auto [batch, rows] = drawn.next(limits);
    const test::results expected = test::run_step(all.space, all.dispatcher, all.state, batch, rows);
    CHECK(test::run_step(one.space, one.dispatcher, one.state, batch, rows) == expected);
    CHECK(test::run_step(few.space, few.dispatcher, few.state, batch, rows) == expected);
  }
}
