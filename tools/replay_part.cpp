// One part of seqpool-run's instantiations, which tools/meson.build compiles
// once per space and result type, so that no translation unit compiles every
// kernel the tool runs: the replay of SEQPOOL_RUN_SPACE with SEQPOOL_RUN_RESULT
// results, and a part of that result type for a batch with parts. Under nvcc,
// which builds device code for every method, it is cut finer: SEQPOOL_RUN_CLASS
// compiles the replay without its steps, and the part (whose pooler launches
// over every hidden type), and SEQPOOL_RUN_HIDDEN one step over hidden states
// of that type.
#include <seqpool/seqpool.hpp>

#include "replay.hpp"
#include "typed_part_replay.hpp"

namespace seqpool::tool {

// A part of a batch with parts, of this space and result type: its pooler's
// kernels are the replay's own.
#if !defined(SEQPOOL_RUN_HIDDEN)
template std::unique_ptr<part_replay<SEQPOOL_RUN_SPACE>> make_part_replay<SEQPOOL_RUN_SPACE, SEQPOOL_RUN_RESULT>(
    SEQPOOL_RUN_SPACE&, const batch_file&, const part_file&, const options&);
#endif

#if defined(SEQPOOL_RUN_CLASS)
template void replay_batch<SEQPOOL_RUN_SPACE, SEQPOOL_RUN_RESULT>(const batch_file&, const options&);
#endif

}  // namespace seqpool::tool

#if !defined(SEQPOOL_RUN_CLASS) || defined(SEQPOOL_RUN_HIDDEN)
#include "replay_forward.hpp"

namespace seqpool::tool {

#if defined(SEQPOOL_RUN_HIDDEN)
template audit_counts replay<SEQPOOL_RUN_SPACE, SEQPOOL_RUN_RESULT>::forward<SEQPOOL_RUN_HIDDEN>(
    const npy_array&, const step_plan&, buffer<SEQPOOL_RUN_RESULT, SEQPOOL_RUN_SPACE>&);
#else
template void replay_batch<SEQPOOL_RUN_SPACE, SEQPOOL_RUN_RESULT>(const batch_file&, const options&);
#endif

}  // namespace seqpool::tool
#endif
