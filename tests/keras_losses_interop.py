#!/usr/bin/env python3
"""Keras's losses, metrics and models of several inputs and outputs against real Keras 3 (run
by tests/test_keras_losses_interop.sh).

Usage: python keras_losses_interop.py BUILD_DIR WORK_DIR

For each model of CASES (Functional models compiled with Keras's losses and metrics: binary
cross-entropy from probabilities and from logits, categorical cross-entropy both ways, mean
squared and absolute error, Huber; binary_accuracy with a threshold, categorical_accuracy,
"accuracy"; loss_weights as a list and as a dict; two and three outputs, two inputs), Keras
saves NAME.keras with its compile_config, and BUILD_DIR/tests/test_losses_multi (with
SN_KERAS_LOSSES_DIR) loads it, evaluates the batch, takes one SGD step and writes what it got.
Checked:
 (a) evaluate: the same names as Keras's evaluate(return_dict=True) (the total loss, each
     output's "<layer>_loss", "<layer>_<metric>") and values within 1e-5 relative;
 (b) History keys of one fit epoch with validation: the same set as Keras's;
 (c) one SGD step: every weight's change as Keras's train_on_batch (in float64) within
     1e-5 relative beyond 2 float32 ulps (sinter's weights file, in Keras's nested layout for the nested
     models, loaded by Keras);
 (p) predictions within 1e-5; (s) `sinter summary` prints Keras's table byte for byte;
 (k) sinter's .keras of the model (written as loaded), reopened by Keras, predicts within
     1e-5 of the original.
The nested models (nested_two, nested_shared) use a Functional encoder of two outputs as a
layer, once and twice (shared weights), as the U-Net's MobileNetV2 encoder is.
Exit 0 when everything matched, 1 otherwise.
"""
import contextlib
import io
import os
import subprocess
import sys
import zipfile

import keras_reference  # noqa: F401  (sets Keras's environment: before keras)
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers  # noqa: E402

ROWS = 16
LR = 0.1
TOL = 1e-5


def body(inputs, units=6):
    h = layers.Concatenate()(inputs) if len(inputs) > 1 else inputs[0]
    return layers.Dense(units, activation="tanh", name="h")(h)


def bce_probs():
    a = keras.Input((5,), name="a")
    o = layers.Dense(3, activation="sigmoid", name="p")(body([a]))
    m = keras.Model(a, o, name="bce_probs")
    m.compile(optimizer=keras.optimizers.SGD(LR), loss="binary_crossentropy",
              metrics=[keras.metrics.BinaryAccuracy(threshold=0.3)])
    return m, ["binary"]


def cce_logits():
    a = keras.Input((5,), name="a")
    o = layers.Dense(4, name="z")(body([a]))
    m = keras.Model(a, o, name="cce_logits")
    m.compile(optimizer=keras.optimizers.SGD(LR),
              loss=keras.losses.CategoricalCrossentropy(from_logits=True),
              metrics=["categorical_accuracy"])
    return m, ["onehot"]


def cce_probs():
    a = keras.Input((5,), name="a")
    o = layers.Dense(4, activation="softmax", name="p")(body([a]))
    m = keras.Model(a, o, name="cce_probs")
    m.compile(optimizer=keras.optimizers.SGD(LR), loss="categorical_crossentropy",
              metrics=["accuracy"])
    return m, ["onehot"]


def regress3():
    a, b = keras.Input((5,), name="a"), keras.Input((3,), name="b")
    h = body([a, b])
    o = [layers.Dense(2, name="r1")(h), layers.Dense(1, name="r2")(h),
         layers.Dense(3, name="r3")(h)]
    m = keras.Model([a, b], o, name="regress3")
    m.compile(optimizer=keras.optimizers.SGD(LR), loss=["mse", "mae", keras.losses.Huber()],
              loss_weights=[0.5, 1.0, 2.0])
    return m, ["real", "real", "real"]


def mixed():
    a, b = keras.Input((5,), name="a"), keras.Input((3,), name="b")
    h = body([a, b])
    cls = layers.Dense(1, name="cls")(h)
    cat = layers.Dense(3, activation="softmax", name="cat")(h)
    m = keras.Model([a, b], [cls, cat], name="mixed")
    m.compile(optimizer=keras.optimizers.SGD(LR),
              loss={"cls": keras.losses.BinaryCrossentropy(from_logits=True),
                    "cat": "categorical_crossentropy"},
              loss_weights={"cls": 0.7, "cat": 1.3},
              metrics={"cls": ["binary_accuracy"], "cat": ["categorical_accuracy"]})
    return m, ["binary", "onehot"]


def encoder():
    """A model of two outputs, to be nested (as the U-Net's MobileNetV2 encoder is)."""
    i = keras.Input((6,), name="ei")
    h = layers.Dense(5, activation="relu", name="e1")(i)
    g = layers.Dense(4, activation="tanh", name="e2")(h)
    return keras.Model(i, [h, g], name="enc")


def nested_two():
    x = keras.Input((6,), name="x")
    a, b = encoder()(x)
    c = layers.Concatenate()([a, b])
    o = layers.Dense(3, name="out")(c)
    m = keras.Model(x, o, name="nested_two")
    m.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    return m, ["real"]


def nested_shared():
    """The nested model called twice (shared weights), its outputs used by two heads."""
    x, y = keras.Input((6,), name="x"), keras.Input((6,), name="y")
    enc = encoder()
    a1, b1 = enc(x)
    a2, b2 = enc(y)
    s = layers.Add()([b1, b2])
    o1 = layers.Dense(2, name="o1")(layers.Concatenate()([a1, a2]))
    o2 = layers.Dense(1, name="o2")(s)
    m = keras.Model([x, y], [o1, o2], name="nested_shared")
    m.compile(optimizer=keras.optimizers.SGD(LR), loss=["mse", "mae"])
    return m, ["real", "real"]


CASES = {"bce_probs": bce_probs, "cce_logits": cce_logits, "cce_probs": cce_probs,
         "regress3": regress3, "mixed": mixed, "nested_two": nested_two,
         "nested_shared": nested_shared}


def labels(kind, shape, rng):
    if kind == "binary":
        return rng.integers(0, 2, shape).astype(np.float32)
    if kind == "onehot":
        return np.eye(shape[-1], dtype=np.float32)[rng.integers(0, shape[-1], shape[0])]
    return rng.standard_normal(shape).astype(np.float32)


def main():
    build, work = sys.argv[1], sys.argv[2]
    work = os.path.join(work, "losses")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(5)
    keras.utils.set_random_seed(5)  # the initial weights too: the same models every run
    ref = {}
    tables = {}
    for name, make in CASES.items():
        m, kinds = make()
        xs = [rng.standard_normal((ROWS,) + tuple(t.shape[1:])).astype(np.float32)
              for t in m.inputs]
        ys = [labels(k, (ROWS,) + tuple(t.shape[1:]), rng) for k, t in zip(kinds, m.outputs)]
        for k, x in enumerate(xs):
            x.tofile(os.path.join(work, f"{name}.in{k}.f32"))
        for j, y in enumerate(ys):
            y.tofile(os.path.join(work, f"{name}.y{j}.f32"))
        m.save(os.path.join(work, f"{name}.keras"))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            m.summary()
        tables[name] = buf.getvalue()
        pred = m.predict(xs if len(xs) > 1 else xs[0], verbose=0)
        ref[name] = (m, xs, ys, [np.asarray(p) for p in (pred if isinstance(pred, list) else [pred])])
    with open(os.path.join(work, "cases.txt"), "w") as f:
        f.write("".join(f"{n} {ROWS} {LR}\n" for n in CASES))
    exe = os.path.join(build, "tests", "test_losses_multi")
    r = subprocess.run([exe], env=dict(os.environ, SN_KERAS_LOSSES_DIR=work),
                       capture_output=True, text=True)
    print(r.stdout.strip())
    if r.returncode != 0:
        print(r.stderr.strip())
        print("FAIL sinter could not load, evaluate or train a model")
    ok = r.returncode == 0
    for name, (m, xs, ys, pred) in ref.items():
        x = xs if len(xs) > 1 else xs[0]
        y = ys if len(ys) > 1 else ys[0]
        r = subprocess.run([os.path.join(build, "sinter"), "summary", "--model",
                            os.path.join(work, f"{name}.keras")], capture_output=True, text=True,
                           env=dict(os.environ, COLUMNS="80"))
        good = r.returncode == 0 and r.stdout == tables[name]
        ok &= good
        print(f"{'OK  ' if good else 'FAIL'} (s) sinter summary --model {name}.keras "
              f"{'equals' if good else 'differs from'} Keras's table")
        if not good:
            print("Keras:\n" + tables[name] + "sinter:\n" + r.stdout + r.stderr)
        d = 0.0
        for j, p in enumerate(pred):
            f = os.path.join(work, f"{name}.out{j}.f32")
            got = np.fromfile(f, np.float32).reshape(p.shape) if os.path.exists(f) else None
            d = max(d, float(np.max(np.abs(got - p))) if got is not None else float("inf"))
        good = d <= TOL
        ok &= good
        print(f"{'OK  ' if good else 'FAIL'} (p) {name}: sinter predicts {len(pred)} outputs "
              f"within {d:.3g} of Keras (bound {TOL})")
        # (k) Keras reopens sinter's .keras (written as loaded) and predicts the same
        sp = os.path.join(work, f"{name}.sinter.keras")
        d2 = float("inf")
        if os.path.exists(sp):
            p2 = keras.models.load_model(sp).predict(x, verbose=0)
            p2 = [np.asarray(p) for p in (p2 if isinstance(p2, list) else [p2])]
            d2 = max(float(np.max(np.abs(a - b))) for a, b in zip(p2, pred))
        good = d2 <= TOL
        ok &= good
        print(f"{'OK  ' if good else 'FAIL'} (k) Keras {keras.__version__} reopens sinter's "
              f"{name}.sinter.keras and predicts within {d2:.3g} of the original (bound {TOL})")
        w0 = [np.asarray(w) for w in m.get_weights()]
        want = m.evaluate(x, y, batch_size=ROWS, verbose=0, return_dict=True)
        got = {}
        p = os.path.join(work, f"{name}.eval.txt")
        if os.path.exists(p):
            for line in open(p):
                k, v = line.split()
                got[k] = float(v)
        worst = max((abs(got[k] - float(v)) / max(1.0, abs(float(v))) for k, v in want.items()
                     if k in got), default=float("inf"))
        good = set(got) == set(want) and worst <= TOL
        ok &= good
        print(f"{'OK  ' if good else 'FAIL'} (a) {name}: evaluate {sorted(want)} within "
              f"{worst:.3g} relative of Keras's (bound {TOL})")
        if not good:
            print(f"     Keras {want}\n     sinter {got}")
        # (b) History keys of one epoch with validation, from a fresh copy of the file
        mk = keras.models.load_model(os.path.join(work, f"{name}.keras"))
        hk = set(mk.fit(x, y, batch_size=ROWS, epochs=1, verbose=0,
                        validation_data=(x, y)).history)
        p = os.path.join(work, f"{name}.keys.txt")
        sk = set(open(p).read().split()) if os.path.exists(p) else set()
        good = hk == sk
        ok &= good
        print(f"{'OK  ' if good else 'FAIL'} (b) {name}: History keys {sorted(sk)}"
              f"{'' if good else ' but Keras has ' + str(sorted(hk))}")
        # (c) one SGD step from the same weights and batch, against Keras's step in float64
        # (the same config with every dtype float64): float32 steps differ from it by the
        # rounding of sums that cancel (a bias gradient of a few rows), which sinter and
        # Keras round differently
        with zipfile.ZipFile(os.path.join(work, f"{name}.keras")) as z:
            cfg = z.read("config.json").decode()
        m64 = keras.models.model_from_json(cfg.replace('"float32"', '"float64"'))
        m64.set_weights([w.astype(np.float64) for w in w0])
        m64.compile_from_config(m.get_compile_config())
        x64 = [a.astype(np.float64) for a in xs]
        y64 = [a.astype(np.float64) for a in ys]
        m64.train_on_batch(x64 if len(x64) > 1 else x64[0], y64 if len(y64) > 1 else y64[0])
        wk = [np.asarray(w, np.float64) for w in m64.get_weights()]
        step = os.path.join(work, f"{name}.step.weights.h5")
        worst, where = float("inf"), "no weights from sinter"
        if os.path.exists(step):
            ms = keras.models.load_model(os.path.join(work, f"{name}.keras"))
            ms.load_weights(step)
            worst, where = 0.0, "all equal"
            for v, a, b, c in zip(m.weights, w0, wk, [np.asarray(w) for w in ms.get_weights()]):
                dk, ds = b - a, c - a
                scale = float(np.max(np.abs(dk)))
                excess = np.maximum(np.abs(ds - dk) - 2 * np.spacing(np.abs(c)), 0)
                e = float(np.max(excess)) / scale if scale > 0 else float(np.max(excess))
                if e > worst:
                    worst, where = e, v.path
        good = worst <= TOL
        ok &= good
        print(f"{'OK  ' if good else 'FAIL'} (c) {name}: one SGD step (lr {LR}) changes every "
              f"weight as Keras's within {worst:.3g} relative (worst: {where}; bound {TOL})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
