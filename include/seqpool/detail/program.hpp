// step_program: everything a step runner fixed on the host about one step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/detail/planner.hpp>
#include <seqpool/detail/reused_list.hpp>
#include <seqpool/detail/share.hpp>

namespace seqpool::detail {

/// What planning a step works in besides its shares, kept for the next plan
/// made into the same step_plan.
struct plan_scratch {
  step_layout layout;                   ///< its chunks' rows counted from the step's first row (lay_out_into())
  std::vector<std::uint64_t> id_table;  ///< the layout's check of unique ids
  std::vector<std::size_t> chosen;      ///< one entry's requests
  /// A multi_pooler's: the step as each part plans it (route_knobs), without
  /// token ids once planned (routed_ids_release).
  std::vector<batch> part_batches;
  planner_scratch planner;
};

/// A serial number that moves with the object holding it and leaves 0 behind.
/// Moved into itself it holds 0 too: the holder's other members may have
/// emptied themselves, as std::vector's do. A copy holds the same serial.
class moving_serial {
 public:
  moving_serial() = default;
  explicit moving_serial(std::uint64_t value) : value_(value) {}
  moving_serial(const moving_serial&) = default;
  moving_serial& operator=(const moving_serial&) = default;
  moving_serial(moving_serial&& from) noexcept : value_(std::exchange(from.value_, 0)) {}
  moving_serial& operator=(moving_serial&& from) noexcept {
    const std::uint64_t taken = std::exchange(from.value_, 0);
    value_ = this == &from ? 0 : taken;
    return *this;
  }

  std::uint64_t value() const { return value_; }

 private:
  std::uint64_t value_ = 0;
};

/// A planned step: one share per pooler that has requests in it, their images
/// packed into the step's one image and their results into its outputs (one,
/// or a multi_pooler's one a part). The
/// public step_plan carries it, opaque, with the storage the next plan into
/// it reuses.
struct step_program {
  /// The runner that made it, which alone may run it: 0 while none has (a plan
  /// never planned into, one whose plan() threw, one moved from or into itself).
  moving_serial maker;
  std::uint64_t serial = 0;  ///< this plan, which runs once, after the reserve() made for it
  std::int64_t hidden_size = 0;
  std::int64_t num_rows = 0;     ///< rows the step's hidden states must have
  std::vector<std::int64_t> output_sizes;  ///< values each of the step's outputs must hold
  std::size_t image_bytes = 0;
  reused_list<share> shares;
  plan_scratch scratch;
};

}  // namespace seqpool::detail
