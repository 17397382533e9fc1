// Steps captured with cudaStreamBeginCapture (cudaStreamCaptureModeGlobal) after
// the staging ring wrapped, replayed for changing batches, against host_space;
// and the kernels on grids cut to waves of 1, 3 and the GPU's, bit for bit equal.
// Also under the candidate policy whose captured pooling launch runs on one
// wave: its loop of indices, with the barrier between them, on the GPU.
#include <tuple>

#include "../cases/capture.hpp"
#include "../support/spaces.hpp"

namespace {

using capture_spaces =
    std::tuple<seqpool::device_space<seqpool::cuda_backend>,
               seqpool::device_space<
                   seqpool::with_policy<seqpool::cuda_backend, seqpool::detail::device::one_wave_capture_policy>>>;

}  // namespace

TEST_CASE_TEMPLATE_APPLY(dispatcher_capture, capture_spaces);
TEST_CASE_TEMPLATE_APPLY(pooler_capture, capture_spaces);
// The one-wave candidate changes only a captured pooling launch, which a token pooler never makes.
TEST_CASE_TEMPLATE_APPLY(token_stack_capture, std::tuple<seqpool::device_space<seqpool::cuda_backend>>);
TEST_CASE_TEMPLATE_APPLY(any_wave, capture_spaces);
