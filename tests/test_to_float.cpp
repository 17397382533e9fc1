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

/// Bit patterns whose conversion differs from CUDA's own, over all 65536 of them.
template <class Element, class FromBits, class Reference>
int mismatches(FromBits from_bits, Reference reference) {
  int different = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const Element value = from_bits(static_cast<std::uint16_t>(bits));
    if (!same(seqpool::detail::to_float(value), reference(value))) ++different;
  }
  return different;
}

TEST_CASE("every half converts exactly as __half2float does") {
  CHECK(mismatches<__half>(half_from_bits, [](__half value) { return __half2float(value); }) == 0);
  CHECK(seqpool::detail::to_float(half_from_bits(0x0001)) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(seqpool::detail::to_float(half_from_bits(0xfc00)) == -INFINITY);
}

TEST_CASE("every bfloat16 converts exactly as __bfloat162float does") {
  CHECK(mismatches<__nv_bfloat16>(bfloat16_from_bits, [](__nv_bfloat16 value) { return __bfloat162float(value); }) ==
        0);
}
