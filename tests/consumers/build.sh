#!/usr/bin/env bash
# Builds and runs pool.cpp from outside projects, one way of adopting seqpool per
# ROUTE, each as its README section "Use it in your build" says:
#
#   meson-subproject   seqpool in an outside Meson project's subprojects/
#   pkg-config         meson install --destdir, then g++ (and nvcc) with the .pc flags
#   cmake-package      meson install --destdir, then find_package(seqpool CONFIG)
#   cmake-subdirectory add_subdirectory(seqpool) from a checkout
#   cmake-fetchcontent FetchContent from this repository's committed HEAD
#   no-toolkit         g++ that sees neither /usr/local/cuda nor /usr/local/include,
#                      with only the headers scripts/install-deps.sh fetches from PyPI
#
#   tests/consumers/build.sh ROUTE WORK_DIR
# Exits 77 (skipped) where a route's tool is missing: nvcc for the CUDA twins is
# optional, CMake and pkg-config are not.
set -euo pipefail
route=$1
work=$2
source_root=$(cd "$(dirname "$0")/../.." && pwd)
consumers=$source_root/tests/consumers
rm -rf "$work" && mkdir -p "$work"
cd "$work"

# meson install into $work/root, with nothing else built.
install_seqpool() {
  meson setup install-build "$source_root" --prefix=/usr -Dcuda=disabled >/dev/null
  DESTDIR="$work/root" meson install -C install-build --quiet >/dev/null
}

case $route in
meson-subproject)
  mkdir project
  cp "$consumers/meson_subproject/meson.build" "$consumers/pool.cpp" project/
  sed -i "s|'../pool.cpp'|'pool.cpp'|" project/meson.build
  mkdir project/subprojects && ln -s "$source_root" project/subprojects/seqpool
  meson setup build project >/dev/null
  meson test -C build --print-errorlogs
  ;;
pkg-config)
  install_seqpool
  # The .pc files find their prefix from their own folder: moved, they still hold.
  mv root/usr root/elsewhere
  export PKG_CONFIG_PATH=$work/root/elsewhere/share/pkgconfig
  echo "seqpool.pc: $(pkg-config --cflags --libs seqpool)"
  # shellcheck disable=SC2046
  g++ -std=c++20 -O2 $(pkg-config --cflags seqpool) "$consumers/pool.cpp" -o pool $(pkg-config --libs seqpool)
  ./pool
  if command -v nvcc >/dev/null; then
    echo "seqpool-cuda.pc: $(pkg-config --cflags --libs seqpool-cuda)"
    # shellcheck disable=SC2046
    nvcc -std=c++20 -arch=sm_90 $(pkg-config --cflags seqpool-cuda) "$consumers/pool.cu" -o pool_cuda \
      $(pkg-config --libs seqpool-cuda)
    ./pool_cuda
  fi
  ;;
cmake-package)
  install_seqpool
  cmake -S "$consumers/cmake_package" -B build -DCMAKE_PREFIX_PATH="$work/root/usr" >/dev/null
  cmake --build build
  build/pool
  [ ! -x build/pool_cuda ] || build/pool_cuda
  ;;
cmake-subdirectory)
  cmake -S "$consumers/cmake_source" -B build -DSEQPOOL_SOURCE_DIR="$source_root" >/dev/null
  cmake --build build
  build/pool
  ;;
cmake-fetchcontent)
  cmake -S "$consumers/cmake_source" -B build -DSEQPOOL_GIT="$source_root" \
    -DSEQPOOL_GIT_TAG="$(git -C "$source_root" rev-parse HEAD)" >/dev/null
  cmake --build build
  build/pool
  ;;
no-toolkit)
  pypi=$source_root/.deps/cuda/include
  if [ ! -f "$pypi/cccl/thrust/version.h" ] || [ ! -f "$pypi/cuda_bf16.h" ]; then
    echo "no PyPI headers in .deps/cuda: run SEQPOOL_CCCL_FROM_PYPI=1 scripts/install-deps.sh"
    exit 77
  fi
  # g++'s own search path less /usr/local/include, where some machines link CUDA headers.
  system=()
  while read -r dir; do
    [ "$dir" = /usr/local/include ] || system+=(-isystem "$dir")
  done < <(echo | g++ -std=c++20 -E -x c++ - -v 2>&1 | sed -n '/<...> search starts here/,/End of search list/p' | grep '^ /')
  flags=(-std=c++20 -O2 -fopenmp -nostdinc "${system[@]}" -I "$source_root/include")
  # Host-only: CCCL alone (nvidia-cuda-cccl), seqpool's own 16-bit types.
  g++ "${flags[@]}" -isystem "$pypi/cccl" "$consumers/pool.cpp" -o pool
  ./pool
  # With the whole fetch, CUDA's __nv_bfloat16 and __half are accepted too
  # (cuda_bf16.h needs nvidia-cuda-crt's crt/host_defines.h).
  g++ "${flags[@]}" -isystem "$pypi/cccl" -isystem "$pypi" -x c++ - -o cuda_types <<'CPP'
#include <seqpool/seqpool.hpp>
static_assert(SEQPOOL_HAS_CUDA_FLOAT16 && seqpool::hidden_element<__nv_bfloat16> && seqpool::hidden_element<__half>);
int main() { return seqpool::detail::to_float(__float2bfloat16_rn(1.5f)) == 1.5f ? 0 : 1; }
CPP
  ./cuda_types
  echo "no-toolkit: seqpool's types with CCCL alone; CUDA's with the whole PyPI fetch"
  ;;
*)
  echo "unknown route: $route" >&2
  exit 2
  ;;
esac
