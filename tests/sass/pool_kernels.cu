// The device pooling kernels whose machine code tests/sass_check.py reads:
// MEAN and MAX over bf16 and fp32 rows into float results, and MEAN over bf16
// rows into bf16 results, as seqpool launches them.
#include <seqpool/seqpool.hpp>

namespace device = seqpool::detail::device;

template <class Method, class T, class Result = float>
using pooling = device::pool_rows<Method, seqpool::head::embed, T, Result, device::launch_policy>;

template __global__ void device::run_blocks(pooling<seqpool::method::mean, __nv_bfloat16>);
template __global__ void device::run_blocks(pooling<seqpool::method::mean, float>);
template __global__ void device::run_blocks(pooling<seqpool::method::max, __nv_bfloat16>);
template __global__ void device::run_blocks(pooling<seqpool::method::max, float>);
template __global__ void device::run_blocks(pooling<seqpool::method::mean, __nv_bfloat16, seqpool::bfloat16>);
