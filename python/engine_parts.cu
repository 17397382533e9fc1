// The CUDA multi-pooler engine: engine_parts.cpp under nvcc.
#include "engine_parts.cpp"
