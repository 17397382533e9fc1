#!/usr/bin/env bash
# Installs what seqpool's build, tests, tools and benchmarks need: Debian's
# packages, and CCCL from PyPI where no CUDA toolkit provides it. Runs as root
# (or through sudo) without a terminal; does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ meson ninja-build pkg-config cmake doctest-dev nlohmann-json3-dev libcli11-dev libomp-dev
          libdlpack-dev python3 python3-dev python3-pip python3-numpy python3-pytest clang libclang-rt-14-dev)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  echo "seqpool: installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Unpacks what lies under nvidia/cu13/FOLDER/ in the wheels of WHEELS into TARGET,
# keeping the layout below it; files from bin/ are made executable.
unpack_wheels() {
  python3 - "$1" "$2" "$3" <<'PY'
import pathlib, sys, zipfile
wheels, folder, target = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
prefix = f'nvidia/cu13/{folder}/'
for wheel in pathlib.Path(wheels).glob('*.whl'):
    with zipfile.ZipFile(wheel) as archive:
        for entry in archive.namelist():
            if entry.startswith(prefix) and not entry.endswith('/'):
                destination = target / entry[len(prefix):]
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(archive.read(entry))
                if folder == 'bin':
                    destination.chmod(0o755)
PY
}

# CCCL 3.x and cuda_fp16.h / cuda_bf16.h: the toolkit's, else the same headers
# from PyPI's wheels, unpacked into .deps/cuda in the toolkit's layout (Meson
# finds them there): CCCL, the runtime's headers, and the crt/ headers these
# include. SEQPOOL_CCCL_FROM_PYPI=1 fetches them even beside a toolkit, to check
# that path (tests/consumers' no-toolkit route; or configure with
# -Dcccl_root=.deps/cuda -Dcuda=disabled).
if [ "${SEQPOOL_CCCL_FROM_PYPI:-0}" = 1 ] ||
   { [ ! -f /usr/local/cuda/include/cccl/thrust/version.h ] && [ ! -f .deps/cuda/include/cccl/thrust/version.h ]; }; then
  echo "seqpool: fetching CCCL and the CUDA runtime headers from PyPI into .deps/cuda"
  python3 -m pip download --quiet --no-deps --dest .deps/wheels nvidia-cuda-cccl==13.0.85 nvidia-cuda-runtime==13.0.96 \
    nvidia-cuda-crt==13.0.88
  unpack_wheels .deps/wheels include .deps/cuda/include
fi

# nanobind, for the Python module the suite builds and tests: PyPI's wheel (pure
# Python and sources, no Debian package) unpacked into .deps/python, where
# python/meson.build looks.
if [ ! -f .deps/python/nanobind/__init__.py ]; then
  echo "seqpool: fetching nanobind from PyPI into .deps/python"
  python3 -m pip download --quiet --no-deps --dest .deps/wheels nanobind==3.1.0
  mkdir -p .deps/python
  python3 -m zipfile -e .deps/wheels/nanobind-3.1.0-py3-none-any.whl .deps/python
fi

# cuobjdump and nvdisasm, for the test that reads the kernels' machine code:
# where nvcc is installed without them, PyPI's wheels (the oldest release there
# reads what nvcc 13.0 writes) unpacked into .deps/cuda-tools/bin.
if command -v nvcc >/dev/null && ! command -v cuobjdump >/dev/null &&
   [ ! -x "$(dirname "$(command -v nvcc)")/cuobjdump" ] && [ ! -x .deps/cuda-tools/bin/cuobjdump ]; then
  echo "seqpool: fetching cuobjdump and nvdisasm from PyPI"
  python3 -m pip download --quiet --no-deps --dest .deps/tool-wheels nvidia-cuda-cuobjdump==13.2.51 \
    nvidia-cuda-nvdisasm==13.2.51
  unpack_wheels .deps/tool-wheels bin .deps/cuda-tools/bin
fi
