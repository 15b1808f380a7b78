#!/usr/bin/env bash
# The README's main job: install what is missing, build, train small_cnn on Fashion-MNIST.
# Extra arguments go to `sinter train` (e.g. --model tpu_guide_cnn --epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/sinter devices
exec build/sinter train --dataset fashion_mnist --model small_cnn --save small_cnn.weights.h5 "$@"
