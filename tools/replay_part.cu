// A part of seqpool-run-cuda's instantiations: replay_part.cpp under nvcc.
#include "replay_part.cpp"
