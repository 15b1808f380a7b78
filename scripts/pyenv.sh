#!/usr/bin/env bash
# Makes (once) the Python virtual environment that the interop tests use: real Keras 3 on
# TensorFlow (the guide's own framework), h5py and TensorBoard's event reader, from PyPI
# (tests/requirements.txt). Usage: scripts/pyenv.sh BUILD_DIR; prints the venv's python.
# Exit 77 (CTest's SKIP_RETURN_CODE for sinter's tests) when PyPI cannot be reached, so a test
# without its reference reports SKIPPED, never Passed. Later calls reuse the venv at once.
set -euo pipefail
build=${1:?usage: scripts/pyenv.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/.." && pwd)
venv="$build/pyenv"
req="$src/tests/requirements.txt"
mkdir -p "$build"
exec 9>"$build/pyenv.lock"
flock 9   # one installer at a time (ctest -j, two test programs)
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$venv/requirements.txt"; then
  echo "$venv/bin/python"; exit 0
fi
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "pyenv: no python3 on PATH" >&2; exit 77; }
rm -rf "$venv"
if ! "$py" -m venv "$venv" >"$build/pyenv.log" 2>&1; then
  echo "pyenv: python3 -m venv failed (Debian: apt-get install python3-venv); see $build/pyenv.log" >&2
  exit 77
fi
if ! "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >>"$build/pyenv.log" 2>&1; then
  echo "pyenv: pip install -r tests/requirements.txt failed (PyPI unreachable?); see $build/pyenv.log" >&2
  tail -3 "$build/pyenv.log" >&2
  rm -rf "$venv"
  exit 77
fi
cp "$req" "$venv/requirements.txt"
echo "$venv/bin/python"
