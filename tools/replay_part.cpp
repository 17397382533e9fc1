// One part of seqpool-run's instantiations, which tools/meson.build compiles
// once per space and result type, so that no translation unit compiles every
// kernel the tool runs: the replay of SEQPOOL_RUN_SPACE with SEQPOOL_RUN_RESULT
// results, and a part of that result type for a batch with parts, whose
// pooler's kernels are the replay's own. Under nvcc, which builds device code
// for every method, it is cut finer: SEQPOOL_RUN_CLASS compiles the replay
// without its steps, SEQPOOL_RUN_HIDDEN one step over hidden states of that
// type, and SEQPOOL_RUN_PART the part (whose pooler launches over every hidden
// type).
#include <seqpool/seqpool.hpp>

#include "replay.hpp"

#if defined(SEQPOOL_RUN_HIDDEN) || !defined(SEQPOOL_RUN_CLASS) && !defined(SEQPOOL_RUN_PART)
#include "replay_forward.hpp"
#endif
#if !defined(SEQPOOL_RUN_CLASS) && !defined(SEQPOOL_RUN_HIDDEN)
#include "typed_part_replay.hpp"
#endif

namespace seqpool::tool {

#if defined(SEQPOOL_RUN_HIDDEN)
template audit_counts replay<SEQPOOL_RUN_SPACE, SEQPOOL_RUN_RESULT>::forward<SEQPOOL_RUN_HIDDEN>(
    const npy_array&, const step_plan&, buffer<SEQPOOL_RUN_RESULT, SEQPOOL_RUN_SPACE>&);
#elif !defined(SEQPOOL_RUN_PART)
template void replay_batch<SEQPOOL_RUN_SPACE, SEQPOOL_RUN_RESULT>(const batch_file&, const options&);
#endif

#if !defined(SEQPOOL_RUN_CLASS) && !defined(SEQPOOL_RUN_HIDDEN)
template std::unique_ptr<part_replay<SEQPOOL_RUN_SPACE>> make_part_replay<SEQPOOL_RUN_SPACE, SEQPOOL_RUN_RESULT>(
    SEQPOOL_RUN_SPACE&, const batch_file&, const part_file&, const options&);
#endif

}  // namespace seqpool::tool
