#!/usr/bin/env python3
"""Checks that sinter's weight files and Keras's are interchangeable, both ways.

Needs keras (3.x) with a backend and h5py, which the CTest suite deliberately does not:
    pip install keras "jax[cpu]" h5py scipy
Usage:
    python3 scripts/keras_interop.py BUILD_DIR        (BUILD_DIR holds tests/test_weights_h5)

Steps:
 1. Keras builds the CNN that tests/test_weights_h5.c describes (Conv2D 3x3x1x8, BN, MaxPool,
    Flatten, Dense 72->16, Dropout, Dense 16->10), fills every variable with random values
    (BN moving statistics too) and writes it three ways: model.save_weights (Keras 3
    .weights.h5), Keras's legacy writer save_weights_to_hdf5_group (Keras 2 layout), and
    model.save to .h5 (weights under /model_weights).
 2. test_weights_h5, run with SN_KERAS_INTEROP_DIR, loads all three with sn_weights_load_h5,
    checks they agree, and writes sinter.weights.h5 (Keras 3) and sinter_legacy.h5 (Keras 2).
 3. h5py compares the structure of Keras's and sinter's Keras 3 files: every group, dataset,
    shape, dtype and attribute must be the same.
 4. Fresh Keras models load sinter's two files with model.load_weights; every weight must
    equal the original bit for bit.
Exit status 0 when everything matched.
"""
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import h5py  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402


def build_model():
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(8, 3),
            keras.layers.BatchNormalization(),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(16),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(10),
        ],
        name="sequential",
    )


def structure(path):
    """Every object in the file: (path, kind, shape, dtype, {attr: value})."""
    out = []

    def visit(name, obj):
        attrs = {}
        for k, v in obj.attrs.items():
            if isinstance(v, bytes):
                v = v.decode()
            attrs[k] = v if isinstance(v, str) else repr(np.asarray(v).tolist())
        if isinstance(obj, h5py.Dataset):
            out.append((name, "dataset", obj.shape, str(obj.dtype), attrs))
        else:
            out.append((name, "group", None, None, attrs))

    with h5py.File(path, "r") as f:
        visit("/", f)
        f.visititems(visit)
    return sorted(out, key=lambda t: t[0])


def same_weights(a, b):
    wa, wb = a.get_weights(), b.get_weights()
    if len(wa) != len(wb):
        return False
    return all(x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
               for x, y in zip(wa, wb))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    exe = os.path.join(sys.argv[1], "tests", "test_weights_h5")
    ok = True
    with tempfile.TemporaryDirectory() as d:
        m = build_model()
        rng = np.random.default_rng(1)
        # Random values everywhere (including moving_variance > 0), so a swapped or missing
        # variable cannot go unnoticed.
        m.set_weights([rng.standard_normal(w.shape).astype(np.float32) ** 2 + 0.01
                       if "variance" in w.path else
                       rng.standard_normal(w.shape).astype(np.float32) for w in m.weights])
        m.save_weights(os.path.join(d, "keras.weights.h5"))
        from keras.src.legacy.saving import legacy_h5_format
        with h5py.File(os.path.join(d, "keras_legacy.h5"), "w") as f:
            legacy_h5_format.save_weights_to_hdf5_group(f, m)
        m.save(os.path.join(d, "keras_model.h5"))

        env = dict(os.environ, SN_KERAS_INTEROP_DIR=d)
        r = subprocess.run([exe], env=env, capture_output=True, text=True)
        print(r.stdout.strip(), r.stderr.strip())
        if r.returncode != 0:
            print("FAIL: sinter could not load Keras's files")
            return 1

        ks, ss = structure(os.path.join(d, "keras.weights.h5")), structure(
            os.path.join(d, "sinter.weights.h5"))
        if ks == ss:
            print(f"OK   structure: sinter.weights.h5 has the same {len(ss)} objects, shapes, "
                  "dtypes and attributes as Keras's")
        else:
            ok = False
            print("FAIL structure differs:")
            kset = {t[0]: t for t in ks}
            sset = {t[0]: t for t in ss}
            for p in sorted(set(kset) | set(sset)):
                if kset.get(p) != sset.get(p):
                    print(f"   keras : {kset.get(p)}\n   sinter: {sset.get(p)}")

        for name in ("sinter.weights.h5", "sinter_legacy.h5"):
            m2 = build_model()
            m2.load_weights(os.path.join(d, name))
            if same_weights(m, m2):
                print(f"OK   Keras {keras.__version__} ({keras.backend.backend()}) loads {name}: "
                      f"all {len(m2.weights)} variables bit-identical")
            else:
                ok = False
                print(f"FAIL Keras loaded {name} with different values")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
