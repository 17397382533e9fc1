// seqpool-run-cuda's replay of a batch with parts: replay_parts.cpp under nvcc.
#include "replay_parts.cpp"
