#!/usr/bin/env bash
# The Python package (python/sinter, docs/python.md) under pytest: tests/python/test_*.py, run
# against this build's libsinter.so and `sinter` command. The venv (numpy + pytest from PyPI)
# is made once in BUILD_DIR/pyvenv; without PyPI the test reports SKIPPED (77).
# Usage: tests/test_python.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: test_python.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
venv="$build/pyvenv"
[ -f "$build/libsinter.so" ] || { echo "test_python: $build/libsinter.so is missing" >&2; exit 1; }
# An ASan build's library cannot be loaded into an uninstrumented python (the ASan runtime must
# come first in the process); the package is tested by the plain build's run.
if grep -q '^SN_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "test_python: SKIPPED in a sanitizer build (libasan cannot be loaded into python)" >&2
  exit 77
fi
exec 9>"$build/pyvenv.lock"
flock 9
if ! "$venv/bin/python" -c "import numpy, pytest" 2>/dev/null; then
  py=$(command -v python3 || true)
  [ -n "$py" ] || { echo "test_python: no python3 on PATH" >&2; exit 77; }
  rm -rf "$venv"
  if ! "$py" -m venv "$venv" >"$build/pyvenv.log" 2>&1 ||
     ! "$venv/bin/pip" install -q --disable-pip-version-check numpy pytest >>"$build/pyvenv.log" 2>&1; then
    echo "test_python: could not make the venv (python3-venv missing or PyPI unreachable); see $build/pyvenv.log" >&2
    rm -rf "$venv"
    exit 77
  fi
fi
flock -u 9
export SINTER_LIBRARY="$build/libsinter.so" SINTER_CLI="$build/sinter" SN_BUILD_DIR="$build"
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
cd "$build"
set +e
"$venv/bin/python" -m pytest -q -p no:cacheprovider -rs "$src/tests/python" "${@:2}"
rc=$?
# pytest: 5 = no tests collected (treated as failure here: the suite must exist)
exit $rc
