"""Python's fit and `sinter train` with the same seed and settings give bit-identical weights.

`sinter train --model mlp --seed S --batch-size B` builds the preset (the tutorial's model)
with weights drawn from S, shuffles the training split with S (a new order each epoch),
batches it with drop_remainder, and trains with Adam and sparse categorical cross-entropy
from logits. The Python side does the same through Keras's API: set_random_seed(S) seeds the
weights and fit's shuffle; B divides 60,000 so drop_remainder makes no difference; x / 255.0
in NumPy rounds to the float32 values the C pipeline's u8 / 255.0f gives (double rounding of
a division is exact-rounded for float32)."""
import os
import subprocess

import numpy as np
import pytest

from conftest import need_fashion

import sinter
from sinter import keras

SEED, BATCH, STEPS = 7, 100, 120


def mlp():
    keras.backend.clear_session()  # layer names as the preset's: flatten, dense, dense_1
    return keras.Sequential([keras.layers.Flatten(input_shape=(28, 28)),
                             keras.layers.Dense(128, activation="relu"),
                             keras.layers.Dense(10)])


@pytest.mark.parametrize("spe", [1, 50])
def test_fit_equals_sinter_train(tmp_path, spe):
    need_fashion()
    cli = os.environ.get("SINTER_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("SINTER_CLI (the sinter command) not given")
    w_cli = tmp_path / "cli.weights.h5"
    r = subprocess.run([cli, "train", "--model", "mlp", "--epochs", "2", "--batch-size",
                        str(BATCH), "--steps-per-epoch", str(STEPS), "--validation-steps", "1",
                        "--seed", str(SEED), "--steps-per-execution", "50", "--quiet",
                        "--save", str(w_cli)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr

    (x, y), _ = keras.datasets.fashion_mnist.load_data()
    keras.utils.set_random_seed(SEED)
    m = mlp()
    m.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"], steps_per_execution=spe)
    m.fit(x / 255.0, y, batch_size=BATCH, epochs=2, steps_per_epoch=STEPS, verbose=0)

    ref = mlp()
    ref.build((None, 28, 28))
    ref.load_weights(str(w_cli))
    got, want = m.get_weights(), ref.get_weights()
    assert len(got) == len(want) == 4
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape
        diff = np.flatnonzero(a.view(np.uint32) != b.view(np.uint32))
        assert diff.size == 0, (f"variable {i} {a.shape}: {diff.size} values differ from "
                                f"`sinter train`'s, first at {diff[0]}: "
                                f"{a.flat[diff[0]]!r} vs {b.flat[diff[0]]!r}")
