#!/usr/bin/env bash
# Everything that needs a GPU, in one run of a few minutes, on the project's
# H200 test machine as it comes (nvcc 13, CMake, ninja, pip's meson, python3
# with PyTorch and numpy, compute-sanitizer, cuobjdump; no package registry and
# none of Debian's headers). On a development machine first run
# scripts/gather-gpu-deps.sh, and carry the .gpu-deps.tar.xz it packs with the tree.
#
# Builds the CUDA targets in build-gpu/ and runs, each with a verdict line:
#   the CUDA tests (docs/TESTS.md cases, random batches, dispatcher) on device_space<cuda_backend>,
#     and the candidate policy whose split blocks read rows through bulk copies, against them;
#   a dispatcher and a pooler step captured with cudaStreamBeginCapture(Global) after the staging
#     ring wrapped, replayed for changing batches, against host_space;
#   the examples and seqpool-run's black-box tests on CUDA;
#   100 eager steps with an LD_PRELOAD shim that counts waits, synchronous copies and allocations;
#   compute-sanitizer memcheck and racecheck over the CUDA tests (random batches left out);
#   the device benchmark (pool_bench_cuda, CUB's segmented sums for MEAN among its cases) and the
#     vLLM-style PyTorch pooler on the same GPU, eager and, for MEAN and the mixed step in bf16, under
#     torch.compile (the last part);
#   the sweep: the pooling cases again under each candidate launch policy (pool_bench_cuda_<policy>),
#     tabled against the default by benchmarks/sweep.py;
#   the Python module built with CUDA, its pytest cases on torch.cuda tensors, and seqpool from
#   Python against the PyTorch pooler;
#   Nsight Compute over the pooling and gathering kernels on one shape, and the time of each
#     kernel of a mixed step and of ColBERT's.
# Writes JSON and logs to $OUT (default build-gpu/out); exits non-zero if any part fails.
# GPU_PARTS, a bash regular expression, runs only the parts whose names match it
# (a rerun of what a change touched: GPU_PARTS='^device benchmark|^sweep'); a part
# that needs another (the Python parts need the module's build) needs it matched too.
# GPU_PROGRAMS (tests/gpu/programs.sh) narrows the programs carried and built to
# those the chosen parts run. GPU_SECONDS (480 by default) is the time the script
# takes at most: each part's limit is cut to what is left of it, and the last
# part, the torch.compile peer, gets what is left. Run it under an outer limit
# above GPU_SECONDS, so that the script, not the limit, ends the run.
set -uo pipefail
cd "$(dirname "$0")/../.."
arch=${GPU_ARCH:-90}
out=${OUT:-build-gpu/out}
mkdir -p "$out"
status=0
budget=${GPU_SECONDS:-480}
# Whether GPU_PARTS lets part $1 run.
chosen() { [[ -z ${GPU_PARTS:-} || $1 =~ $GPU_PARTS ]]; }
# part NAME LIMIT COMMAND...: runs COMMAND under LIMIT seconds, cut to what is
# left of GPU_SECONDS less 20 s for the tables, so that the script ends within
# GPU_SECONDS and a call's own limit, set above it, never cuts the script short
# (its parts' processes would outlive it, and its output with them). A part cut
# short reports FAILED with status 124; one no time is left for, not run.
part() {
  local name=$1 limit=$2
  shift 2
  if ! chosen "$name"; then
    echo "gpu: $name: skipped"
    return
  fi
  local left=$((budget - 20 - SECONDS))
  if ((left < 5)); then
    echo "gpu: $name: not run, $left s of GPU_SECONDS left"
    status=1
    return
  fi
  local start=$SECONDS
  timeout -k 5 $((limit < left ? limit : left)) "$@"
  local code=$?
  if [ $code = 0 ]; then echo "gpu: $name: ok ($((SECONDS - start)) s)"; else
    echo "gpu: $name: FAILED, status $code ($((SECONDS - start)) s)"; status=1; fi
}
# clear_for NAME FILE...: a part that writes records removes an earlier run's
# first, where GPU_PARTS chooses it: if it fails or is not run, no earlier run's
# records are tabled as this one's.
clear_for() {
  local name=$1
  shift
  if chosen "$name"; then rm -f "$@"; fi
}

echo "gpu: $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
echo "gpu: $(nvcc --version | tail -1); $(g++ --version | head -1); meson $(meson --version); $(python3 -c 'import torch, numpy; print("torch", torch.__version__, "numpy", numpy.__version__)' 2>&1)"
if ! echo '#include <omp.h>' | g++ -fopenmp -x c++ -fsyntax-only - 2>/dev/null; then
  echo "gpu: g++ has no omp.h here"; exit 1
fi
# What scripts/gather-gpu-deps.sh gathers travels packed, .gpu-deps.tar.xz (its
# programs unpacked are more than a call may carry).
# A machine kept warm between calls keeps the last call's folder: it is replaced
# whenever the archive is newer than its unpacking.
if [ -f .gpu-deps.tar.xz ] && [ ! .gpu-deps/.unpacked -nt .gpu-deps.tar.xz ]; then
  rm -rf .gpu-deps
  python3 -c 'import tarfile; tarfile.open(".gpu-deps.tar.xz").extractall(filter="tar")' || exit 1
  touch .gpu-deps/.unpacked
fi
if [ ! -f .gpu-deps/include/doctest/doctest.h ]; then
  echo "gpu: .gpu-deps/ is missing: run scripts/gather-gpu-deps.sh on a development machine and carry .gpu-deps.tar.xz"
  exit 1
fi
deps="$PWD/.gpu-deps/include"
export CPATH="$deps${CPATH:+:$CPATH}"

# The programs carried in .gpu-deps/bin are used when every one of them loads
# here; otherwise they are built in build-gpu/.
source tests/gpu/programs.sh
bin=.gpu-deps/bin
# sync_steps links the shared CUDA runtime, which .gpu-deps/bin carries too.
libraries="/usr/local/cuda/lib64:$PWD/$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
carried=yes
for program in "${programs[@]##*/}" sync_steps libcount_sync.so; do
  path=${LD_LIBRARY_PATH:-}  # as each runs: sync_steps and its shim with the carried runtime
  [[ $program = sync_steps || $program = libcount_sync.so ]] && path=$libraries
  if [ ! -f "$bin/$program" ] || LD_LIBRARY_PATH="$path" ldd "$bin/$program" 2>&1 | grep -q 'not found'; then
    carried=no
  fi
done
start=$SECONDS
if [ $carried = yes ]; then
  echo "gpu: build: the programs carried in $bin load here"
else
  bin=build-gpu/bin
  libraries="/usr/local/cuda/lib64:$PWD/$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  mkdir -p "$bin"
  if [ ! -f build-gpu/build.ninja ]; then
    meson setup build-gpu --buildtype=release -Dtests=true -Dexamples=true -Dbenchmarks=true -Dtools=true -Dcuda=enabled -Dgpu_programs=true -Dgpu_arch="$arch" -Dcpp_args="-I$deps" \
      -Dcuda_args="-I$deps" > "$out/setup.log" 2>&1 || { cat "$out/setup.log"; exit 1; }
  fi
  ninja -C build-gpu "${programs[@]}" > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }
  for program in "${programs[@]}"; do cp "build-gpu/$program" "$bin/"; done
  tests/gpu/build-sync-steps.sh "$bin" "$arch" || exit 1
  echo "gpu: build: ok ($((SECONDS - start)) s)"
fi

# The parts run most important first, each under a time limit, so that one that
# hangs costs its limit, not the call.
part "CUDA tests" 90 "$bin/test_cuda" -tce='*captured*,*bulk-copy*'
part "capture replays" 60 "$bin/test_cuda" -tc='*captured*'
# The candidate whose split blocks wait on mbarriers for bulk copies, apart: a
# wait that never completes would cost this part's limit, not the tests'.
part "bulk-copy candidate" 30 "$bin/test_cuda" -tc='*bulk-copy*'
part "no waits, copies or allocations in 100 steps" 60 env LD_PRELOAD="$PWD/$bin/libcount_sync.so" \
  LD_LIBRARY_PATH="$libraries" "$bin/sync_steps"
part "main example on CUDA" 30 "$bin/embed_batch_cuda"
part "custom method on CUDA" 30 "$bin/custom_method_cuda"
part "padded batch through DLPack on CUDA" 30 "$bin/padded_batch_cuda"
part "BGE-M3's three outputs on CUDA" 60 "$bin/bge_m3_cuda"
clear_for "device benchmark" "$out/gpu-bench.json"
part "device benchmark" 150 "$bin/pool_bench_cuda" --space device --repeats 5 --json "$out/gpu-bench.json"
# A step's fixed cost without the flush before each run that the figures above
# pay (which evicts the TLB's pages with the caches): CLS and the mixed step, warm.
warm_steps() {
  local code=0
  for method in cls dispatcher; do
    "$bin/pool_bench_cuda" --space device --method "$method" --repeats 5 --warm --json "$out/gpu-warm-$method.json" ||
      code=1
  done > "$out/gpu-warm.txt"
  return $code
}
export -f warm_steps
export bin out
clear_for "device benchmark, warm caches" "$out"/gpu-warm-*.json "$out/gpu-warm.txt"
part "device benchmark, warm caches" 100 bash -c warm_steps
# The sweep: MEAN (packed and split requests) and ALL (gathering) under each
# candidate policy, every shape, fp32 and bf16, three repeats: 30 s a part at most.
# The candidates that change captured steps alone run the captured dispatcher step,
# its whole capacity and an eighth of it; the one that changes a dispatcher's
# streams alone, its step eager and captured; the one that changes split
# requests' tiles alone, MEAN.
for policy in "${policies[@]}"; do
  methods=(mean all)
  [[ $policy = *_capture_policy ]] && methods=("dispatcher graph" "dispatcher graph eighth")
  [ "$policy" = branched_entries_policy ] && methods=(dispatcher "dispatcher graph")
  [ "$policy" = wave_tiles_policy ] && methods=(mean)
  for method in "${methods[@]}"; do
    swept="$out/sweep-$policy-${method// /-}.json"
    clear_for "sweep: $policy, $method" "$swept"
    part "sweep: $policy, $method" 30 "$bin/pool_bench_cuda_$policy" --space device --method "$method" \
      --repeats 3 --json "$swept"
  done
done
clear_for "PyTorch pooler on CUDA" "$out/torch-cuda.json"
part "PyTorch pooler on CUDA" 60 python3 benchmarks/torch_baseline.py --device cuda --repeats 3 \
  --json "$out/torch-cuda.json"
# Nsight Compute's view of the pooling and gathering kernels on one shape: the
# fraction of DRAM's peak, occupancy and what holds it, the launch's waves.
ncu_kernels() {
  local code=0
  for method in mean all; do
    ncu --clock-control none --kernel-name-base demangled -k regex:'pool_rows|gather_rows' --launch-count 2 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      "$bin/pool_bench_cuda" --space device --method "$method" --shape long --dtype bf16 --repeats 1 --unheld || code=1
  done > "$out/ncu.txt" 2>&1
  return $code
}
export -f ncu_kernels
clear_for "Nsight Compute: MEAN and ALL, bf16, long" "$out/ncu.txt"
part "Nsight Compute: MEAN and ALL, bf16, long" 90 bash -c ncu_kernels
# Nsight Compute's time of each kernel of a step, one after another (the mixed
# dispatcher's, eager and replayed from a graph at an eighth of its capacity;
# ColBERT's projection), against the step's time in gpu-bench.json: where a
# step's time goes between its kernels.
ncu_steps() {
  local code=0
  for method in dispatcher "dispatcher graph eighth" colbert; do
    ncu --clock-control none --kernel-name-base function --metrics gpu__time_duration.sum --csv --print-units base \
      --log-file "$out/ncu-steps-${method// /-}.csv" "$bin/pool_bench_cuda" --space device --method "$method" \
      --shape wide --dtype fp32 --repeats 1 --unheld > /dev/null || code=1
  done
  return $code
}
export -f ncu_steps
clear_for "Nsight Compute: the kernels of a step" "$out"/ncu-steps-*.csv
part "Nsight Compute: the kernels of a step" 90 bash -c ncu_steps
part "seqpool-run on CUDA" 150 env SEQPOOL_RUN="$PWD/$bin/seqpool-run-cuda" \
  python3 -m unittest discover -s tests/cli -p 'test_*.py'
part "memcheck" 150 compute-sanitizer --tool memcheck --error-exitcode 1 --log-file "$out/memcheck.log" \
  "$bin/test_cuda" -tce='random*'
part "racecheck" 120 compute-sanitizer --tool racecheck --error-exitcode 1 --log-file "$out/racecheck.log" \
  "$bin/test_cuda" -tce='random*'
# The Python module with its CUDA engines, built here for this machine's python3
# (nanobind from its pip; DLPack's header from python/third_party), its CUDA
# tests on torch.cuda tensors (a torch.cuda.graph capture among them), and
# seqpool from Python against the PyTorch pooler.
part "Python module build" 300 bash -c "meson setup build-gpu-py --buildtype=release -Dpython=enabled \
  -Dpython_cuda=enabled -Dcuda=enabled -Dgpu_arch=$arch > '$out/python-setup.log' 2>&1 && ninja -C build-gpu-py \
  > '$out/python-build.log' 2>&1 || { tail -30 '$out/python-setup.log' '$out/python-build.log'; exit 1; }"
part "Python on CUDA (pytest)" 120 env PYTHONPATH="$PWD/build-gpu-py/python:$PWD/.gpu-deps/python" python3 -m pytest -q \
  -p no:cacheprovider python/tests
clear_for "seqpool from Python against the PyTorch pooler" "$out/python-cuda.json"
part "seqpool from Python against the PyTorch pooler" 90 env PYTHONPATH="$PWD/build-gpu-py/python" \
  python3 python/benchmarks/torch_vs_seqpool.py --device cuda --repeats 5 --json "$out/python-cuda.json"
# The same code under torch.compile, what a user who will not write kernels picks
# instead: MEAN and the mixed step in bf16, compiled in each case's untimed first
# call (once a method, and again where a shape first changes). Last, as its
# compiles take the longest: it gets what is left of the script's time
# (GPU_SECONDS, 480 by default; 150 s at most), so that the tables below are still
# written; the records of the cases it finished are written as each ends.
compiled_part="PyTorch pooler under torch.compile on CUDA"
compile_seconds=$((budget - 20 - SECONDS))
((compile_seconds > 150)) && compile_seconds=150
clear_for "$compiled_part" "$out/torch-cuda-compile.json"
if ! chosen "$compiled_part"; then
  echo "gpu: $compiled_part: skipped"
elif ((compile_seconds >= 60)); then
  # It starts no case past its share less a case's compile (45 s); the limit stops one that hangs.
  part "$compiled_part" $compile_seconds python3 benchmarks/torch_baseline.py --device cuda --compile \
    --method mean,dispatcher --dtype bf16 --repeats 3 --seconds $((compile_seconds - 45)) \
    --json "$out/torch-cuda-compile.json"
else
  echo "gpu: $compiled_part: not run, $compile_seconds s of GPU_SECONDS left (it needs 60)"
  status=1
fi
rm -f "$out/gpu-tables.md" "$out/gpu-report.json" "$out/sweep.md" "$out/sweep.json"
if [ -f "$out/gpu-bench.json" ] && [ -f "$out/torch-cuda.json" ]; then
  compiled=()
  [ -f "$out/torch-cuda-compile.json" ] && compiled=("$out/torch-cuda-compile.json")
  if python3 benchmarks/report.py "$out/gpu-bench.json" "$out/torch-cuda.json" "${compiled[@]}" --space device \
    --json "$out/gpu-report.json" > "$out/gpu-tables.md"; then cat "$out/gpu-tables.md"; else
    echo "gpu: tables: FAILED"; status=1; fi
fi
if [ -f "$out/gpu-bench.json" ] && compgen -G "$out/sweep-*.json" > /dev/null; then
  if python3 benchmarks/sweep.py "$out/gpu-bench.json" "$out"/sweep-*.json --json "$out/sweep.json" > "$out/sweep.md"
  then cat "$out/sweep.md"; else
    echo "gpu: sweep table: FAILED"; status=1; fi
fi
echo "gpu: done in $SECONDS s, status $status"
exit $status
