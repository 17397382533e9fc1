// seqpool-run's step: the dispatcher's forward over hidden states of one type.
#pragma once

#include <cstdint>
#include <span>

#include <seqpool/seqpool.hpp>

#include "replay.hpp"

namespace seqpool::tool {

/// The step itself, with what the space counted while it ran.
template <class Space, class Result>
template <class T>
seqpool::audit_counts replay<Space, Result>::forward(const npy_array& hidden, const seqpool::step_plan& plan,
                                                     seqpool::buffer<Result, Space>& output) {
  const seqpool::buffer<T, Space> rows = copied_in<T>(space_, hidden);
  const seqpool::audit_scope scope(space_.audit());
  const std::int64_t num_rows = static_cast<std::int64_t>(rows.size()) / batch_.hidden_size;  // B·S where padded
  dispatcher_.forward(seqpool::make_hidden_view<T>(rows.data(), num_rows, batch_.hidden_size), plan, state_,
                      output.span());
  return scope.counts();
}

}  // namespace seqpool::tool
