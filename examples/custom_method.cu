// The custom-method example built by nvcc: splade's device functions compile for the GPU too.
#include "custom_method.cpp"
