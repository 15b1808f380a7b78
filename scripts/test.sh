#!/usr/bin/env bash
# The README's test command: install what is missing, build with warnings as errors, run the
# whole CTest suite; then (unless SN_SKIP_SANITIZE=1) the same suite under ASan + UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
SN_BUILD_DIR=build scripts/build.sh -DSN_WERROR=ON
(cd build && ctest --output-on-failure)
if [ "${SN_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== sanitizer build (ASan + UBSan) =="
  SN_BUILD_DIR=build-asan scripts/build.sh -DSN_WERROR=ON -DSN_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
  # LeakSanitizer is on; OpenMP's and oneDNN's per-thread caches live until exit and are
  # suppressed by name in scripts/lsan.supp.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/../scripts/lsan.supp \
     ctest --output-on-failure -E "${SN_ASAN_EXCLUDE:-^$}")
fi
