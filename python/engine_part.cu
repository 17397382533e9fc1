// The CUDA engines of one result type: engine_part.cpp under nvcc.
#include "engine_part.cpp"
