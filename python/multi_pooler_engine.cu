// The CUDA multi-pooler engine: multi_pooler_engine.cpp under nvcc.
#include "multi_pooler_engine.cpp"
