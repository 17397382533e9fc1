#!/usr/bin/env bash
# Everything that needs a GPU, in one run of a few minutes, on the project's
# H200 test machine as it comes (nvcc 13, CMake, ninja, pip's meson, python3
# with PyTorch and numpy, compute-sanitizer, cuobjdump; no package registry and
# none of Debian's headers). On a development machine first run
# scripts/gather-gpu-deps.sh, and carry the .gpu-deps/ it fills with the tree.
#
# Builds the CUDA targets in build-gpu/ and runs, each with a verdict line:
#   the CUDA tests (docs/TESTS.md cases, random batches, dispatcher) on device_space<cuda_backend>;
#   a dispatcher and a pooler step captured with cudaStreamBeginCapture(Global) after the staging
#     ring wrapped, replayed for changing batches, against host_space;
#   both examples and seqpool-run's black-box tests on CUDA;
#   100 eager steps with an LD_PRELOAD shim that counts waits, synchronous copies and allocations;
#   compute-sanitizer memcheck and racecheck over the CUDA tests (random batches left out);
#   the device benchmark (pool_bench_cuda) and the vLLM-style PyTorch pooler on the same GPU.
# Writes JSON and logs to $OUT (default build-gpu/out); exits non-zero if any part fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
arch=${GPU_ARCH:-90}
out=${OUT:-build-gpu/out}
mkdir -p "$out"
status=0
part() {
  local name=$1
  shift
  local start=$SECONDS
  "$@"
  local code=$?
  if [ $code = 0 ]; then echo "gpu: $name: ok ($((SECONDS - start)) s)"; else
    echo "gpu: $name: FAILED, status $code ($((SECONDS - start)) s)"; status=1; fi
}

echo "gpu: $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
echo "gpu: $(nvcc --version | tail -1); $(g++ --version | head -1); meson $(meson --version); $(python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)' 2>&1)"
if ! echo '#include <omp.h>' | g++ -fopenmp -x c++ -fsyntax-only - 2>/dev/null; then
  echo "gpu: g++ has no omp.h here"; exit 1
fi
if [ ! -f .gpu-deps/include/doctest/doctest.h ]; then
  echo "gpu: .gpu-deps/ is missing: run scripts/gather-gpu-deps.sh on a development machine and carry .gpu-deps"
  exit 1
fi
deps="$PWD/.gpu-deps/include"
export CPATH="$deps${CPATH:+:$CPATH}"

start=$SECONDS
if [ ! -f build-gpu/build.ninja ]; then
  meson setup build-gpu --buildtype=release -Dcuda=enabled -Dgpu_arch="$arch" -Dcpp_args="-I$deps" \
    -Dcuda_args="-I$deps" > "$out/setup.log" 2>&1 || { cat "$out/setup.log"; exit 1; }
fi
ninja -C build-gpu tests/test_cuda examples/embed_batch_cuda examples/custom_method_cuda tools/seqpool-run-cuda \
  benchmarks/pool_bench_cuda > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
# The step counted by the shim is linked against the shared CUDA runtime, which
# LD_PRELOAD can come between.
gcc -O2 -shared -fPIC -o build-gpu/libcount_sync.so tests/gpu/count_sync.c -ldl || exit 1
nvcc -std=c++20 -O2 -arch=sm_"$arch" -cudart shared -Xcompiler=-fopenmp -I include -I "$deps" \
  tests/gpu/sync_steps.cu -o build-gpu/sync_steps -ldl || exit 1
echo "gpu: build: ok ($((SECONDS - start)) s)"

part "CUDA tests" build-gpu/tests/test_cuda -tce='*captured*'
part "capture replays" build-gpu/tests/test_cuda -tc='*captured*'
part "main example on CUDA" build-gpu/examples/embed_batch_cuda
part "custom method on CUDA" build-gpu/examples/custom_method_cuda
part "seqpool-run on CUDA" env SEQPOOL_RUN="$PWD/build-gpu/tools/seqpool-run-cuda" \
  python3 -m unittest discover -s tests/cli -p 'test_*.py'
part "no waits, copies or allocations in 100 steps" env LD_PRELOAD="$PWD/build-gpu/libcount_sync.so" \
  build-gpu/sync_steps
# Each of the slow parts has a time limit, so that the whole run stays within
# eight minutes; a part cut short reports FAILED with status 124.
part "memcheck" timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 --log-file "$out/memcheck.log" \
  build-gpu/tests/test_cuda -tce='random*'
part "racecheck" timeout 150 compute-sanitizer --tool racecheck --error-exitcode 1 --log-file "$out/racecheck.log" \
  build-gpu/tests/test_cuda -tce='random*'
part "device benchmark" timeout 120 build-gpu/benchmarks/pool_bench_cuda --space device --repeats 5 --json "$out/gpu-bench.json"
part "PyTorch pooler on CUDA" timeout 120 python3 benchmarks/torch_baseline.py --device cuda --repeats 5 \
  --json "$out/torch-cuda.json"
if [ -f "$out/gpu-bench.json" ] && [ -f "$out/torch-cuda.json" ]; then
  python3 benchmarks/report.py "$out/gpu-bench.json" "$out/torch-cuda.json" --space device --json "$out/gpu-report.json" \
    > "$out/gpu-tables.md" && cat "$out/gpu-tables.md"
fi
echo "gpu: done in $SECONDS s, status $status"
exit $status
