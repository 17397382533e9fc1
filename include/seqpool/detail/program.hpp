// step_program: everything a step runner fixed on the host about one step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/detail/share.hpp>
#include <seqpool/result_slice.hpp>

namespace seqpool::detail {

/// A planned step: one share per pooler that has requests in it, their images
/// packed into the step's one image and their results into one output. The
/// public step_plan carries it, opaque.
struct step_program {
  std::uint64_t maker = 0;   ///< the runner that made it, which alone may run it
  std::uint64_t serial = 0;  ///< this plan, which runs once, after the reserve() made for it
  std::int64_t hidden_size = 0;
  std::int64_t num_rows = 0;     ///< rows the step's hidden states must have
  std::int64_t output_size = 0;  ///< values the step's output must hold
  std::size_t image_bytes = 0;
  std::vector<std::optional<result_slice>> results;  ///< per request in batch order, until the plan takes them
  std::vector<task_group> groups;                    ///< until the plan takes them
  std::vector<share> shares;
};

}  // namespace seqpool::detail
