// The row a head's epilogue works on, on the host.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>

namespace seqpool::head {

/// A result row in contiguous memory, finished by one thread. A head's epilogue
/// is written against what this offers — width(), transform(f) (each value
/// becomes f(value)), scale(factor) (each value times factor), sum(f) and
/// max(f) (of f over the values) — so that the device kernels can hand it a
/// row spread over the lanes of a warp instead. sum() may add in any order.
struct plain_row {
  float* values;
  std::int64_t columns;

  SEQPOOL_HOST_DEVICE std::int64_t width() const { return columns; }

  // The loops read the members into locals first: GCC leaves a loop over
  // `this->values` scalar.
  template <class F>
  SEQPOOL_HOST_DEVICE void transform(F&& f) {
    float* const row = values;
    const std::int64_t width = columns;
    for (std::int64_t c = 0; c < width; ++c) row[c] = f(row[c]);
  }

  /// In vector lanes: GCC leaves a loop of a runtime count scalar below -O3.
  /// (transform() is not asked to be: its function may call libm, which
  /// clang warns an asked loop cannot be vectorised over.)
  SEQPOOL_HOST_DEVICE void scale(float factor) {
    float* const row = values;
    const std::int64_t width = columns;
    SEQPOOL_SIMD
    for (std::int64_t c = 0; c < width; ++c) row[c] *= factor;
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float sum(F&& f) const {
    const float* const row = values;
    const std::int64_t width = columns;
    float total = 0.0f;
    SEQPOOL_SIMD_REDUCTION(+ : total)
    for (std::int64_t c = 0; c < width; ++c) total += f(row[c]);
    return total;
  }

  template <class F>
  SEQPOOL_HOST_DEVICE float max(F&& f) const {
    // fmaxf's rule (a NaN is taken as missing), as comparisons: fmaxf is a call into libm here.
    float largest = f(values[0]);
    for (std::int64_t c = 1; c < columns; ++c) {
      const float value = f(values[c]);
      if (value > largest || largest != largest) largest = value;
    }
    return largest;
  }
};

}  // namespace seqpool::head
