// The largest weights of a sparse list (top_k), chosen by a radix select that
// the host pass and the device kernel share: no sort, no memory but 256 counts.
#pragma once

#include <cstdint>
#include <cstring>

#include <seqpool/config.hpp>

namespace seqpool::detail {

/// A weight as an unsigned key ordered as the weights are, both zeros one key
/// (relu and fmaxf may give either, and equal weights go by id); NaN, which is
/// never above a floor, is never keyed. Every key is above 0.
SEQPOOL_HOST_DEVICE inline std::uint32_t weight_key(float weight) {
  std::uint32_t bits;
  const float unsigned_zero = weight == 0.0f ? 0.0f : weight;
  std::memcpy(&bits, &unsigned_zero, sizeof bits);
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

/// Finds the `top`-th largest of a list's keys a digit of 8 bits a round, from
/// the highest: each round counts the keys that agree with `threshold` above
/// the round's digit into 256 bins of that digit (counted()), and take() keeps
/// the bin the top-th largest key falls in. After four rounds `threshold` is
/// that key, and `wanted` how many keys equal to it are among the top: a list
/// keeps the keys above the threshold and, of those equal to it, the first
/// `wanted` in order of id (the smaller ids), so the choice is the same on every
/// space and in every run.
struct top_select {
  static constexpr int rounds = 4;
  static constexpr int bins = 256;

  std::uint32_t threshold;
  std::int64_t wanted;  ///< keys still to take among those that agree with the threshold's digits found
  int shift;            ///< the digit the next round counts

  /// The select of a list's `top` largest keys, before its first round. (No
  /// constructor: a device block holds one in shared memory.)
  SEQPOOL_HOST_DEVICE static top_select of(std::int64_t top) { return {0, top, 24}; }

  /// Whether the round counts `key`, and into which bin.
  SEQPOOL_HOST_DEVICE bool counted(std::uint32_t key) const {
    return shift == 24 || (key >> (shift + 8)) == (threshold >> (shift + 8));
  }
  SEQPOOL_HOST_DEVICE int bin(std::uint32_t key) const { return static_cast<int>((key >> shift) & 0xffu); }

  /// Keeps the highest digit whose bin, with the bins above it, holds the
  /// keys still to take.
  SEQPOOL_HOST_DEVICE void take(const std::int32_t* counts) {
    int digit = bins - 1;
    while (counts[digit] < wanted) wanted -= counts[digit--];
    threshold |= static_cast<std::uint32_t>(digit) << shift;
    shift -= 8;
  }
};

}  // namespace seqpool::detail
