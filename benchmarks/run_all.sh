#!/usr/bin/env bash
# Runs seqpool's benchmarks and the PyTorch baseline in one go, on this machine,
# and writes docs/bench.json, docs/bandwidth.png and the tables for
# docs/PERFORMANCE.md (build-bench/tables.md). Takes about 40 minutes on two cores:
# PyTorch's ColBERT projections (colbert, bge-m3) take seconds a call.
#
# The benchmarks are built with -O3 -march=native: the flags a CPU inference
# server is built with. Pass another flag set as the first argument to compare,
# e.g. benchmarks/run_all.sh -march=x86-64.
set -euo pipefail
cd "$(dirname "$0")/.."
arch_flags=${1:--march=native}

scripts/install-deps.sh
missing=()
for package in python3-torch python3-matplotlib; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

rm -rf build-bench
meson setup build-bench --buildtype=release -Dbenchmarks=true -Dcuda=disabled \
  -Dcpp_args="$arch_flags" >/dev/null
meson compile -C build-bench benchmarks/pool_bench >/dev/null

build-bench/benchmarks/pool_bench --repeats 11 --json build-bench/seqpool.json
/usr/bin/python3 benchmarks/torch_baseline.py --repeats 11 --json build-bench/torch.json
/usr/bin/python3 benchmarks/report.py build-bench/seqpool.json build-bench/torch.json \
  --json docs/bench.json --png docs/bandwidth.png > build-bench/tables.md
echo "wrote docs/bench.json, docs/bandwidth.png and build-bench/tables.md"
