#!/usr/bin/env bash
# The README's main job: install what is missing, build, train small_cnn on Fashion-MNIST,
# then draw its curves. Writes, under out/small_cnn (git ignores out/): checkpoints of the
# whole training state after every epoch (checkpoints/; running main.sh again resumes from the
# newest one, and a finished run has nothing left to train: remove the folder, or pass
# --no-resume, to start over), TensorBoard logs (logs/), the CSV log and curves.png; the
# weights go to small_cnn.weights.h5. Extra arguments go to `sinter train` (e.g. --epochs 8).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The Shakespeare corpus for the character models, fetched once into data/ (not needed here).
scripts/shakespeare.sh >/dev/null || echo "main.sh: going on without the Shakespeare corpus"
scripts/build.sh
build/sinter devices
run=out/small_cnn
mkdir -p "$run"
build/sinter train --dataset fashion_mnist --model small_cnn --save small_cnn.weights.h5 \
    --checkpoint-dir "$run/checkpoints" --logdir "$run/logs" --csv "$run/history.csv" "$@"
build/sinter plot "$run/history.csv" -o "$run/curves.png"
echo
echo "Weights:          small_cnn.weights.h5"
echo "Checkpoints:      $run/checkpoints   (rerun to resume; --no-resume starts over)"
echo "TensorBoard logs: $run/logs   (tensorboard --logdir $run/logs)"
echo "Training log:     $run/history.csv"
echo "Curves:           $run/curves.png"
echo "Mistakes:         build/sinter evaluate --weights small_cnn.weights.h5 --misclassified $run/misclassified.png --confusion $run/confusion.png"
