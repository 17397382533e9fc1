// The classify head: classifier, Platt scaling, activation by problem type.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>

#include <seqpool/head/activation.hpp>
#include <seqpool/head/concepts.hpp>

namespace seqpool::head {

enum class problem_type : std::uint8_t { single_label, multi_label, regression };

/// (x − logit_mean) / logit_sigma, applied to the logits before the activation.
struct platt_scaling {
  float logit_mean = 0.0f;
  float logit_sigma = 1.0f;
};

/// The classify head's epilogue: Platt scaling when configured, then when
/// `use_activation` identity for regression, sigmoid per label for
/// multi-label, otherwise sigmoid for one label (the cross-encoder score) and
/// softmax for several. It is what device kernels carry of the head
/// (classify::kernel_head()).
class score {
 public:
  score() = default;
  score(problem_type problem, std::optional<platt_scaling> platt) : problem_(problem) {
    if (!platt) return;
    if (!std::isfinite(platt->logit_mean)) detail::fail("logit_mean", "must be finite, got ", platt->logit_mean);
    if (!std::isfinite(platt->logit_sigma)) detail::fail("logit_sigma", "must be finite, got ", platt->logit_sigma);
    if (platt->logit_sigma == 0.0f) detail::fail("logit_sigma", "must not be 0");
    scaled_ = true;
    logit_mean_ = platt->logit_mean;
    logit_sigma_ = platt->logit_sigma;
  }

  template <class Row>
  SEQPOOL_HOST_DEVICE void epilogue(Row& row, const request_knobs& knobs) const {
    if (scaled_) {
      const float mean = logit_mean_;
      const float sigma = logit_sigma_;
      row.transform([mean, sigma](float logit) { return (logit - mean) / sigma; });
    }
    if (!knobs.use_activation || problem_ == problem_type::regression) return;
    if (problem_ == problem_type::multi_label || row.width() < 2)
      sigmoid(row);
    else
      softmax(row);
  }

 private:
  problem_type problem_ = problem_type::single_label;
  bool scaled_ = false;
  float logit_mean_ = 0.0f;
  float logit_sigma_ = 1.0f;
};

/// Optional classifier W[L, H] (+ bias) — or a stack of dense layers, the last
/// the classifier (BERT's pooler, dense → tanh, before it) — then `score`.
/// Without a classifier the pooled rows are taken as logits already, as
/// process-reward models produce them. Applied per row, it is token_classify's head.
class classify {
 public:
  static constexpr head_kind kind = head_kind::classify;

  classify() = default;
  explicit classify(const dense_stack& classifier, problem_type problem = problem_type::single_label,
                    std::optional<platt_scaling> platt = std::nullopt)
      : classifier_(detail::checked(classifier, "classifier")), score_(problem, platt) {}

  dense_stack layers() const { return classifier_; }
  score kernel_head() const { return score_; }

  std::int64_t output_width(std::size_t index, const request& r, std::int64_t pooled_width) const {
    if (r.params.dimensions)
      detail::fail_request(index, r.id, "dimensions", "applies to embed tasks only, not ", name(r.task));
    return detail::width_after(classifier_, "classifier", index, r, pooled_width);
  }

  template <class Row>
  SEQPOOL_HOST_DEVICE void epilogue(Row& row, const request_knobs& knobs) const {
    score_.epilogue(row, knobs);
  }

 private:
  dense_stack classifier_;
  score score_;
};

}  // namespace seqpool::head
