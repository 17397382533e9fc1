// Conversions between the element types and float: hidden states on load,
// 16-bit results on store.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <seqpool/config.hpp>
#include <seqpool/float16.hpp>

namespace seqpool::detail {

SEQPOOL_HOST_DEVICE inline float to_float(float value) { return value; }

// On the host both 16-bit conversions are written on the bits, branch-free, so
// that loops over a row vectorise; the device uses its conversion instructions.
SEQPOOL_HOST_DEVICE inline float to_float(bfloat16 value) {
#if defined(__CUDA_ARCH__)
  return __bfloat162float(__nv_bfloat16(__nv_bfloat16_raw{value.bits}));
#else
  return std::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16);
#endif
}

SEQPOOL_HOST_DEVICE inline float to_float(half value) {
#if defined(__CUDA_ARCH__)
  return __half2float(__half(__half_raw{value.bits}));
#else
  const std::uint32_t sign = static_cast<std::uint32_t>(value.bits & 0x8000u) << 16;
  const std::uint32_t shifted = static_cast<std::uint32_t>(value.bits & 0x7fffu) << 13;
  // Scaling by 2^112 rebiases the exponent and turns half subnormals into float
  // normals exactly; infinities and NaNs keep an all-ones exponent instead.
  const std::uint32_t magnitude = shifted >= (0x7c00u << 13)
                                      ? shifted | 0x7f800000u
                                      : std::bit_cast<std::uint32_t>(std::bit_cast<float>(shifted) * 0x1p112f);
  return std::bit_cast<float>(magnitude | sign);
#endif
}

#if SEQPOOL_HAS_CUDA_FLOAT16
// CUDA's types hold the same bits as seqpool's.
SEQPOOL_HOST_DEVICE inline float to_float(__nv_bfloat16 value) {
#if defined(__CUDA_ARCH__)
  return __bfloat162float(value);
#else
  bfloat16 same;
  std::memcpy(&same, &value, sizeof same);
  return to_float(same);
#endif
}

SEQPOOL_HOST_DEVICE inline float to_float(__half value) {
#if defined(__CUDA_ARCH__)
  return __half2float(value);
#else
  half same;
  std::memcpy(&same, &value, sizeof same);
  return to_float(same);
#endif
}
#endif

/// A float result as the output's element type, rounded to nearest even (once:
/// every kernel finishes a row in float and rounds as it stores it). The device
/// uses its conversion instructions, which round the same way.
template <class Result>
SEQPOOL_HOST_DEVICE inline Result round_to(float value) {
  if constexpr (std::is_same_v<Result, float>) {
    return value;
#if SEQPOOL_HAS_CUDA_FLOAT16
  } else if constexpr (std::is_same_v<Result, __half>) {
    return __float2half_rn(value);
  } else if constexpr (std::is_same_v<Result, __nv_bfloat16>) {
    return __float2bfloat16_rn(value);
#endif
  } else {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<Result, half>)
      return half::from_bits(__half_as_ushort(__float2half_rn(value)));
    else
      return bfloat16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(value)));
#else
    return Result(value);
#endif
  }
}

}  // namespace seqpool::detail
