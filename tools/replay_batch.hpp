// What seqpool-run's main translation unit sees of a replay: a function per
// space and result type, instantiated in parts (replay_part.cpp), and one per
// space for a batch with parts (replay_parts.cpp), so that the main unit
// compiles none of seqpool's kernels.
#pragma once

#include <filesystem>
#include <string>

#include <seqpool/space/device.hpp>
#include <seqpool/space/host.hpp>

#include "batch_file.hpp"

namespace seqpool::tool {

struct options {
  std::filesystem::path batch;
  std::filesystem::path out;
  std::string space = "host";
  bool audit = false;
};

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
