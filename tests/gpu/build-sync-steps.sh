#!/usr/bin/env bash
# Builds the LD_PRELOAD shim that counts waits, synchronous copies and
# allocations, and the 100-step program it watches, into the folder $1 for
# sm_$2. The program is linked against the shared CUDA runtime, which
# LD_PRELOAD can come between.
set -euo pipefail
cd "$(dirname "$0")/../.."
into=$1
arch=$2
gcc -O2 -shared -fPIC -o "$into/libcount_sync.so" tests/gpu/count_sync.c -ldl
nvcc -std=c++20 -O2 -arch=sm_"$arch" -cudart shared -Xcompiler=-fopenmp -I include -I .gpu-deps/include \
  tests/gpu/sync_steps.cu -o "$into/sync_steps" -ldl
