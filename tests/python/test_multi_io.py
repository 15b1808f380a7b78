"""fit, evaluate and predict on models of several inputs and outputs against real Keras
(multi_io_cases.py: x and y as dicts by layer name and as lists, loss/loss_weights/metrics as
dicts and lists, sample weights; the same start and SGD steps give the same weights, History
keys and values, evaluate results in Keras's names and order, and predictions within 1e-5),
and the errors sinter gives for malformed x, y and compile arguments."""
import os

import numpy as np
import pytest

from sinter import keras
from sinter.keras import layers

from conftest import HERE, same_as_keras

SCRIPT = os.path.join(HERE, "multi_io_cases.py")


def test_same_as_keras(tmp_path):
    same_as_keras(SCRIPT, tmp_path)


def _model():
    a, b = keras.Input((3,), name="a"), keras.Input((2,), name="b")
    o1 = layers.Dense(2, name="o1")(layers.Concatenate()([a, b]))
    o2 = layers.Dense(1, name="o2")(a)
    return keras.Model([a, b], [o1, o2])


def test_predict_and_errors():
    m = _model()
    x = [np.ones((5, 3)), np.ones((5, 2))]
    p = m.predict(x, batch_size=2, verbose=0)
    assert isinstance(p, list) and [q.shape for q in p] == [(5, 2), (5, 1)]
    assert all(q.dtype == np.float32 for q in p)
    pd = m.predict({"a": x[0], "b": x[1]}, verbose=0)
    assert all(np.array_equal(u, v) for u, v in zip(p, pd))
    ob = m.predict_on_batch(x)
    assert all(np.allclose(u, v) for u, v in zip(p, ob))
    with pytest.raises(ValueError, match=r"has 2 inputs \['a', 'b'\]"):
        m.predict(x[0], verbose=0)
    with pytest.raises(ValueError, match=r"keys \['c'\] are not among"):
        m.predict({"a": x[0], "b": x[1], "c": x[1]}, verbose=0)
    with pytest.raises(ValueError, match="loss: 3 entries for 2 outputs"):
        m.compile(loss=["mse", "mse", "mse"])
    with pytest.raises(ValueError, match="metrics per output"):
        m.compile(loss="mse", metrics=["mae"])
    m.compile(optimizer="sgd", loss={"o1": "mse", "o2": "mse"})
    assert m.metrics_names == ["loss", "o1_loss", "o2_loss"]
    with pytest.raises(ValueError, match="give y as a list of that many arrays"):
        m.fit(x, np.zeros((5, 2)), verbose=0)
    with pytest.raises(ValueError, match="every output needs labels"):
        m.fit(x, {"o1": np.zeros((5, 2))}, verbose=0)
    with pytest.raises(ValueError, match="class_weight` is only supported for Models with a "
                                         "single output"):
        m.fit(x, [np.zeros((5, 2)), np.zeros((5, 1))], class_weight={0: 1.0}, verbose=0)
    h = m.fit(x, [np.zeros((5, 2)), np.zeros((5, 1))], epochs=2, verbose=0)
    assert sorted(h.history) == ["loss", "o1_loss", "o2_loss"]


def test_two_inputs_two_outputs_under_mirrored_strategy():
    """A model of two inputs and two outputs trains under MirroredStrategy over two CPU
    replicas (each takes its rows of both inputs and both labels) to the History and weights
    of the same model on one device from the same start. In its own process: the two logical
    CPUs are set before anything runs."""
    import subprocess
    import sys
    code = r'''
import numpy as np
import sinter as tf
from sinter import keras
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
def make():
    a, b = keras.Input((4,), name="a"), keras.Input((3,), name="b")
    h = keras.layers.Dense(5, activation="relu")(keras.layers.Concatenate()([a, b]))
    return keras.Model([a, b], [keras.layers.Dense(2, name="reg")(h),
                                keras.layers.Dense(3, name="cls")(h)])
rng = np.random.default_rng(0)
a, b = rng.standard_normal((32, 4)).astype("f4"), rng.standard_normal((32, 3)).astype("f4")
yr, yc = rng.standard_normal((32, 2)).astype("f4"), np.arange(32) % 3
one = make()
w0 = one.get_weights()
s = tf.distribute.MirroredStrategy()
with s.scope():
    mir = make()
mir.set_weights(w0)
hist = []
for m in (one, mir):
    m.compile(optimizer="sgd", loss=["mse", keras.losses.SparseCategoricalCrossentropy(
        from_logits=True)], loss_weights=[0.5, 2.0], metrics=[[], ["accuracy"]])
    hist.append(m.fit([a, b], [yr, yc], batch_size=8, epochs=2, shuffle=False,
                      verbose=0).history)
assert sorted(hist[0]) == ["cls_accuracy", "cls_loss", "loss", "reg_loss"], hist[0]
herr = max(abs(u - v) for k in hist[0] for u, v in zip(hist[0][k], hist[1][k]))
werr = max(float(np.max(np.abs(u - v))) for u, v in zip(one.get_weights(), mir.get_weights()))
moved = min(float(np.max(np.abs(u - v))) for u, v in zip(one.get_weights(), w0))
print("OK", herr < 1e-6, werr < 1e-6, moved > 1e-4, herr, werr, moved)
'''
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("OK True True True"), r.stdout
