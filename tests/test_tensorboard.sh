#!/usr/bin/env bash
# sinter train --logdir read back by TensorBoard's own reader (EventAccumulator from the
# tensorboard package of PyPI, in the venv of scripts/pyenv.sh): every epoch scalar (train and
# validation) at its step with the value of the CSV log, the learning rate, the batch scalars
# every --log-every steps, and the weight histograms of --histograms; then the same scalars
# through TensorBoard 2's plugin path (data_compat turns simple_value into scalar tensors).
#
#     bash tests/test_tensorboard.sh <build dir>
#
# Exit 77 (SKIPPED) without Fashion-MNIST or without the venv (PyPI unreachable).
set -u
BUILD=${1:?usage: bash tests/test_tensorboard.sh <build dir>}
BUILD=$(cd "$BUILD" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
DATA=/usr/share/datasets/fashion-mnist
export SN_NUM_THREADS=${SN_NUM_THREADS:-2} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export TF_CPP_MIN_LOG_LEVEL=2  # TensorFlow, if tensorboard loads it, without its banner

. "$SRC/tests/sh_test_util.sh"
[ -e "$DATA/train-images-idx3-ubyte.gz" ] || sn_skip "no Fashion-MNIST in $DATA"
sn_keras_python "$BUILD" "no Python venv with tensorboard (PyPI unreachable)"

sn_tmpdir test_tb

# 3 epochs of 20 steps, 5 steps per execution, batch scalars every 10 steps.
if ! "$BUILD/sinter" train --model mlp --epochs 3 --steps-per-epoch 20 --steps-per-execution 5 \
        --validation-steps 4 --learning-rate 0.002 --csv "$TMP/history.csv" \
        --logdir "$TMP/logs" --log-every 10 --histograms >"$TMP/train.out" 2>&1; then
    echo "FAIL: sinter train --logdir"; cat "$TMP/train.out"; exit 1
fi
grep -q "TensorBoard logs in $TMP/logs" "$TMP/train.out" ||
    { echo "FAIL: train does not say where the logs are"; cat "$TMP/train.out"; exit 1; }

"$PY" - "$TMP/logs" "$TMP/history.csv" <<'PYEOF'
import csv, glob, sys
import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing import plugin_event_accumulator as pea
from tensorboard.util import tensor_util

logs, hist = sys.argv[1], sys.argv[2]
rows = list(csv.DictReader(open(hist)))
fails = []
def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond: fails.append(msg)

f32 = lambda v: float(np.float32(float(v)))
check(len(glob.glob(logs + "/train/events.out.tfevents.*")) == 1, "one event file in train/")
check(len(glob.glob(logs + "/validation/events.out.tfevents.*")) == 1, "one event file in validation/")
tr = EventAccumulator(logs + "/train", size_guidance={"scalars": 0, "histograms": 0}); tr.Reload()
va = EventAccumulator(logs + "/validation", size_guidance={"scalars": 0}); va.Reload()
metric = "sparse_categorical_accuracy"
for acc, tag, col in [(tr, "epoch_loss", "loss"), (tr, "epoch_" + metric, metric),
                      (va, "epoch_loss", "val_loss"), (va, "epoch_" + metric, "val_" + metric)]:
    got = [(e.step, e.value) for e in acc.Scalars(tag)]
    want = [(int(r["epoch"]), f32(r[col])) for r in rows]
    check(got == want, f"{tag} in {'train' if acc is tr else 'validation'} = CSV {col}: {got} vs {want}")
lr = [(e.step, e.value) for e in tr.Scalars("epoch_learning_rate")]
check(lr == [(e, f32(0.002)) for e in range(3)], f"epoch_learning_rate 0.002 at epochs 0-2: {lr}")
bl = [(e.step, e.value) for e in tr.Scalars("batch_loss")]
check([s for s, _ in bl] == [10, 20, 30, 40, 50, 60], f"batch_loss every 10 steps: {[s for s, _ in bl]}")
# the running mean at the epoch's last step is the epoch's loss
ends = {s: v for s, v in bl}
check(all(ends[20 * (e + 1)] == f32(rows[e]["loss"]) for e in range(3)),
      "batch_loss at each epoch's last step = that epoch's loss")
check("batch_" + metric in tr.Tags()["scalars"], "batch_" + metric + " logged")
sizes = {"dense/kernel/histogram": 784 * 128, "dense/bias/histogram": 128,
         "dense_1/kernel/histogram": 128 * 10, "dense_1/bias/histogram": 10}
htags = tr.Tags()["histograms"]
check(sorted(htags) == sorted(sizes), f"a histogram per weight: {htags}")
for tag in htags:
    hs = tr.Histograms(tag)
    steps = [h.step for h in hs]
    okh = steps == [0, 1, 2] and all(h.histogram_value.num == sizes.get(tag, -1) and
            sum(h.histogram_value.bucket) == h.histogram_value.num and
            h.histogram_value.min <= h.histogram_value.max for h in hs)
    check(okh, f"{tag}: steps {steps}, {sizes.get(tag)} values in its buckets")
# TensorBoard 2's loading path: simple_value becomes a scalar tensor of the scalars plugin.
p = pea.EventAccumulator(logs + "/train", size_guidance={"tensors": 0}); p.Reload()
t = [(e.step, float(np.asarray(tensor_util.make_ndarray(e.tensor_proto)))) for e in p.Tensors("epoch_loss")]
check(t == [(int(r["epoch"]), f32(r["loss"])) for r in rows], f"TensorBoard 2 epoch_loss tensors: {t}")
check(p.SummaryMetadata("epoch_loss").plugin_data.plugin_name == "scalars", "epoch_loss goes to the scalars plugin")
check(p.SummaryMetadata("dense/kernel/histogram").plugin_data.plugin_name == "histograms",
      "histograms go to the histograms plugin")
sys.exit(1 if fails else 0)
PYEOF
rc=$?

# A resumed run (--checkpoint-dir) writes a new file whose batch steps continue from the
# checkpoint's global step: 2 epochs, then the same command with 3 resumes at step 40.
for e in 2 3; do
    "$BUILD/sinter" train --model mlp --epochs $e --steps-per-epoch 20 --steps-per-execution 5 \
        --validation-steps 2 --checkpoint-dir "$TMP/ck" --logdir "$TMP/rlogs" --log-every 10 \
        >"$TMP/resume$e.out" 2>&1 || { echo "FAIL: train --epochs $e --checkpoint-dir"; cat "$TMP/resume$e.out"; rc=1; }
done
grep -q "^Resuming from" "$TMP/resume3.out" || { echo "FAIL: the second run did not resume"; rc=1; }
"$PY" - "$TMP/rlogs/train" <<'PYEOF' || rc=1
import glob, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
got = []
for f in sorted(glob.glob(sys.argv[1] + "/events.out.tfevents.*")):
    a = EventAccumulator(f); a.Reload()
    got.append(([e.step for e in a.Scalars("batch_loss")], [e.step for e in a.Scalars("epoch_loss")]))
got.sort(key=lambda g: g[1])
want = [([10, 20, 30, 40], [0, 1]), ([50, 60], [2])]
ok = got == want
print(("ok   " if ok else "FAIL ") + f"resumed run: (batch steps, epochs) per file {got}, want {want}")
sys.exit(0 if ok else 1)
PYEOF
[ $rc -eq 0 ] && echo "test_tensorboard: passed" || echo "test_tensorboard: FAILED"
exit $rc
