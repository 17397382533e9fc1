// result_slice: where a finished request's result lies in a step's output.
#pragma once

#include <cstdint>

namespace seqpool {

/// `rows` rows of `cols` values from value `offset` of the step's output, which
/// is a multiple of 16 bytes' worth (4 floats, 8 16-bit values). A sequence
/// task has one row, or one per span.
struct result_slice {
  std::int64_t offset = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

}  // namespace seqpool
