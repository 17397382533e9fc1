#!/usr/bin/env bash
# Everything that needs a GPU, in one run: builds the CUDA twins in build-gpu/
# and runs the CUDA tests (docs/TESTS.md cases, random batches, the dispatcher on
# device_space<cuda_backend>), both examples on CUDA, seqpool-run's black-box
# tests with --space device on CUDA, and the bandwidth benchmark of the device
# space (JSON in build-gpu/gpu-bench.json). Prints a summary line per part;
# exits non-zero if any part fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
arch=${GPU_ARCH:-90}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true

if [ ! -f build-gpu/build.ninja ]; then
  meson setup build-gpu --buildtype=release -Dcuda=enabled -Dgpu_arch="$arch" >/dev/null || exit 1
fi
ninja -C build-gpu tests/test_cuda examples/embed_batch_cuda examples/custom_method_cuda tools/seqpool-run-cuda \
  benchmarks/pool_bench_cuda >/dev/null || exit 1

status=0
part() {
  local name=$1
  shift
  local start=$SECONDS
  if "$@"; then echo "gpu: $name: ok ($((SECONDS - start)) s)"; else echo "gpu: $name: FAILED"; status=1; fi
}
part "CUDA tests" build-gpu/tests/test_cuda
part "main example on CUDA" build-gpu/examples/embed_batch_cuda
part "custom method on CUDA" build-gpu/examples/custom_method_cuda
python=$(for candidate in python3 /usr/bin/python3; do
  "$candidate" -c 'import numpy' 2>/dev/null && echo "$candidate" && break
done)
if [ -n "$python" ]; then
  part "seqpool-run on CUDA" env SEQPOOL_RUN="$PWD/build-gpu/tools/seqpool-run-cuda" \
    "$python" -m unittest discover -s tests/cli -p 'test_*.py'
else
  echo "gpu: seqpool-run on CUDA: skipped (no python3 with numpy)"
fi
part "device bandwidth" build-gpu/benchmarks/pool_bench_cuda --space device --repeats 5 --json build-gpu/gpu-bench.json
exit $status
