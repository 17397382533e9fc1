// The host's branch-free 16-bit conversions against CUDA's own, on every bit pattern.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <doctest/doctest.h>

#include <seqpool/detail/to_float.hpp>

namespace {

template <class T>
T from_bits(std::uint16_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof bits);
  return value;
}

/// Equal bit for bit, or both NaN.
bool same(float actual, float expected) {
  return std::bit_cast<std::uint32_t>(actual) == std::bit_cast<std::uint32_t>(expected) ||
         (std::isnan(actual) && std::isnan(expected));
}

}  // namespace

TEST_CASE("every half converts exactly as __half2float does") {
  int mismatches = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const __half value = from_bits<__half>(static_cast<std::uint16_t>(bits));
    if (!same(seqpool::detail::to_float(value), __half2float(value))) ++mismatches;
  }
  CHECK(mismatches == 0);
  CHECK(seqpool::detail::to_float(from_bits<__half>(0x0001)) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(seqpool::detail::to_float(from_bits<__half>(0xfc00)) == -INFINITY);
}

TEST_CASE("every bfloat16 converts exactly as __bfloat162float does") {
  int mismatches = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const __nv_bfloat16 value = from_bits<__nv_bfloat16>(static_cast<std::uint16_t>(bits));
    if (!same(seqpool::detail::to_float(value), __bfloat162float(value))) ++mismatches;
  }
  CHECK(mismatches == 0);
}
