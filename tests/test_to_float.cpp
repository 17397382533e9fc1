// The host's branch-free 16-bit conversions against CUDA's own, on every bit pattern.
#include <bit>
#include <cmath>
#include <cstdint>

#include <doctest/doctest.h>

#include <seqpool/detail/to_float.hpp>

namespace {

__half half_from_bits(std::uint16_t bits) { return __half(__half_raw{bits}); }
__nv_bfloat16 bfloat16_from_bits(std::uint16_t bits) { return __nv_bfloat16(__nv_bfloat16_raw{bits}); }

/// Equal bit for bit, or both NaN.
bool same(float actual, float expected) {
  return std::bit_cast<std::uint32_t>(actual) == std::bit_cast<std::uint32_t>(expected) ||
         (std::isnan(actual) && std::isnan(expected));
}

}  // namespace

TEST_CASE("every half converts exactly as __half2float does") {
  int mismatches = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const __half value = half_from_bits(static_cast<std::uint16_t>(bits));
    if (!same(seqpool::detail::to_float(value), __half2float(value))) ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(seqpool::detail::to_float(half_from_bits(0x0001)) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(seqpool::detail::to_float(half_from_bits(0xfc00)) == -INFINITY);
}

TEST_CASE("every bfloat16 converts exactly as __bfloat162float does") {
  int mismatches = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const __nv_bfloat16 value = bfloat16_from_bits(static_cast<std::uint16_t>(bits));
    if (!same(seqpool::detail::to_float(value), __bfloat162float(value))) ++mismatches;
  }
  CHECK(mismatches == 0);
}
