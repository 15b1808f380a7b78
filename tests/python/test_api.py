"""Keras's API over sinter: return types, keys, callbacks, files, datasets, devices."""
import csv
import os
import subprocess

import numpy as np
import pytest

import sinter
from sinter import keras
from sinter.keras import layers


def data(n=256, d=8, k=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, d))
    y = (x[:, :k].argmax(1)).astype(np.int64)  # learnable
    return x, y


def mlp(d=8, k=3, name=None):
    m = keras.Sequential([keras.Input((d,)), layers.Dense(16, activation="relu"),
                          layers.Dense(k)], name=name)
    m.compile(optimizer=keras.optimizers.Adam(0.01),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    return m


def test_fit_history_evaluate_predict_types():
    x, y = data()
    m = mlp()
    h = m.fit(x, y, epochs=3, batch_size=32, validation_split=0.25, verbose=0)
    assert list(h.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert all(len(v) == 3 for v in h.history.values()) and h.epoch == [0, 1, 2]
    assert h.history["loss"][-1] < h.history["loss"][0]
    r = m.evaluate(x, y, verbose=0)
    assert isinstance(r, list) and len(r) == 2 and all(isinstance(v, float) for v in r)
    d = m.evaluate(x, y, verbose=0, return_dict=True)
    assert list(d) == ["accuracy", "loss"] and d["loss"] == r[0]
    p = m.predict(x, verbose=0)
    assert p.dtype == np.float32 and p.shape == (256, 3)
    # Keras's predict returns the model's output (logits here), not probabilities
    assert not np.allclose(p.sum(1), 1)


def test_any_dtype_and_stride_gives_the_same_predictions():
    x, _ = data()
    m = mlp()
    base = m.predict(x.astype(np.float32), verbose=0)
    wide = np.zeros((256, 16))
    wide[:, ::2] = x
    for v in (x, x.astype(np.float16).astype(np.float64), wide[:, ::2], np.asfortranarray(x),
              x.tolist()):
        got = m.predict(v, verbose=0)
        want = m.predict(np.ascontiguousarray(v, np.float32), verbose=0)
        assert np.array_equal(got, want)
    # Another batch size: the same bits where the matmul is oneDNN's brgemm (AVX-512), whose
    # rows do not depend on how many there are; on AVX2 CPUs, and in a build without oneDNN,
    # OpenBLAS's kernels (chosen by the row count) round some elements differently: the same up
    # to that rounding.
    same = np.array_equal if _avx512() and _onednn_loaded() else (
        lambda a, b: np.allclose(a, b, rtol=1e-6, atol=1e-6))
    assert same(m.predict(x, batch_size=7, verbose=0), base)
    assert same(m(x[:5]), base[:5])


def _onednn_loaded():
    """Whether the sinter library in this process runs oneDNN (scripts/test.sh also tests a
    build without it): its shared library is then mapped."""
    try:
        return "libdnnl" in open("/proc/self/maps").read()
    except OSError:
        return False


def _avx512():
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return " avx512f " in flags and " avx512bw " in flags and " avx512vl " in flags


def test_initial_epoch_and_validation_data():
    x, y = data()
    m = mlp()
    h = m.fit(x, y, epochs=4, initial_epoch=2, validation_data=(x[:64], y[:64]), verbose=0)
    assert h.epoch == [2, 3] and "val_loss" in h.history


def test_progress_bar_one_line_per_epoch(capsys):
    x, y = data()
    mlp().fit(x, y, epochs=2, batch_size=64, verbose=1)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Epoch 1/2" and out[2] == "Epoch 2/2", out
    # Keras 3's bar, escape codes included (test_progress.py compares it with Keras's)
    assert out[1].startswith("\x1b[1m4/4\x1b[0m \x1b[32m" + "\u2501" * 20) and "loss:" in out[1]
    mlp().fit(x, y, epochs=1, batch_size=64, verbose=2)
    out = capsys.readouterr().out.splitlines()
    # one epoch: no "Epoch 1/1" line; the logs by name, as Keras 3 prints them
    assert out[0].startswith("4/4 - ") and "/step - accuracy: " in out[0], out
    assert out[0].index(" - accuracy: ") < out[0].index(" - loss: "), out


def test_summary_is_the_c_table(capsys):
    m = mlp(name="mlp_summary")
    m.summary()
    out = capsys.readouterr().out
    assert out.startswith('Model: "mlp_summary"\n') and "│ dense (Dense)" in out
    assert " Total params: 195 (780.00 B)" in out
    lines = []
    m.summary(print_fn=lines.append)
    assert "\n".join(lines) + "\n" == out


def test_callbacks(tmp_path):
    x, y = data()
    seen = []
    lam = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: seen.append((epoch, sorted(logs))),
        on_train_batch_end=lambda batch, logs: seen.append(("b", batch)))
    sched = keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.01 * 0.5 ** epoch)
    csvp = tmp_path / "log.csv"
    ck = tmp_path / "m-{epoch:02d}.weights.h5"
    m = mlp()
    h = m.fit(x, y, epochs=3, batch_size=128, verbose=0, validation_split=0.5,
              callbacks=[lam, sched, keras.callbacks.CSVLogger(str(csvp)),
                         keras.callbacks.ModelCheckpoint(str(ck), save_weights_only=True),
                         keras.callbacks.TerminateOnNaN(),
                         keras.callbacks.TensorBoard(str(tmp_path / "tb"))])
    assert (0, ["accuracy", "learning_rate", "loss", "val_accuracy", "val_loss"]) in seen
    assert ("b", 0) in seen
    assert np.allclose(h.history["learning_rate"], [0.01, 0.005, 0.0025])
    rows = list(csv.reader(open(csvp)))
    assert rows[0][0] == "epoch" and len(rows) == 4
    assert sorted(os.listdir(tmp_path))[:3] == ["log.csv", "m-01.weights.h5", "m-02.weights.h5"]
    assert os.listdir(tmp_path / "tb")


def test_early_stopping_and_python_callback_errors():
    x, y = data()
    m = mlp()
    h = m.fit(x, y, epochs=50, verbose=0, validation_split=0.5,
              callbacks=[keras.callbacks.EarlyStopping(monitor="loss", min_delta=10,
                                                       patience=1)])
    assert len(h.epoch) == 2

    class Boom(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise ZeroDivisionError("from the callback")
    with pytest.raises(ZeroDivisionError, match="from the callback"):
        m.fit(x, y, epochs=3, verbose=0, callbacks=[Boom()])

    class Stop(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.stop_training = True
    assert len(m.fit(x, y, epochs=5, verbose=0, callbacks=[Stop()]).epoch) == 1


def test_reduce_lr_and_schedule():
    x, y = data()
    m = mlp()
    h = m.fit(x, y, epochs=3, verbose=0, callbacks=[
        keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0,
                                          min_delta=100)])
    # Keras: epoch 0 sets the best; epoch 1 does not improve, so epoch 2 runs at half
    assert np.allclose(h.history["learning_rate"], [0.01, 0.01, 0.005])
    m2 = keras.Sequential([keras.Input((8,)), layers.Dense(3)])
    s = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    assert s(2) == pytest.approx(0.025)
    m2.compile(optimizer=keras.optimizers.SGD(s), loss=keras.losses.SparseCategoricalCrossentropy(True))
    m2.fit(x, y, epochs=1, batch_size=256, verbose=0)


def test_backup_and_restore(tmp_path):
    x, y = data()
    keras.utils.set_random_seed(3)
    m = mlp()
    b = keras.callbacks.BackupAndRestore(str(tmp_path / "bk"), delete_checkpoint=False)
    m.fit(x, y, epochs=2, verbose=0, callbacks=[b])
    assert any(f.startswith("ckpt-") for f in os.listdir(tmp_path / "bk"))
    b2 = keras.callbacks.BackupAndRestore(str(tmp_path / "bk2"))
    m.fit(x, y, epochs=1, verbose=0, callbacks=[b2])
    assert not [f for f in os.listdir(tmp_path / "bk2") if f.startswith("ckpt-")]


def test_save_load_round_trip(tmp_path):
    x, y = data()
    m = mlp()
    m.fit(x, y, epochs=1, verbose=0)
    p = m.predict(x, verbose=0)
    m.save(str(tmp_path / "m.keras"))
    m2 = keras.models.load_model(str(tmp_path / "m.keras"))
    assert np.array_equal(m2.predict(x, verbose=0), p)
    assert [l.name for l in m2.layers] == [l.name for l in m.layers]
    assert m2.evaluate(x, y, verbose=0, return_dict=True).keys() == {"loss", "accuracy"}
    m.save_weights(str(tmp_path / "w.weights.h5"))
    m3 = mlp()
    m3.build((None, 8))
    m3.load_weights(str(tmp_path / "w.weights.h5"))
    assert np.array_equal(m3.predict(x, verbose=0), p)
    with pytest.raises(ValueError, match="weights.h5"):
        m.save_weights(str(tmp_path / "w.h5"))


def test_weights_get_set_and_nesting():
    x, _ = data()
    m = mlp()
    w = m.get_weights()
    assert [a.shape for a in w] == [(8, 16), (16,), (16, 3), (3,)]
    m.set_weights([np.ones_like(a) for a in w])
    assert np.allclose(m.predict(x[:1], verbose=0), 16 * (x[:1].sum() + 1) + 1, rtol=1e-5)
    m.layers[1].set_weights([np.zeros((16, 3)), np.full((3,), 2.0)])
    assert np.array_equal(m.predict(x[:2], verbose=0), np.full((2, 3), 2, np.float32))
    m.set_weights(w)
    prob = keras.Sequential([m, layers.Softmax()])
    p = prob.predict(x, verbose=0)
    z = m.predict(x, verbose=0)
    e = np.exp(z - z.max(1, keepdims=True))
    assert np.allclose(p, e / e.sum(1, keepdims=True), atol=1e-6)


def test_functional_chain():
    inp = keras.Input((8,))
    out = layers.Dense(3)(layers.Dense(16, activation="relu")(inp))
    m = keras.Model(inp, out)
    assert m.predict(np.zeros((2, 8)), verbose=0).shape == (2, 3)


def test_layers_build():
    m = keras.Sequential([
        keras.Input((12, 12, 1)), layers.Conv2D(4, 3, activation="relu", padding="same"),
        layers.BatchNormalization(), layers.MaxPooling2D(), layers.AveragePooling2D(1),
        layers.Dropout(0.1), layers.Conv2D(4, (3, 3)), layers.GlobalAveragePooling2D(),
        layers.Reshape((2, 2)), layers.Flatten(), layers.Activation("tanh"), layers.Dense(5)])
    assert m.output_shape == (None, 5)
    r = keras.Sequential([keras.Input((7,)), layers.Embedding(20, 4),
                          layers.LSTM(6, return_sequences=True), layers.GRU(5),
                          layers.Dense(2)])
    r.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(True))
    ids = np.random.default_rng(0).integers(0, 20, (16, 7))
    h = r.fit(ids, ids[:, 0] % 2, epochs=1, batch_size=8, verbose=0)
    assert r.predict(ids, verbose=0).shape == (16, 2) and "loss" in h.history


def test_dataset_pipeline():
    x, y = data(n=100)
    ds = sinter.data.Dataset.from_tensor_slices((x, y))
    b = ds.batch(32)
    assert b.cardinality() == 4 and ds.cardinality() == 100  # ds unchanged
    firsts = [bx.shape[0] for bx, by in b]
    assert firsts == [32, 32, 32, 4]
    assert [len(e[0]) for e in ds.take(3).batch(2)] == [2, 1]
    sh = ds.shuffle(100, seed=1).batch(100)
    a = next(iter(sh))[1]
    assert sorted(a.tolist()) == sorted(y.tolist()) and a.tolist() != y.tolist()
    assert len(list(ds.batch(50).repeat(3).cache().prefetch(sinter.data.AUTOTUNE))) == 6
    m = mlp()
    h = m.fit(ds.shuffle(100, seed=2).batch(10), epochs=2, verbose=0,
              validation_data=ds.batch(50))
    assert list(h.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert m.evaluate(ds.batch(25), verbose=0, return_dict=True)["loss"] > 0
    assert m.predict(sinter.data.Dataset.from_tensor_slices(x).batch(30),
                     verbose=0).shape == (100, 3)


def test_tfrecord_dataset(tmp_path):
    cli = os.environ.get("SINTER_CLI")
    if not cli:
        pytest.skip("SINTER_CLI not given")
    # a TFRecord written by Python's own encoder would need TensorFlow; build one with C
    import ctypes as C
    from sinter import _lib
    lib = _lib.lib

    class Feature(C.Structure):
        _fields_ = [("name", C.c_char_p), ("kind", C.c_int), ("count", C.c_int64),
                    ("floats", C.POINTER(C.c_float)), ("int64s", C.POINTER(C.c_int64)),
                    ("bytes", C.POINTER(C.c_char_p)), ("bytes_len", C.POINTER(C.c_size_t))]
    lib.sn_example_encode.argtypes = [C.POINTER(Feature), C.c_int, C.POINTER(C.c_void_p),
                                      C.POINTER(C.c_size_t)]
    lib.sn_tfrecord_writer_open.argtypes = [C.POINTER(C.c_void_p), C.c_char_p, C.c_bool]
    lib.sn_tfrecord_write.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t]
    lib.sn_tfrecord_writer_close.argtypes = [C.c_void_p]
    path = str(tmp_path / "d.tfrecord")
    w = C.c_void_p()
    assert lib.sn_tfrecord_writer_open(C.byref(w), path.encode(), False) == 0
    for i in range(6):
        img = bytes([i] * 4)
        label = (C.c_int64 * 1)(i % 2)
        bs = (C.c_char_p * 1)(img)
        ln = (C.c_size_t * 1)(4)
        f = (Feature * 2)(Feature(b"image", 1, 1, None, None, bs, ln),
                          Feature(b"label", 3, 1, None, label, None, None))
        buf, n = C.c_void_p(), C.c_size_t()
        assert lib.sn_example_encode(f, 2, C.byref(buf), C.byref(n)) == 0
        assert lib.sn_tfrecord_write(w, buf, n) == 0
        _lib.libc.free(buf)
    assert lib.sn_tfrecord_writer_close(w) == 0
    ds = sinter.data.TFRecordDataset(path, image_shape=(2, 2)).batch(4)
    xs, ys = zip(*list(ds))
    assert xs[0].dtype == np.float32 and xs[0].shape == (4, 2, 2)
    assert ys[0].tolist() == [0, 1, 0, 1] and xs[1][1, 0, 0] == 5.0


def test_devices_and_strategies():
    code = r'''
import sinter as tf
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
print([d.name for d in tf.config.list_logical_devices("CPU")])
s = tf.distribute.MirroredStrategy()
print(s.num_replicas_in_sync, tf.distribute.OneDeviceStrategy("cpu:1").num_replicas_in_sync)
import numpy as np
with s.scope():
    m = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    m.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(True))
h = m.fit(np.zeros((64, 4)), np.zeros(64), batch_size=16, epochs=1, verbose=0)
print("OK", list(h.history))
'''
    import sys
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["['/device:CPU:0', '/device:CPU:1']", "2 1",
                                     "OK ['loss']"], r.stdout


def test_datasets_load_data():
    from conftest import need_fashion
    need_fashion()
    (x, y), (xt, yt) = keras.datasets.fashion_mnist.load_data()
    assert x.shape == (60000, 28, 28) and x.dtype == np.uint8 and y.shape == (60000,)
    assert xt.shape == (10000, 28, 28) and yt.dtype == np.uint8 and y.max() == 9


def test_gil_is_released_while_c_runs():
    import threading
    import time
    m = keras.Sequential([keras.Input((512,)), layers.Dense(512, activation="relu"),
                          layers.Dense(512, activation="relu"), layers.Dense(10)])
    x = np.random.default_rng(0).random((20000, 512), dtype=np.float32)
    m.predict_on_batch(x[:10])
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1
    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    try:
        t0 = time.perf_counter()
        before = count[0]
        m.predict_on_batch(x)  # one C call of ~20,000 x 0.5 MFLOP
        during = count[0] - before
        took = time.perf_counter() - t0
    finally:
        stop.set()
        t.join()
    # holding the GIL, the C call would leave the thread no turn at all
    assert during > 1000, f"the thread counted {during} times in {took:.2f} s of predict"
