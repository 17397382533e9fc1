// token_ids: a host view of a prompt's token ids, 64- or 32-bit as the engine
// holds them (vLLM and llama.cpp keep them in 32 bits); read as 64-bit values.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>

namespace seqpool {

/// Ids of 64-bit or 32-bit integers, viewed, not copied: plan() reads them
/// before it returns and never after, so the memory need last until then.
class token_ids {
 public:
  token_ids() = default;
  token_ids(std::span<const std::int64_t> ids) : wide_(ids) {}
  token_ids(std::span<const std::int32_t> ids) : narrow_(ids) {}
  /// Any contiguous range of either width: a std::vector, an array, a span.
  template <std::ranges::contiguous_range Range>
    requires std::ranges::sized_range<Range> &&
             (std::same_as<std::ranges::range_value_t<Range>, std::int64_t> ||
              std::same_as<std::ranges::range_value_t<Range>, std::int32_t>)
  token_ids(const Range& ids) : token_ids(std::span<const std::ranges::range_value_t<Range>>(ids)) {}

  std::size_t size() const { return wide_.size() + narrow_.size(); }
  bool empty() const { return size() == 0; }
  std::int64_t operator[](std::size_t position) const {
    return narrow_.empty() ? wide_[position] : narrow_[position];
  }
  /// The first `count` ids, count ≤ size().
  token_ids first(std::size_t count) const {
    return narrow_.empty() ? token_ids(wide_.first(count)) : token_ids(narrow_.first(count));
  }

 private:
  std::span<const std::int64_t> wide_;
  std::span<const std::int32_t> narrow_;
};

}  // namespace seqpool
