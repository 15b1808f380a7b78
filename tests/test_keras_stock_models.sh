#!/usr/bin/env bash
# Issue 23's stock architectures against real Keras 3, saved by Keras as .keras:
# keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10), the
# small Xception of keras.io's "Image classification from scratch" (no augmentation) at
# 96x96, and the TensorFlow segmentation tutorial's U-Net at 128x128 (MobileNetV2 encoder as a
# nested model of five outputs, pix2pix upsample blocks as nested Sequentials, Concatenate
# skips; sparse cross-entropy from logits over every pixel). For each: `sinter summary` prints Keras's table byte for byte, sinter predicts 64
# inputs within 1e-5 of Keras, one SGD step from the same weights and batch changes every
# weight as Keras's does (tests/keras_models_interop.py, part (f), says to what bound), and
# Keras reopens sinter's .keras and predicts the same. Several minutes of CPU.
#
#     bash tests/test_keras_stock_models.sh <build dir>
#
# SKIPPED (77) without the PyPI reference environment (scripts/pyenv.sh), as
# tests/test_keras_interop.sh.
set -u
BUILD=${1:?usage: bash tests/test_keras_stock_models.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
export SN_NUM_THREADS=${SN_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

PY=$("$SRC/scripts/pyenv.sh" "$BUILD")
rc=$?
if [ $rc -eq 77 ]; then echo "SKIPPED: no Keras reference (scripts/pyenv.sh could not make the venv)"; exit 77; fi
[ $rc -eq 0 ] || { echo "FAIL: scripts/pyenv.sh exited $rc"; exit 1; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/sinter_keras_stock.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
SN_INTEROP_ONLY=mobilenet_v2,xception_small,unet "$PY" "$SRC/tests/keras_models_interop.py" "$BUILD" "$TMP"
