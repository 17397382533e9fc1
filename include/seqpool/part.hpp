// part: one output of a multi_pooler, a pooler and the token filters it adds.
#pragma once

#include <cstdint>
#include <vector>

namespace seqpool {

/// Token filters a multi_pooler's token part adds to each request's own
/// (pooling_params' knobs of the same names): BGE-M3's ColBERT vectors leave
/// out the first token (drop_first), its sparse weights the special tokens'
/// ids. drop_token_ids: ascending, distinct, each ≥ 0; with a request's own, at
/// most max_drop_token_ids.
struct part_filters {
  bool drop_first = false;
  bool drop_last = false;
  std::vector<std::int64_t> drop_token_ids;
};

/// One part of a multi_pooler: its pooler, and the token filters it adds (a
/// token part's; a sequence part takes none).
template <class Pooler>
struct part {
  Pooler pooler;
  part_filters filters = {};
};

template <class Pooler>
part(Pooler, part_filters = {}) -> part<Pooler>;

}  // namespace seqpool
