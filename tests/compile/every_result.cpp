// A user's translation unit whose host poolers write every result type seqpool
// writes, a sequence method's and a token method's through each head: compiled,
// not run, by a test at -O3 under -Werror (tests/meson.build), so that a release
// build of any result type stays warning-free where CI builds seqpool-run's host
// parts of those types unoptimised (tools/meson.build).
#include <cstdint>
#include <span>
#include <vector>

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

int main() {
  space_type space;
  pool_into_each<float, seqpool::half, seqpool::bfloat16, std::int8_t, std::uint8_t, seqpool::binary, seqpool::ubinary,
                 seqpool::sparse_entry>(space);
}
