#!/usr/bin/env bash
# Gathers what tests/gpu/run.sh needs and the GPU test machine lacks (it reaches
# no package registry and has none of Debian's -dev packages) into .gpu-deps/,
# a git-ignored folder, and packs it into .gpu-deps.tar.xz to carry along with
# the working tree (run.sh unpacks it; the programs unpacked are more than a
# call carries):
#   include/  the headers of doctest, nlohmann-json and CLI11 from Debian's packages;
#   python/   pytest, unpacked from PyPI's wheels for the GPU machine's python3;
#   bin/      the GPU programs (and the shared CUDA runtime sync_steps links against), built here for sm_${GPU_ARCH:-90} in build-gpu/, so
#             that the GPU's time goes to running them (run.sh builds them itself
#             when bin/ is absent or its programs do not load there).
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${GPU_ARCH:-90}
scripts/install-deps.sh
rm -rf .gpu-deps
mkdir -p .gpu-deps/include .gpu-deps/bin
for header in doctest nlohmann CLI; do
  cp -r --preserve=timestamps "/usr/include/$header" .gpu-deps/include/
done
deps="$PWD/.gpu-deps/include"
if [ ! -f build-gpu/build.ninja ]; then
  meson setup build-gpu --buildtype=release -Dtests=true -Dexamples=true -Dbenchmarks=true -Dtools=true -Dcuda=enabled -Dgpu_programs=true -Dgpu_arch="$arch" -Dcpp_args="-I$deps" -Dcuda_args="-I$deps"
fi
# Meson before 1.4 writes no header dependencies for nvcc, so ninja would keep a
# CUDA object older than a header it includes: where a source or header of the
# tree is newer than the oldest CUDA object, every CUDA object is compiled again.
oldest=$(find build-gpu -name '*.cu.o' -printf '%T@ %p\n' | sort -n | awk 'NR == 1 { sub(/^[^ ]* /, ""); print }')
if [ -n "$oldest" ] && [ -n "$(find include tests benchmarks examples tools python \( -name '*.hpp' -o -name '*.cpp' \
  -o -name '*.cu' -o -name '*.h' \) -newer "$oldest" -print -quit)" ]; then
  find build-gpu -name '*.cu.o' -delete
fi
source tests/gpu/programs.sh
ninja -C build-gpu "${programs[@]}"
# Stripped of their host symbols: what is carried is held to 64 MiB in all.
for program in "${programs[@]}"; do strip -o ".gpu-deps/bin/${program##*/}" "build-gpu/$program"; done
tests/gpu/build-sync-steps.sh .gpu-deps/bin "$arch"
# pytest for the Python module's cases there (its python3 is 3.12; pure-Python
# wheels, unpacked), in case that machine lacks it.
mkdir -p .gpu-deps/python .gpu-deps/wheels
python3 -m pip download --quiet --only-binary=:all: --python-version 3.12 --dest .gpu-deps/wheels pytest
for wheel in .gpu-deps/wheels/*.whl; do python3 -m zipfile -e "$wheel" .gpu-deps/python; done
# The shared runtime sync_steps is linked against, in case the GPU machine keeps its own elsewhere.
cp -L /usr/local/cuda/lib64/libcudart.so.13 .gpu-deps/bin/
XZ_OPT=-T0 tar -cJf .gpu-deps.tar.xz .gpu-deps
echo "seqpool: gathered $(du -sh .gpu-deps | cut -f1) into .gpu-deps/, packed into .gpu-deps.tar.xz" \
  "($(du -sh .gpu-deps.tar.xz | cut -f1)) for tests/gpu/run.sh"
