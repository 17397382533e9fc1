// One result type's engines and multi-pooler parts (SEQPOOL_PY_RESULT: 0 float32,
// 1 float16, 2 bfloat16, 3 sparse, 4 int8, 5 uint8, 6 binary, 7 ubinary), so that
// no translation unit instantiates them all. Under nvcc (engine_part.cu) the
// CUDA ones, otherwise the host ones.
#include "engine_impl.hpp"
#include "typed_part_engine.hpp"

#ifndef SEQPOOL_PY_RESULT
#error "compile engine_part.cpp with SEQPOOL_PY_RESULT from 0 to 7"
#endif

namespace seqpool::python {

#if SEQPOOL_PY_RESULT == 0
using result_type = float;
#elif SEQPOOL_PY_RESULT == 1
using result_type = half;
#elif SEQPOOL_PY_RESULT == 2
using result_type = bfloat16;
#elif SEQPOOL_PY_RESULT == 3
using result_type = sparse_entry;
#elif SEQPOOL_PY_RESULT == 4
using result_type = std::int8_t;
#elif SEQPOOL_PY_RESULT == 5
using result_type = std::uint8_t;
#elif SEQPOOL_PY_RESULT == 6
using result_type = binary;
#elif SEQPOOL_PY_RESULT == 7
using result_type = ubinary;
#else
#error "SEQPOOL_PY_RESULT is from 0 to 7"
#endif

#if defined(__CUDACC__)
template <class Result>
std::unique_ptr<engine> make_cuda_engine_of(const engine_config& config, std::uintptr_t stream) {
  cuda_backend backend(reinterpret_cast<cudaStream_t>(stream));
  const int device = backend.device();
  return std::make_unique<engine_of<device_space<cuda_backend>, Result>>(config, device, std::move(backend));
}
template std::unique_ptr<engine> make_cuda_engine_of<result_type>(const engine_config&, std::uintptr_t);
template std::unique_ptr<part_engine<device_space<cuda_backend>>>
make_part_engine<device_space<cuda_backend>, result_type>(device_space<cuda_backend>&, const part_config&);
#else
template <class Result>
std::unique_ptr<engine> make_host_engine_of(const engine_config& config) {
  return std::make_unique<engine_of<host_space, Result>>(config, 0);
}
template std::unique_ptr<engine> make_host_engine_of<result_type>(const engine_config&);
template std::unique_ptr<part_engine<host_space>> make_part_engine<host_space, result_type>(host_space&,
                                                                                            const part_config&);
#endif

}  // namespace seqpool::python
