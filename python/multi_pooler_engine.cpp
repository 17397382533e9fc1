// The multi-pooler engine of one space: a runtime_multi_pooler of parts, each
// made by the engine part of its result type. Under nvcc (multi_pooler_engine.cu) the
// CUDA one, otherwise the host one; it compiles none of the parts' kernels.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine_impl.hpp"
#include "part_engine.hpp"

namespace seqpool::python {
namespace {

template <class Space>
class multi_pooler_engine_of final : public engine_core<Space, runtime_multi_pooler<Space>, multi_pooler_engine> {
  using core = engine_core<Space, runtime_multi_pooler<Space>, multi_pooler_engine>;
  using core::space_;
  using core::state_;

 public:
  template <class... SpaceArgs>
  multi_pooler_engine_of(const std::vector<part_config>& configs, std::int32_t device_id, SpaceArgs&&... space_args)
      : core(configs.empty() ? 0 : configs.front().pooler.hidden_size, device_id,
             std::forward<SpaceArgs>(space_args)...),
        parts_(make_parts(configs)),
        multi_(make_multi()) {}

  std::size_t parts() const override { return parts_.size(); }
  DLDataType result_type(std::size_t part) const override { return parts_.at(part)->result_type(); }
  bool sparse(std::size_t part) const override { return parts_.at(part)->sparse(); }

  void plan(const batch& step, parts_plan& into) const override { multi_.plan(step, state_, into); }

  std::vector<std::unique_ptr<output_memory>> reserve(const parts_plan& plan) override {
    multi_.reserve(plan, state_);
    std::vector<std::unique_ptr<output_memory>> outputs;
    outputs.reserve(parts_.size());
    for (std::size_t k = 0; k < parts_.size(); ++k) outputs.push_back(parts_[k]->output(plan.parts[k].output_size));
    return outputs;
  }

  void forward(const DLTensor& hidden, const parts_plan& plan, std::span<DLTensor> outputs) override {
    const std::vector<part_output> views = as_outputs(outputs);
    dlpack::visit_hidden<Space>(hidden, [&](auto view) { multi_.forward(view, plan, state_, views); });
  }

  std::int64_t output_capacity(std::size_t part) const override { return multi_.output_capacity(part); }

  void capture(const DLTensor& hidden, const parts_plan& plan, std::span<DLTensor> outputs,
               graph_upload_handle& home) override {
    if constexpr (Space::family == algorithm_family::device) {
      const std::vector<part_output> views = as_outputs(outputs);
      dlpack::visit_hidden<Space>(hidden,
                                  [&](auto view) { multi_.capture(view, plan, state_, views, core::home_of(home)); });
    } else {
      core::refuse_capture("capture");
    }
  }

  void restage(const parts_plan& plan, graph_upload_handle& home) override {
    if constexpr (Space::family == algorithm_family::device)
      multi_.restage(plan, state_, core::home_of(home));
    else
      core::refuse_capture("restage");
  }

 private:
  runtime_multi_pooler<Space>& runner() override { return multi_; }

  /// Each part, made by the engine part of its result type; what seqpool
  /// refuses in making one is named by the part's place.
  std::vector<std::unique_ptr<part_engine<Space>>> make_parts(const std::vector<part_config>& configs) {
    std::vector<std::unique_ptr<part_engine<Space>>> made;
    made.reserve(configs.size());
    for (std::size_t k = 0; k < configs.size(); ++k) {
      try {
        made.push_back(with_result(
            configs[k].result, [&]<class Result>() { return make_part_engine<Space, Result>(space_, configs[k]); }));
      } catch (const error& refused) {
        detail::fail("parts[" + std::to_string(k) + "]", refused.what());
      }
    }
    return made;
  }

  runtime_multi_pooler<Space> make_multi() {
    std::vector<runtime_part<Space>> taken;
    taken.reserve(parts_.size());
    for (const auto& part : parts_) taken.push_back(part->take());
    return runtime_multi_pooler<Space>(space_, std::move(taken));
  }

  /// One output a part, each checked against its part's type.
  std::vector<part_output> as_outputs(std::span<DLTensor> outputs) const {
    if (outputs.size() != parts_.size())
      detail::fail("out", "one tensor a part: got ", outputs.size(), " for ", parts_.size(), " parts");
    std::vector<part_output> views;
    views.reserve(outputs.size());
    for (std::size_t k = 0; k < outputs.size(); ++k) views.push_back(parts_[k]->as_output(outputs[k]));
    return views;
  }

  /// Before the multi-pooler, which outlives none of them: their heads read the layers each part keeps.
  std::vector<std::unique_ptr<part_engine<Space>>> parts_;
  runtime_multi_pooler<Space> multi_;
};

}  // namespace

#if defined(__CUDACC__)
std::unique_ptr<multi_pooler_engine> make_cuda_multi_pooler_engine(const std::vector<part_config>& parts,
                                                                   std::uintptr_t stream) {
  cuda_backend backend(reinterpret_cast<cudaStream_t>(stream));
  const int device = backend.device();
  return std::make_unique<multi_pooler_engine_of<device_space<cuda_backend>>>(parts, device, std::move(backend));
}
#else
std::unique_ptr<multi_pooler_engine> make_host_multi_pooler_engine(const std::vector<part_config>& parts) {
  return std::make_unique<multi_pooler_engine_of<host_space>>(parts, 0);
}
#endif

}  // namespace seqpool::python
