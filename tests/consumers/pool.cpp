// What every outside project in tests/consumers/ builds: pools one small batch of
// bfloat16 rows with MEAN on host_space and on device_space<omp_backend> (built by
// nvcc too, as pool.cu, it runs the device kernels' logic on the CPU) and checks
// the hand-computed result. Exits 0 when both match.
#include <cstdio>
#include <span>
#include <vector>

#include <seqpool/seqpool.hpp>

namespace {

template <class Space>
bool pools_correctly(const char* name) {
  constexpr std::int64_t hidden_size = 2;
  Space space;
  seqpool::state_store<Space> state(space);
  seqpool::pooler<seqpool::method::mean, seqpool::head::embed, Space> pooler(space, hidden_size);
  // Two prompts of 1 and 3 rows, every value exact in bfloat16; no normalisation.
  const std::vector<float> rows = {1, 2, /**/ 3, 4, 5, 6, 7, 11};
  std::vector<seqpool::bfloat16> host_hidden;
  for (const float value : rows) host_hidden.push_back(seqpool::bfloat16(value));
  const seqpool::pooling_params raw{.use_activation = false};
  const seqpool::batch step{
      {{.id = "a", .task = seqpool::task::embed, .prompt_len = 1, .num_scheduled = 1, .params = raw},
       {.id = "b", .task = seqpool::task::embed, .prompt_len = 3, .num_scheduled = 3, .params = raw}}};

  seqpool::buffer<seqpool::bfloat16, Space> hidden(space, host_hidden.size());
  space.copy_in(std::span<const seqpool::bfloat16>(host_hidden), hidden.span());
  const auto plan = pooler.plan(step, state);
  pooler.reserve(plan, state);
  seqpool::buffer<float, Space> out(space, static_cast<std::size_t>(plan.output_size));
  const seqpool::audit_scope audit(space.audit());
  pooler.forward(seqpool::make_hidden_view(hidden.data(), 4, hidden_size), plan, state, out.span());
  const bool in_contract = seqpool::keeps_sync_contract(audit.counts());
  std::vector<float> results(out.size());
  space.copy_out(cuda::std::span<const float>(out.data(), out.size()), std::span<float>(results));

  const std::vector<std::vector<float>> expected = {{1, 2}, {5, 7}};  // (3+5+7)/3, (4+6+11)/3
  bool correct = in_contract;
  for (std::size_t r = 0; r < expected.size(); ++r) {
    const seqpool::result_slice& slice = *plan.results[r];
    correct = correct && slice.rows == 1 && slice.cols == hidden_size &&
              std::vector<float>(results.begin() + slice.offset, results.begin() + slice.offset + hidden_size) ==
                  expected[r];
  }
  std::printf("%s: %s\n", name, correct ? "pooled as expected" : "WRONG RESULT");
  return correct;
}

}  // namespace

int main() {
  const bool host = pools_correctly<seqpool::host_space>("host_space");
  const bool device = pools_correctly<seqpool::device_space<seqpool::omp_backend>>("device_space<omp_backend>");
  return host && device ? 0 : 1;
}
