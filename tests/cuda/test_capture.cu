// Steps captured with cudaStreamBeginCapture (cudaStreamCaptureModeGlobal) after
// the staging ring wrapped, replayed for changing batches, against host_space;
// and the kernels on grids cut to waves of 1, 3 and the GPU's, bit for bit equal.
#include "../cases/capture.hpp"
#include "../support/spaces.hpp"

TEST_CASE_TEMPLATE_APPLY(dispatcher_capture, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(pooler_capture, test::cuda_spaces);
TEST_CASE_TEMPLATE_APPLY(any_wave, test::cuda_spaces);
