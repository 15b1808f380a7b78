"""EarlyStopping(restore_best_weights=, baseline=, mode=, start_from_epoch=) as Keras 3's,
on_train_batch_begin/on_batch_begin (called by the C fit loop before each execution),
on_predict_* hooks, and on_test_* hooks around validation and evaluate."""
import numpy as np
import pytest

from sinter import keras
from sinter.keras import layers


def data(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0)


def mlp(lr=0.05):
    m = keras.Sequential([keras.Input((8,)), layers.Dense(16, activation="relu"),
                          layers.Dense(3)])
    m.compile(optimizer=keras.optimizers.SGD(lr),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


class Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.weights, self.events = [], []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append(self.model.get_weights())

    def on_train_batch_begin(self, batch, logs=None):
        self.events.append(("begin", batch))

    def on_train_batch_end(self, batch, logs=None):
        self.events.append(("end", batch))


def test_restore_best_weights():
    x, y = data()
    # validation labels the training pushes away from: val_loss rises after the first epochs
    vy = (y + 1) % 3
    m, rec = mlp(), Recorder()
    es = keras.callbacks.EarlyStopping(monitor="val_loss", patience=2,
                                       restore_best_weights=True)
    h = m.fit(x, y, epochs=12, batch_size=32, validation_data=(x, vy), verbose=0,
              callbacks=[rec, es])
    vl = h.history["val_loss"]
    best = int(np.argmin(vl))
    assert len(vl) < 12, f"did not stop early: {vl}"
    assert best == es.best_epoch and len(vl) == best + 3, (vl, es.best_epoch)
    for a, b in zip(m.get_weights(), rec.weights[best]):
        assert np.array_equal(a, b), "the weights are not the best epoch's"
    # without restore_best_weights the last epoch's weights stay
    m2, rec2 = mlp(), Recorder()
    m2.fit(x, y, epochs=12, batch_size=32, validation_data=(x, vy), verbose=0,
           callbacks=[rec2, keras.callbacks.EarlyStopping(patience=2)])
    for a, b in zip(m2.get_weights(), rec2.weights[-1]):
        assert np.array_equal(a, b)


def test_early_stopping_mode_baseline_start():
    """Keras 3's rules: wait counts every epoch and resets only on an improvement that also
    beats the baseline; the stop test runs only on epochs without improvement."""
    x, y = data()

    def epochs(lr, **kw):
        m = mlp(lr)
        # unshuffled: with the weights still, each epoch's mean loss is the same sum
        h = m.fit(x, y, epochs=10, verbose=0, shuffle=False,
                  callbacks=[keras.callbacks.EarlyStopping(monitor="loss", **kw)])
        return len(h.history["loss"])

    # the loss falls: under mode "max" no epoch after the first improves
    assert epochs(0.05, mode="max", patience=1) == 2
    # lr 1e-30: the loss stays (the updates vanish in rounding); a baseline never beaten keeps wait from resetting
    assert epochs(1e-30, patience=2) == 3
    assert epochs(1e-30, patience=2, baseline=0.0) == 2
    assert epochs(1e-30, patience=0, start_from_epoch=3) == 5


def test_train_batch_begin_order():
    x, y = data(100)
    for spe in (1, 2):
        m, rec = mlp(), Recorder()
        m.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  steps_per_execution=spe)
        m.fit(x, y, epochs=2, batch_size=25, verbose=0, callbacks=[rec])
        # 4 batches an epoch; with steps_per_execution 2 the hooks run once per execution:
        # begin at its first step's index, end with the steps done (Keras's last index)
        if spe == 1:
            want = [(e, i) for _ in range(2) for i in range(4) for e in ("begin", "end")]
        else:
            want = [("begin", 0), ("end", 1), ("begin", 2), ("end", 3)] * 2
        assert rec.events == want, (spe, rec.events)
    seen = []
    lam = keras.callbacks.LambdaCallback(on_batch_begin=lambda b, logs: seen.append(b))
    mlp().fit(x, y, epochs=1, batch_size=50, verbose=0, callbacks=[lam])
    assert seen == [0, 1]


def test_predict_hooks():
    x, _ = data(70)
    m = mlp()
    ev = []

    class P(keras.callbacks.Callback):
        def on_predict_begin(self, logs=None):
            ev.append("begin")

        def on_predict_batch_begin(self, batch, logs=None):
            ev.append(("b", batch))

        def on_predict_batch_end(self, batch, logs=None):
            ev.append(("e", batch, logs["outputs"].shape))

        def on_predict_end(self, logs=None):
            ev.append("end")

    out = m.predict(x, batch_size=32, verbose=0, callbacks=[P()])
    assert out.shape == (70, 3)
    assert ev == ["begin", ("b", 0), ("e", 0, (32, 3)), ("b", 1), ("e", 1, (32, 3)),
                  ("b", 2), ("e", 2, (6, 3)), "end"], ev


def test_test_hooks_as_keras(tmp_path):
    """on_test_begin/end and on_test_batch_begin/end around fit's validation and evaluate: the
    same calls, batch indices, log names and values (within 1e-5) as real Keras."""
    import os
    from conftest import HERE, run_both
    k, s = run_both(os.path.join(HERE, "hook_cases.py"), tmp_path)

    def shape(ev):  # the call without its log values
        return [e if not isinstance(e, dict) else sorted(e) for e in ev]

    assert [shape(e) for e in s] == [shape(e) for e in k], f"sinter {s}\nKeras {k}"
    for ke, se in zip(k, s):
        for kv, sv in zip(ke, se):
            if isinstance(kv, dict):
                for name in kv:
                    assert abs(kv[name] - sv[name]) <= 1e-5, (ke, se)


def test_test_hook_exception_propagates():
    x, y = data(64)

    class Boom(keras.callbacks.Callback):
        def on_test_batch_end(self, batch, logs=None):
            if batch == 1:
                raise RuntimeError("boom in on_test_batch_end")

    m = mlp()
    with pytest.raises(RuntimeError, match="boom"):
        m.fit(x, y, verbose=0, validation_data=(x, y), callbacks=[Boom()])
    with pytest.raises(RuntimeError, match="boom"):
        m.evaluate(x, y, batch_size=16, verbose=0, callbacks=[Boom()])
    assert np.isfinite(m.evaluate(x, y, verbose=0))  # the model is still usable

