// A differential fuzz target: the input decodes into a dispatch table and a run
// of steps — requests of every task, chunks, knobs, some of them wrong, packed or
// padded — which go through one dispatcher on host_space and one on
// device_space<omp_backend>.
// Both must refuse the same steps with the same message, or both run them; every
// result must equal the other space's and the plain reference over the whole
// prompt. Each dispatcher plans every step into one plan, reused after refusals
// too. Anything else aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#define DOCTEST_CONFIG_DISABLE
#include <seqpool/seqpool.hpp>

#include "../support/reference.hpp"
#include "flights.hpp"

namespace {

using seqpool::task;
namespace method = seqpool::method;
namespace head = seqpool::head;

[[noreturn]] void mismatch(const std::string& what) {
  std::fprintf(stderr, "fuzz steps: %s\n", what.c_str());
  std::abort();
}

template <class Space>
struct engine {
  Space space;
  seqpool::state_store<Space> state{space};
  seqpool::dispatcher<seqpool::configurable_table<Space>> dispatcher;
  seqpool::step_plan plan;  // every step's, refused ones included: its storage reused

  engine(std::int64_t hidden_size, const char* sequence, const char* token)
      : dispatcher(space,
                   seqpool::pooler<method::any_sequence, head::embed, Space>(space, hidden_size,
                                                                             *method::any_sequence::from_name(sequence)),
                   seqpool::pooler<method::any_sequence, head::classify, Space>(
                       space, hidden_size, *method::any_sequence::from_name(sequence)),
                   seqpool::pooler<method::any_token, head::embed, Space>(space, hidden_size,
                                                                          *method::any_token::from_name(token)),
                   seqpool::pooler<method::any_token, head::classify, Space>(space, hidden_size,
                                                                             *method::any_token::from_name(token))) {}

  /// One step: the results, or the error's message.
  std::pair<std::optional<std::vector<std::optional<test::matrix>>>, std::string> run(const seqpool::batch& step,
                                                                                      const std::vector<float>& rows,
                                                                                      std::int64_t hidden_size) {
    try {
      dispatcher.plan(step, state, plan);
      dispatcher.reserve(plan, state);
      const auto hidden = test::to_space(space, rows);
      seqpool::buffer<float, Space> output(space, static_cast<std::size_t>(plan.output_size));
      const seqpool::audit_scope scope(space.audit());
      dispatcher.forward(seqpool::make_hidden_view(hidden.data(), plan.num_rows, hidden_size), plan, state,
                         output.span());
      if (!seqpool::keeps_sync_contract(scope.counts())) mismatch("a forward broke the sync contract");
      return {test::slice(plan, test::to_host(space, output)), {}};
    } catch (const seqpool::error& refused) {
      return {std::nullopt, refused.what()};
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::int64_t hidden_size = in.ConsumeIntegralInRange<std::int64_t>(1, 9);
  // Concats among them, chosen at run time: each mode's columns side by side.
  const char* sequences[] = {"cls", "last", "mean", "max", "weighted_mean", "mean_sqrt_len", "max+mean", "cls+max+mean"};
  const char* tokens[] = {"all", "step"};
  const char* sequence = sequences[in.ConsumeIntegralInRange(0, 7)];
  const std::int64_t modes = 1 + static_cast<std::int64_t>(std::count(sequence, sequence + std::strlen(sequence), '+'));
  const char* token = tokens[in.ConsumeIntegralInRange(0, 1)];
  engine<seqpool::host_space> host(hidden_size, sequence, token);
  engine<seqpool::device_space<seqpool::omp_backend>> device(hidden_size, sequence, token);

  const std::vector<float> padding_row(static_cast<std::size_t>(hidden_size), 1e6f);
  std::vector<fuzz::flight> flights;
  int serial = 0;
  for (int step = in.ConsumeIntegralInRange(1, 6); step > 0 && in.remaining_bytes() > 0; --step) {
    for (int fresh = in.ConsumeIntegralInRange(0, 3); fresh > 0; --fresh) {
      fuzz::flight& f = fuzz::add_flight(in, flights, hidden_size, 3);
      seqpool::pooling_params params{.use_activation = in.ConsumeBool()};
      if (in.ConsumeBool()) params.step_tag_id = in.ConsumeIntegralInRange(0, 3);
      if (in.ConsumeBool()) params.dimensions = in.ConsumeIntegralInRange<std::int64_t>(0, hidden_size + 1);
      for (int c = in.ConsumeIntegralInRange(0, 3); c > 0; --c)
        params.returned_token_ids.push_back(in.ConsumeIntegralInRange<std::int64_t>(-1, hidden_size));
      // Its own id (an integer or text, in turns; a later chunk gives an integer as its text), or one other
      // flights share.
      if (in.ConsumeBool())
        f.r.id = serial % 2 == 0 ? seqpool::request_id(serial++) : seqpool::request_id("r" + std::to_string(serial++));
      else
        f.r.id = "dup";
      f.r.task = static_cast<task>(in.ConsumeIntegralInRange(0, 3));
      // An instruction, mostly on sequence tasks (out of range now and then), and
      // token filters, mostly on token tasks (a skiplist out of order or repeated
      // now and then): the other kind refuses them, both spaces alike.
      const bool token_wise = seqpool::is_token_task(f.r.task);
      if (in.ConsumeIntegralInRange(0, token_wise ? 7 : 1) == 0)
        params.instruction_len = in.ConsumeIntegralInRange<std::int64_t>(-1, f.r.prompt_len);
      if (in.ConsumeIntegralInRange(0, token_wise ? 1 : 7) == 0) {
        params.drop_first = in.ConsumeBool();
        params.drop_last = in.ConsumeBool();
        for (int d = in.ConsumeIntegralInRange(0, 2); d > 0; --d)
          params.drop_token_ids.push_back(in.ConsumeIntegralInRange<std::int64_t>(-1, 3));
      }
      f.r.params = params;
    }
    const fuzz::drawn_step drawn = fuzz::draw_step(in, flights, hidden_size, padding_row);
    const auto [host_results, device_results] = fuzz::run_both(host, device, drawn, hidden_size, mismatch);
    if (!host_results) continue;  // refused on both, with the state as it was
    const auto& [batch, rows, scheduled] = drawn;
    for (std::size_t i = 0; i < scheduled.size(); ++i) {
      const fuzz::flight& f = *scheduled[i];
      const auto& mine = (*host_results)[i];
      const auto& theirs = (*device_results)[i];
      if (mine.has_value() != (f.done == f.r.prompt_len) || theirs.has_value() != mine.has_value())
        mismatch("a result is missing or early for " + f.r.id.str() + " (" +
                 std::to_string(batch.requests[i].num_computed) + " computed, " +
                 std::to_string(batch.requests[i].num_scheduled) + " scheduled of " + std::to_string(f.r.prompt_len) +
                 ")");
      if (!mine) continue;
      if (!fuzz::close(*mine, *theirs)) mismatch("the spaces' results differ for " + f.r.id.str());
      seqpool::request whole = f.r;
      whole.prompt_token_ids = f.ids;
      const bool token_wise = seqpool::is_token_task(f.r.task);
      const std::int64_t width = !token_wise ? modes * hidden_size
                                 : !f.r.params.returned_token_ids.empty() && std::string(token) == "step"
                                     ? static_cast<std::int64_t>(f.r.params.returned_token_ids.size())
                                     : hidden_size;
      const test::head_spec spec{.classify = f.r.task == task::classify || f.r.task == task::token_classify};
      const std::int64_t kept = spec.classify ? width : f.r.params.dimensions.value_or(width);
      if (!fuzz::close(*mine, test::reference(token_wise ? token : sequence, f.prompt, hidden_size, whole, spec, kept)))
        mismatch("a result differs from the reference for " + f.r.id.str());
    }
  }
  return 0;
}
