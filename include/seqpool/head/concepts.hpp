// What a head is: the per-row step after pooling (SPEC section 4).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <seqpool/batch.hpp>
#include <seqpool/config.hpp>
#include <seqpool/error.hpp>
#include <seqpool/head/knobs.hpp>
#include <seqpool/head/row.hpp>

namespace seqpool {

enum class head_kind : std::uint8_t { embed, classify };

/// The task a pooler serves follows from its method's kind and its head's kind.
constexpr task task_of(bool token_wise, head_kind kind) {
  if (kind == head_kind::embed) return token_wise ? task::token_embed : task::embed;
  return token_wise ? task::token_classify : task::classify;
}

/// A dense layer the head runs on the device: `weight` is [out_features, in_features]
/// row-major float in the space's memory, `bias` has out_features floats or is null.
/// A layer with a null weight is absent.
struct linear_layer {
  const float* weight = nullptr;
  const float* bias = nullptr;
  std::int64_t out_features = 0;
  std::int64_t in_features = 0;

  constexpr bool present() const { return weight != nullptr; }
};

namespace detail {

/// Records hold widths in 32 bits.
inline linear_layer checked(linear_layer layer, const char* field) {
  if (layer.weight == nullptr) fail(field, "the weight is null");
  constexpr std::int64_t widest = std::numeric_limits<std::int32_t>::max();
  if (layer.out_features < 1 || layer.in_features < 1 || layer.out_features > widest || layer.in_features > widest)
    fail(field, "the weight must be [1, 1] to [2147483647, 2147483647], got [", layer.out_features, ", ",
         layer.in_features, "]");
  return layer;
}

/// The width a linear layer returns, after checking it takes what the method gives.
inline std::int64_t width_after(const linear_layer& layer, const char* field, std::size_t index, const request& r,
                                std::int64_t pooled_width) {
  if (!layer.present()) return pooled_width;
  if (layer.in_features != pooled_width)
    fail_request(index, r.id, field, "takes ", layer.in_features, " columns but the method returns ", pooled_width);
  return layer.out_features;
}

}  // namespace detail

/// A head owns an optional linear layer and a row epilogue. output_width() checks
/// a request's knobs on the host and returns the width of its result rows.
/// epilogue(row, knobs) is a template over the row it finishes, told the
/// request's knobs (request_knobs): the host hands it a head::plain_row, the
/// device kernels a row spread over a warp's lanes or a block's threads that
/// offers the same width(), transform(), sum() and max(); so it is
/// SEQPOOL_HOST_DEVICE, every thread of the warp or block runs it and reaches
/// each of those calls (they may meet at a barrier: none may sit under a
/// condition that differs between threads), and the head is copied into device
/// work, so it is trivially copyable.
// clang-format off
template <class Head>
concept pooling_head = std::is_trivially_copyable_v<Head> &&
                       requires(const Head head, head::plain_row& row, std::int64_t width, const request_knobs& knobs,
                                std::size_t index, const request& r) {
                         { Head::kind } -> std::convertible_to<head_kind>;
                         { head.linear() } -> std::same_as<linear_layer>;
                         { head.output_width(index, r, width) } -> std::same_as<std::int64_t>;
                         head.epilogue(row, knobs);
                       };
// clang-format on

}  // namespace seqpool
