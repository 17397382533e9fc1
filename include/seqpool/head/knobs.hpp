// request_knobs: what a head's epilogue is told about the request whose row it finishes.
#pragma once

#include <cstdint>

#include <seqpool/batch.hpp>

namespace seqpool {

/// The per-request knobs a head's epilogue reads, copied into device work with
/// the request's record. A new knob is a field here and a line in knobs_of():
/// the records, the plan and every kernel carry it as they are.
struct request_knobs {
  bool use_activation = true;  ///< embed: L2-normalise; classify: the activation of its problem type

  bool operator==(const request_knobs&) const = default;
};

inline request_knobs knobs_of(const pooling_params& params) { return {.use_activation = params.use_activation}; }

}  // namespace seqpool
