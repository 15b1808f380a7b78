"""fit(sample_weight=, class_weight=) and evaluate(sample_weight=) against real Keras
(sample_weight_cases.py: the same start, SGD steps; weights, History and evaluate within 1e-5),
and what sinter alone can check: the weights split with the batch under a strategy, datasets
that yield (x, y, sample_weight), and the errors."""
import os
import subprocess
import sys

import numpy as np
import pytest

import sinter
from sinter import keras
from sinter.keras import layers

from conftest import HERE, same_as_keras

SCRIPT = os.path.join(HERE, "sample_weight_cases.py")


def test_same_as_keras(tmp_path):
    same_as_keras(SCRIPT, tmp_path)


def _model(seed=0):
    m = keras.Sequential([keras.Input((4,)), layers.Dense(6, activation="relu"), layers.Dense(3)])
    rng = np.random.default_rng(seed)
    m.set_weights([rng.normal(scale=0.5, size=w.shape).astype("float32")
                   for w in m.get_weights()])
    m.compile(optimizer=keras.optimizers.SGD(0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["sparse_categorical_accuracy"])
    return m


def _data(n=24):
    rng = np.random.default_rng(5)
    return (rng.normal(size=(n, 4)).astype("float32"), rng.integers(0, 3, n),
            rng.uniform(0, 2, n).astype("float32"))


def test_weights_of_one_and_zero():
    x, y, _ = _data()
    a, b = _model(), _model()
    ha = a.fit(x, y, batch_size=8, shuffle=False, verbose=0)
    hb = b.fit(x, y, sample_weight=np.ones(len(x)), batch_size=8, shuffle=False, verbose=0)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        assert np.array_equal(wa, wb), "weights of 1 changed training"
    assert ha.history == hb.history
    # a zero weight leaves only the other samples' gradient, still divided by the batch size
    c = _model()
    w0 = np.r_[np.ones(4), np.zeros(4)].astype("float32")
    c.fit(x[:8], y[:8], sample_weight=w0, batch_size=8, shuffle=False, verbose=0)
    d = _model()
    d.compile(optimizer=keras.optimizers.SGD(0.05),  # half the rate: 4 of 8 samples count
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    d.fit(x[:4], y[:4], batch_size=4, shuffle=False, verbose=0)
    for wc, wd in zip(c.get_weights(), d.get_weights()):
        assert np.allclose(wc, wd, atol=1e-6), np.max(np.abs(wc - wd))


def test_dataset_with_weights_and_evaluate():
    x, y, sw = _data()
    a, b = _model(), _model()
    a.fit(x, y, sample_weight=sw, batch_size=8, shuffle=False, verbose=0)
    ds = sinter.data.Dataset.from_tensor_slices((x, y.astype("int32"), sw)).batch(8)
    b.fit(ds, verbose=0)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        assert np.allclose(wa, wb, atol=1e-7)
    ev = a.evaluate(x, y, sample_weight=sw, verbose=0, return_dict=True)
    ev_ds = a.evaluate(ds, verbose=0, return_dict=True)
    assert abs(ev["loss"] - ev_ds["loss"]) < 1e-6
    # metrics stay unweighted (Keras's `metrics`), the loss does not
    plain = a.evaluate(x, y, verbose=0, return_dict=True)
    assert plain["sparse_categorical_accuracy"] == ev["sparse_categorical_accuracy"]
    assert plain["loss"] != ev["loss"]


def test_weights_split_with_the_batch_under_a_strategy():
    code = r'''
import numpy as np
import sinter as tf
from sinter import keras
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
rng = np.random.default_rng(5)
x = rng.normal(size=(24, 4)).astype("float32")
y = rng.integers(0, 3, 24)
sw = rng.uniform(0, 2, 24).astype("float32")
def make():
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6, activation="relu"),
                          keras.layers.Dense(3)])
    r = np.random.default_rng(0)
    m.set_weights([r.normal(scale=0.5, size=w.shape).astype("float32") for w in m.get_weights()])
    m.compile(optimizer=keras.optimizers.SGD(0.1),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m
one = make()
h1 = one.fit(x, y, sample_weight=sw, batch_size=8, epochs=2, shuffle=False, verbose=0)
with tf.distribute.MirroredStrategy().scope():
    two = make()
h2 = two.fit(x, y, sample_weight=sw, batch_size=8, epochs=2, shuffle=False, verbose=0)
err = max(float(np.max(np.abs(a - b))) for a, b in zip(one.get_weights(), two.get_weights()))
lerr = max(abs(a - b) for a, b in zip(h1.history["loss"], h2.history["loss"]))
print("OK", err < 1e-6, lerr < 1e-6, err, lerr)
'''
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("OK True True"), r.stdout


def test_errors():
    x, y, sw = _data()
    m = _model()
    with pytest.raises(ValueError, match="class_weight.*sample_weight"):
        m.fit(x, y, sample_weight=sw, class_weight={0: 2.0}, verbose=0)
    with pytest.raises(ValueError, match=r"sample_weight of shape \(23,\)"):
        m.fit(x, y, sample_weight=sw[:-1], verbose=0)
    with pytest.raises(ValueError, match="sample_weight of shape"):
        m.evaluate(x, y, sample_weight=np.ones((24, 2)), verbose=0)
    with pytest.raises(TypeError, match="class_weight must be a dict"):
        m.fit(x, y, class_weight=[1.0, 2.0], verbose=0)
    ds = sinter.data.Dataset.from_tensor_slices((x, y.astype("int32"))).batch(8)
    with pytest.raises(ValueError, match="third component"):
        m.fit(ds, sample_weight=sw, verbose=0)
