// A user's translation unit whose host poolers write every result type seqpool
// writes, a sequence method's and a token method's each: compiled, not run, by a
// test at -O3 under -Werror (tests/meson.build), so that a release build of any
// result type stays warning-free where CI builds seqpool-run's host parts of
// those types unoptimised (tools/meson.build).
#include <cstdint>
#include <span>
#include <vector>

#include <seqpool/seqpool.hpp>

using space_type = seqpool::host_space;

template <class Method, seqpool::task Served, class Result>
void pool_into(space_type& space) {
  seqpool::state_store<space_type> state(space);
  seqpool::pooler<Method, seqpool::head::embed, space_type, Result> pooler(space, 768);
  const seqpool::batch step{{{.id = "a", .task = Served, .prompt_len = 3, .num_scheduled = 3}}};
  const std::vector<float> rows(3 * 768, 1.0f);
  seqpool::buffer<float, space_type> hidden(space, rows.size());
  space.copy_in(std::span<const float>(rows), hidden.span());
  const seqpool::step_plan plan = pooler.plan(step, state);
  pooler.reserve(plan, state);
  seqpool::buffer<Result, space_type> out(space, static_cast<std::size_t>(plan.output_size));
  pooler.forward(seqpool::make_hidden_view<float>(hidden.data(), 3, 768), plan, state, out.span());
}

template <class... Results>
void pool_into_each(space_type& space) {
  (pool_into<seqpool::method::mean, seqpool::task::embed, Results>(space), ...);
  (pool_into<seqpool::method::all, seqpool::task::token_embed, Results>(space), ...);
}

int main() {
  space_type space;
  pool_into_each<float, seqpool::half, seqpool::bfloat16, std::int8_t, std::uint8_t, seqpool::binary, seqpool::ubinary,
                 seqpool::sparse_entry>(space);
}
