// A user's translation unit with a table of four poolers whose methods are
// chosen by name (configurable_table), given its tensors through DLPack as an
// engine gives them: what benchmarks/compile_times.sh times (docs/PERFORMANCE.md,
// Build). Under nvcc (four_poolers.cu) the space is CUDA's.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <seqpool/dlpack.hpp>
#include <seqpool/seqpool.hpp>

#if defined(__CUDACC__)
using space_type = seqpool::device_space<seqpool::cuda_backend>;
constexpr DLDevice device{kDLCUDA, 0};
#else
using space_type = seqpool::host_space;
constexpr DLDevice device{kDLCPU, 0};
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
  seqpool::batch step{{{.id = "a", .task = seqpool::task::embed, .prompt_len = 3, .num_scheduled = 3}}};
  std::vector<std::int64_t> ids{101, 2023, 102};
  std::int64_t id_shape[] = {1, 3};
  const DLTensor id_rows{ids.data(), {kDLCPU, 0}, 2, {kDLInt, 64, 1}, id_shape, nullptr, 0};
  seqpool::dlpack::assign_token_ids(id_rows, step);  // a row a request, as vLLM holds them
  const std::vector<float> rows(3 * 768, 1.0f);
  seqpool::buffer<float, space_type> hidden(space, rows.size());
  space.copy_in(std::span<const float>(rows), hidden.span());
  const auto plan = engine.plan(step, state);
  engine.reserve(plan, state);
  seqpool::buffer<float, space_type> out(space, static_cast<std::size_t>(plan.output_size));
  std::int64_t hidden_shape[] = {3, 768}, out_shape[] = {plan.output_size};
  const DLTensor hidden_tensor{hidden.data(), device, 2, {kDLFloat, 32, 1}, hidden_shape, nullptr, 0};
  DLTensor out_tensor{out.data(), device, 1, {kDLFloat, 32, 1}, out_shape, nullptr, 0};
  engine.forward(seqpool::dlpack::hidden<float, space_type>(hidden_tensor, step), plan, state,
                 seqpool::dlpack::output<space_type>(out_tensor));
  std::vector<float> result(out.size());
  space.copy_out(cuda::std::span<const float>(out.data(), out.size()), std::span<float>(result));
  std::printf("%g\n", result[0]);
}
