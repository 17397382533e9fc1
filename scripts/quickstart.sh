#!/usr/bin/env bash
# Installs what is missing, configures build/ (tests, examples and seqpool-run),
# builds the main example alone and runs it; `meson test -C build` builds and
# runs the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ -f build/build.ninja ] || meson setup build -Dtests=true -Dexamples=true -Dtools=true
meson compile -C build examples/embed_batch
build/examples/embed_batch
