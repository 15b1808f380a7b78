#!/usr/bin/env bash
# Keras's losses, metrics and models of several inputs and outputs against real Keras 3
# (tests/keras_losses_interop.py says what is checked): Keras saves compiled models, sinter
# loads them, evaluates, takes one SGD step and lists its History keys, and the numbers and
# names must be Keras's.
#
#     bash tests/test_keras_losses_interop.sh <build dir>
#
# The reference (TensorFlow 2.21 with Keras 3, h5py) comes from scripts/pyenv.sh, which makes
# a virtual environment under the build folder once; when PyPI cannot be reached it exits 77
# and so does this test (CTest: SKIPPED, never Passed).
set -u
BUILD=${1:?usage: bash tests/test_keras_losses_interop.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
export SN_NUM_THREADS=${SN_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

. "$SRC/tests/sh_test_util.sh"
sn_keras_python "$BUILD" "no Keras reference (scripts/pyenv.sh could not make the venv)"

sn_tmpdir keras_losses
"$PY" "$SRC/tests/keras_losses_interop.py" "$BUILD" "$TMP"
