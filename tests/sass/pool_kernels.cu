// The device pooling kernels whose machine code tests/sass_check.py reads:
// MEAN and MAX over bf16 and fp32 rows, as seqpool launches them.
#include <seqpool/seqpool.hpp>

namespace device = seqpool::detail::device;

template <class Method, class T>
using pooling = device::pool_rows<Method, seqpool::head::embed, T>;

template __global__ void device::run_blocks(pooling<seqpool::method::mean, __nv_bfloat16>);
template __global__ void device::run_blocks(pooling<seqpool::method::mean, float>);
template __global__ void device::run_blocks(pooling<seqpool::method::max, __nv_bfloat16>);
template __global__ void device::run_blocks(pooling<seqpool::method::max, float>);
