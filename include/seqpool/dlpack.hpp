// Framework tensors handed over through DLPack (PyTorch, JAX, CuPy, …) as
// seqpool's views, without a copy: hidden states, the output, and token ids.
// Needs <dlpack/dlpack.h> (Debian's libdlpack-dev); not part of seqpool.hpp.
//
// Every view checks the tensor's device against the space that will read it, its
// dtype, shape, strides and data pointer, and throws seqpool::error naming what it
// found and what it needs. The views borrow the tensor's memory: its owner keeps it
// alive until the step that reads it has finished.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include <dlpack/dlpack.h>
#include <cuda/std/span>

#include <seqpool/batch.hpp>
#include <seqpool/error.hpp>
#include <seqpool/float16.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/quantized.hpp>
#include <seqpool/space/device.hpp>
#include <seqpool/space/host.hpp>
#include <seqpool/sparse.hpp>
#include <seqpool/token_ids.hpp>

namespace seqpool::dlpack {

/// Which DLPack devices a space's work reads and writes.
template <class Space>
struct memory;

template <>
struct memory<host_space> {
  static constexpr const char* space = "host_space";
  static constexpr DLDeviceType devices[] = {kDLCPU, kDLCUDAHost};
};

template <>
struct memory<device_space<omp_backend>> {
  static constexpr const char* space = "device_space<omp_backend>";
  static constexpr DLDeviceType devices[] = {kDLCPU, kDLCUDAHost};
};

#if defined(__CUDACC__)
template <>
struct memory<device_space<cuda_backend>> {
  static constexpr const char* space = "device_space<cuda_backend>";
  static constexpr DLDeviceType devices[] = {kDLCUDA, kDLCUDAManaged};
  /// The device whose kDLCUDA memory it reads: the current one, which must be
  /// its stream's whenever it is used.
  static int device() { return cuda_backend::current_device(); }
};
#endif

namespace detail {

inline std::string device_name(DLDeviceType type) {
  switch (type) {
    case kDLCPU:
      return "kDLCPU";
    case kDLCUDA:
      return "kDLCUDA";
    case kDLCUDAHost:
      return "kDLCUDAHost";
    case kDLCUDAManaged:
      return "kDLCUDAManaged";
    case kDLROCM:
      return "kDLROCM";
    default:
      return "device type " + std::to_string(static_cast<int>(type));
  }
}

/// float32, bfloat16, int64, uint8x4, bool, …: as DLPack's type names are
/// written, a byte-wide bool (PyTorch's and NumPy's) without its bits.
inline std::string dtype_name(DLDataType type) {
  constexpr std::uint8_t bool_code = 6;  // kDLBool, since DLPack 0.8 (Debian's header is 0.6)
  std::string name;
  switch (type.code) {
    case kDLFloat:
      name = "float";
      break;
    case kDLBfloat:
      name = "bfloat";
      break;
    case kDLInt:
      name = "int";
      break;
    case kDLUInt:
      name = "uint";
      break;
    case kDLComplex:
      name = "complex";
      break;
    case bool_code:
      name = "bool";
      break;
    default:
      name = "type code " + std::to_string(type.code) + " of ";
      break;
  }
  if (type.code != bool_code || type.bits != 8) name += std::to_string(type.bits);
  if (type.lanes != 1) {
    // Appended apart: g++ 12 at -O3 takes `"x" + std::string` for an overlapping copy (-Wrestrict, GCC bug 105329).
    name += 'x';
    name += std::to_string(type.lanes);
  }
  return name;
}

/// [2, 3, 4]: the tensor's shape, for messages.
inline std::string shape_name(const DLTensor& tensor) {
  std::string name = "[";
  for (int d = 0; d < tensor.ndim; ++d) {
    if (d > 0) name += ", ";
    name += std::to_string(tensor.shape[d]);
  }
  return name + "]";
}

template <class Space>
void check_device(const DLTensor& tensor, const char* what) {
  if (std::ranges::find(memory<Space>::devices, tensor.device.device_type) !=
      std::ranges::end(memory<Space>::devices)) {
    // The kernels run on the current device, which another's memory may not be open to (no peer access).
    if constexpr (requires { memory<Space>::device(); })
      if (tensor.device.device_type == kDLCUDA)
        if (const int device = memory<Space>::device(); tensor.device.device_id != device)
          seqpool::detail::fail(
              what, "the tensor is on CUDA device ", tensor.device.device_id, "; ", memory<Space>::space,
              " reads the current device's, ", device,
              ", which must be its stream's (cudaSetDevice or torch.cuda.set_device before using it)");
    return;
  }
  std::string accepted;
  for (const DLDeviceType device : memory<Space>::devices)
    accepted += (accepted.empty() ? "" : " or ") + device_name(device);
  seqpool::detail::fail(what, "the tensor is on ", device_name(tensor.device.device_type), ", which ",
                        memory<Space>::space, " does not read; it needs ", accepted);
}

/// The DLPack type of a result element.
template <result_element T>
DLDataType dtype_of() {
  const auto bits = static_cast<std::uint8_t>(8 * sizeof(T));
  if constexpr (std::same_as<T, bfloat16>
#if SEQPOOL_HAS_CUDA_FLOAT16
                || std::same_as<T, __nv_bfloat16>
#endif
  )
    return {kDLBfloat, bits, 1};
  else if constexpr (std::same_as<T, std::int8_t> || std::same_as<T, binary>)
    return {kDLInt, bits, 1};
  else if constexpr (std::same_as<T, std::uint8_t> || std::same_as<T, ubinary>)
    return {kDLUInt, bits, 1};
  else
    return {kDLFloat, bits, 1};
}

template <class T>
bool holds(DLDataType type) {
  if (type.lanes != 1 || type.bits != 8 * sizeof(T)) return false;
  if constexpr (std::same_as<T, float>)
    return type.code == kDLFloat;
  else if constexpr (std::same_as<T, half>)
    return type.code == kDLFloat;
  else if constexpr (std::same_as<T, bfloat16>)
    return type.code == kDLBfloat;
#if SEQPOOL_HAS_CUDA_FLOAT16
  else if constexpr (std::same_as<T, __half>)
    return type.code == kDLFloat;
  else if constexpr (std::same_as<T, __nv_bfloat16>)
    return type.code == kDLBfloat;
#endif
  else if constexpr (std::same_as<T, std::int64_t> || std::same_as<T, std::int32_t> || std::same_as<T, std::int8_t> ||
                     std::same_as<T, binary>)
    return type.code == kDLInt;
  else if constexpr (std::same_as<T, std::uint8_t> || std::same_as<T, ubinary>)
    return type.code == kDLUInt;
  else
    return false;
}

/// The tensor's first element, after byte_offset, checked to be aligned for T and,
/// where the tensor has elements, not to be null. A tensor of no elements may have
/// null data (a framework's empty tensor may own no memory): nothing reads or writes it.
template <class T>
T* first_element(const DLTensor& tensor, const char* what, std::int64_t elements) {
  if (tensor.data == nullptr && elements > 0)
    seqpool::detail::fail(what, "data is null; the tensor has ", elements, " elements");
  const auto address = reinterpret_cast<std::uintptr_t>(tensor.data) + tensor.byte_offset;
  if (address % alignof(T) != 0)
    seqpool::detail::fail(what, "data + byte_offset is not aligned to ", alignof(T), " bytes (it is ",
                          address % alignof(T), " more than a multiple of ", alignof(T), ")");
  return reinterpret_cast<T*>(address);
}

/// Refuses a negative extent.
inline void check_extents(const DLTensor& tensor, const char* what) {
  for (int d = 0; d < tensor.ndim; ++d)
    if (tensor.shape[d] < 0) seqpool::detail::fail(what, "shape[", d, "] is negative: ", tensor.shape[d]);
}

/// Elements of a tensor whose elements lie one after another in row-major order.
/// The extents multiply from the last, each product the row-major stride of the
/// dimension before; one past int64 is refused (even where an earlier extent is 0),
/// and so is a size in bytes past int64: no memory holds such a tensor. A tensor
/// of no elements may have any strides (PyTorch's torch.empty(3, 0) has (1, 1)):
/// nothing is read or written.
inline std::int64_t compact_size(const DLTensor& tensor, const char* what) {
  check_extents(tensor, what);
  const bool has_elements = std::find(tensor.shape, tensor.shape + tensor.ndim, 0) == tensor.shape + tensor.ndim;
  std::int64_t size = 1;
  for (int d = tensor.ndim - 1; d >= 0; --d) {
    if (tensor.strides && has_elements && tensor.shape[d] > 1 && tensor.strides[d] != size)
      seqpool::detail::fail(what, "strides[", d, "] is ", tensor.strides[d], "; the tensor must be contiguous (", size,
                            ")");
    if (__builtin_mul_overflow(size, tensor.shape[d], &size))
      seqpool::detail::fail(what, "shape ", shape_name(tensor), ": the product of its extents overflows int64");
  }
  // DLPack's bytes of an element: bits·lanes, rounded up to whole bytes.
  const std::int64_t element_bytes = (tensor.dtype.bits * tensor.dtype.lanes + 7) / 8;
  if (std::int64_t bytes; __builtin_mul_overflow(size, element_bytes, &bytes))
    seqpool::detail::fail(what, "shape ", shape_name(tensor), ": its bytes overflow int64 (", element_bytes,
                          " an element)");
  return size;
}

}  // namespace detail

/// A [rows, hidden_size] tensor of T (float32, float16 or bfloat16) as the hidden
/// states Space reads — or a padded [B, S, hidden_size] one as its B·S rows (with
/// batch::padded saying S and the side). Rows may be further apart than
/// hidden_size (a slice of a wider tensor), columns must be adjacent, and a padded
/// tensor's sequences must follow one another at S rows.
template <hidden_element T, class Space>
hidden_view<T> hidden(const DLTensor& tensor) {
  constexpr const char* what = "hidden states";
  detail::check_device<Space>(tensor, what);
  if (!detail::holds<T>(tensor.dtype))
    seqpool::detail::fail(what, "the tensor holds ", detail::dtype_name(tensor.dtype), ", the view is of ",
                          8 * sizeof(T), "-bit elements of another type");
  if (tensor.ndim != 2 && tensor.ndim != 3)
    seqpool::detail::fail(what, "the tensor has ", tensor.ndim,
                          " dimensions, needs 2 ([rows, H]) or 3 (padded [B, S, H])");
  detail::check_extents(tensor, what);
  const int column_dim = tensor.ndim - 1, row_dim = tensor.ndim - 2;
  const std::int64_t hidden_size = tensor.shape[column_dim];
  std::int64_t rows = tensor.shape[0];
  if (tensor.ndim == 3 && __builtin_mul_overflow(tensor.shape[0], tensor.shape[1], &rows))
    seqpool::detail::fail(what, "shape ", detail::shape_name(tensor), ": B·S overflows int64");
  std::int64_t row_stride = hidden_size;
  // A tensor of no elements may have any strides: nothing reads it.
  if (tensor.strides && rows > 0 && hidden_size > 0) {
    if (hidden_size > 1 && tensor.strides[column_dim] != 1)
      seqpool::detail::fail(what, "strides[", column_dim, "] is ", tensor.strides[column_dim],
                            "; a row's elements must be adjacent (1)");
    // The rows' spacing: along the row dimension, or, one row a sequence, between sequences.
    if (tensor.shape[row_dim] > 1)
      row_stride = tensor.strides[row_dim];
    else if (tensor.ndim == 3 && tensor.shape[0] > 1)
      row_stride = tensor.strides[0];
    if (tensor.ndim == 3 && tensor.shape[0] > 1 && tensor.shape[1] > 1) {
      std::int64_t sequence_stride;
      if (__builtin_mul_overflow(tensor.shape[1], tensor.strides[1], &sequence_stride))
        seqpool::detail::fail(what, "strides[1] is ", tensor.strides[1], "; S·strides[1] overflows int64");
      if (tensor.strides[0] != sequence_stride)
        seqpool::detail::fail(what, "strides[0] is ", tensor.strides[0], "; padded sequences must follow ",
                              "one another, S·strides[1] = ", sequence_stride, " apart");
    }
    if (rows > 1 && row_stride < hidden_size)
      seqpool::detail::fail(what, "strides[", tensor.shape[row_dim] > 1 ? row_dim : 0, "] is ", row_stride,
                            "; rows must not overlap (at least ", hidden_size, ")");
  }
  // Every element lies within rows·row_stride elements of the first (row_stride is
  // at least hidden_size where rows > 1, and is hidden_size otherwise): where their
  // bytes fit in int64, so does every element's index and byte offset.
  if (std::int64_t bytes; __builtin_mul_overflow(rows, row_stride, &bytes) ||
                          __builtin_mul_overflow(bytes, std::int64_t{sizeof(T)}, &bytes))
    seqpool::detail::fail(what, "shape ", detail::shape_name(tensor), ", rows ", row_stride,
                          " elements apart: their bytes overflow int64 (", sizeof(T), " an element)");
  return make_hidden_view(detail::first_element<const T>(tensor, what, rows * hidden_size), rows, hidden_size,
                          row_stride);
}

/// What a padded batch's hidden states hold as a [B, S, H] tensor: B
/// sequences, the batch's requests, of S rows, its padded.sequence_length.
struct padded_extents {
  std::int64_t sequences = 0;
  std::int64_t sequence_length = 0;
};

/// The extents a [B, S, H] tensor of `step`'s hidden states must have; none
/// for a packed batch, whose rows come as [T, H].
inline std::optional<padded_extents> padded_extents_of(const batch& step) {
  if (!step.padded) return std::nullopt;
  return padded_extents{static_cast<std::int64_t>(step.requests.size()), step.padded->sequence_length};
}

namespace detail {

/// Throws seqpool::error unless a [B, S, H] tensor (`what`) has the B and S of
/// the padded batch its plan was made for (`padded`); a packed batch takes no
/// such tensor (`remedy` says what to give instead). The view alone is rows,
/// which another B and S of the same product would agree with: its sequences
/// would be read across their padding.
inline void check_sequences(const DLTensor& tensor, const char* what, const std::optional<padded_extents>& padded,
                            std::string_view remedy) {
  if (tensor.ndim != 3) return;
  if (!padded) seqpool::detail::fail(what, "a [B, S, H] tensor is a padded batch's: ", remedy);
  if (tensor.shape[0] != padded->sequences || tensor.shape[1] != padded->sequence_length)
    seqpool::detail::fail(what, "is ", shape_name(tensor), ", but the plan's padded batch is ", padded->sequences,
                          " sequences of ", padded->sequence_length, " rows");
}

inline constexpr std::string_view packed_remedy =
    "give the batch a padded layout (batch::padded), or its packed rows as [T, H]";

}  // namespace detail

/// hidden<T, Space>(tensor) for the batch `step` a plan was made from: a
/// [B, S, H] tensor must have the batch's B requests and its S
/// (padded.sequence_length), and a packed batch's rows come as [T, H].
template <hidden_element T, class Space>
hidden_view<T> hidden(const DLTensor& tensor, const batch& step) {
  detail::check_sequences(tensor, "hidden states", padded_extents_of(step), detail::packed_remedy);
  return hidden<T, Space>(tensor);
}

/// Calls `visit` with the tensor's hidden view for the dtype it holds: float32,
/// float16 (seqpool::half) or bfloat16 (seqpool::bfloat16).
template <class Space, class Visit>
decltype(auto) visit_hidden(const DLTensor& tensor, Visit&& visit) {
  const DLDataType type = tensor.dtype;
  if (detail::holds<float>(type)) return visit(hidden<float, Space>(tensor));
  if (detail::holds<half>(type)) return visit(hidden<half, Space>(tensor));
  if (detail::holds<bfloat16>(type)) return visit(hidden<bfloat16, Space>(tensor));
  seqpool::detail::fail("hidden states", "the tensor holds " + detail::dtype_name(type) +
                                             "; seqpool reads float32, float16 and bfloat16");
}

/// visit_hidden<Space>(tensor, visit) for the batch `step` a plan was made
/// from, checked as hidden(tensor, step) checks it.
template <class Space, class Visit>
decltype(auto) visit_hidden(const DLTensor& tensor, const batch& step, Visit&& visit) {
  detail::check_sequences(tensor, "hidden states", padded_extents_of(step), detail::packed_remedy);
  return visit_hidden<Space>(tensor, std::forward<Visit>(visit));
}

/// A contiguous tensor of any shape as the output span forward() writes: float32,
/// or float16 or bfloat16 for a pooler whose results are (Result), int8 for
/// int8 and binary results, uint8 for uint8 and ubinary ones; for sparse
/// results int32 whose last extent is 2, an entry's id and its weight's bits
/// (`out[..., 1].view(torch.float32)` reads the weights).
template <class Space, class Result = float>
  requires result_element<Result> || sparse_element<Result>
cuda::std::span<Result> output(DLTensor& tensor) {
  constexpr const char* what = "output";
  detail::check_device<Space>(tensor, what);
  if constexpr (sparse_element<Result>) {
    if (!detail::holds<std::int32_t>(tensor.dtype))
      seqpool::detail::fail(what, "the tensor holds " + detail::dtype_name(tensor.dtype) +
                                      "; the pooler writes sparse entries, int32 pairs of an id and a weight's bits");
    if (tensor.ndim < 1 || tensor.shape[tensor.ndim - 1] != 2)
      seqpool::detail::fail(what, "shape ", detail::shape_name(tensor),
                            "; sparse entries need a last extent of 2 (an id, then a weight's bits)");
  } else {
    if (!detail::holds<Result>(tensor.dtype))
      seqpool::detail::fail(what, "the tensor holds " + detail::dtype_name(tensor.dtype) + "; the pooler writes " +
                                      detail::dtype_name(detail::dtype_of<Result>()));
    if (tensor.ndim < 0) seqpool::detail::fail(what, "the tensor has ", tensor.ndim, " dimensions, needs 0 or more");
  }
  const std::int64_t elements = detail::compact_size(tensor, what);
  const std::int64_t size = sparse_element<Result> ? elements / 2 : elements;  // an entry is two int32
  return {detail::first_element<Result>(tensor, what, elements), static_cast<std::size_t>(size)};
}

/// A host tensor of int64 or int32 ids, one dimension, contiguous, as a request's
/// prompt_token_ids.
inline seqpool::token_ids token_ids(const DLTensor& tensor) {
  constexpr const char* what = "token ids";
  detail::check_device<host_space>(tensor, what);
  if (tensor.ndim != 1) seqpool::detail::fail(what, "the tensor has ", tensor.ndim, " dimensions, needs 1");
  const std::int64_t size = detail::compact_size(tensor, what);
  if (detail::holds<std::int64_t>(tensor.dtype))
    return std::span<const std::int64_t>(detail::first_element<const std::int64_t>(tensor, what, size),
                                         static_cast<std::size_t>(size));
  if (detail::holds<std::int32_t>(tensor.dtype))
    return std::span<const std::int32_t>(detail::first_element<const std::int32_t>(tensor, what, size),
                                         static_cast<std::size_t>(size));
  seqpool::detail::fail(what,
                        "the tensor holds " + detail::dtype_name(tensor.dtype) + "; token ids are int64 or int32");
}

namespace detail {

/// assign_token_ids() for a tensor of Id, its `rows` rows of `length` ids
/// `row_stride` apart, checked but for their bytes and its data.
template <class Id>
void assign_token_rows(const DLTensor& tensor, std::int64_t rows, std::int64_t length, std::int64_t row_stride,
                       batch& step) {
  const char* const what = "token ids";
  // Every id lies within rows·row_stride elements of the first (as hidden()'s rows do).
  if (std::int64_t bytes; __builtin_mul_overflow(rows, row_stride, &bytes) ||
                          __builtin_mul_overflow(bytes, std::int64_t{sizeof(Id)}, &bytes))
    seqpool::detail::fail(what, "shape ", shape_name(tensor), ", rows ", row_stride,
                          " ids apart: their bytes overflow int64 (", sizeof(Id), " an id)");
  const Id* first = first_element<const Id>(tensor, what, rows * length);
  // Every row checked before any request is given one: a refusal leaves the batch as it was.
  for (std::size_t i = 0; i < step.requests.size(); ++i)
    if (step.requests[i].prompt_len > length)
      seqpool::detail::fail_request(i, step.requests[i].id, "prompt_token_ids", "the tensor's rows hold ", length,
                                    " ids; the prompt has ", step.requests[i].prompt_len);
  for (std::size_t i = 0; i < step.requests.size(); ++i) {
    request& r = step.requests[i];
    // A negative prompt_len, which planning refuses, views no ids.
    const auto count = static_cast<std::size_t>(std::max<std::int64_t>(r.prompt_len, 0));
    r.prompt_token_ids = std::span<const Id>(first + static_cast<std::int64_t>(i) * row_stride, count);
  }
}

}  // namespace detail

/// A host tensor of int64 or int32 ids with two dimensions, [B, L], as the
/// prompt_token_ids of `step`'s B requests: request i's prompt_len ids are the
/// first of row i, the rest of the row padding. Rows may be further apart than
/// L (a slice of a wider buffer); a row's ids must be adjacent. vLLM's padded
/// prompt_token_ids ([num_reqs, max_prompt_len]) is such a tensor, and so is its
/// persistent token_ids_cpu ([max_num_reqs, max_model_len]) sliced to the batch's
/// rows. The views point into the tensor, which plan() reads before it returns
/// and never after.
inline void assign_token_ids(const DLTensor& tensor, batch& step) {
  constexpr const char* what = "token ids";
  detail::check_device<host_space>(tensor, what);
  if (tensor.ndim != 2)
    seqpool::detail::fail(what, "the tensor has ", tensor.ndim, " dimensions, needs 2 ([B, L]: a row a request)");
  detail::check_extents(tensor, what);
  const std::int64_t rows = tensor.shape[0], length = tensor.shape[1];
  if (rows != static_cast<std::int64_t>(step.requests.size()))
    seqpool::detail::fail(what, "the tensor has ", rows, " rows; the batch has ", step.requests.size(), " requests");
  std::int64_t row_stride = length;
  if (tensor.strides && rows > 0 && length > 0) {  // a tensor of no ids may have any strides: nothing reads it
    if (length > 1 && tensor.strides[1] != 1)
      seqpool::detail::fail(what, "strides[1] is ", tensor.strides[1], "; a row's ids must be adjacent (1)");
    if (rows > 1) row_stride = tensor.strides[0];
    if (rows > 1 && row_stride < length)
      seqpool::detail::fail(what, "strides[0] is ", row_stride, "; rows must not overlap (at least ", length, ")");
  }
  if (detail::holds<std::int64_t>(tensor.dtype))
    detail::assign_token_rows<std::int64_t>(tensor, rows, length, row_stride, step);
  else if (detail::holds<std::int32_t>(tensor.dtype))
    detail::assign_token_rows<std::int32_t>(tensor, rows, length, row_stride, step);
  else
    seqpool::detail::fail(what,
                          "the tensor holds " + detail::dtype_name(tensor.dtype) + "; token ids are int64 or int32");
}

/// DLManagedTensor and DLManagedTensorVersioned (DLPack 1.x): the same views of
/// the tensor they carry. A versioned tensor must be of major version 1, and one
/// flagged read-only cannot be the output.
template <class Managed>
concept managed_tensor = requires(Managed& managed) {
  { managed.dl_tensor } -> std::convertible_to<DLTensor>;
};

template <managed_tensor Managed>
void check_version(const Managed& managed, const char* what) {
  if constexpr (requires { managed.version.major; })
    if (managed.version.major != 1)
      seqpool::detail::fail(what, "DLPack version ", managed.version.major, ".", managed.version.minor,
                            "; seqpool reads 1.x");
}

template <managed_tensor Managed>
const DLTensor& tensor_of(const Managed& managed, const char* what) {
  check_version(managed, what);
  return managed.dl_tensor;
}

template <hidden_element T, class Space, managed_tensor Managed>
hidden_view<T> hidden(const Managed& managed) {
  return hidden<T, Space>(tensor_of(managed, "hidden states"));
}

template <hidden_element T, class Space, managed_tensor Managed>
hidden_view<T> hidden(const Managed& managed, const batch& step) {
  return hidden<T, Space>(tensor_of(managed, "hidden states"), step);
}

template <class Space, managed_tensor Managed, class Visit>
decltype(auto) visit_hidden(const Managed& managed, Visit&& visit) {
  return visit_hidden<Space>(tensor_of(managed, "hidden states"), std::forward<Visit>(visit));
}

template <class Space, managed_tensor Managed, class Visit>
decltype(auto) visit_hidden(const Managed& managed, const batch& step, Visit&& visit) {
  return visit_hidden<Space>(tensor_of(managed, "hidden states"), step, std::forward<Visit>(visit));
}

template <class Space, class Result = float, managed_tensor Managed>
  requires result_element<Result> || sparse_element<Result>
cuda::std::span<Result> output(Managed& managed) {
  if constexpr (requires { managed.flags; })
    if (managed.flags & 1u)  // DLPACK_FLAG_BITMASK_READ_ONLY
      seqpool::detail::fail("output", "the tensor is flagged read-only");
  check_version(managed, "output");
  return output<Space, Result>(managed.dl_tensor);
}

template <managed_tensor Managed>
seqpool::token_ids token_ids(const Managed& managed) {
  return token_ids(tensor_of(managed, "token ids"));
}

template <managed_tensor Managed>
void assign_token_ids(const Managed& managed, batch& step) {
  assign_token_ids(tensor_of(managed, "token ids"), step);
}

}  // namespace seqpool::dlpack
