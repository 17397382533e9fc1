// Token filters: the rows a request's knobs leave out of those its token method chooses.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

#include <seqpool/batch.hpp>
#include <seqpool/error.hpp>

namespace seqpool::detail {

/// Positions [begin, end) of a prompt; empty when end ≤ begin.
struct position_range {
  std::int64_t begin = 0;
  std::int64_t end = 0;

  constexpr std::int64_t size() const { return std::max<std::int64_t>(end - begin, 0); }
};

/// Has `refuse`, which throws, say what is wrong with the first of `ids` that
/// is below 0 or not above the one before it: ids to drop are token ids, kept
/// strictly ascending so that each lookup is a binary search.
template <class Refuse>
void check_drop_order(std::span<const std::int64_t> ids, Refuse refuse) {
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0) refuse("id ", k, " is ", ids[k], "; token ids are ≥ 0");
    if (k > 0 && ids[k] <= ids[k - 1])
      refuse("id ", k, " is ", ids[k], " after ", ids[k - 1], "; the ids must be strictly ascending");
  }
}

/// Refuses request `index`'s ids to drop (`r`'s drop_token_ids) that are too
/// many, or out of order (check_drop_order()).
inline void check_drop_list(std::size_t index, const request& r) {
  const auto& ids = r.params.drop_token_ids;
  if (ids.size() > max_drop_token_ids)
    fail_request(index, r.id, "drop_token_ids", "holds ", ids.size(), " ids; at most ", max_drop_token_ids,
                 " may be dropped");
  check_drop_order(ids, [&](const auto&... said) { fail_request(index, r.id, "drop_token_ids", said...); });
}

/// What pooling_params' drop_first, drop_last and drop_token_ids leave out of
/// a request's prompt (SPEC section 3). It refers to the request, which must
/// outlive it.
class token_filter {
 public:
  explicit token_filter(const request& r) : r_(r) {}

  /// Whether it leaves out anything a method might choose.
  bool any() const { return r_.params.drop_first || r_.params.drop_last || by_id(); }
  /// Whether it reads the prompt's token ids.
  bool by_id() const { return !r_.params.drop_token_ids.empty(); }
  /// The knob of the first filter asked for, for messages.
  std::string_view first_knob() const {
    return r_.params.drop_first ? "drop_first" : r_.params.drop_last ? "drop_last" : "drop_token_ids";
  }

  /// Whether the row at `position` stays (the prompt's ids are read only where by_id()).
  bool stays(std::int64_t position) const {
    if (r_.params.drop_first && position == 0) return false;
    if (r_.params.drop_last && position == r_.prompt_len - 1) return false;
    return !by_id() || !std::ranges::binary_search(r_.params.drop_token_ids, r_.prompt_token_ids[position]);
  }

  /// [begin, end) less the first and last positions where those are dropped:
  /// the positions that stay of a range whose every row is chosen, where !by_id().
  position_range inner(std::int64_t begin, std::int64_t end) const {
    return {std::max<std::int64_t>(begin, r_.params.drop_first ? 1 : 0),
            std::min(end, r_.prompt_len - (r_.params.drop_last ? 1 : 0))};
  }

  /// Refuses the request's ids to drop as check_drop_list() does, and prompt
  /// ids too few to look them up in.
  void check(std::size_t index) const {
    check_drop_list(index, r_);
    if (by_id() && std::cmp_less(r_.prompt_token_ids.size(), r_.prompt_len))
      fail_request(index, r_.id, "prompt_token_ids", "drop_token_ids are looked up in all ", r_.prompt_len,
                   " ids of the prompt, got ", r_.prompt_token_ids.size());
  }

 private:
  const request& r_;
};

}  // namespace seqpool::detail
