#!/usr/bin/env bash
# The Python package against the `sinter` command on the same work (issue 24's figures):
#
#   fit      one epoch of small_cnn on Fashion-MNIST, batch 128, Adam, steps_per_execution 50,
#            seed 1: `sinter train --report`'s epoch_s (epoch start to its last batch, validation
#            excluded) against the same interval in Python's fit (a LambdaCallback's clock at
#            on_epoch_begin and at the last on_train_batch_end; with steps_per_execution 50 it
#            runs 10 times an epoch). Python runs 468 steps, as the command's drop_remainder.
#   predict  the 10,000 test images through small_cnn with saved weights, batch 128:
#            `sinter predict --count 10000 --output FILE` (process wall time, CSV of the class
#            probabilities) against a Python process doing the same (import, load the data,
#            build, load the weights, predict, softmax, the same CSV); and, inside Python,
#            model.predict alone.
#
#   bench/python_vs_cli.sh [--rounds N] [--smoke]     (default 5 rounds; --smoke: a functional
#                                                      check in seconds, numbers meaningless)
# Rounds alternate which side runs first; the table gives medians and Python / command. Run it
# on a quiet machine (nothing else on the cores): docs/benchmarks.md records the result.
# Needs: scripts/build.sh (build/sinter, build/libsinter.so) and numpy for python3 (or
# SN_PY=/path/to/python of a venv with numpy, e.g. build/pyvenv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=5 SMOKE=0
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift ;;
    --smoke) SMOKE=1; ROUNDS=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "python_vs_cli.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
BUILD=${SN_BUILD_DIR:-build}
SINTER=$(realpath "$BUILD/sinter")
PY=${SN_PY:-$([ -x "$BUILD/pyvenv/bin/python" ] && echo "$BUILD/pyvenv/bin/python" || echo python3)}
OUT=${SN_BENCH_OUT:-$BUILD/bench}/python_vs_cli
mkdir -p "$OUT"
export SINTER_LIBRARY=$(realpath "$BUILD/libsinter.so") PYTHONPATH=$PWD/python
"$PY" -c "import numpy" || { echo "python_vs_cli.sh: $PY has no numpy (set SN_PY)" >&2; exit 1; }
STEPS=0 COUNT=10000
[ $SMOKE = 1 ] && STEPS=5 COUNT=256
# The command sets GOMP_SPINCOUNT=1000 for itself; the package does the same on import.

fit_cli() {
  "$SINTER" train --model small_cnn --epochs 1 --batch-size 128 --steps-per-execution 50 \
    --seed 1 --steps-per-epoch $STEPS --validation-steps 1 --report --quiet |
    sed -n 's/.*epoch_s=\([0-9.]*\).*/\1/p'
}

fit_py() {
  "$PY" - "$STEPS" <<'PYEOF'
import sys, time
from sinter import keras
from sinter.keras import layers
steps = int(sys.argv[1]) or 468            # `sinter train` drops the last partial batch
(x, y), (xt, yt) = keras.datasets.fashion_mnist.load_data()
x, xt = x[..., None] / 255.0, xt[..., None] / 255.0
keras.utils.set_random_seed(1)
m = keras.Sequential([keras.Input((28, 28, 1)),
                      layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(),
                      layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(),
                      layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(10)])
m.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
          metrics=["accuracy"], steps_per_execution=50)
t = {}
clock = keras.callbacks.LambdaCallback(
    on_epoch_begin=lambda e, l: t.__setitem__("begin", time.perf_counter()),
    on_train_batch_end=lambda b, l: t.__setitem__("last", time.perf_counter()))
m.fit(x, y, batch_size=128, epochs=1, steps_per_epoch=steps, validation_data=(xt, yt),
      validation_steps=1, verbose=0, callbacks=[clock])
print(f"{t['last'] - t['begin']:.4f}")
PYEOF
}

make_weights() {
  "$SINTER" train --model small_cnn --epochs 1 --steps-per-epoch 20 --validation-steps 1 \
    --quiet --save "$OUT/small_cnn.weights.h5" >/dev/null
}

predict_cli() {
  local t0 t1
  t0=$(date +%s.%N)
  "$SINTER" predict --model small_cnn --weights "$OUT/small_cnn.weights.h5" --count $COUNT \
    --batch-size 128 --output "$OUT/cli.csv" 2>/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

# The command's fixed cost (start, data, model, weights, plans) with one batch: subtracted from
# its 10,000-image time, it estimates the command's own predicting time, which the Python
# process's model.predict is compared with (the process figure also holds Python's start, the
# NumPy import and load_data reading both splits, as Keras's does).
predict_cli_one() {
  local t0 t1
  t0=$(date +%s.%N)
  "$SINTER" predict --model small_cnn --weights "$OUT/small_cnn.weights.h5" --count 128 \
    --batch-size 128 --output "$OUT/cli1.csv" 2>/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

predict_py() {
  local t0 t1 inner
  t0=$(date +%s.%N)
  inner=$("$PY" - "$OUT/small_cnn.weights.h5" "$COUNT" "$OUT/py.csv" <<'PYEOF'
import sys, time
import numpy as np
from sinter import keras
from sinter.keras import layers
weights, count, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
_, (xt, yt) = keras.datasets.fashion_mnist.load_data()
xt, yt = xt[:count, ..., None] / 255.0, yt[:count]
keras.backend.clear_session()                 # the preset's layer names
m = keras.Sequential([keras.Input((28, 28, 1)),
                      layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(),
                      layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(),
                      layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(10)])
m.build((None, 28, 28, 1))
m.load_weights(weights)
t0 = time.perf_counter()
z = m.predict(xt, batch_size=128, verbose=0)
t1 = time.perf_counter()
p = np.exp(z - z.max(1, keepdims=True))
p /= p.sum(1, keepdims=True)
with open(out, "w") as f:                     # the rows `sinter predict` writes
    f.write("index,label,predicted," + ",".join(f"p{i}" for i in range(10)) + "\n")
    for i in range(count):
        f.write(f"{i},{yt[i]},{p[i].argmax()}," + ",".join(f"{v:.6f}" for v in p[i]) + "\n")
print(f"{t1 - t0:.4f}")
PYEOF
)
  t1=$(date +%s.%N)
  echo "$(echo "$t1 - $t0" | bc -l) $inner"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

make_weights
: >"$OUT/fit_cli" ; : >"$OUT/fit_py" ; : >"$OUT/pred_cli" ; : >"$OUT/pred_py" ; : >"$OUT/pred_py_inner"
: >"$OUT/pred_cli_one"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then
    fit_cli >>"$OUT/fit_cli"; fit_py >>"$OUT/fit_py"
    predict_cli >>"$OUT/pred_cli"; predict_cli_one >>"$OUT/pred_cli_one"
    read -r a b < <(predict_py)
  else
    fit_py >>"$OUT/fit_py"; fit_cli >>"$OUT/fit_cli"
    read -r a b < <(predict_py); predict_cli_one >>"$OUT/pred_cli_one"
    predict_cli >>"$OUT/pred_cli"
  fi
  echo "$a" >>"$OUT/pred_py"; echo "$b" >>"$OUT/pred_py_inner"
  echo "round $r: fit cli $(tail -1 "$OUT/fit_cli") s, py $(tail -1 "$OUT/fit_py") s;" \
       "predict cli $(tail -1 "$OUT/pred_cli") s, py $a s (model.predict $b s)" >&2
done
fc=$(median <"$OUT/fit_cli") fp=$(median <"$OUT/fit_py")
pc=$(median <"$OUT/pred_cli") pp=$(median <"$OUT/pred_py") pi=$(median <"$OUT/pred_py_inner")
p1=$(median <"$OUT/pred_cli_one")
pe=$(echo "($pc - $p1) * $COUNT / ($COUNT - 128)" | bc -l)
cmp -s <(cut -d, -f1-3 "$OUT/cli.csv") <(cut -d, -f1-3 "$OUT/py.csv") &&
  same="the same predicted classes" || same="PREDICTED CLASSES DIFFER"
echo
echo "| work ($ROUNDS rounds, medians, $(nproc) cores) | sinter command | Python package | Python / command |"
echo "| --- | ---: | ---: | ---: |"
printf '| small_cnn epoch (fit, batch 128) | %.2f s | %.2f s | %.3f |\n' "$fc" "$fp" "$(echo "$fp / $fc" | bc -l)"
printf '| predict 10,000 test images (process) | %.2f s | %.2f s | %.3f |\n' "$pc" "$pp" "$(echo "$pp / $pc" | bc -l)"
printf '| predicting alone (command: 10,000 minus 128 images, scaled; Python: model.predict) | %.3f s | %.3f s | %.3f |\n' "$pe" "$pi" "$(echo "$pi / $pe" | bc -l)"
echo
echo "($same; logs in $OUT)"
