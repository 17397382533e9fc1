// The head's row epilogue as a pass of its own.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>
#include <seqpool/detail/records.hpp>

namespace seqpool::detail {

/// Where one item covers a single column, no item sees a whole row, so the
/// epilogue (normalise, softmax) runs afterwards with one item per result row.
template <class Head>
struct finish_rows {
  Head head;
  const finish_record* rows;
  const request_record* requests;
  float* output;

  SEQPOOL_HOST_DEVICE void operator()(std::int64_t item) const {
    const finish_record row = rows[item];
    head.finish_row(output + row.offset, row.width, requests[row.request].use_activation != 0);
  }
};

}  // namespace seqpool::detail
