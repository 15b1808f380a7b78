"""Frozen layers and a frozen nested model (Keras's layer.trainable = False, issue 23) against
real Keras (frozen_models.py): the same summary() text (its "Trainable params" and
"Non-trainable params" lines) before and after training, the frozen weights unchanged bit for
bit by an epoch of SGD, the others moved as Keras moves them, and the frozen base's
BatchNormalization in inference mode (its moving statistics stay)."""
import os

import numpy as np

from conftest import HERE, close, same_stdout_as_keras

SCRIPT = os.path.join(HERE, "frozen_models.py")


def test_frozen_base_as_keras(tmp_path):
    same_stdout_as_keras(SCRIPT, tmp_path, "outputs")
    s = np.load(tmp_path / "frozen_sinter.npz")
    k = np.load(tmp_path / "frozen_keras.npz")
    n = len(s.files) // 2
    before = [s[f"arr_{i}"] for i in range(n)]
    after_s = [s[f"arr_{n + i}"] for i in range(n)]
    after_k = [k[f"arr_{n + i}"] for i in range(n)]
    # weights 0-1: the trainable 1x1 Conv2D; 2-7: the frozen base (Conv2D, BN with its moving
    # statistics); 8-9: the Dense frozen after building; 10-11: the trainable last Dense
    for i in range(2, 10):
        assert np.array_equal(before[i], after_s[i]), f"frozen weight {i} moved in sinter"
        assert np.array_equal(before[i], after_k[i]), f"frozen weight {i} moved in Keras"
    for i in (0, 1, 10, 11):
        dk, ds = after_k[i] - before[i], after_s[i] - before[i]
        scale = float(np.max(np.abs(dk)))
        assert scale > 0, f"weight {i} did not train in Keras"
        # beyond 2 float32 ulps of the weight (the interop test's rule): the first
        # Conv2D's change is ~4e-4 of weights ~1, where one ulp is 3e-4 of the change
        excess = np.maximum(np.abs(ds - dk) - 2 * np.spacing(np.abs(after_k[i])), 0)
        err = float(np.max(excess)) / scale
        assert err < 1e-5, f"weight {i}: sinter's change differs from Keras's by {err:.3g} relative"
    # the fine-tuning phase (base.trainable = True, still called with training=False): every
    # weight, the base's moving statistics included, as Keras's after its epoch (Keras 3's fit
    # overrides the keyword); the predictions of a model whose BatchNormalization and Dropout
    # are called with training= keywords as Keras's (predict overrides them too)
    s = np.load(tmp_path / "finetune_sinter.npz")
    k = np.load(tmp_path / "finetune_keras.npz")
    assert sorted(s.files) == sorted(k.files)
    for f in k.files:
        close(f, k[f], s[f])
    for i in (2, 6, 7):  # the base's kernel and moving statistics moved, on both sides
        assert not np.array_equal(after_s[i], s[f"arr_{i}"]), f"base weight {i} did not move"
        assert not np.array_equal(after_k[i], k[f"arr_{i}"]), f"base weight {i} did not move (Keras)"
