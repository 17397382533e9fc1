// part_output: one output of a runtime_multi_pooler's step, of its part's result type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include <cuda/std/span>

#include <seqpool/float16.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/quantized.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool {

namespace detail {

/// A result type's name, which tells the types apart (an output's from a
/// part's) and says which in messages.
template <class Result>
constexpr std::string_view result_name() {
  if constexpr (std::is_same_v<Result, float>)
    return "float";
  else if constexpr (std::is_same_v<Result, half>)
    return "half";
  else if constexpr (std::is_same_v<Result, bfloat16>)
    return "bfloat16";
  else if constexpr (std::is_same_v<Result, std::int8_t>)
    return "int8";
  else if constexpr (std::is_same_v<Result, std::uint8_t>)
    return "uint8";
  else if constexpr (std::is_same_v<Result, binary>)
    return "binary";
  else if constexpr (std::is_same_v<Result, ubinary>)
    return "ubinary";
  else if constexpr (std::is_same_v<Result, sparse_entry>)
    return "sparse_entry";
#if SEQPOOL_HAS_CUDA_FLOAT16
  else if constexpr (std::is_same_v<Result, __half>)
    return "__half";
  else if constexpr (std::is_same_v<Result, __nv_bfloat16>)
    return "__nv_bfloat16";
#endif
  else
    static_assert(sizeof(Result) == 0, "every result type seqpool writes has a name here");
}

}  // namespace detail

/// Where a runtime_multi_pooler's step writes one part's results: the values
/// of a span of the part's result type, which the step checks before it
/// launches anything (a span of another type is refused, never reinterpreted).
class part_output {
 public:
  template <class Result>
  requires result_element<Result> || sparse_element<Result> part_output(
      cuda::std::span<Result> values)  // NOLINT: a span is an output
      : data_(values.data()),
        size_(values.size()),
        value_bytes_(sizeof(Result)),
        result_type_name_(detail::result_name<Result>()) {}

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * value_bytes_; }
  /// Its values' type (float, half, …, sparse_entry).
  std::string_view result_type_name() const { return result_type_name_; }

 private:
  void* data_;
  std::size_t size_;
  std::size_t value_bytes_;
  std::string_view result_type_name_;
};

}  // namespace seqpool
