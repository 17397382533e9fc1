// Host algorithms: a pooled row finished where its request finishes.
#pragma once

#include <cstdint>

#include <seqpool/detail/records.hpp>
#include <seqpool/head/row.hpp>
#include <seqpool/method/concepts.hpp>

namespace seqpool::detail::host {

/// When `flags` say the request finishes here: the method's finish on every
/// column of `row` (a concat's, each mode's on its columns, `loaded` a
/// mode) and, when flagged, the head's epilogue (a row bound for the head's
/// linear layer gets its epilogue after the layer).
template <class Method, class Head>
void finish_row(const Method& method, const Head& head, const request_record& owner, std::int64_t loaded,
                std::uint8_t flags, float* row) {
  if ((flags & finish) == 0) return;
  for_mode_columns<modes_of<Method>>(loaded, owner.width, [&]<int S>(std::int64_t begin, std::int64_t end) {
    with_mode_of<S>(method, [&](const auto& finishing) {
      for (std::int64_t c = begin; c < end; ++c) row[c] = finishing.finish(row[c], owner.prompt_len);
    });
  });
  if ((flags & epilogue) == 0) return;
  head::plain_row finished{row, owner.width};
  head.epilogue(finished, owner.knobs);
}

}  // namespace seqpool::detail::host
