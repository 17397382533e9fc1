// Steps captured with cudaStreamBeginCapture (cudaStreamCaptureModeGlobal) after
// the staging ring wrapped, replayed for changing batches, against host_space;
// and the kernels on grids cut to waves of 1, 3 and the GPU's, bit for bit equal.
// Also under the candidate policy whose captured pooling launch runs on one
// wave: its loop of indices, with the barrier between them, on the GPU; under
// the one whose captured upload is a copy node of the whole image (the
// dispatcher's steps and the poolers'); and the dispatcher's steps under the
// one that puts its poolers on branches.
#include <tuple>

#include "../cases/capture.hpp"
#include "../support/spaces.hpp"

namespace {

template <class Policy>
using cuda_with = seqpool::device_space<seqpool::with_policy<seqpool::cuda_backend, Policy>>;
namespace policy = seqpool::detail::device;
using capture_spaces =
    std::tuple<seqpool::device_space<seqpool::cuda_backend>, cuda_with<policy::one_wave_capture_policy>>;

}  // namespace

TEST_CASE_TEMPLATE_APPLY(
    dispatcher_capture,
    std::tuple<seqpool::device_space<seqpool::cuda_backend>, cuda_with<policy::one_wave_capture_policy>,
               cuda_with<policy::whole_image_capture_policy>, cuda_with<policy::branched_entries_policy>>);
TEST_CASE_TEMPLATE_APPLY(pooler_capture, capture_spaces);
// The one-wave candidate changes only a captured pooling launch, which a token pooler never makes.
TEST_CASE_TEMPLATE_APPLY(token_stack_capture, std::tuple<seqpool::device_space<seqpool::cuda_backend>>);
TEST_CASE_TEMPLATE_APPLY(any_wave, capture_spaces);
TEST_CASE_TEMPLATE_APPLY(whole_image_capture, std::tuple<cuda_with<policy::whole_image_capture_policy>>);
