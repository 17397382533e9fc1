// What a head is: the per-row step after pooling (SPEC section 4).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <seqpool/batch.hpp>
#include <seqpool/config.hpp>
#include <seqpool/head/knobs.hpp>
#include <seqpool/head/layers.hpp>
#include <seqpool/head/row.hpp>

namespace seqpool {

enum class head_kind : std::uint8_t { embed, classify };

/// The task a pooler serves follows from its method's kind and its head's kind.
constexpr task task_of(bool token_wise, head_kind kind) {
  if (kind == head_kind::embed) return token_wise ? task::token_embed : task::embed;
  return token_wise ? task::token_classify : task::classify;
}

/// A head owns its dense layers (none, one, or a stack) and a row epilogue. output_width() checks
/// a request's knobs on the host and returns the width of its result rows.
/// epilogue(row, knobs) is a template over the row it finishes, told the
/// request's knobs (request_knobs): the host hands it a head::plain_row, the
/// device kernels a row spread over a warp's lanes or a block's threads that
/// offers the same width(), transform(), sum() and max(); so it is
/// SEQPOOL_HOST_DEVICE, every thread of the warp or block runs it and reaches
/// each of those calls (they may meet at a barrier: none may sit under a
/// condition that differs between threads), and the head is copied into device
/// work, so it is trivially copyable. A head may offer `kernel_head()`, an
/// object whose epilogue is the head's, which device kernels then carry in its
/// place (the built-in heads do: their layers would cost every kernel's
/// parameters, and with them the gathering kernel's registers).
// clang-format off
template <class Head>
concept pooling_head = std::is_trivially_copyable_v<Head> &&
                       requires(const Head head, head::plain_row& row, std::int64_t width, const request_knobs& knobs,
                                std::size_t index, const request& r) {
                         { Head::kind } -> std::convertible_to<head_kind>;
                         { head.layers() } -> std::same_as<dense_stack>;
                         { head.output_width(index, r, width) } -> std::same_as<std::int64_t>;
                         head.epilogue(row, knobs);
                       };
// clang-format on

namespace detail {

/// What device kernels carry of a head, as a kernel parameter: its
/// `kernel_head()` where it offers one — an object with the head's epilogue and
/// nothing else, so that a kernel's parameters do not carry the head's layers,
/// which its own launches are given — or else the head itself.
template <class Head>
auto kernel_head_of(const Head& head) {
  if constexpr (requires { head.kernel_head().epilogue(std::declval<head::plain_row&>(), request_knobs{}); }) {
    static_assert(std::is_trivially_copyable_v<decltype(head.kernel_head())>,
                  "seqpool: a head's kernel_head() is copied into device work, so it is trivially copyable");
    return head.kernel_head();
  } else {
    return head;
  }
}

}  // namespace detail
}  // namespace seqpool
