#!/usr/bin/env bash
# Times (CPU seconds, user + system) what a user's build of seqpool costs: a
# translation unit with one pooler and one with a table of four, under g++
# (-O2) and nvcc (-O2, sm_90), against the headers of ROOT (default: this
# checkout). Prints one JSON object per line.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="${1:-$here/..}"
cccl=/usr/local/cuda/include
[ -f "$cccl/cccl/thrust/version.h" ] || cccl="$here/../.deps/cuda/include"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
time_one() {  # compiler, source, command...
  local compiler=$1 source=$2
  shift 2
  if ! /usr/bin/time -f '%U %S' -o "$out/time" "$@" -o "$out/a.out" >"$out/log" 2>&1; then
    cat "$out/log" >&2
    exit 1
  fi
  rm -f "$out/a.out"
  echo "{\"compiler\": \"$compiler\", \"source\": \"$source\", \"cpu_s\": $(awk '{print $1 + $2}' "$out/time")}"
}
for source in one_pooler four_poolers; do
  time_one g++ "$source" g++ -std=c++20 -O2 -fopenmp -I "$root/include" -isystem "$cccl/cccl" -isystem "$cccl" \
    "$here/../tests/compile/$source.cpp"
  if command -v nvcc >/dev/null; then
    time_one nvcc "$source" nvcc -std=c++20 -O2 -arch=sm_90 -Xcompiler=-fopenmp -I "$root/include" "$here/../tests/compile/$source.cu"
  fi
done
