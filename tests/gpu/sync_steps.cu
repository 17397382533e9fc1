// 100 eager steady-state steps of a mixed dispatcher on a GPU, with the runtime
// calls every forward() makes counted by the count_sync.c shim (LD_PRELOAD):
// waits, synchronous copies and allocations of any kind must all be 0. What
// reserve() calls between steps (settling the staging slot it sets aside for
// the next step) is reported beside them. Exits 1 if a forward made a counted call, 2 if
// the shim is not loaded.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <seqpool/seqpool.hpp>

namespace {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;
using space_type = seqpool::device_space<seqpool::cuda_backend>;

constexpr std::int64_t hidden_size = 1024;

struct shim {
  const long* (*counts)() = nullptr;
  const char* const* (*names)() = nullptr;
  int (*calls)() = nullptr;

  std::vector<long> now() const { return {counts(), counts() + calls()}; }
};

void add_difference(std::vector<long>& total, const std::vector<long>& before, const std::vector<long>& after) {
  for (std::size_t i = 0; i < total.size(); ++i) total[i] += after[i] - before[i];
}

}  // namespace

int main() {
  shim counted;
  counted.counts = reinterpret_cast<const long* (*)()>(dlsym(RTLD_DEFAULT, "seqpool_sync_counts"));
  counted.names = reinterpret_cast<const char* const* (*)()>(dlsym(RTLD_DEFAULT, "seqpool_sync_names"));
  counted.calls = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "seqpool_sync_count_calls"));
  if (counted.counts == nullptr || counted.names == nullptr || counted.calls == nullptr) {
    std::puts("sync_steps: the count_sync shim is not loaded (LD_PRELOAD it)");
    return 2;
  }
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  space_type space{seqpool::cuda_backend(stream)};
  seqpool::state_store<space_type> state(space);
  std::vector<float> weights(2 * hidden_size, 1.0f / hidden_size);
  seqpool::buffer<float, space_type> classifier(space, weights.size());
  space.copy_in(std::span<const float>(weights), classifier.span());
  const seqpool::linear_layer layer{classifier.data(), nullptr, 2, hidden_size};
  seqpool::dispatcher<seqpool::configurable_table<space_type>> engine(
      space, seqpool::pooler<method::any_sequence, head::embed, space_type>(space, hidden_size, method::mean{}),
      seqpool::pooler<method::any_sequence, head::classify, space_type>(space, hidden_size, method::cls{},
                                                                        head::classify(layer)),
      seqpool::pooler<method::any_token, head::embed, space_type>(space, hidden_size, method::all{}),
      seqpool::pooler<method::any_token, head::classify, space_type>(space, hidden_size, method::step{},
                                                                     head::classify(layer)));

  // Batches of 64 requests of 8-200 tokens over all four tasks, a quarter of
  // them arriving in two chunks; hidden states for the most rows a step has.
  constexpr std::int64_t most_rows = 64 * 200;
  seqpool::buffer<__nv_bfloat16, space_type> hidden(space, most_rows * hidden_size);
  seqpool::buffer<float, space_type> output(space, 64 * 200 * hidden_size + 64 * 4);
  std::mt19937 random(7);
  const auto between = [&](std::int64_t low, std::int64_t high) {
    return std::uniform_int_distribution<std::int64_t>(low, high)(random);
  };
  std::vector<std::int64_t> token_ids(200);
  for (std::size_t t = 0; t < token_ids.size(); ++t) token_ids[t] = static_cast<std::int64_t>(t % 8);
  std::vector<seqpool::request> continuing;
  int serial = 0;
  const auto next_batch = [&] {
    seqpool::batch step{continuing};
    continuing.clear();
    while (step.requests.size() < 64) {
      seqpool::request r;
      r.id = "r" + std::to_string(serial++);
      r.task = static_cast<task>(between(0, 3));
      r.prompt_len = between(8, 200);
      r.num_scheduled = between(0, 3) == 0 ? r.prompt_len / 2 : r.prompt_len;
      r.prompt_token_ids = token_ids;
      r.params.step_tag_id = 7;
      if (r.num_scheduled < r.prompt_len) {
        seqpool::request rest = r;
        rest.num_computed = r.num_scheduled;
        rest.num_scheduled = r.prompt_len - r.num_scheduled;
        continuing.push_back(rest);
      }
      step.requests.push_back(r);
    }
    return step;
  };

  std::vector<long> in_forward(counted.calls(), 0), in_reserve(counted.calls(), 0);
  for (int step = -20; step < 100; ++step) {  // 20 warm-up steps grow every buffer and wrap the ring
    const seqpool::batch batch = next_batch();
    const seqpool::step_plan plan = engine.plan(batch, state);
    const std::vector<long> before_reserve = counted.now();
    engine.reserve(plan, state);
    const std::vector<long> before_forward = counted.now();
    engine.forward(seqpool::make_hidden_view<__nv_bfloat16>(hidden.data(), plan.num_rows, hidden_size), plan, state,
                   output.span());
    const std::vector<long> after = counted.now();
    if (step < 0) continue;
    add_difference(in_reserve, before_reserve, before_forward);
    add_difference(in_forward, before_forward, after);
  }
  space.synchronize();
  bool clean = true;
  std::printf("%-24s %8s %8s\n", "call, over 100 steps", "forward", "reserve");
  for (int i = 0; i < counted.calls(); ++i) {
    std::printf("%-24s %8ld %8ld\n", counted.names()[i], in_forward[i], in_reserve[i]);
    clean = clean && in_forward[i] == 0;
  }
  std::printf("sync_steps: %s\n", clean ? "forward() made none of these calls" : "forward() made a forbidden call");
  return clean ? 0 : 1;
}
