// seqpool::half and seqpool::bfloat16: the 16-bit float types hidden states may
// have, with no header beyond libcu++'s. A host build needs nothing of
// the CUDA toolkit for them; where cuda_fp16.h and cuda_bf16.h are at hand, CUDA's
// __half and __nv_bfloat16 are accepted as well (see hidden_element), bit for bit
// the same data.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda/std/bit>

#include <seqpool/config.hpp>

namespace seqpool {

namespace detail {

/// float → IEEE binary16 bits, rounded to nearest even; every NaN becomes 0x7fff,
/// as __float2half_rn gives.
SEQPOOL_HOST_DEVICE constexpr std::uint16_t half_bits(float value) {
  const std::uint32_t bits = cuda::std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0x7fffu;
  // From 65520 up (half's largest finite value plus half an ulp), infinity.
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {
    // Below half's smallest normal: adding 0.5 leaves the value's bits, shifted
    // to half's subnormal ulp (2^-24) and rounded to nearest even by the float
    // addition itself, in the low mantissa bits of the sum.
    const float sum = cuda::std::bit_cast<float>(magnitude) + 0.5f;
    return static_cast<std::uint16_t>(sign | (cuda::std::bit_cast<std::uint32_t>(sum) - 0x3f000000u));
  }
  // Rebias the exponent from float's to half's and round the mantissa bits half
  // drops to nearest even; a carry out of the mantissa steps the exponent, as it must.
  const std::uint32_t odd = (magnitude >> 13) & 1u;
  const std::uint32_t rounded = magnitude - (112u << 23) + 0xfffu + odd;
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

/// float → bfloat16 bits, rounded to nearest even; every NaN becomes 0x7fff, as
/// __float2bfloat16_rn gives.
SEQPOOL_HOST_DEVICE constexpr std::uint16_t bfloat16_bits(float value) {
  const std::uint32_t bits = cuda::std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace detail

/// IEEE binary16. Trivially copyable, two bytes: an array of them is the same
/// memory as an array of CUDA's __half or of torch.float16.
struct half {
  std::uint16_t bits;

  half() = default;
  /// `value` rounded to nearest even.
  SEQPOOL_HOST_DEVICE constexpr explicit half(float value) : bits(detail::half_bits(value)) {}
  SEQPOOL_HOST_DEVICE static constexpr half from_bits(std::uint16_t bits) {
    half made;
    made.bits = bits;
    return made;
  }
};

/// bfloat16: the high half of a float. Trivially copyable, two bytes: an array of
/// them is the same memory as an array of CUDA's __nv_bfloat16 or of torch.bfloat16.
struct bfloat16 {
  std::uint16_t bits;

  bfloat16() = default;
  /// `value` rounded to nearest even.
  SEQPOOL_HOST_DEVICE constexpr explicit bfloat16(float value) : bits(detail::bfloat16_bits(value)) {}
  SEQPOOL_HOST_DEVICE static constexpr bfloat16 from_bits(std::uint16_t bits) {
    bfloat16 made;
    made.bits = bits;
    return made;
  }
};

static_assert(sizeof(half) == 2 && alignof(half) == 2 && std::is_trivially_copyable_v<half>);
static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>);

}  // namespace seqpool
