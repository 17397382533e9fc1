// make_host_engine / make_cuda_engine: the engine part of the result type asked for.
#include "engine.hpp"

namespace seqpool::python {

namespace {

template <template <class> class Make, class... Args>
std::unique_ptr<engine> by_result(result_kind result, Args&&... args) {
  switch (result) {
    case result_kind::float32: return Make<float>::make(args...);
    case result_kind::float16: return Make<half>::make(args...);
    case result_kind::bfloat16: return Make<bfloat16>::make(args...);
    case result_kind::sparse: return Make<sparse_entry>::make(args...);
    case result_kind::int8: return Make<std::int8_t>::make(args...);
    case result_kind::uint8: return Make<std::uint8_t>::make(args...);
    case result_kind::binary: return Make<binary>::make(args...);
    case result_kind::ubinary: return Make<ubinary>::make(args...);
  }
  return nullptr;
}

template <class Result>
struct host_maker {
  static std::unique_ptr<engine> make(const engine_config& config) { return make_host_engine_of<Result>(config); }
};

}  // namespace

std::unique_ptr<engine> make_host_engine(const engine_config& config, result_kind result) {
  return by_result<host_maker>(result, config);
}

#if SEQPOOL_PY_CUDA
namespace {
template <class Result>
struct cuda_maker {
  static std::unique_ptr<engine> make(const engine_config& config, std::uintptr_t stream) {
    return make_cuda_engine_of<Result>(config, stream);
  }
};
}  // namespace

bool has_cuda() { return true; }

std::unique_ptr<engine> make_cuda_engine(const engine_config& config, result_kind result, std::uintptr_t stream) {
  return by_result<cuda_maker>(result, config, stream);
}
#else
bool has_cuda() { return false; }

std::unique_ptr<engine> make_cuda_engine(const engine_config&, result_kind, std::uintptr_t) { return nullptr; }
#endif

}  // namespace seqpool::python
