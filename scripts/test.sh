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
  # LeakSanitizer is on; OpenMP's, oneDNN's and HDF5's per-thread caches live until exit and are
  # suppressed by name in scripts/lsan.supp. Open MPI's runtime leaks from plugins it unloads
  # (no name to suppress), so the MPI test runs under ASan + UBSan with leak checks off.
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/../scripts/lsan.supp \
     ctest --output-on-failure -E "test_mpi")
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure -R "test_mpi")
fi
