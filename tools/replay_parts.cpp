// seqpool-run's replay of a batch with parts in SEQPOOL_RUN_SPACE, which
// tools/meson.build compiles once per space: the runtime_multi_pooler's steps,
// which reach each part's kernels through the part (replay_part.cpp).
#include "parts_replay.hpp"

namespace seqpool::tool {

template void replay_parts<SEQPOOL_RUN_SPACE>(const batch_file&, const options&);

}  // namespace seqpool::tool
