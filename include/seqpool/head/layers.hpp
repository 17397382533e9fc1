// The dense layers a head runs on a pooled row before its epilogue (SPEC section 4).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <seqpool/batch.hpp>
#include <seqpool/config.hpp>
#include <seqpool/error.hpp>

namespace seqpool {

/// A dense layer's weights on the device: `weight` is [out_features, in_features]
/// row-major float in the space's memory, `bias` has out_features floats or is
/// null. A head with no layer has an empty dense_stack; one whose layer has a
/// null weight is refused.
struct linear_layer {
  const float* weight = nullptr;
  const float* bias = nullptr;
  std::int64_t out_features = 0;
  std::int64_t in_features = 0;
};

/// What a dense layer applies to each of its outputs, as PyTorch defines it:
/// sentence-transformers' `Dense(activation_function=...)`, BERT's pooler (tanh).
enum class activation_function : std::uint8_t {
  identity,
  tanh,
  gelu,  ///< x · Φ(x) = 0.5 · x · (1 + erf(x / √2)), torch.nn.GELU()
  relu,  ///< max(x, 0); NaN stays NaN
};

/// The functions' names, in activation_function's order, as seqpool-run's
/// batch files and the Python module spell them.
inline constexpr std::array<std::string_view, 4> activation_names{"identity", "tanh", "gelu", "relu"};

/// The function named `name`, if one is.
constexpr std::optional<activation_function> activation_named(std::string_view name) {
  for (std::size_t k = 0; k < activation_names.size(); ++k)
    if (activation_names[k] == name) return static_cast<activation_function>(k);
  return std::nullopt;
}

/// The names as a message lists them, quoted as a user writes them: `"identity", "tanh", "gelu" or "relu"`.
inline std::string activation_name_list() {
  std::string list;
  for (std::size_t k = 0; k < activation_names.size(); ++k)
    list.append(k == 0 ? "\"" : k + 1 < activation_names.size() ? ", \"" : " or \"")
        .append(activation_names[k])
        .append("\"");
  return list;
}

/// The function on one value; `activation_function` names which.
SEQPOOL_HOST_DEVICE inline float activate(activation_function function, float x) {
  switch (function) {
    case activation_function::tanh:
      return tanhf(x);
    case activation_function::gelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case activation_function::relu:
      return x < 0.0f ? 0.0f : x;
    default:
      return x;
  }
}

/// A linear layer and the function applied to each of its outputs.
struct dense_layer {
  linear_layer linear;
  activation_function activation = activation_function::identity;
};

/// The layers a head passes a pooled row through, one after another, each
/// output of each through its layer's activation function: a projector or a
/// classifier alone, or stacks such as BERT's pooler (dense → tanh) before a
/// classifier, or sentence-transformers' Dense modules (an expansion and a
/// projection back). Empty: the head has no layers. Held by value, so that a
/// head stays trivially copyable.
class dense_stack {
 public:
  static constexpr int most_layers = 4;

  constexpr dense_stack() = default;
  /// One layer, no activation function: a projector or a classifier.
  dense_stack(linear_layer layer) : layers_{{layer}}, count_(1) {}  // NOLINT: implicit on purpose
  dense_stack(std::initializer_list<dense_layer> layers) : dense_stack(std::span(layers.begin(), layers.size())) {}
  explicit dense_stack(std::span<const dense_layer> layers) {
    if (layers.size() > most_layers)
      detail::fail("layers", "a head runs at most ", most_layers, " dense layers, got ", layers.size());
    for (const dense_layer& layer : layers) layers_[count_++] = layer;
  }

  int size() const { return count_; }
  bool present() const { return count_ > 0; }
  const dense_layer& operator[](int index) const { return layers_[index]; }
  const dense_layer& last() const { return layers_[count_ - 1]; }
  std::int64_t in_features() const { return layers_[0].linear.in_features; }
  std::int64_t out_features() const { return last().linear.out_features; }

  /// The floats a row takes between layers: the outputs of every layer but the last.
  std::int64_t between_floats() const { return between_offset(count_ - 1); }
  /// Where layer `index`'s outputs begin among a row's floats between layers.
  std::int64_t between_offset(int index) const {
    std::int64_t offset = 0;
    for (int k = 0; k < index; ++k) offset += layers_[k].linear.out_features;
    return offset;
  }

 private:
  dense_layer layers_[most_layers] = {};
  int count_ = 0;
};

namespace detail {

/// Each layer present and within what records hold (widths in 32 bits), and
/// each taking what the one before gives.
inline dense_stack checked(const dense_stack& layers, const char* field) {
  constexpr std::int64_t widest = std::numeric_limits<std::int32_t>::max();
  for (int k = 0; k < layers.size(); ++k) {
    const linear_layer& layer = layers[k].linear;
    if (layer.weight == nullptr) fail(field, "the weight is null");
    if (layer.out_features < 1 || layer.in_features < 1 || layer.out_features > widest || layer.in_features > widest)
      fail(field, "the weight must be [1, 1] to [2147483647, 2147483647], got [", layer.out_features, ", ",
           layer.in_features, "]");
    if (k > 0 && layer.in_features != layers[k - 1].linear.out_features)
      fail(field, "layer ", k, " takes ", layer.in_features, " inputs but layer ", k - 1, " gives ",
           layers[k - 1].linear.out_features);
  }
  return layers;
}

/// The width the layers return, after checking they take what the method gives.
inline std::int64_t width_after(const dense_stack& layers, const char* field, std::size_t index, const request& r,
                                std::int64_t pooled_width) {
  if (!layers.present()) return pooled_width;
  if (layers.in_features() != pooled_width)
    fail_request(index, r.id, field, "takes ", layers.in_features(), " columns but the method returns ", pooled_width);
  return layers.out_features();
}

}  // namespace detail
}  // namespace seqpool
