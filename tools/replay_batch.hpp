// What seqpool-run's main translation unit sees of a replay: a function per
// space and result type, instantiated in parts (replay_part.cpp), and one per
// space for a batch with parts (replay_parts.cpp), so that the main unit
// compiles none of seqpool's kernels.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <seqpool/float16.hpp>
#include <seqpool/quantized.hpp>
#include <seqpool/space/device.hpp>
#include <seqpool/space/host.hpp>
#include <seqpool/sparse.hpp>

#include "batch_file.hpp"

namespace seqpool::tool {

struct options {
  std::filesystem::path batch;
  std::filesystem::path out;
  std::string space = "host";
  bool audit = false;
};

/// Calls `work.template operator()<Result>()` with the result type a batch's
/// "result_dtype" names (float32 where it names none), and returns what it returns.
template <class Work>
decltype(auto) with_result_type(const std::string& dtype, Work&& work) {
  if (dtype == "float16") return work.template operator()<seqpool::half>();
  if (dtype == "bfloat16") return work.template operator()<seqpool::bfloat16>();
  if (dtype == "int8") return work.template operator()<std::int8_t>();
  if (dtype == "uint8") return work.template operator()<std::uint8_t>();
  if (dtype == "binary") return work.template operator()<seqpool::binary>();
  if (dtype == "ubinary") return work.template operator()<seqpool::ubinary>();
  if (dtype == "sparse") return work.template operator()<seqpool::sparse_entry>();
  return work.template operator()<float>();
}

#if defined(__CUDACC__)
using device_space_type = seqpool::device_space<seqpool::cuda_backend>;
#else
using device_space_type = seqpool::device_space<seqpool::omp_backend>;
#endif

/// Replays every step of `batch` in Space with results of type Result
/// (replay.hpp); throws input_error, seqpool::error or device_error.
template <class Space, class Result>
void replay_batch(const batch_file& batch, const options& chosen);

/// Replays every step of `batch`, which has parts, in Space, each part with
/// results of its own type (parts_replay.hpp); throws as replay_batch().
template <class Space>
void replay_parts(const batch_file& batch, const options& chosen);

}  // namespace seqpool::tool
