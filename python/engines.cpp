// make_host_engine / make_cuda_engine: the engine part of the result type asked for.
#include "engine.hpp"

namespace seqpool::python {

std::unique_ptr<engine> make_host_engine(const engine_config& config, result_kind result) {
  return with_result(result, [&]<class Result>() { return make_host_engine_of<Result>(config); });
}

#if SEQPOOL_PY_CUDA
bool has_cuda() { return true; }

std::unique_ptr<engine> make_cuda_engine(const engine_config& config, result_kind result, std::uintptr_t stream) {
  return with_result(result, [&]<class Result>() { return make_cuda_engine_of<Result>(config, stream); });
}
#else
bool has_cuda() { return false; }

std::unique_ptr<engine> make_cuda_engine(const engine_config&, result_kind, std::uintptr_t) { return nullptr; }
std::unique_ptr<parts_engine> make_cuda_parts_engine(const std::vector<part_config>&, std::uintptr_t) {
  return nullptr;
}
#endif

}  // namespace seqpool::python
