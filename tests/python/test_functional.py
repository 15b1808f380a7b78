"""Functional models (keras.Input, layers called on tensors, merges, shared layers, several
inputs and outputs, keras.Model(inputs, outputs)) against real Keras: the same summary() text
and layer order, and the same predictions from the same weights (functional_models.py)."""
import os

import numpy as np
import pytest

import sinter
from sinter import keras
from sinter.keras import layers

from conftest import HERE, same_stdout_as_keras

SCRIPT = os.path.join(HERE, "functional_models.py")


def test_same_summary_and_predictions_as_keras(tmp_path):
    same_stdout_as_keras(SCRIPT, tmp_path, "summaries")
    for name in ("graph", "images", "convs", "seq", "attn", "cross_attn", "nested", "key_kw"):
        s = np.load(tmp_path / f"{name}_sinter.npy")
        k = np.load(tmp_path / f"{name}_keras.npy")
        assert s.shape == k.shape, (name, s.shape, k.shape)
        err = float(np.max(np.abs(s - k)))
        assert err < 1e-5, f"model {name}: predictions differ from Keras's by up to {err}"


def graph_model():
    x = keras.Input((5,))
    d = layers.Dense(5, activation="tanh")
    h = d(d(x))
    out = layers.Dense(2)(layers.Concatenate()([x, h]))
    return keras.Model(x, out), d


def test_shared_layer_weights_and_training():
    m, d = graph_model()
    assert [l.name for l in m.layers][1] == d.name
    assert len(d.get_weights()) == 2 and m.count_params() == 30 + 22
    m.compile(optimizer="sgd", loss="mse")
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(64, 5)), rng.normal(size=(64, 2))
    before = m.evaluate(x, y, verbose=0)
    w0 = d.get_weights()[0].copy()
    h = m.fit(x, y, epochs=3, batch_size=16, verbose=0)
    assert h.history["loss"][-1] < before
    assert not np.array_equal(d.get_weights()[0], w0), "the shared layer did not train"
    # the shared kernel, applied twice, by hand
    k, b = d.get_weights()
    k2, b2 = m.layers[-1].get_weights()
    hh = np.tanh(np.tanh(x @ k + b) @ k + b)
    want = np.concatenate([x, hh], 1) @ k2 + b2
    assert np.allclose(m.predict(x, verbose=0), want, atol=1e-5)


def test_multi_io_builds_and_predicts():
    a, b = keras.Input((3,)), keras.Input((2,))
    o1 = layers.Dense(2)(layers.Concatenate()([a, b]))
    o2 = layers.Dense(1)(a)
    m = keras.Model([a, b], [o1, o2])
    assert m.input_shape == [(None, 3), (None, 2)]
    assert m.output_shape == [(None, 2), (None, 1)]
    assert [w.shape for w in m.get_weights()] == [(5, 2), (2,), (3, 1), (1,)]
    p = m.predict([np.zeros((1, 3)), np.zeros((1, 2))], verbose=0)  # test_multi_io.py: more
    assert [q.shape for q in p] == [(1, 2), (1, 1)]


def test_saved_functional_model_loads(tmp_path):
    m, _ = graph_model()
    x = np.random.default_rng(2).normal(size=(4, 5)).astype("float32")
    m.save(tmp_path / "g.keras")
    r = keras.models.load_model(tmp_path / "g.keras")
    assert np.array_equal(r.predict(x, verbose=0), m.predict(x, verbose=0))


def test_functional_errors():
    x = keras.Input((4,))
    with pytest.raises(TypeError, match="keras.Input"):
        layers.Dense(2)(np.zeros((1, 4)))
    other = keras.Input((4,))
    y = layers.Add()([x, other])
    with pytest.raises(ValueError, match="not among the model's inputs"):
        keras.Model(x, y)
    with pytest.raises(ValueError, match=r"add_1.*\(None, 3\)"):
        keras.Model(x, layers.Add()([x, layers.Dense(3)(x)]))


def test_model_as_layer_shares_weights():
    """Sequential([model, Softmax()]) as the tutorial makes it: Keras shares the inner model's
    weights, so training or setting either changes what both predict."""
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(64, 8)).astype("float32"), rng.integers(0, 3, 64)
    for kind in ("sequential", "functional"):
        if kind == "sequential":
            m = keras.Sequential([keras.Input((8,)), layers.Dense(16, activation="relu"),
                                  layers.Dense(3)])
        else:
            inp = keras.Input((8,))
            h = layers.Dense(16, activation="relu")(inp)
            m = keras.Model(inp, layers.Add()([layers.Dense(3)(h), layers.Dense(3)(inp)]))
        prob = keras.Sequential([m, layers.Softmax()])

        def softmax(z):
            e = np.exp(z - z.max(1, keepdims=True))
            return e / e.sum(1, keepdims=True)

        assert np.allclose(prob.predict(x, verbose=0), softmax(m.predict(x, verbose=0)),
                           atol=1e-6), kind
        # training the inner model changes the outer one
        m.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True))
        w0 = m.get_weights()
        m.fit(x, y, epochs=2, verbose=0)
        assert not np.array_equal(m.get_weights()[0], w0[0])
        assert np.allclose(prob.predict(x, verbose=0), softmax(m.predict(x, verbose=0)),
                           atol=1e-6), f"{kind}: the outer model did not follow training"
        # setting the outer model's weights changes the inner one
        w = prob.get_weights()
        prob.set_weights([np.zeros_like(a) for a in w])
        assert np.array_equal(m.predict(x[:2], verbose=0), np.zeros((2, 3), np.float32))
        # a layer set through the inner model shows in the outer one
        m.layers[-1 if kind == "sequential" else 1].set_weights(
            [np.ones_like(a) for a in w[:2]] if kind == "functional" else
            [np.ones((16, 3)), np.ones(3)])
        inner_w = m.get_weights()
        assert all(np.array_equal(a, b) for a, b in zip(prob.get_weights(), inner_w))
        assert any(np.all(a == 1) for a in inner_w), kind
        # training the outer model changes the inner one
        prob.set_weights(w)
        prob.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
        prob.fit(x, y, epochs=1, verbose=0)
        assert np.allclose(prob.predict(x, verbose=0), softmax(m.predict(x, verbose=0)),
                           atol=1e-6), f"{kind}: the inner model did not follow training"


def test_symbolic_shapes():
    x = keras.Input((6,))
    h = layers.Dense(4)(x)
    z = layers.Concatenate()([x, h])
    assert (x.shape, h.shape, z.shape) == ((None, 6), (None, 4), (None, 10))
    img = keras.Input((8, 8, 3), batch_size=2)
    assert layers.Conv2D(5, 3)(img).shape == (2, 6, 6, 5)
    # learning the shapes used no automatic name and bound no layer
    m = keras.Model(x, z)
    assert m.name == "functional" and [l.name for l in m.layers] == \
        ["input_layer", "dense", "concatenate"]
    assert len(m.layers[1].get_weights()) == 2


def test_nested_model_shares_weights():
    i = keras.Input((4,))
    enc = keras.Model(i, layers.Dense(3, activation="tanh")(i), name="enc")
    x = keras.Input((4,))
    m = keras.Model(x, layers.Dense(1)(enc(x)))
    assert [l.name for l in m.layers] == [m.layers[0].name, "enc", m.layers[2].name]
    assert m.layers[1] is enc
    m.compile(optimizer="sgd", loss="mse")
    rng = np.random.default_rng(4)
    xs, ys = rng.normal(size=(64, 4)), rng.normal(size=(64, 1))
    before = [w.copy() for w in enc.get_weights()]
    m.fit(xs, ys, epochs=2, batch_size=16, verbose=0)
    after = enc.get_weights()
    assert not np.array_equal(after[0], before[0]), "training the outer model left enc alone"
    assert all(np.array_equal(a, b) for a, b in zip(after, m.get_weights()[:2]))
    # and back: the inner model's new weights are the outer one's
    enc.set_weights([np.zeros_like(w) for w in after])
    assert np.allclose(m.predict(xs[:4], verbose=0), m.layers[2].get_weights()[1])
