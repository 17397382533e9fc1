#!/usr/bin/env bash
# Installs what is missing, configures and builds build/, and runs the main example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build -Dtests=true -Dexamples=true -Dbenchmarks=true -Dtools=true
meson compile -C build
build/examples/embed_batch
