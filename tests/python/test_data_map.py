"""Dataset.map with a Python function over NumPy arrays (applied once, before batching)."""
import numpy as np
import pytest

import sinter as tf


def test_map_then_batch_and_fit():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(96, 4, 4)).astype(np.uint8)
    y = rng.integers(0, 3, 96)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(
        lambda img, label: (img.astype(np.float32) / 255.0, label))
    first = next(iter(ds))
    assert first[0].dtype == np.float32 and np.allclose(first[0], x[0] / 255.0)
    assert first[1] == y[0]
    batches = list(ds.shuffle(96, seed=1).batch(32))
    assert [b[0].shape for b in batches] == [(32, 4, 4)] * 3
    m = tf.keras.Sequential([tf.keras.Input((4, 4)), tf.keras.layers.Flatten(),
                             tf.keras.layers.Dense(3)])
    m.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True))
    h = m.fit(ds.batch(16), epochs=2, verbose=0)
    assert len(h.history["loss"]) == 2


def test_map_single_component_and_structure():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    out = list(tf.data.Dataset.from_tensor_slices(x).take(3).map(lambda a: a * 10))
    assert np.array_equal(np.stack(out), x[:3] * 10)
    pairs = list(tf.data.Dataset.from_tensor_slices(x).map(lambda a: (a, a.sum())))
    assert pairs[1][1] == 5.0


def test_map_refusals():
    ds = tf.data.Dataset.from_tensor_slices(np.zeros((4, 2)))
    with pytest.raises(NotImplementedError, match="put map before batch"):
        ds.batch(2).map(lambda a: a)
    with pytest.raises(NotImplementedError, match="put map before shuffle"):
        ds.shuffle(4).map(lambda a: a)
    with pytest.raises(TypeError, match="callable"):
        ds.map(3)
