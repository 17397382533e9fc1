// A user's translation unit with a table of four poolers whose methods are
// chosen by name (configurable_table): what benchmarks/compile_times.sh times
// (docs/PERFORMANCE.md, Build). Under nvcc (four_poolers.cu) the space is CUDA's.
#include <cstdio>
#include <vector>

#include <seqpool/seqpool.hpp>

#if defined(__CUDACC__)
using space_type = seqpool::device_space<seqpool::cuda_backend>;
#else
using space_type = seqpool::host_space;
#endif

namespace method = seqpool::method;
namespace head = seqpool::head;

int main() {
  space_type space;
  seqpool::state_store<space_type> state(space);
  seqpool::dispatcher<seqpool::configurable_table<space_type>> engine(
      space, seqpool::pooler<method::any_sequence, head::embed, space_type>(space, 768, method::mean{}),
      seqpool::pooler<method::any_sequence, head::classify, space_type>(space, 768, method::cls{}),
      seqpool::pooler<method::any_token, head::embed, space_type>(space, 768, method::all{}),
      seqpool::pooler<method::any_token, head::classify, space_type>(space, 768, method::step{}));
  const seqpool::batch step{{{.id = "a", .task = seqpool::task::embed, .prompt_len = 3, .num_scheduled = 3}}};
  const std::vector<float> rows(3 * 768, 1.0f);
  seqpool::buffer<float, space_type> hidden(space, rows.size());
  space.copy_in(std::span<const float>(rows), hidden.span());
  const auto plan = engine.plan(step, state);
  engine.reserve(plan, state);
  seqpool::buffer<float, space_type> out(space, static_cast<std::size_t>(plan.output_size));
  engine.forward(seqpool::make_hidden_view<float>(hidden.data(), 3, 768), plan, state, out.span());
  std::vector<float> result(out.size());
  space.copy_out(cuda::std::span<const float>(out.data(), out.size()), std::span<float>(result));
  std::printf("%g\n", result[0]);
}
