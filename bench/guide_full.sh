#!/usr/bin/env bash
# The TPU guide's own program (../shared/guide/tpu_guide.py) at its full size with only its
# epochs cut from 5 to 1 (issue 25's "done when": the guide's CNN, batch 200, 300 steps per
# epoch, 50 validation steps; 8 logical CPU devices under a MirroredStrategy instead of the
# TPU), on sinter and then on TensorFlow, each under /usr/bin/time -v. Prints, per side: wall
# time, peak RSS, the two fits' final log lines and the custom loop's "Current step" lines
# (final training accuracy), and keeps the whole outputs in $OUT (default /tmp/guide_full).
#
#   bench/guide_full.sh [--side sinter|tf|both] [--smoke]
#
# --smoke: 2 steps of batch 16 on 512 examples (a functional check in minutes, numbers
# meaningless). Each side rewrites only the guide's [platform] lines
# (tests/python/tpu_guide_platform.py; TensorFlow gets `import tensorflow as tf`, its
# MirroredStrategy over the 8 logical CPUs by name, and a tfds.load stand-in reading the same
# IDX files, as tensorflow_datasets is not installed). The dataset is MNIST where it is on the
# machine, else Fashion-MNIST. Under --smoke, TensorFlow 2.21 / Keras 3.15 fail the second
# fit (steps_per_execution 50 over an epoch of 2 steps under MirroredStrategy: "You must feed a
# value for placeholder tensor ... while/cond/Placeholder_6"; seen 2026-12-02); the full size
# (300 steps, a multiple of 50) was not tried here.
#
# Run it on a quiet machine (nothing else on the cores, >= 16 GB free): the full run takes tens
# of minutes per side on 2 cores. Needs scripts/build.sh (build/libsinter.so, build/pyvenv
# with numpy; build/pyenv with TensorFlow: scripts/pyenv.sh build).
set -euo pipefail
cd "$(dirname "$0")/.."
SIDE=both SMOKE=0
while [ $# -gt 0 ]; do
  case $1 in
    --side) SIDE=$2; shift ;;
    --smoke) SMOKE=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "guide_full.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
BUILD=${SN_BUILD_DIR:-build}
GUIDE=${SINTER_GUIDE:-../shared/guide/tpu_guide.py}
OUT=${OUT:-/tmp/guide_full}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
[ -f "$GUIDE" ] || { echo "guide_full.sh: no guide at $GUIDE" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "guide_full.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
DATASET=fashion_mnist
[ -d "${SINTER_MNIST_DIR:-/usr/share/datasets/mnist}" ] && DATASET=mnist

export SINTER_GUIDE_EPOCHS=1
if [ "$SMOKE" = 1 ]; then
  export SINTER_GUIDE_STEPS=2 SINTER_GUIDE_BATCH=16 SINTER_GUIDE_VAL_STEPS=1 SINTER_TFDS_MAX_EXAMPLES=512
fi

# The programs: the guide with its [platform] lines rewritten for each side.
python3 - "$GUIDE" "$OUT" "$DATASET" <<'EOF'
import sys
sys.path.insert(0, "tests/python")
from tpu_guide_platform import platform_source
guide, out, dataset = sys.argv[1:4]
src = platform_source(open(guide).read(), dataset)
open(f"{out}/guide_sinter.py", "w").write(src)
tf_lines = {
    "import sinter as tf  # [platform]": "import tensorflow as tf  # [platform]",
    "from sinter import tfds  # [platform]": "import tfds_idx as tfds  # [platform]",
    "strategy = tf.distribute.MirroredStrategy()  # [platform]":
        "strategy = tf.distribute.MirroredStrategy([d.name for d in "
        "tf.config.list_logical_devices('CPU')])  # [platform]",
}
for old, new in tf_lines.items():
    if src.count(old) != 1:
        sys.exit(f"guide_full.sh: the rewritten guide has {src.count(old)} of {old!r}")
    src = src.replace(old, new)
open(f"{out}/guide_tf.py", "w").write(src)
# tensorflow_datasets.load over the machine's IDX files (the guide's arguments)
open(f"{out}/tfds_idx.py", "w").write('''
import gzip, os
import numpy as np
import tensorflow as tf

DIRS = {"mnist": os.environ.get("SINTER_MNIST_DIR", "/usr/share/datasets/mnist"),
        "fashion_mnist": os.environ.get("SINTER_FASHION_MNIST_DIR",
                                        "/usr/share/datasets/fashion-mnist")}


def _idx(path):
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            data = (gzip.open if p.endswith(".gz") else open)(p, "rb").read()
            nd = data[3]
            dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
            return np.frombuffer(data, np.uint8, offset=4 + 4 * nd).reshape(dims)
    raise FileNotFoundError(path)


def load(name, split, with_info=False, as_supervised=False, try_gcs=False, **kw):
    pre = "train" if split == "train" else "t10k"
    d = DIRS[name]
    x = _idx(os.path.join(d, pre + "-images-idx3-ubyte"))[..., None]
    y = _idx(os.path.join(d, pre + "-labels-idx1-ubyte")).astype(np.int64)
    cap = os.environ.get("SINTER_TFDS_MAX_EXAMPLES")
    if cap:
        x, y = x[:int(cap)], y[:int(cap)]
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return (ds, {"name": name}) if with_info else ds
''')
EOF

report() {  # side, log, time file
  local wall rss
  wall=$(grep -E "Elapsed \(wall clock\)" "$3" | awk '{print $NF}')
  rss=$(grep -E "Maximum resident set size" "$3" | awk '{printf "%.2f GB", $NF / 1048576}')
  echo "== $1: wall $wall, peak RSS $rss (exit $4)"
  # the fits' last log lines (Keras 3's bar, its ANSI colours taken out) and the custom loop
  sed -e 's/\x1b\[[0-9;]*m//g' "$2" | tr '\r' '\n' |
    grep -E "val_sparse_categorical_accuracy|^Current step|^Epoch: " || true
}

if [ "$SIDE" = sinter ] || [ "$SIDE" = both ]; then
  PY=${SN_PY:-$BUILD/pyvenv/bin/python}
  [ -x "$PY" ] || PY=python3
  rc=0
  SINTER_LIBRARY=$(realpath "$BUILD/libsinter.so") PYTHONPATH=$PWD/python \
    /usr/bin/time -v -o "$OUT/sinter.time" "$PY" "$OUT/guide_sinter.py" > "$OUT/sinter.log" 2>&1 || rc=$?
  report sinter "$OUT/sinter.log" "$OUT/sinter.time" $rc
fi
if [ "$SIDE" = tf ] || [ "$SIDE" = both ]; then
  TFPY=${SN_TF_PY:-$BUILD/pyenv/bin/python}
  [ -x "$TFPY" ] || { echo "guide_full.sh: no TensorFlow python at $TFPY (scripts/pyenv.sh $BUILD)" >&2; exit 1; }
  TFPY=$(realpath -s "$TFPY")
  rc=0
  (cd "$OUT" && TF_CPP_MIN_LOG_LEVEL=3 PYTHONPATH=$OUT \
    /usr/bin/time -v -o "$OUT/tf.time" "$TFPY" guide_tf.py > "$OUT/tf.log" 2>&1) || rc=$?
  report tensorflow "$OUT/tf.log" "$OUT/tf.time" $rc
fi
