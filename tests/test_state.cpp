// The chunked-prefill state store.
#include <memory>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/pooler.hpp>
#include <seqpool/space/device.hpp>
#include <seqpool/space/host.hpp>
#include <seqpool/state.hpp>

#include "support/step.hpp"

using seqpool::task;
using test::part;
using test::whole;

TEST_CASE("a chunked request holds its state from its first chunk until it finishes") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const seqpool::request first = part("r", task::embed, 10, 0, 4);
  state.check(0, first, {});
  float* memory = state.reserve(0, first, 8, {});
  CHECK(memory != nullptr);
  CHECK(state.data("r") == memory);
  CHECK(state.reserve(0, first, 8, {}) == memory);  // reserving again is free
  CHECK(space.audit().counts().allocations == 1);
  state.check(0, first, {});  // a reserved state that has not run yet still accepts its first chunk

  state.advance(first);
  CHECK(state.num_computed("r") == 4);
  const seqpool::request second = part("r", task::embed, 10, 4, 3);
  state.check(0, second, {});
  state.advance(second);
  const seqpool::request last = part("r", task::embed, 10, 7, 3);
  state.check(0, last, {});
  state.advance(last);
  CHECK_FALSE(state.contains("r"));
  CHECK(state.size() == 0);

  SUBCASE("a finished request's state serves the next one without allocating") {
    CHECK(state.reserve(0, part("s", task::embed, 6, 0, 2), 8, {}) == memory);
    CHECK(space.audit().counts().allocations == 1);
    state.release("s");
  }
  SUBCASE("trim returns cached allocations to the space") {
    CHECK(state.cached_allocations() == 1);
    state.trim();
    CHECK(state.cached_allocations() == 0);
    CHECK(space.audit().counts().allocations == 2);
  }
}

TEST_CASE("an integer id's state is its decimal text's: a chunk may give either, and another text is another id") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const std::uint64_t number = 18446744073709551614u;
  const seqpool::request first = part(number, task::embed, 10, 0, 4);
  state.check(0, first, {});
  float* memory = state.reserve(0, first, 8, {});
  state.advance(first);
  CHECK(state.data("18446744073709551614") == memory);
  CHECK(state.num_computed("18446744073709551614") == 4);
  CHECK_FALSE(state.contains("018446744073709551614"));
  CHECK_THROWS_WITH_AS(state.check(0, part("18446744073709551614", task::embed, 10, 0, 4), {}),
                       doctest::Contains("request 0 (id \"18446744073709551614\"): num_computed: 0 restarts"),
                       seqpool::error);
  const seqpool::request second = part("18446744073709551614", task::embed, 10, 4, 6);
  state.check(0, second, {});
  state.advance(second);
  CHECK_FALSE(state.contains(number));
  CHECK(state.size() == 0);

  state.reserve(0, part(7, task::embed, 10, 0, 4), 8, {});
  CHECK(state.contains("7"));
  state.release("7");
  CHECK_FALSE(state.contains(7));
}

TEST_CASE("a token method's request keeps the rows its chunks chose and its prompt returns, from its first chunk") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const seqpool::request first = part("t", task::token_embed, 10, 0, 4);
  CHECK(state.rows_of("t").before.count == 0);
  CHECK(state.rows_of("t").total == 0);
  state.reserve(0, first, 16, {.rows_total = 7});
  CHECK(state.rows_of("t").total == 7);
  state.advance(first, 0, {3, 11});
  CHECK(state.rows_of("t").before.count == 3);
  CHECK(state.rows_of("t").before.digest == 11);
  // A part of a multi_pooler keeps its own.
  state.reserve(0, first, 16, {.rows_total = 2}, 1);
  state.advance(first, 1, {1, 0});
  const seqpool::request second = part("t", task::token_embed, 10, 4, 3);
  state.advance(second, 0, {2, 20});
  CHECK(state.rows_of("t").before.count == 5);
  CHECK(state.rows_of("t").total == 7);
  CHECK(state.rows_of("t").before.digest == 31);
  CHECK(state.rows_of("t", 1).before.digest == 0);
  CHECK(state.rows_of("t", 1).before.count == 1);
  CHECK(state.rows_of("t", 1).total == 2);
  state.release("t");
  CHECK(state.rows_of("t").total == 0);
  // A first chunk reserved again before it ran (planned anew) begins with what the later call says.
  state.reserve(0, first, 16, {.rows_total = 7});
  state.reserve(0, first, 16, {.rows_total = 9});
  CHECK(state.rows_of("t").before.count == 0);
  CHECK(state.rows_of("t").total == 9);
  state.release("t");
}

TEST_CASE("a step's states are reserved whole or not at all") {
  // Through ALL, whose state grows with the prompt: a step that makes one state, begins one anew in
  // more memory and one where it was, then is refused at a state released since its plan.
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  seqpool::pooler<seqpool::method::all, seqpool::head::embed, seqpool::host_space> all(space, 4);
  const auto run = [&](const seqpool::step_plan& plan) {
    all.reserve(plan, state);
    const std::vector<float> rows(static_cast<std::size_t>(plan.num_rows * 4), 1.0f);
    seqpool::buffer<float, seqpool::host_space> output(space, static_cast<std::size_t>(plan.output_size));
    all.forward(seqpool::make_hidden_view(rows.data(), plan.num_rows, 4), plan, state, output.span());
  };
  run(all.plan(seqpool::batch{{part("b", task::token_embed, 10, 0, 2)}}, state));
  // "grown" and "same" reserved by a plan not run yet.
  const seqpool::step_plan first = all.plan(
      seqpool::batch{{part("grown", task::token_embed, 10, 0, 2), part("same", task::token_embed, 10, 0, 2)}}, state);
  all.reserve(first, state);
  float* const grown_before = state.data("grown");
  float* const same_before = state.data("same");
  const auto step = [&](bool with_b) {
    seqpool::batch planned{{part("made", task::token_embed, 10, 0, 2), part("grown", task::token_embed, 1000, 0, 2),
                            part("same", task::token_embed, 10, 0, 2, {.drop_first = true})}};
    if (with_b) planned.requests.push_back(part("b", task::token_embed, 10, 2, 2));
    return all.plan(planned, state);
  };
  const seqpool::step_plan refused = step(true);
  state.release("b");
  const std::size_t cached_before = state.cached_allocations();  // "b"'s
  CHECK_THROWS_WITH_AS(
      all.reserve(refused, state),
      doctest::Contains("request 3 (id \"b\"): plan: planned when the state held 2 tokens, it holds none"),
      seqpool::error);
  CHECK(state.size() == 2);
  CHECK_FALSE(state.contains("made"));
  CHECK(state.data("grown") == grown_before);
  CHECK(state.data("same") == same_before);
  // The step took "b"'s memory from the cache for "made" and new memory for "grown": both are back.
  CHECK(state.cached_allocations() == cached_before + 1);
  run(first);  // its states are the ones it reserved
  CHECK(state.num_computed("grown") == 2);

  // Kept: "grown"'s memory before goes back once the step's states stand.
  state.release("grown");
  state.release("same");
  all.reserve(
      all.plan(seqpool::batch{{part("grown", task::token_embed, 10, 0, 2), part("same", task::token_embed, 10, 0, 2)}},
               state),
      state);
  float* const grown_small = state.data("grown");
  const std::size_t cached = state.cached_allocations();
  all.reserve(step(false), state);
  CHECK(state.size() == 3);
  CHECK(state.data("grown") != grown_small);
  CHECK(state.cached_allocations() == cached - 2 + 1);  // "made" and "grown" took two, "grown" gave one back
}

TEST_CASE("a plan's state is the one it was planned against: begun alike, with the rows chosen so far") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const seqpool::request first = part("t", task::token_embed, 10, 0, 4);
  const seqpool::state_key key{.hidden_size = 4, .rows_total = 7};
  state.reserve(0, first, 28, key);
  state.advance(first, 0, {2, 5});
  const seqpool::request later = part("t", task::token_embed, 10, 4, 3);
  state.check_current(0, later, key, 0, {2, 5});
  const char* const other =
      "request 0 (id \"t\"): plan: its state was begun again since: for another task or prompt length, with another "
      "method, width, knobs or ids, or choosing other rows so far (released and begun anew, or reserved again by a "
      "pooler that shares the store): plan each step once, against the state it runs with";
  CHECK_THROWS_WITH_AS(state.check_current(0, later, key, 0, {3, 5}), other, seqpool::error);
  CHECK_THROWS_WITH_AS(state.check_current(0, later, key, 0, {2, 6}), other, seqpool::error);
  CHECK_THROWS_WITH_AS(state.check_current(0, later, {.hidden_size = 4, .rows_total = 8}, 0, {2, 5}), other,
                       seqpool::error);
  CHECK_THROWS_WITH_AS(state.check_current(0, later, {.hidden_size = 4, .token_ids = 1, .rows_total = 7}, 0, {2, 5}),
                       other, seqpool::error);
  CHECK_THROWS_WITH_AS(state.check_current(0, part("t", task::token_classify, 10, 4, 3), key, 0, {2, 5}), other,
                       seqpool::error);
  CHECK_THROWS_WITH_AS(state.reserve(0, later, 28, key, 0, {3, 5}), other, seqpool::error);
  CHECK(state.reserve(0, later, 28, key, 0, {2, 5}) != nullptr);
  // A key's method is its address: its name, which may view an instance's, is not compared.
  seqpool::state_key named = key;
  named.method_name = "another view";
  state.check_current(0, later, named, 0, {2, 5});
}

TEST_CASE("a method that keeps nothing still tracks progress") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const seqpool::request first = part("r", task::embed, 5, 0, 2);
  CHECK(state.reserve(0, first, 0, {}) == nullptr);
  state.advance(first);
  CHECK(state.num_computed("r") == 2);
  CHECK_THROWS_AS(state.check(0, part("r", task::embed, 5, 3, 2), {}), seqpool::error);
  CHECK(space.audit().counts().allocations == 0);
}

TEST_CASE("chunks that disagree with the state are rejected, naming request, id and field") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const seqpool::request first = part("r", task::embed, 10, 0, 4);
  state.reserve(0, first, 4, {});
  state.advance(first);

  CHECK_THROWS_WITH_AS(state.check(2, part("r", task::embed, 10, 5, 2), {}),
                       "request 2 (id \"r\"): num_computed: 5 disagrees with the state, which holds 4 tokens",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(state.check(0, part("r", task::classify, 10, 4, 2), {}),
                       "request 0 (id \"r\"): task: continues as classify but began as embed", seqpool::error);
  CHECK_THROWS_WITH_AS(state.check(0, part("r", task::embed, 12, 4, 2), {}),
                       "request 0 (id \"r\"): prompt_len: 12 differs from 10 given at the first chunk", seqpool::error);
  CHECK_THROWS_WITH_AS(state.check(1, part("q", task::embed, 10, 4, 2), {}),
                       "request 1 (id \"q\"): num_computed: 4 continues a request that has no state (its first chunk "
                       "never ran, or it finished)",
                       seqpool::error);
  CHECK_THROWS_WITH_AS(state.check(0, whole("r", task::embed, 3), {}),
                       "request 0 (id \"r\"): num_computed: 0 restarts a request whose state holds 4 tokens; release() "
                       "it first",
                       seqpool::error);
  state.release("r");
  state.check(0, whole("r", task::embed, 3), {});
}

TEST_CASE("a first chunk reserved again before it ran begins the state with what it says then") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  const seqpool::state_key four{.hidden_size = 8, .params = {.dimensions = 4}};
  const seqpool::state_key eight{.hidden_size = 8, .params = {.dimensions = 8}};
  state.reserve(0, part("k", task::embed, 10, 0, 2), 8, four);
  // Planned anew (other knobs, another prompt length and task) before the first ran.
  const seqpool::request again = part("k", task::classify, 12, 0, 2);
  state.reserve(0, again, 8, eight);
  state.advance(again);
  state.check(0, part("k", task::classify, 12, 2, 2, {.dimensions = 8}), eight);
  CHECK_THROWS_WITH_AS(state.check(0, part("k", task::classify, 12, 2, 2, {.dimensions = 4}), four),
                       "request 0 (id \"k\"): params: dimensions differs from the first chunk's", seqpool::error);
}

TEST_CASE("the state of an id the store does not hold is an error, not a read past the store") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  CHECK_THROWS_WITH_AS((void)state.data("absent"),
                       "state: no state is held for id \"absent\": reserve() makes it for a chunked request",
                       seqpool::error);
}

TEST_CASE("a state too large to allocate is an error that names the request, and leaves none") {
  seqpool::host_space space;
  seqpool::state_store<seqpool::host_space> state(space);
  CHECK_THROWS_WITH_AS(state.reserve(0, part("big", task::token_embed, 1LL << 40, 0, 2), std::size_t{1} << 60, {}),
                       "request 0 (id \"big\"): prompt_len: keeping 1099511627776 tokens' state needs "
                       "1152921504606846976 floats, more than can be allocated",
                       seqpool::error);
  CHECK_FALSE(state.contains("big"));
}

namespace {

/// The device stand-in, with allocations that fail when the test says so, as
/// cudaMallocAsync does when the device is out of memory: all of them, or
/// those of more than `most_bytes`.
class failing_backend : public seqpool::omp_backend {
 public:
  explicit failing_backend(std::shared_ptr<bool> fail, std::size_t most_bytes = 0)
      : fail_(std::move(fail)), most_bytes_(most_bytes) {}

  void* allocate(std::size_t bytes) {
    if (*fail_ && bytes > most_bytes_) throw seqpool::device_error("cudaMallocAsync: out of memory");
    return seqpool::omp_backend::allocate(bytes);
  }

 private:
  std::shared_ptr<bool> fail_;
  std::size_t most_bytes_;
};

}  // namespace

TEST_CASE("a device allocation that fails in reserve leaves the state store exactly as it was") {
  auto fail = std::make_shared<bool>(false);
  seqpool::device_space<failing_backend> space{failing_backend(fail)};
  seqpool::state_store<seqpool::device_space<failing_backend>> state(space);
  const seqpool::request held = part("held", task::embed, 10, 0, 4);
  float* held_state = state.reserve(0, held, 8, {});
  state.advance(held);

  *fail = true;
  CHECK_THROWS_WITH_AS(state.reserve(0, part("new", task::embed, 10, 0, 4), 8, {}), "cudaMallocAsync: out of memory",
                       seqpool::device_error);
  CHECK_FALSE(state.contains("new"));
  CHECK(state.size() == 1);
  CHECK(state.data("held") == held_state);
  CHECK(state.num_computed("held") == 4);

  // A request reserved but not yet run may ask for more; failing leaves its state.
  const seqpool::request fresh = part("fresh", task::token_embed, 10, 0, 4);
  *fail = false;
  float* small = state.reserve(0, fresh, 8, {});
  *fail = true;
  CHECK_THROWS_AS(state.reserve(0, fresh, 4096, {}), seqpool::device_error);
  CHECK(state.data("fresh") == small);
  CHECK(state.holds("fresh", 8));
  *fail = false;
  state.check(0, fresh, {});
}

TEST_CASE("a device allocation that fails in a pooler's reserve leaves every request's state as it was") {
  // The first request's state fits, the second's does not: the first is not begun either.
  auto fail = std::make_shared<bool>(true);
  seqpool::device_space<failing_backend> space{failing_backend(fail, 4096)};
  seqpool::state_store<seqpool::device_space<failing_backend>> state(space);
  seqpool::pooler<seqpool::method::all, seqpool::head::embed, seqpool::device_space<failing_backend>> all(space, 4);
  const seqpool::step_plan step = all.plan(
      seqpool::batch{{part("small", task::token_embed, 10, 0, 2), part("large", task::token_embed, 1000, 0, 2)}},
      state);
  CHECK_THROWS_WITH_AS(all.reserve(step, state), "cudaMallocAsync: out of memory", seqpool::device_error);
  CHECK(state.size() == 0);
  CHECK_FALSE(state.contains("small"));
  CHECK(state.cached_allocations() == 1);  // "small"'s, taken back
  *fail = false;
  all.reserve(step, state);
  CHECK(state.size() == 2);
}
