#!/usr/bin/env bash
# Keras model files against real Keras 3 (tests/keras_models_interop.py says what is checked):
# Keras writes .keras and JSON models, sinter loads and predicts them, Keras loads sinter's
# .keras files, and `sinter summary/train --model guide.keras` report the guide's parameter
# count and a loss with its L2 term.
#
#     bash tests/test_keras_interop.sh <build dir>
#
# The reference (TensorFlow 2.21 with Keras 3, h5py) comes from scripts/pyenv.sh, which makes
# a virtual environment under the build folder once; when PyPI cannot be reached it exits 77
# and so does this test (CTest: SKIPPED, never Passed).
set -u
BUILD=${1:?usage: bash tests/test_keras_interop.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
export SN_NUM_THREADS=${SN_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

. "$SRC/tests/sh_test_util.sh"
sn_keras_python "$BUILD" "no Keras reference (scripts/pyenv.sh could not make the venv)"

sn_tmpdir keras_interop
"$PY" "$SRC/tests/keras_models_interop.py" "$BUILD" "$TMP"
