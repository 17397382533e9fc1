// A user's translation unit whose host poolers write every result type seqpool
// writes, a sequence method's and a token method's through each head, and one
// step given its tensors through DLPack as an engine gives them: compiled, not
// run, by a test at -O3 under -Werror (tests/meson.build), so that a release
// build of any result type stays warning-free where CI builds seqpool-run's host
// parts of those types unoptimised (tools/meson.build).
#include <cstdint>
#include <span>
#include <vector>

#include <seqpool/dlpack.hpp>
#include <seqpool/seqpool.hpp>

using space_type = seqpool::host_space;

template <class Method, class Head, seqpool::task Served, class Hidden, class Result>
void pool_into(space_type& space) {
  seqpool::state_store<space_type> state(space);
  seqpool::pooler<Method, Head, space_type, Result> pooler(space, 768);
  const seqpool::batch step{{{.id = "a", .task = Served, .prompt_len = 3, .num_scheduled = 3}}};
  const std::vector<Hidden> rows(3 * 768);
  seqpool::buffer<Hidden, space_type> hidden(space, rows.size());
  space.copy_in(std::span<const Hidden>(rows), hidden.span());
  const seqpool::step_plan plan = pooler.plan(step, state);
  pooler.reserve(plan, state);
  seqpool::buffer<Result, space_type> out(space, static_cast<std::size_t>(plan.output_size));
  pooler.forward(seqpool::make_hidden_view<Hidden>(hidden.data(), 3, 768), plan, state, out.span());
}

// Float rows through the embed head, 16-bit rows through the classify head (BGE-M3's
// sparse weights are ALL's rows through a regression classifier).
template <class... Results>
void pool_into_each(space_type& space) {
  using seqpool::task;
  namespace method = seqpool::method;
  namespace head = seqpool::head;
  (pool_into<method::mean, head::embed, task::embed, float, Results>(space), ...);
  (pool_into<method::all, head::embed, task::token_embed, float, Results>(space), ...);
  (pool_into<method::cls, head::classify, task::classify, seqpool::bfloat16, Results>(space), ...);
  (pool_into<method::all, head::classify, task::token_classify, seqpool::half, Results>(space), ...);
}

// ALL's rows but those of the ids left out (a row of token ids a request, as
// vLLM holds them), the hidden states and the output described by DLPack.
void pool_through_dlpack(space_type& space) {
  seqpool::state_store<space_type> state(space);
  seqpool::pooler<seqpool::method::all, seqpool::head::embed, space_type> pooler(space, 768);
  seqpool::batch step{{{.id = "a", .task = seqpool::task::token_embed, .prompt_len = 3, .num_scheduled = 3}}};
  step.requests[0].params.drop_token_ids = {102};
  std::vector<std::int64_t> ids{101, 2023, 102};
  std::int64_t id_shape[] = {1, 3};
  const DLTensor id_rows{ids.data(), {kDLCPU, 0}, 2, {kDLInt, 64, 1}, id_shape, nullptr, 0};
  seqpool::dlpack::assign_token_ids(id_rows, step);
  std::vector<float> rows(3 * 768, 1.0f);
  const seqpool::step_plan plan = pooler.plan(step, state);
  pooler.reserve(plan, state);
  std::vector<float> out(static_cast<std::size_t>(plan.output_size));
  std::int64_t hidden_shape[] = {3, 768}, out_shape[] = {plan.output_size};
  const DLTensor hidden{rows.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, hidden_shape, nullptr, 0};
  DLTensor output{out.data(), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, out_shape, nullptr, 0};
  pooler.forward(seqpool::dlpack::hidden<float, space_type>(hidden, step), plan, state,
                 seqpool::dlpack::output<space_type>(output));
}

int main() {
  space_type space;
  pool_through_dlpack(space);
  pool_into_each<float, seqpool::half, seqpool::bfloat16, std::int8_t, std::uint8_t, seqpool::binary, seqpool::ubinary,
                 seqpool::sparse_entry>(space);
}
