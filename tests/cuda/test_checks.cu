// Padded batches, the pooler's bad-input rules and API misuse on device_space<cuda_backend>.
#include "../cases/misuse.hpp"
#include "../cases/padded.hpp"
#include "../cases/validation.hpp"
#include "../support/spaces.hpp"

#include <string>

#include <seqpool/dlpack.hpp>

TEST_CASE_TEMPLATE_APPLY(plan_of_another_pooler, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(plan_of_another_dispatcher, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(moved_runners, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(other_spaces, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(state_of_another_shape, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(stale_plans, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(checked_inputs, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(huge_prompts, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(outputs_apart, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(padded_hand_checked, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(padded_refused, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(padded_random, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(bad_request_leaves_state, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(views_that_do_not_fit, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(token_method_knobs, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(span_knobs, test::cuda_spaces);

// The device a CUDA space reads: its stream's, the current one. One GPU gives no stream of another device,
// but a tensor can say it is on one.
TEST_CASE("a DLPack tensor of another CUDA device than the current one, the stream's, is refused") {
  using space = seqpool::device_space<seqpool::cuda_backend>;
  int current = 0;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  CHECK(seqpool::cuda_backend(stream).device() == current);
  CHECK(seqpool::cuda_backend().device() == current);
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);

  float* values = nullptr;
  REQUIRE(cudaMalloc(&values, 8 * sizeof(float)) == cudaSuccess);
  std::int64_t shape[] = {2, 4};
  DLTensor tensor{values, {kDLCUDA, current}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  CHECK((seqpool::dlpack::hidden<float, space>(tensor).extent(0)) == 2);
  CHECK(seqpool::dlpack::output<space>(tensor).size() == 8);
  tensor.device.device_id = current + 1;
  const std::string found = "the tensor is on CUDA device " + std::to_string(current + 1) +
                            "; device_space<cuda_backend> reads the current device's, " + std::to_string(current) +
                            ", which must be its stream's (cudaSetDevice or torch.cuda.set_device before using it)";
  CHECK_THROWS_WITH_AS((seqpool::dlpack::hidden<float, space>(tensor)), ("hidden states: " + found).c_str(),
                       seqpool::error);
  CHECK_THROWS_WITH_AS(seqpool::dlpack::output<space>(tensor), ("output: " + found).c_str(), seqpool::error);
  REQUIRE(cudaFree(values) == cudaSuccess);
}
