// A differential fuzz target for several results of every request: the input
// decodes into a multi_pooler of three parts — a sequence method's rows
// (embed), ALL's rows but each prompt's first (embed; ColBERT's vectors) and
// ALL's rows weighed by a one-output relu layer and listed by token id, id 0
// left out (sparse; BGE-M3's lexical weights) — and a run of steps, each
// request with knobs that reach some parts and not others, some of them wrong,
// chunked, packed or padded. The steps go through the multi_pooler on
// host_space and on device_space<omp_backend>: both must refuse the same steps
// with the same message, or both run them; every part's results must equal the
// other space's and the plain reference over the whole prompt. Anything else aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>

#define DOCTEST_CONFIG_DISABLE
#include <seqpool/seqpool.hpp>

#include "../support/reference.hpp"
#include "flights.hpp"

namespace {

namespace method = seqpool::method;
namespace head = seqpool::head;
using seqpool::sparse_entry;
using listing = std::vector<sparse_entry>;

[[noreturn]] void mismatch(const std::string& what) {
  std::fprintf(stderr, "fuzz parts: %s\n", what.c_str());
  std::abort();
}

/// The lexical part's layer: [1, H] weights `v` and bias `b`, relu after.
struct lexical_layer {
  std::vector<float> v;
  float b;
  float floor;
};

/// One step's results: each part's, request by request.
struct part_results {
  test::results dense;
  test::results tokens;
  std::vector<std::optional<listing>> lists;
};

template <class Space>
struct engine {
  using dense = seqpool::pooler<method::any_sequence, head::embed, Space>;
  using tokens = seqpool::pooler<method::all, head::embed, Space>;
  using lexical = seqpool::pooler<method::all, head::classify, Space, sparse_entry>;

  Space space;
  seqpool::state_store<Space> state{space};
  seqpool::buffer<float, Space> weight;
  seqpool::buffer<float, Space> bias;
  seqpool::multi_pooler<dense, tokens, lexical> parts;
  seqpool::parts_plan plan;  // every step's, refused ones included: its storage reused

  engine(std::int64_t hidden_size, const char* sequence, const lexical_layer& layer)
      : weight(test::to_space(space, layer.v)),
        bias(test::to_space(space, std::vector<float>{layer.b})),
        parts(space, {dense(space, hidden_size, *method::any_sequence::from_name(sequence))},
              {tokens(space, hidden_size), {.drop_first = true}},
              {weighed(hidden_size, layer.floor), {.drop_token_ids = {0}}}) {}

  lexical weighed(std::int64_t hidden_size, float floor) {
    lexical pooler(space, hidden_size, {},
                   head::classify(seqpool::dense_stack{{{weight.data(), bias.data(), 1, hidden_size},
                                                        seqpool::activation_function::relu}},
                                  head::problem_type::regression));
    pooler.set_weight_floor(floor);
    return pooler;
  }

  /// One step: every part's results, or the error's message.
  std::pair<std::optional<part_results>, std::string> run(const seqpool::batch& step, const std::vector<float>& rows,
                                                          std::int64_t hidden_size) {
    try {
      parts.plan(step, state, plan);
      parts.reserve(plan, state);
      const auto hidden = test::to_space(space, rows);
      seqpool::buffer<float, Space> dense_out(space, static_cast<std::size_t>(plan.parts[0].output_size));
      seqpool::buffer<float, Space> token_out(space, static_cast<std::size_t>(plan.parts[1].output_size));
      seqpool::buffer<sparse_entry, Space> list_out(space, static_cast<std::size_t>(plan.parts[2].output_size));
      const seqpool::audit_scope scope(space.audit());
      parts.forward(seqpool::make_hidden_view(hidden.data(), plan.num_rows, hidden_size), plan, state, dense_out.span(),
                    token_out.span(), list_out.span());
      if (!seqpool::keeps_sync_contract(scope.counts())) mismatch("a forward broke the sync contract");
      part_results got{test::slice(plan.parts[0], test::to_host(space, dense_out)),
                       test::slice(plan.parts[1], test::to_host(space, token_out)),
                       {}};
      const std::vector<sparse_entry> entries = test::to_host(space, list_out);
      for (const auto& result : plan.parts[2].results) {
        if (!result) {
          got.lists.emplace_back();
          continue;
        }
        const auto first = entries.begin() + result->offset;
        got.lists.emplace_back(listing(first, first + result->cols));
      }
      return {std::move(got), {}};
    } catch (const seqpool::error& refused) {
      return {std::nullopt, refused.what()};
    }
  }
};

/// The request as a token part sees it: without the knobs that reach only
/// sequence parts (SPEC section 5), its filters joined with the part's.
seqpool::request as_token_part(seqpool::request r, bool drop_first, std::int64_t dropped_id) {
  r.params.dimensions.reset();
  r.params.instruction_len = 0;
  r.params.drop_first = r.params.drop_first || drop_first;
  std::vector<std::int64_t>& ids = r.params.drop_token_ids;
  if (dropped_id >= 0 && !std::binary_search(ids.begin(), ids.end(), dropped_id))
    ids.insert(std::lower_bound(ids.begin(), ids.end(), dropped_id), dropped_id);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::int64_t hidden_size = in.ConsumeIntegralInRange<std::int64_t>(1, 9);
  const char* sequences[] = {"cls",           "last",          "mean",     "max",
                             "weighted_mean", "mean_sqrt_len", "max+mean", "cls+max+mean"};
  const char* sequence = sequences[in.ConsumeIntegralInRange(0, 7)];
  const std::int64_t modes = 1 + static_cast<std::int64_t>(std::count(sequence, sequence + std::strlen(sequence), '+'));
  // Weights, rows and bias on grids whose sums a float holds exactly: the lists compare bit for bit.
  lexical_layer layer{{}, static_cast<float>(in.ConsumeIntegralInRange(-8, 8)) / 8, 0.0f};
  for (std::int64_t c = 0; c < hidden_size; ++c)
    layer.v.push_back(static_cast<float>(in.ConsumeIntegralInRange(-3, 3)));
  if (in.ConsumeBool()) layer.floor = static_cast<float>(in.ConsumeIntegralInRange(-4, 16)) / 8;
  engine<seqpool::host_space> host(hidden_size, sequence, layer);
  engine<seqpool::device_space<seqpool::omp_backend>> device(hidden_size, sequence, layer);

  // A padding row read by mistake would change every part's result: its values
  // weigh 1e6 × Σ|v| + b, listed above any floor.
  std::vector<float> padding_row;
  for (const float weight : layer.v) padding_row.push_back(weight < 0 ? -1e6f : 1e6f);
  std::vector<fuzz::flight> flights;
  int serial = 0;
  for (int step = in.ConsumeIntegralInRange(1, 6); step > 0 && in.remaining_bytes() > 0; --step) {
    for (int fresh = in.ConsumeIntegralInRange(0, 3); fresh > 0; --fresh) {
      fuzz::flight& f = fuzz::add_flight(in, flights, hidden_size, 5);
      // Knobs for the dense part (dimensions, an instruction), the token parts
      // (filters; a step tag, which ALL ignores) and the lexical part (top_k),
      // out of range or out of order now and then.
      seqpool::pooling_params& params = f.r.params;
      params.use_activation = in.ConsumeBool();
      if (in.ConsumeIntegralInRange(0, 3) == 0)
        params.dimensions = in.ConsumeIntegralInRange<std::int64_t>(0, hidden_size + 1);
      if (in.ConsumeIntegralInRange(0, 3) == 0)
        params.instruction_len = in.ConsumeIntegralInRange<std::int64_t>(-1, f.r.prompt_len);
      params.drop_first = in.ConsumeIntegralInRange(0, 3) == 0;
      params.drop_last = in.ConsumeIntegralInRange(0, 3) == 0;
      for (int d = in.ConsumeIntegralInRange(0, 2); d > 0; --d)
        params.drop_token_ids.push_back(in.ConsumeIntegralInRange<std::int64_t>(-1, 5));
      if (in.ConsumeIntegralInRange(0, 2) == 0) params.top_k = in.ConsumeIntegralInRange<std::int64_t>(0, 6);
      if (in.ConsumeIntegralInRange(0, 15) == 0) params.step_tag_id = 1;
      // Its own id (an integer or text, in turns; a later chunk gives an integer as its text), or one other
      // flights share.
      if (in.ConsumeBool())
        f.r.id = serial % 2 == 0 ? seqpool::request_id(serial++) : seqpool::request_id("r" + std::to_string(serial++));
      else
        f.r.id = "dup";
    }
    const fuzz::drawn_step drawn = fuzz::draw_step(in, flights, hidden_size, padding_row);
    const auto [host_results, device_results] = fuzz::run_both(host, device, drawn, hidden_size, mismatch);
    if (!host_results) continue;  // refused on both, with the state as it was
    const auto& [batch, rows, scheduled] = drawn;
    for (std::size_t i = 0; i < scheduled.size(); ++i) {
      const fuzz::flight& f = *scheduled[i];
      const bool finished = f.done == f.r.prompt_len;
      const auto& dense = host_results->dense[i];
      const auto& tokens = host_results->tokens[i];
      const auto& list = host_results->lists[i];
      if (dense.has_value() != finished || tokens.has_value() != finished || list.has_value() != finished ||
          device_results->dense[i].has_value() != finished || device_results->tokens[i].has_value() != finished ||
          device_results->lists[i].has_value() != finished)
        mismatch("a result is missing or early for " + f.r.id.str());
      if (!finished) continue;
      if (!fuzz::close(*dense, *device_results->dense[i]) || !fuzz::close(*tokens, *device_results->tokens[i]) ||
          *list != *device_results->lists[i])
        mismatch("the spaces' results differ for " + f.r.id.str());
      seqpool::request whole = f.r;
      whole.prompt_token_ids = f.ids;
      const std::int64_t kept = f.r.params.dimensions.value_or(modes * hidden_size);
      if (!fuzz::close(*dense, test::reference(sequence, f.prompt, hidden_size, whole, {}, kept)))
        mismatch("the dense part differs from the reference for " + f.r.id.str());
      if (!fuzz::close(*tokens,
                       test::reference("all", f.prompt, hidden_size, as_token_part(whole, true, -1), {}, hidden_size)))
        mismatch("the token part differs from the reference for " + f.r.id.str());
      const seqpool::request weighed = as_token_part(whole, false, 0);
      if (*list != test::reference_list(f.prompt, f.ids, weighed.params, layer.v, layer.b, layer.floor))
        mismatch("the lexical part differs from the reference for " + f.r.id.str());
    }
  }
  return 0;
}
