// The CUDA twins' entry point: without a GPU there is nothing to run, and the
// exit status 77 makes Meson report the test as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cstdio>

#include <cuda_runtime.h>
#include <doctest/doctest.h>

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device here: the CUDA twins compiled and are skipped");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
