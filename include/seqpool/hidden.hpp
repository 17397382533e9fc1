// The view of a step's hidden states.
#pragma once

#include <concepts>
#include <cstdint>

#include <cuda/std/array>
#include <cuda/std/mdspan>

#include <seqpool/config.hpp>
#include <seqpool/float16.hpp>
#include <seqpool/quantized.hpp>

namespace seqpool {

/// The element types hidden states may have; every method reads them as float.
/// CUDA's __half and __nv_bfloat16 are accepted where their headers are at hand.
template <class T>
concept hidden_element = std::same_as<T, float> || std::same_as<T, half> || std::same_as<T, bfloat16>
#if SEQPOOL_HAS_CUDA_FLOAT16
                         || std::same_as<T, __half> || std::same_as<T, __nv_bfloat16>
#endif
    ;

/// The element types a pooler's results may have: the same, and the quantized
/// ones (int8, uint8, binary, ubinary). Methods and heads work in float; a
/// 16-bit result is rounded to nearest even once, and a quantized one quantized
/// once, as it is stored.
template <class T>
concept result_element = hidden_element<T> || quantized_element<T>;

/// hidden[T, H], row-major in the space's memory; rows may be further apart than H.
template <hidden_element T>
using hidden_view = cuda::std::mdspan<const T, cuda::std::dextents<std::int64_t, 2>, cuda::std::layout_stride>;

template <hidden_element T>
hidden_view<T> make_hidden_view(const T* data, std::int64_t rows, std::int64_t hidden_size, std::int64_t row_stride) {
  using extents = cuda::std::dextents<std::int64_t, 2>;
  return {data, cuda::std::layout_stride::mapping<extents>(extents(rows, hidden_size),
                                                           cuda::std::array<std::int64_t, 2>{row_stride, 1})};
}

template <hidden_element T>
hidden_view<T> make_hidden_view(const T* data, std::int64_t rows, std::int64_t hidden_size) {
  return make_hidden_view(data, rows, hidden_size, hidden_size);
}

}  // namespace seqpool
