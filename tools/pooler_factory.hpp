// The poolers a batch file's results describe (SPEC section 9), made in a space.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <seqpool/seqpool.hpp>

#include "batch_file.hpp"
#include "npy.hpp"

namespace seqpool::tool {

/// A layer's weights copied into the space.
template <class Space>
struct layer_memory {
  seqpool::buffer<float, Space> weight;
  std::optional<seqpool::buffer<float, Space>> bias;
  seqpool::dense_layer layer;

  layer_memory(Space& space, const layer_file& file)
      : weight(to_space(space, file.weight)),
        layer{{weight.data(), nullptr, file.weight.shape[0], file.weight.shape[1]}, file.activation} {
    if (!file.bias) return;
    bias.emplace(to_space(space, *file.bias));
    layer.linear.bias = bias->data();
  }

  static seqpool::buffer<float, Space> to_space(Space& space, const npy_array& array) {
    seqpool::buffer<float, Space> copy(space, static_cast<std::size_t>(array.count()));
    space.copy_in(std::span<const float>(reinterpret_cast<const float*>(array.data.data()), copy.size()), copy.span());
    return copy;
  }
};

/// Makes poolers of Result as a results_file says: its heads, whose layers it
/// copies into the space and keeps (it must outlive the poolers), and each
/// pooler's ranges or weight floor.
template <class Space, class Result>
class pooler_factory {
 public:
  pooler_factory(Space& space, std::int64_t hidden_size, const results_file& results)
      : space_(&space),
        hidden_size_(hidden_size),
        results_(&results),
        embed_head_(load_layers(results.projector, projector_)),
        classify_head_(load_layers(results.classifier, classifier_), results.problem, results.platt) {}
  pooler_factory(const pooler_factory&) = delete;
  pooler_factory& operator=(const pooler_factory&) = delete;

  /// The pooler of task `Served`, with the method `methods` names for it
  /// (none where it names none) and the task's head: an embed task's the
  /// projector's, a classify task's the classifier's. A pooler seqpool refuses
  /// to make is refused as `field`'s.
  template <task Served>
  auto make(const pooler_methods& methods, const std::string& field) const {
    if constexpr (Served == task::embed)
      return make_with(methods.embed, embed_head_, field);
    else if constexpr (Served == task::classify)
      return make_with(methods.classify, classify_head_, field);
    else if constexpr (Served == task::token_embed)
      return make_with(methods.token_embed, embed_head_, field);
    else
      return make_with(methods.token_classify, classify_head_, field);
  }

 private:
  template <class Method, class Head>
  std::optional<seqpool::pooler<Method, Head, Space, Result>> make_with(const std::optional<Method>& method,
                                                                        const Head& pooling_head,
                                                                        const std::string& field) const {
    if (!method) return std::nullopt;
    std::optional<seqpool::pooler<Method, Head, Space, Result>> made;
    try {
      made.emplace(*space_, hidden_size_, *method, pooling_head);
    } catch (const seqpool::error& refused) {
      throw input_error(field + ": " + refused.what());
    }
    try {  // the ranges and the floor are the results' fields (the batch's or a part's), not this pooler's
      if constexpr (seqpool::ranged_element<Result>) {
        const npy_array& ranges = *results_->ranges;
        const auto columns = static_cast<std::size_t>(ranges.shape[1]);
        const std::span<const float> bounds(reinterpret_cast<const float*>(ranges.data.data()), 2 * columns);
        made->set_ranges({bounds.first(columns), bounds.last(columns)});
      }
      if constexpr (seqpool::sparse_element<Result>)
        if (results_->weight_floor) made->set_weight_floor(*results_->weight_floor);
    } catch (const seqpool::error& refused) {
      throw input_error(results_->error_prefix + refused.what());
    }
    return made;
  }

  /// A head's layers copied into the space, kept in `memory`.
  dense_stack load_layers(const std::vector<layer_file>& files, std::vector<layer_memory<Space>>& memory) {
    memory.reserve(files.size());
    std::vector<dense_layer> layers;
    for (const layer_file& file : files) layers.push_back(memory.emplace_back(*space_, file).layer);
    return dense_stack(layers);
  }

  Space* space_;
  std::int64_t hidden_size_;
  const results_file* results_;
  std::vector<layer_memory<Space>> projector_;
  std::vector<layer_memory<Space>> classifier_;
  head::embed embed_head_;
  head::classify classify_head_;
};

}  // namespace seqpool::tool
