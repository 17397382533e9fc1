// The device kernels whose machine code tests/sass_check.py reads, as seqpool
// launches them: pooling (MEAN and MAX over bf16 and fp32 rows into float
// results, MEAN over bf16 rows into bf16 results and over fp32 rows into int8
// ones, MEAN as the candidate policy with two stages of loads cuts it and as
// the one whose split blocks read rows through rings of bulk copies),
// gathering (ALL's and STEP's rows, fp32 and bf16, and bf16 into sign bits),
// the narrow linear layer over pooled rows and over ALL's bf16 rows where they
// lie, the wide one's tiles over pooled rows and over ALL's bf16 and fp32 rows
// (a multi-vector projection), and a captured step's upload.
#include <cstdint>

#include <seqpool/seqpool.hpp>

namespace device = seqpool::detail::device;
/// What the kernels carry of an embed head (its kernel_head()).
using embed = seqpool::head::normalize;

template <class Method, class T, class Result = float, class Policy = device::launch_policy>
using pooling = device::pool_rows<Method, embed, T, Result, Policy>;
template <class T, class Result = float>
using gathering = device::gather_rows<embed, T, Result, device::launch_policy>;

template __global__ void device::run_blocks(pooling<seqpool::method::mean, __nv_bfloat16>, unsigned);
template __global__ void device::run_blocks(pooling<seqpool::method::mean, float>, unsigned);
template __global__ void device::run_blocks(pooling<seqpool::method::max, __nv_bfloat16>, unsigned);
template __global__ void device::run_blocks(pooling<seqpool::method::max, float>, unsigned);
template __global__ void device::run_blocks(pooling<seqpool::method::mean, __nv_bfloat16, seqpool::bfloat16>, unsigned);
template __global__ void device::run_blocks(pooling<seqpool::method::mean, float, float, device::pipelined_loads_policy>,
                                           unsigned);
template __global__ void device::run_blocks(
    pooling<seqpool::method::mean, __nv_bfloat16, float, device::pipelined_loads_policy>, unsigned);
template __global__ void device::run_blocks(pooling<seqpool::method::mean, float, float, device::bulk_rows_policy>,
                                            unsigned);
template __global__ void device::run_blocks(
    pooling<seqpool::method::mean, __nv_bfloat16, float, device::bulk_rows_policy>, unsigned);
template __global__ void device::run_blocks(gathering<float>, unsigned);
template __global__ void device::run_blocks(pooling<seqpool::method::mean, float, std::int8_t>, unsigned);
template __global__ void device::run_blocks(gathering<__nv_bfloat16>, unsigned);
template __global__ void device::run_blocks(gathering<__nv_bfloat16, seqpool::ubinary>, unsigned);
template <class Inputs>
using layer = device::apply_linear<embed, Inputs, float, device::launch_policy>;

template __global__ void device::run_blocks(layer<device::workspace_inputs>, unsigned);
template __global__ void device::run_blocks(layer<device::returned_rows<__nv_bfloat16>>, unsigned);
template <class Inputs>
using tiles = device::linear_tiles<embed, Inputs, float, device::launch_policy>;

template __global__ void device::run_blocks(tiles<device::workspace_inputs>, unsigned);
template __global__ void device::run_blocks(tiles<device::returned_rows<__nv_bfloat16>>, unsigned);
template __global__ void device::run_blocks(tiles<device::returned_rows<float>>, unsigned);
template __global__ void device::run_blocks(device::copy_pieces, unsigned);
