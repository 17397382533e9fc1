#!/usr/bin/env bash
# Gathers what tests/gpu/run.sh needs and the GPU test machine lacks (it reaches
# no package registry and has none of Debian's -dev packages) into .gpu-deps/,
# a git-ignored folder to carry along with the working tree: the headers of
# doctest, nlohmann-json and CLI11 from this machine's Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
rm -rf .gpu-deps
mkdir -p .gpu-deps/include
for header in doctest nlohmann CLI; do
  cp -r "/usr/include/$header" .gpu-deps/include/
done
echo "seqpool: gathered $(du -sh .gpu-deps | cut -f1) into .gpu-deps/ for tests/gpu/run.sh"
