// make_host_engine / make_cuda_engine: the engine part of the result type asked
// for; and which methods are token methods, by name.
#include <seqpool/configurable.hpp>

#include "engine.hpp"

namespace seqpool::python {

std::unique_ptr<engine> make_host_engine(const engine_config& config, result_kind result) {
  return with_result(result, [&]<class Result>() { return make_host_engine_of<Result>(config); });
}

bool is_token_method(const std::string& method) { return method::any_token::from_name(method).has_value(); }

#if SEQPOOL_PY_CUDA
bool has_cuda() { return true; }

std::unique_ptr<engine> make_cuda_engine(const engine_config& config, result_kind result, std::uintptr_t stream) {
  return with_result(result, [&]<class Result>() { return make_cuda_engine_of<Result>(config, stream); });
}
#else
bool has_cuda() { return false; }

std::unique_ptr<engine> make_cuda_engine(const engine_config&, result_kind, std::uintptr_t) { return nullptr; }
std::unique_ptr<multi_pooler_engine> make_cuda_multi_pooler_engine(const std::vector<part_config>&, std::uintptr_t) {
  return nullptr;
}
#endif

}  // namespace seqpool::python
