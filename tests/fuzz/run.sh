#!/usr/bin/env bash
# Builds seqpool's libFuzzer targets with clang++ (Debian's clang and
# libclang-rt-14-dev) under AddressSanitizer and UndefinedBehaviorSanitizer, and
# runs each over its corpus in tests/fuzz/corpus/<target>/.
#
#   tests/fuzz/run.sh                 replays the corpus (what `meson test` runs)
#   tests/fuzz/run.sh SECONDS         fuzzes each target for SECONDS from the corpus,
#                                     in build-fuzz/corpus/<target>/, then merges
#                                     into the corpus the inputs that reach new
#                                     coverage; a crash leaves crash-* in
#                                     build-fuzz/, to be fixed and then kept in the
#                                     corpus under a name that says what it found
#
# CCCL_INCLUDE names the folder whose cccl/ holds Thrust (default: the CUDA
# toolkit's, else .deps/cuda/include). Exits 77 (skipped) without clang++.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-0}
command -v clang++ >/dev/null || { echo "no clang++: fuzz targets skipped"; exit 77; }
cccl=${CCCL_INCLUDE:-}
if [ -z "$cccl" ]; then
  for candidate in /usr/local/cuda/include .deps/cuda/include; do
    [ -f "$candidate/cccl/thrust/version.h" ] && cccl=$candidate && break
  done
fi
out=${FUZZ_BUILD:-build-fuzz}
mkdir -p "$out"
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fopenmp
       -Wno-missing-field-initializers -Wno-pass-failed -I include -isystem "$cccl/cccl" -isystem "$cccl")
for target in batch_file npy steps parts; do
  if [ ! -x "$out/fuzz_$target" ] || [ -n "$(find include tools tests/fuzz tests/support -newer "$out/fuzz_$target" -name '*.[hc]pp' | head -1)" ]; then
    clang++ "${flags[@]}" "tests/fuzz/$target.cpp" -o "$out/fuzz_$target"
  fi
done
export ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1
for target in batch_file npy steps parts; do
  corpus=$PWD/tests/fuzz/corpus/$target
  if [ "$seconds" = 0 ]; then
    "$out/fuzz_$target" -runs=0 "$corpus" 2>&1 | tail -3
  else
    mkdir -p "$out/corpus/$target"
    (cd "$out" && "./fuzz_$target" -max_total_time="$seconds" -max_len=4096 -timeout=10 "corpus/$target" "$corpus" 2>&1 |
      tail -3)
    "$out/fuzz_$target" -merge=1 "$corpus" "$out/corpus/$target" 2>&1 | tail -1
  fi
done
