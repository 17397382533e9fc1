// seqpool's 16-bit floats against CUDA's own: conversion to float on every bit
// pattern, and rounding from float on every rounding case of every exponent.
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/detail/to_float.hpp>

namespace {

__half cuda_half(std::uint16_t bits) { return __half(__half_raw{bits}); }
__nv_bfloat16 cuda_bfloat16(std::uint16_t bits) { return __nv_bfloat16(__nv_bfloat16_raw{bits}); }

/// Equal bit for bit, or both NaN.
bool same(float actual, float expected) {
  return std::bit_cast<std::uint32_t>(actual) == std::bit_cast<std::uint32_t>(expected) ||
         (std::isnan(actual) && std::isnan(expected));
}

/// Bit patterns whose conversion to float differs from CUDA's, over all 65536 of
/// them, for seqpool's type and for CUDA's own as seqpool reads it.
template <class Seqpool, class Cuda, class FromBits, class Reference>
int load_mismatches(FromBits cuda_from_bits, Reference reference) {
  int different = 0;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const Cuda value = cuda_from_bits(static_cast<std::uint16_t>(bits));
    const float expected = reference(value);
    if (!same(seqpool::detail::to_float(Seqpool::from_bits(static_cast<std::uint16_t>(bits))), expected)) ++different;
    if (!same(seqpool::detail::to_float(value), expected)) ++different;
  }
  return different;
}

/// Floats that exercise rounding to 16 bits: for every value of the high 19 bits
/// (sign, exponent, leading mantissa), low bits below, at, and above each halfway
/// point of both formats; and a stride through all 2^32 patterns.
std::vector<float> rounding_cases() {
  std::vector<float> cases;
  for (std::uint32_t high = 0; high < (1u << 19); ++high)
    for (std::uint32_t low : {0x0u, 0x1u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu})
      cases.push_back(std::bit_cast<float>(high << 13 | low));
  for (std::uint64_t bits = 0; bits < (1ull << 32); bits += 4099) cases.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  for (std::uint32_t high = 0; high < (1u << 16); ++high)
    for (std::uint32_t low : {0x1u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      cases.push_back(std::bit_cast<float>(high << 16 | low));
  return cases;
}

template <class Cuda>
std::uint16_t bits_of(Cuda value) {
  return std::bit_cast<std::uint16_t>(value);
}

}  // namespace

TEST_CASE("every half converts to float exactly as __half2float does") {
  CHECK(load_mismatches<seqpool::half, __half>(cuda_half, [](__half value) { return __half2float(value); }) == 0);
  CHECK(seqpool::detail::to_float(seqpool::half::from_bits(0x0001)) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(seqpool::detail::to_float(seqpool::half::from_bits(0xfc00)) == -INFINITY);
}

TEST_CASE("every bfloat16 converts to float exactly as __bfloat162float does") {
  CHECK(load_mismatches<seqpool::bfloat16, __nv_bfloat16>(cuda_bfloat16,
                                                          [](__nv_bfloat16 value) { return __bfloat162float(value); }) == 0);
}

TEST_CASE("floats round to half and bfloat16 exactly as __float2half_rn and __float2bfloat16_rn do") {
  int half_mismatches = 0, bfloat16_mismatches = 0;
  for (const float value : rounding_cases()) {
    if (seqpool::half(value).bits != bits_of(__float2half_rn(value))) ++half_mismatches;
    if (seqpool::bfloat16(value).bits != bits_of(__float2bfloat16_rn(value))) ++bfloat16_mismatches;
  }
  CHECK(half_mismatches == 0);
  CHECK(bfloat16_mismatches == 0);
  // Hand-checked: 65504 is half's largest finite value, 65520 the first to round
  // to infinity; 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 and rounds to even.
  CHECK(seqpool::half(65519.0f).bits == 0x7bff);
  CHECK(seqpool::half(65520.0f).bits == 0x7c00);
  CHECK(seqpool::half(1.0f + 0x1p-11f).bits == 0x3c00);
  CHECK(seqpool::half(1.0f + 0x1p-10f + 0x1p-11f).bits == 0x3c02);
  CHECK(seqpool::half(0x1p-25f).bits == 0x0000);  // halfway to the smallest subnormal: even is zero
  CHECK(seqpool::half(-NAN).bits == 0x7fff);
  CHECK(seqpool::bfloat16(1.0f + 0x1p-8f).bits == 0x3f80);
  CHECK(seqpool::bfloat16(-INFINITY).bits == 0xff80);
}
