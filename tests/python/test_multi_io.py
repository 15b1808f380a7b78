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
