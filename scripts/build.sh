#!/usr/bin/env bash
# Configures and builds sinter into build/ (or $SN_BUILD_DIR) with the given CMake options.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${SN_BUILD_DIR:-build}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
