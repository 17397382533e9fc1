// The embed head: projector, matryoshka truncation, L2 normalisation.
#pragma once

#include <cstddef>
#include <cstdint>

#include <seqpool/head/activation.hpp>
#include <seqpool/head/concepts.hpp>

namespace seqpool::head {

/// The embed head's epilogue: x / max(‖x‖₂, 1e-12) when `use_activation`. It
/// is what device kernels carry of the head (embed::kernel_head()).
struct normalize {
  template <class Row>
  SEQPOOL_HOST_DEVICE void epilogue(Row& row, const request_knobs& knobs) const {
    if (knobs.use_activation) l2_normalize(row);
  }
};

/// Optional projector W[D0, H] (+ bias) — or a stack of dense layers, the
/// last the projector — then truncation to `dimensions`, then
/// x / max(‖x‖₂, 1e-12) when `use_activation`. Truncating first is what makes
/// a matryoshka prefix a unit vector. Applied per row, it is token_embed's head too.
class embed {
 public:
  static constexpr head_kind kind = head_kind::embed;

  embed() = default;
  explicit embed(const dense_stack& projector) : projector_(detail::checked(projector, "projector")) {}

  dense_stack layers() const { return projector_; }
  normalize kernel_head() const { return {}; }

  std::int64_t output_width(std::size_t index, const request& r, std::int64_t pooled_width) const {
    const std::int64_t width = detail::width_after(projector_, "projector", index, r, pooled_width);
    const auto& dimensions = r.params.dimensions;
    if (!dimensions) return width;
    if (*dimensions < 1 || *dimensions > width)
      detail::fail_request(index, r.id, "dimensions", "must be in [1, ", width, "], got ", *dimensions);
    return *dimensions;
  }

  template <class Row>
  SEQPOOL_HOST_DEVICE void epilogue(Row& row, const request_knobs& knobs) const {
    normalize{}.epilogue(row, knobs);
  }

 private:
  dense_stack projector_;
};

}  // namespace seqpool::head
