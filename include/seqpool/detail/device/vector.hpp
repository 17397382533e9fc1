// 16-byte loads and stores: how the device kernels move rows.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include <cuda/std/bit>

#include <seqpool/config.hpp>
#include <seqpool/detail/to_float.hpp>

namespace seqpool::detail::device {

inline constexpr int vector_bytes = 16;

/// Elements of T in one 16-byte vector: 4 floats, or 8 of a 16-bit type.
template <class T>
inline constexpr int vector_elements = vector_bytes / static_cast<int>(sizeof(T));

/// The bytes one load brings: a 16-byte vector, or 8 bytes where a kernel loads
/// half vectors.
template <int Bytes>
struct alignas(Bytes) raw_bytes {
  std::uint32_t words[Bytes / 4];
};
using raw_vector = raw_bytes<vector_bytes>;

SEQPOOL_HOST_DEVICE inline bool is_aligned(const void* address) {
  return reinterpret_cast<std::uintptr_t>(address) % vector_bytes == 0;
}

/// What the GPU requires of a vector access and the host's copies do not: an
/// address aligned to its size (the GPU faults on any other). The stand-in
/// checks it, so that the CPU tests catch a kernel that would fault.
template <int Bytes>
inline void check_aligned(const void* address) {
  if (reinterpret_cast<std::uintptr_t>(address) % Bytes != 0) {
    std::fprintf(stderr, "seqpool: a %d-byte vector access at %p is not aligned to its size\n", Bytes, address);
    std::abort();
  }
}

/// The bytes at `address`, as the host reads them: a plain copy.
template <int Bytes>
inline raw_bytes<Bytes> copied(const void* address) {
  check_aligned<Bytes>(address);
  raw_bytes<Bytes> loaded;
  std::memcpy(&loaded, address, sizeof loaded);
  return loaded;
}

/// One load of 16 (or 8) bytes of data read once (hidden states): on the GPU a
/// streaming load, which leaves L2 to what is read again.
template <int Bytes = vector_bytes>
SEQPOOL_HOST_DEVICE raw_bytes<Bytes> load_once(const void* address) {
  static_assert(Bytes == 16 || Bytes == 8, "16- or 8-byte loads");
#if defined(__CUDA_ARCH__)
  if constexpr (Bytes == 16)
    return cuda::std::bit_cast<raw_bytes<16>>(__ldcs(static_cast<const uint4*>(address)));
  else
    return cuda::std::bit_cast<raw_bytes<8>>(__ldcs(static_cast<const uint2*>(address)));
#else
  return copied<Bytes>(address);
#endif
}

/// One 16-byte load of memory the host rewrites between launches (a pinned
/// staging slot): on the GPU it is fetched again, past every cache.
SEQPOOL_HOST_DEVICE inline raw_vector load_uncached(const void* address) {
#if defined(__CUDA_ARCH__)
  return cuda::std::bit_cast<raw_vector>(__ldcv(static_cast<const uint4*>(address)));
#else
  return copied<vector_bytes>(address);
#endif
}

/// One 16-byte load of floats that another block wrote before it arrived: on
/// the GPU from L2, past the SM's own L1, which does not see other SMs' writes.
SEQPOOL_HOST_DEVICE inline raw_vector load_fresh(const float* address) {
#if defined(__CUDA_ARCH__)
  return cuda::std::bit_cast<raw_vector>(__ldcg(reinterpret_cast<const uint4*>(address)));
#else
  return copied<vector_bytes>(address);
#endif
}

/// The four floats at `from`, a 16-byte boundary (of shared memory): one load.
SEQPOOL_HOST_DEVICE inline void load_four(const float* from, float* to) {
#if defined(__CUDA_ARCH__)
  const float4 loaded = *reinterpret_cast<const float4*>(from);
  to[0] = loaded.x;
  to[1] = loaded.y;
  to[2] = loaded.z;
  to[3] = loaded.w;
#else
  check_aligned<vector_bytes>(from);
  std::memcpy(to, from, vector_bytes);
#endif
}

/// Stores one 16-byte vector at `to`, a 16-byte boundary.
SEQPOOL_HOST_DEVICE inline void store_vector(void* to, const raw_vector& vector) {
#if defined(__CUDA_ARCH__)
  *static_cast<raw_vector*>(to) = vector;
#else
  check_aligned<vector_bytes>(to);
  std::memcpy(to, &vector, sizeof vector);
#endif
}

/// The loaded elements as floats.
template <class T, int Bytes>
SEQPOOL_HOST_DEVICE void to_floats(const raw_bytes<Bytes>& raw, float* out) {
  constexpr int count = Bytes / static_cast<int>(sizeof(T));
  T elements[count];
  std::memcpy(static_cast<void*>(elements), &raw, sizeof raw);
  for (int e = 0; e < count; ++e) out[e] = to_float(elements[e]);
}

/// The first `count` of the N columns from `column` of a row, as floats, where a
/// vector load cannot take them (an unaligned row, or the row's last columns);
/// the rest of `out` is left as it was. Loops of constant length keep `out` in
/// registers.
template <int N, class T>
SEQPOOL_HOST_DEVICE void load_columns(const T* row, std::int64_t column, std::int64_t count, float* out) {
  SEQPOOL_UNROLL
  for (int e = 0; e < N; ++e)
    if (e < count) out[e] = to_float(row[column + e]);
}

/// Four bytes of values rounded to Out, as memory holds them: one float, or two
/// 16-bit values, the first in the low half.
template <class Out>
SEQPOOL_HOST_DEVICE std::uint32_t word_of(const float* values) {
  if constexpr (sizeof(Out) == 4) {
    return cuda::std::bit_cast<std::uint32_t>(values[0]);
  } else {
    const auto low = cuda::std::bit_cast<std::uint16_t>(round_to<Out>(values[0]));
    const auto high = cuda::std::bit_cast<std::uint16_t>(round_to<Out>(values[1]));
    return static_cast<std::uint32_t>(low) | static_cast<std::uint32_t>(high) << 16;
  }
}

/// Stores the first `count` of the N floats of `values` at `to`, as Out (16-bit
/// results rounded to nearest even): as whole vectors when all N go to an
/// address aligned to their size (N × sizeof(Out) bytes, in 16-byte pieces),
/// one value at a time otherwise. The words are packed in registers.
template <int N, class Out>
SEQPOOL_HOST_DEVICE void store_values(Out* to, const float* values, std::int64_t count, bool aligned) {
  static_assert(N % 4 == 0, "whole vectors of four");
  if (!aligned || count != N) {
    SEQPOOL_UNROLL
    for (int e = 0; e < N; ++e)
      if (e < count) to[e] = round_to<Out>(values[e]);
    return;
  }
  constexpr int bytes = N * static_cast<int>(sizeof(Out));
  constexpr int piece = bytes < vector_bytes ? bytes : vector_bytes;
  constexpr int per_piece = piece / static_cast<int>(sizeof(Out));
  constexpr int per_word = 4 / static_cast<int>(sizeof(Out));
  SEQPOOL_UNROLL
  for (int e = 0; e < N; e += per_piece) {
    raw_bytes<piece> packed;
    SEQPOOL_UNROLL
    for (int w = 0; w < piece / 4; ++w) packed.words[w] = word_of<Out>(values + e + w * per_word);
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<raw_bytes<piece>*>(to + e) = packed;
#else
    check_aligned<piece>(to + e);
    std::memcpy(static_cast<void*>(to + e), &packed, piece);
#endif
  }
}

}  // namespace seqpool::detail::device
