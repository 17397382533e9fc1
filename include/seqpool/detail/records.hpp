// The records a step uploads, and how device work finds its memory from them.
#pragma once

#include <cstdint>

#include <seqpool/config.hpp>

namespace seqpool::detail {

/// Which memory a record's offset counts into.
enum class target : std::uint8_t { output, workspace, state };

/// Record flags.
inline constexpr std::uint8_t from_state = 1;  ///< start from the request's state instead of identity()
inline constexpr std::uint8_t finish = 2;      ///< the request finishes here: apply the method's finish()
inline constexpr std::uint8_t epilogue = 4;    ///< and the head's row epilogue, in the same item
/// Whole rows: the finished row is pooled in scratch and passed through the head's
/// linear layer and epilogue in the same item; the record's offset is the result's.
inline constexpr std::uint8_t through_linear = 8;

/// The step's memory as device work sees it.
struct step_memory {
  float* output;
  float* workspace;
  float* const* state;  ///< one slot pointer per request of the group (null where none)

  SEQPOOL_HOST_DEVICE float* at(target where, std::int64_t offset, std::int32_t request) const {
    if (where == target::output) return output + offset;
    if (where == target::workspace) return workspace + offset;
    return state[request] + offset;
  }
};

/// Per request of the group.
struct request_record {
  std::int64_t prompt_len;
  std::int64_t columns;       ///< token methods: first entry in the column table, -1 for all columns
  std::int32_t row_width;     ///< token methods: columns each gathered row receives
  std::int32_t linear_width;  ///< through_linear: the layer's leading outputs kept
  target where;               ///< token methods: where gathered rows go
  std::uint8_t flags;         ///< token methods: epilogue or not
  std::uint8_t use_activation;
};

/// Sequence methods: up to tile_rows rows of one request reduced in one item.
struct tile_record {
  std::int64_t row_begin;
  std::int64_t offset;  ///< where the reduced row goes
  std::int32_t rows;
  std::int32_t request;
  std::int32_t width;  ///< columns reduced
  target where;
  std::uint8_t flags;
};

/// Sequence methods: merges a request's tile partials (and its state) into its row.
struct combine_record {
  std::int64_t partials;  ///< workspace offset of num_partials rows of `width` floats
  std::int64_t offset;
  std::int32_t num_partials;
  std::int32_t request;
  std::int32_t width;
  target where;
  std::uint8_t flags;
};

/// Token methods: one returned (or stashed) row.
struct gather_record {
  std::int64_t source;  ///< a row of hidden states, or -1 - (float offset of a row in the request's state)
  std::int64_t offset;  ///< where the row goes, in the request's target
  std::int32_t request;
};

/// A result row computed by the head's linear layer from a pooled row.
struct linear_record {
  std::int64_t input;   ///< workspace offset of the pooled row
  std::int64_t offset;  ///< output offset of the result row
  std::int32_t request;
  std::int32_t width;  ///< leading outputs kept (matryoshka truncation)
};

/// A result row whose head epilogue runs as a pass of its own.
struct finish_record {
  std::int64_t offset;
  std::int32_t request;
  std::int32_t width;
};

/// Columns [begin, end) that one item covers: a whole row, or a single column.
struct column_range {
  std::int64_t begin;
  std::int64_t end;
};

template <bool WholeRows>
SEQPOOL_HOST_DEVICE column_range columns_of(std::int64_t column, std::int64_t width) {
  if constexpr (WholeRows)
    return {0, width};
  else
    return {column, column < width ? column + 1 : column};
}

}  // namespace seqpool::detail
