// A plain, loop-by-loop statement of SPEC sections 3 and 4, in double, that the
// library's results are compared against. Different code, same semantics.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <string_view>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/head/classify.hpp>
#include <seqpool/sparse.hpp>

#include "step.hpp"

namespace test {

/// A dense layer as plain data.
struct layer_spec {
  std::vector<float> weight;  ///< [out_features, in_features]
  std::vector<float> bias;    ///< empty when there is none
  std::int64_t out_features = 0;
  seqpool::activation_function activation = seqpool::activation_function::identity;
};

/// A head as plain data.
struct head_spec {
  bool classify = false;
  std::vector<layer_spec> layers;  ///< run one after another; none when empty
  seqpool::head::problem_type problem = seqpool::head::problem_type::single_label;
  std::optional<seqpool::head::platt_scaling> platt;
};

/// PyTorch's activation functions, in double, but for the value of erf, which
/// GELU on float32 rounds to float: its 1 + erf then cancels to 0 below about
/// -5.4, where in double it stays a tiny positive number (a row of such values
/// normalised is all but ±1 in double and ±0 in float).
inline double reference_activation(seqpool::activation_function function, double x) {
  switch (function) {
    case seqpool::activation_function::tanh:
      return std::tanh(x);
    case seqpool::activation_function::gelu:
      return 0.5 * x * (1.0 + static_cast<float>(std::erf(x / std::sqrt(2.0))));
    case seqpool::activation_function::relu:
      return x < 0 ? 0.0 : x;  // NaN stays NaN
    default:
      return x;
  }
}

inline std::vector<std::vector<double>> reference_rows(std::string_view method, const std::vector<float>& prompt,
                                                       std::int64_t hidden_size, const seqpool::request& r) {
  const std::int64_t prompt_len = static_cast<std::int64_t>(prompt.size()) / hidden_size;
  const auto row = [&](std::int64_t t) {
    return std::vector<double>(prompt.begin() + t * hidden_size, prompt.begin() + (t + 1) * hidden_size);
  };
  if (const std::size_t plus = method.find('+'); plus != std::string_view::npos) {
    // A concat: its modes' rows side by side.
    std::vector<double> joined = reference_rows(method.substr(0, plus), prompt, hidden_size, r)[0];
    const std::vector<double> rest = reference_rows(method.substr(plus + 1), prompt, hidden_size, r)[0];
    joined.insert(joined.end(), rest.begin(), rest.end());
    return {joined};
  }
  if (method == "cls") return {row(0)};
  if (method == "last") return {row(prompt_len - 1)};
  // MEAN, MAX and MEAN_SQRT_LEN pool the rows after the instruction.
  const std::int64_t first = r.params.instruction_len;
  if (method == "mean" || method == "max") {
    std::vector<double> pooled = row(first);
    for (std::int64_t t = first + 1; t < prompt_len; ++t)
      for (std::int64_t c = 0; c < hidden_size; ++c) {
        const double value = prompt[t * hidden_size + c];
        pooled[c] = method == "mean" ? pooled[c] + value : std::max(pooled[c], value);
      }
    if (method == "mean")
      for (double& value : pooled) value /= static_cast<double>(prompt_len - first);
    return {pooled};
  }
  if (method == "weighted_mean") {  // row t weighs t + 1 (SGPT)
    std::vector<double> pooled(hidden_size, 0.0);
    double weights = 0;
    for (std::int64_t t = 0; t < prompt_len; ++t) {
      weights += static_cast<double>(t + 1);
      for (std::int64_t c = 0; c < hidden_size; ++c) pooled[c] += static_cast<double>(t + 1) * prompt[t * hidden_size + c];
    }
    for (double& value : pooled) value /= weights;
    return {pooled};
  }
  if (method == "mean_sqrt_len") {  // the sum over √(rows pooled) (sentence-transformers)
    std::vector<double> pooled(hidden_size, 0.0);
    for (std::int64_t t = first; t < prompt_len; ++t)
      for (std::int64_t c = 0; c < hidden_size; ++c) pooled[c] += prompt[t * hidden_size + c];
    for (double& value : pooled) value /= std::sqrt(static_cast<double>(prompt_len - first));
    return {pooled};
  }
  std::vector<std::vector<double>> rows;  // all, step
  const auto& tag = r.params.step_tag_id;
  const auto& columns = r.params.returned_token_ids;
  for (std::int64_t t = 0; t < prompt_len; ++t) {
    if (method == "step" && tag && r.prompt_token_ids[t] != *tag) continue;
    // Token filters: the first row, the last, rows whose id is listed.
    if ((r.params.drop_first && t == 0) || (r.params.drop_last && t == prompt_len - 1)) continue;
    const auto& dropped = r.params.drop_token_ids;
    if (!dropped.empty() && std::find(dropped.begin(), dropped.end(), r.prompt_token_ids[t]) != dropped.end()) continue;
    if (method == "all" || columns.empty()) {
      rows.push_back(row(t));
      continue;
    }
    std::vector<double> chosen;
    for (const std::int64_t column : columns) chosen.push_back(prompt[t * hidden_size + column]);
    rows.push_back(chosen);
  }
  return rows;
}

inline std::vector<double> reference_head(std::vector<double> row, const head_spec& head, const seqpool::request& r) {
  for (const layer_spec& layer : head.layers) {
    const auto in_features = static_cast<std::int64_t>(row.size());
    std::vector<double> projected(layer.out_features);
    for (std::int64_t o = 0; o < layer.out_features; ++o) {
      double total = layer.bias.empty() ? 0.0 : layer.bias[o];
      for (std::int64_t k = 0; k < in_features; ++k) total += double(layer.weight[o * in_features + k]) * row[k];
      projected[o] = reference_activation(layer.activation, total);
    }
    row = projected;
  }
  if (!head.classify) {
    if (r.params.dimensions) row.resize(*r.params.dimensions);
    if (!r.params.use_activation) return row;
    double squares = 0;
    for (const double value : row) squares += value * value;
    const double norm = std::max(std::sqrt(squares), 1e-12);
    for (double& value : row) value /= norm;
    return row;
  }
  if (head.platt)
    for (double& value : row) value = (value - head.platt->logit_mean) / head.platt->logit_sigma;
  if (!r.params.use_activation || head.problem == seqpool::head::problem_type::regression) return row;
  if (head.problem == seqpool::head::problem_type::multi_label || row.size() < 2) {
    for (double& value : row) value = 1.0 / (1.0 + std::exp(-value));
    return row;
  }
  const double largest = *std::max_element(row.begin(), row.end());
  double total = 0;
  for (double& value : row) total += value = std::exp(value - largest);
  for (double& value : row) value /= total;
  return row;
}

/// A sparse result's list (SPEC section 3), from all its prompt's rows at once:
/// every `stride`-th row (from row 0) that the request's token filters keep,
/// weighed by relu(v · row + b) (or v · row + b without `relu`), each token
/// id's largest weight, the ids above `floor` by id — the top_k largest, of
/// equal weights the smaller ids — after their count, to the list's bound (1 +
/// the distinct ids weighed, or top_k), {-1, 0} past them.
inline std::vector<seqpool::sparse_entry> reference_list(const std::vector<float>& rows,
                                                         const std::vector<std::int64_t>& token_ids,
                                                         const seqpool::pooling_params& params,
                                                         const std::vector<float>& v, float b, float floor,
                                                         bool relu = true, std::int64_t stride = 1) {
  const auto columns = static_cast<std::int64_t>(v.size());
  const auto prompt_len = static_cast<std::int64_t>(token_ids.size());
  std::map<std::int64_t, double> weights;
  for (std::int64_t t = 0; t < prompt_len; ++t) {
    const std::int64_t id = token_ids[static_cast<std::size_t>(t)];
    const std::vector<std::int64_t>& skip = params.drop_token_ids;
    if (t % stride != 0 || (params.drop_first && t == 0) || (params.drop_last && t == prompt_len - 1) ||
        std::binary_search(skip.begin(), skip.end(), id))
      continue;
    double dot = b;
    for (std::int64_t c = 0; c < columns; ++c) dot += double(rows[t * columns + c]) * v[c];
    const double weight = relu ? std::max(dot, 0.0) : dot;
    const auto [at, added] = weights.emplace(id, weight);
    if (!added) at->second = std::max(at->second, weight);
  }
  std::vector<std::pair<double, std::int64_t>> above;  // (weight, id)
  for (const auto& [id, weight] : weights)
    if (weight > floor) above.emplace_back(weight, id);
  const auto most = static_cast<std::size_t>(params.top_k.value_or(std::numeric_limits<std::int64_t>::max()));
  if (above.size() > most) {
    std::sort(above.begin(), above.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    above.resize(most);
    std::sort(above.begin(), above.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  }
  std::vector<seqpool::sparse_entry> list{{static_cast<std::int32_t>(above.size()), 0.0f}};
  for (const auto& [weight, id] : above) list.push_back({static_cast<std::int32_t>(id), static_cast<float>(weight)});
  list.resize(1 + std::min(weights.size(), most), seqpool::sparse_entry{-1, 0.0f});
  return list;
}

/// The result a finished request must have, from all its prompt's rows at once.
inline matrix reference(std::string_view method, const std::vector<float>& prompt, std::int64_t hidden_size,
                        const seqpool::request& r, const head_spec& head, std::int64_t out_cols) {
  matrix expected{0, out_cols, {}};
  for (const std::vector<double>& row : reference_rows(method, prompt, hidden_size, r)) {
    for (const double value : reference_head(row, head, r)) expected.values.push_back(static_cast<float>(value));
    ++expected.rows;
  }
  return expected;
}

}  // namespace test
