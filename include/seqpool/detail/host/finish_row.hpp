// Host algorithms: a pooled row finished where its request finishes.
#pragma once

#include <cstdint>

#include <seqpool/detail/records.hpp>
#include <seqpool/head/row.hpp>

namespace seqpool::detail::host {

/// When `flags` say the request finishes here: the method's finish on every
/// column of `row` and, when flagged, the head's epilogue (a row bound for the
/// head's linear layer gets its epilogue after the layer).
template <class Method, class Head>
void finish_row(const Method& method, const Head& head, const request_record& owner, std::uint8_t flags, float* row) {
  if ((flags & finish) == 0) return;
  for (std::int64_t c = 0; c < owner.width; ++c) row[c] = method.finish(row[c], owner.prompt_len);
  if ((flags & epilogue) == 0) return;
  head::plain_row finished{row, owner.width};
  head.epilogue(finished, owner.knobs);
}

}  // namespace seqpool::detail::host
