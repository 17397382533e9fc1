// A user's translation unit with one pooler: what benchmarks/compile_times.sh
// times (docs/PERFORMANCE.md, Build). Under nvcc (one_pooler.cu) the space is CUDA's.
#include <cstdio>
#include <vector>

#include <seqpool/seqpool.hpp>

#if defined(__CUDACC__)
using space_type = seqpool::device_space<seqpool::cuda_backend>;
#else
using space_type = seqpool::host_space;
#endif

int main() {
  space_type space;
  seqpool::state_store<space_type> state(space);
  seqpool::pooler<seqpool::method::mean, seqpool::head::embed, space_type> embedder(space, 768);
  const seqpool::batch step{{{.id = "a", .task = seqpool::task::embed, .prompt_len = 3, .num_scheduled = 3}}};
  const std::vector<float> rows(3 * 768, 1.0f);
  seqpool::buffer<float, space_type> hidden(space, rows.size());
  space.copy_in(std::span<const float>(rows), hidden.span());
  const seqpool::step_plan plan = embedder.plan(step, state);
  embedder.reserve(plan, state);
  seqpool::buffer<float, space_type> out(space, static_cast<std::size_t>(plan.output_size));
  embedder.forward(seqpool::make_hidden_view<float>(hidden.data(), 3, 768), plan, state, out.span());
  std::vector<float> result(out.size());
  space.copy_out(cuda::std::span<const float>(out.data(), out.size()), std::span<float>(result));
  std::printf("%g\n", result[0]);
}
