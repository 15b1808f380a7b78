"""Tensors, sinter.function, GradientTape, sinter.range, metric objects, strategy.run and
Dataset.map (issue 25): each checked against the numbers NumPy gives, and against the text
TensorFlow prints."""
import textwrap
from pathlib import Path

import numpy as np
import pytest

import sinter as tf
from conftest import need_fashion, run_py


def test_eager_matmul_prints_as_tensorflow():
    a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    with tf.device("/CPU:0"):
        c = tf.matmul(a, b)
    assert c.device == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert str(c) == "tf.Tensor(\n[[22. 28.]\n [49. 64.]], shape=(2, 2), dtype=float32)"
    assert repr(c).startswith("<tf.Tensor: shape=(2, 2), dtype=float32, numpy=\narray(")
    assert c.shape == (2, 2) and c.dtype is tf.float32
    np.testing.assert_array_equal(c.numpy(), [[22, 28], [49, 64]])
    s = tf.constant(3.5)
    assert s.shape == () and str(s) == "tf.Tensor(3.5, shape=(), dtype=float32)"
    assert str(tf.constant([1, 2])) == "tf.Tensor([1 2], shape=(2,), dtype=int32)"


def test_eager_operators_and_cast():
    a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose((a * 2 + 1 - a / 4.0).numpy(),
                               [[2.75, 4.5], [6.25, 8.0]], rtol=1e-6)
    np.testing.assert_allclose((1.0 - a).numpy(), [[0, -1], [-2, -3]])
    np.testing.assert_allclose((a @ a).numpy(), [[7, 10], [15, 22]])
    i = tf.cast(tf.constant([1.7, -2.2]), tf.int32)
    assert i.dtype is tf.int32
    assert tf.convert_to_tensor(np.int64(300)).dtype is tf.int64
    assert int(tf.convert_to_tensor(300)) == 300
    u = tf.cast(tf.constant(np.array([0, 255], np.uint8)), tf.float32) / 255.0
    np.testing.assert_allclose(u.numpy(), [0, 1])


def test_device_names():
    with pytest.raises(ValueError, match="TPU"):
        with tf.device("/TPU:0"):
            pass


def test_function_traces_per_signature_and_side_effects_once():
    traces = []

    @tf.function
    def f(x, k):
        traces.append(1)  # a Python side effect: at trace time only
        return tf.matmul(x, x) * k

    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(f(x, 2.0).numpy(), [[14, 20], [30, 44]])
    np.testing.assert_allclose(f(x + 1.0, 2.0).numpy(), [[32, 42], [56, 74]])
    assert len(traces) == 1                 # same shape and dtype: no retrace
    f(x, 3.0)                               # a new Python value retraces
    f(tf.constant([[1.0, 2.0, 3.0]] * 3), 2.0)  # a new shape retraces
    assert len(traces) == 3 and f.experimental_get_tracing_count() == 3


def test_gradient_tape_and_sgd_step_match_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    w0 = rng.standard_normal((3, 2)).astype(np.float32)
    w = tf.Variable(w0, name="w")
    opt = tf.keras.optimizers.SGD(learning_rate=0.1)

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            y = tf.matmul(x, w)
            loss = tf.reduce_sum(y * y)
        g = tape.gradient(loss, [w])
        opt.apply_gradients(zip(g, [w]))
        return loss, g[0]

    loss, g = step(tf.constant(x))
    want_g = 2 * x.T @ (x @ w0)
    np.testing.assert_allclose(loss.numpy(), np.sum((x @ w0) ** 2), rtol=1e-5)
    np.testing.assert_allclose(g.numpy(), want_g, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(w.numpy(), w0 - 0.1 * want_g, rtol=1e-5, atol=1e-5)
    assert opt.iterations.numpy() == 1


def test_range_runs_n_steps_in_one_execution():
    v = tf.Variable(0.0)
    opt = tf.keras.optimizers.SGD(learning_rate=0.5)
    w = tf.Variable(np.float32(4.0))

    @tf.function
    def many(steps):
        for _ in tf.range(steps):
            v.assign_add(1.0)
            with tf.GradientTape() as tape:
                loss = w * w
            g = tape.gradient(loss, [w])
            opt.apply_gradients(zip(g, [w]))

    many(tf.convert_to_tensor(7))
    assert float(v.numpy()) == 7.0 and opt.iterations.numpy() == 7
    many(tf.convert_to_tensor(5))   # a tensor count: no retrace
    assert many.experimental_get_tracing_count() == 1
    assert float(v.numpy()) == 12.0 and opt.iterations.numpy() == 12
    assert float(w.numpy()) == 0.0  # w <- w - 0.5 * 2w


def test_metric_objects():
    m = tf.keras.metrics.Mean("training_loss", dtype=tf.float32)
    acc = tf.keras.metrics.SparseCategoricalAccuracy("training_accuracy", dtype=tf.float32)
    m.update_state(tf.constant([1.0, 2.0]))
    m.update_state(tf.constant(6.0))
    assert float(m.result()) == 3.0
    logits = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0]], np.float32)

    @tf.function
    def upd(y, p):
        acc.update_state(y, p)
        m.update_state(tf.reduce_sum(p))

    upd(tf.constant([1, 0, 0, 0]), tf.constant(logits))
    assert float(acc.result()) == 0.5
    assert float(m.result()) == (1 + 2 + 6 + 4) / 4.0  # sum(p) = 4 joins 3 values
    m.reset_states()
    acc.reset_state()
    assert float(m.result()) == 0.0 and float(acc.result()) == 0.0
    upd(tf.constant([1, 0, 2, 1]), tf.constant(logits))
    assert float(acc.result()) == 1.0


def test_losses_and_average_loss():
    logits = np.array([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]], np.float32)
    y = np.array([0, 2])
    want = -np.log(np.exp(logits[[0, 1], y]) / np.exp(logits).sum(1))
    got = tf.keras.losses.sparse_categorical_crossentropy(tf.constant(y), tf.constant(logits),
                                                          from_logits=True)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    got_p = tf.keras.losses.sparse_categorical_crossentropy(tf.constant(y), tf.constant(p))
    np.testing.assert_allclose(got_p.numpy(), want, rtol=1e-5)
    avg = tf.nn.compute_average_loss(got, global_batch_size=8)
    np.testing.assert_allclose(float(avg), want.sum() / 8, rtol=1e-5)


def test_dataset_map_scale():
    x = np.arange(12, dtype=np.uint8).reshape(3, 2, 2, 1) * 20
    y = np.array([1, 2, 3], np.int64)

    def scale(image, label):
        image = tf.cast(image, tf.float32)
        image /= 255.0
        return image, label

    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(scale).batch(3)
    (bx, by), = list(ds)
    np.testing.assert_allclose(bx, x.astype(np.float32) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(by, y)


def test_strategy_run_per_replica_and_distributed_loop():
    # logical devices must be configured before first use: a fresh process
    r = run_py(textwrap.dedent("""
        import numpy as np
        import sinter as tf
        cpu = tf.config.list_physical_devices('CPU')[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        s = tf.distribute.MirroredStrategy()
        a = tf.constant([[1.0, 2.0], [3.0, 4.0]])

        @tf.function
        def mm(x, y):
            return tf.matmul(x, y)
        z = s.run(mm, args=(a, a))
        print(z)
        print(z.values[1].device)
        print(s.reduce(tf.distribute.ReduceOp.SUM, z, axis=None).numpy().tolist())
        # a distributed loop: one weight, each replica's gradient summed, as the all-reduce
        with s.scope():
            w = tf.Variable(np.float32(1.0))
            opt = tf.keras.optimizers.SGD(learning_rate=0.1)
        xs = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
        ds = tf.data.Dataset.from_tensor_slices(xs).batch(4).repeat()
        it = iter(s.experimental_distribute_dataset(ds))

        @tf.function
        def step(it):
            def fn(x):
                with tf.GradientTape() as tape:
                    loss = tf.nn.compute_average_loss(x * w, global_batch_size=4)
                g = tape.gradient(loss, [w])
                opt.apply_gradients(zip(g, [w]))
            s.run(fn, args=(next(it),))
        step(it)
        print(round(float(w.numpy()), 6), int(opt.iterations.numpy()))
        """))
    assert r.returncode == 0, r.stderr
    want = ("PerReplica:{\n  0: tf.Tensor(\n[[ 7. 10.]\n [15. 22.]], shape=(2, 2), "
            "dtype=float32),\n  1: tf.Tensor(\n[[ 7. 10.]\n [15. 22.]], shape=(2, 2), "
            "dtype=float32)\n}\n/job:localhost/replica:0/task:0/device:CPU:1\n"
            "[[14.0, 20.0], [30.0, 44.0]]\n")
    assert r.stdout.startswith(want), r.stdout
    # d/dw mean(x * w) over the global batch = mean(x) = 2.5; w = 1 - 0.1 * 2.5
    assert r.stdout.splitlines()[-1] == "0.75 1", r.stdout


def test_tfds_stand_in():
    need_fashion()
    from sinter import tfds
    ds, info = tfds.load(name="fashion_mnist", split="test", with_info=True,
                         as_supervised=True)
    assert info.splits["test"].num_examples == 10000
    x, y = next(iter(ds.batch(4)))
    assert x.shape == (4, 28, 28, 1) and y.shape == (4,)


def test_custom_loop_and_fit_share_the_model_weights():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 4)).astype(np.float32)
    y = (np.arange(8) % 3).astype(np.int64)
    model = tf.keras.Sequential([tf.keras.layers.Dense(3, input_shape=(4,))])
    opt = tf.keras.optimizers.SGD(learning_rate=0.5)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True))
        g = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(g, model.trainable_variables))
        return logits

    w0 = model.get_weights()
    logits = step(tf.constant(x), tf.constant(y))
    np.testing.assert_allclose(logits.numpy(), x @ w0[0] + w0[1], rtol=1e-5, atol=1e-5)
    w1 = model.get_weights()  # the traced step's update reaches the C model
    assert not np.allclose(w1[0], w0[0])
    np.testing.assert_allclose(model.predict(x, verbose=0), x @ w1[0] + w1[1], rtol=1e-5,
                               atol=1e-5)
    model.set_weights(w0)     # and a change through Keras reaches the next traced run
    np.testing.assert_allclose(step(tf.constant(x), tf.constant(y)).numpy(),
                               x @ w0[0] + w0[1], rtol=1e-5, atol=1e-5)


def test_other_loss_functions_match_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3)).astype(np.float32) * 3
    onehot = np.eye(3, dtype=np.float32)[[0, 2, 1, 2]]
    x64 = x.astype(np.float64)  # references in float64; sinter's float32 within 1e-6
    logp = x64 - np.log(np.exp(x64).sum(1, keepdims=True))
    cce = tf.keras.losses.categorical_crossentropy(tf.constant(onehot), tf.constant(x),
                                                   from_logits=True)
    np.testing.assert_allclose(cce.numpy(), -(onehot * logp).sum(1), rtol=1e-5, atol=1e-6)
    p = np.exp(logp)
    cce_p = tf.keras.losses.categorical_crossentropy(tf.constant(onehot), tf.constant(p.astype(np.float32)))
    np.testing.assert_allclose(cce_p.numpy(), -(onehot * logp).sum(1), rtol=1e-4, atol=1e-6)
    yb = (rng.random((4, 3)) > 0.5).astype(np.float32)
    sig = 1 / (1 + np.exp(-x64))
    want = -(yb * np.log(sig) + (1 - yb) * np.log(1 - sig)).mean(1)
    bce = tf.keras.losses.binary_crossentropy(tf.constant(yb), tf.constant(x), from_logits=True)
    np.testing.assert_allclose(bce.numpy(), want, rtol=1e-5, atol=1e-6)
    bce_p = tf.keras.losses.binary_crossentropy(tf.constant(yb), tf.constant(sig.astype(np.float32)))
    np.testing.assert_allclose(bce_p.numpy(), want, rtol=1e-4, atol=1e-6)
    mse = tf.keras.losses.mean_squared_error(tf.constant(yb), tf.constant(x))
    np.testing.assert_allclose(mse.numpy(), ((x - yb) ** 2).mean(1), rtol=1e-5, atol=1e-6)
    obj = tf.keras.losses.MeanSquaredError()(tf.constant(yb), tf.constant(x))
    np.testing.assert_allclose(float(obj), ((x - yb) ** 2).mean(), rtol=1e-5, atol=1e-6)


def test_eager_gradient_tape_and_apply_gradients():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    y = (np.arange(6) % 3).astype(np.int64)
    model = tf.keras.Sequential([tf.keras.layers.Dense(5, activation="relu", input_shape=(4,)),
                                 tf.keras.layers.Dense(3)])
    opt = tf.keras.optimizers.SGD(learning_rate=0.1)
    w0 = model.get_weights()
    with tf.GradientTape() as tape:
        logits = model(tf.constant(x), training=True)
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
            tf.constant(y), logits, from_logits=True))
    grads = tape.gradient(loss, model.trainable_variables)
    # the same step traced gives the same gradients (both are sn_gradients' graph)
    model2 = tf.keras.Sequential([tf.keras.layers.Dense(5, activation="relu", input_shape=(4,)),
                                  tf.keras.layers.Dense(3)])
    model2.set_weights(w0)

    @tf.function
    def traced(x, y):
        with tf.GradientTape() as t:
            lg = model2(x, training=True)
            ls = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, lg, from_logits=True))
        return ls, t.gradient(ls, model2.trainable_variables)

    ls2, grads2 = traced(tf.constant(x), tf.constant(y))
    np.testing.assert_allclose(float(loss), float(ls2), rtol=1e-6)
    for a, b in zip(grads, grads2):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
    h = np.maximum(x @ w0[0] + w0[1], 0)
    lg = h @ w0[2] + w0[3]
    p = np.exp(lg - lg.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(float(loss), -np.log(p[np.arange(6), y]).mean(), rtol=1e-5)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    for w, g, new in zip(w0, grads, model.get_weights()):
        np.testing.assert_allclose(new, w - 0.1 * g.numpy(), rtol=1e-5, atol=1e-7)
    assert opt.iterations.numpy() == 1
    v = tf.Variable(np.float32(3.0))
    with tf.GradientTape() as tape:
        z = v * v * 2.0
    assert float(tape.gradient(z, v)) == 12.0


def test_function_arguments_in_structures():
    @tf.function
    def f(pair, scale=None, offset=None):
        a, b = pair
        return {"sum": a + b, "scaled": a * scale + offset}

    out = f((tf.constant([1.0, 2.0]), tf.constant([10.0, 20.0])),
            offset=tf.constant([0.5, 0.5]), scale=tf.constant([2.0, 3.0]))
    np.testing.assert_allclose(out["sum"].numpy(), [11, 22])
    np.testing.assert_allclose(out["scaled"].numpy(), [2.5, 6.5])
    pr = tf.distribute.PerReplica([tf.constant(1.0), tf.constant(2.0)])
    g = tf.function(lambda p: p.values[0] * 10.0 + p.values[1])
    assert float(g(pr)) == 12.0
    assert float(g(tf.distribute.PerReplica([tf.constant(3.0), tf.constant(4.0)]))) == 34.0
    assert g.experimental_get_tracing_count() == 1


def test_traced_functions_take_turns_with_one_plan_memory():
    """Two traced functions on one device share one arena (sn_plan_memory): the shared blocks
    are the larger plan's need, not the sum, and each function still computes its own values
    when the calls alternate (a plan's inputs are fed before every run), also from two threads
    at once. In its own process, so that no other test's traces share the memory."""
    r = run_py(textwrap.dedent("""
        import numpy as np
        import sinter as tf
        from sinter import _function
        from sinter._lib import lib
        big = tf.function(lambda x: tf.matmul(x, x) + 1.0)
        small = tf.function(lambda x: (x * 2.0 + 1.0) * x)
        rng = np.random.default_rng(3)
        a = [rng.standard_normal((96, 96)).astype(np.float32) for _ in range(2)]
        b = [rng.standard_normal(8).astype(np.float32) for _ in range(2)]
        with tf.device("/CPU:0"):
            for k in range(2):
                np.testing.assert_allclose(big(tf.constant(a[k])).numpy(), a[k] @ a[k] + 1.0,
                                           rtol=1e-4, atol=1e-4)
                np.testing.assert_allclose(small(tf.constant(b[k])).numpy(),
                                           (b[k] * 2.0 + 1.0) * b[k], rtol=1e-6)
        # from two threads at once: the calls take turns, each with its own values
        import threading
        bad = []
        def loop(f, xs, ref):
            with tf.device("/CPU:0"):
                for k in range(30):
                    got = f(tf.constant(xs[k % 2])).numpy()
                    if not np.allclose(got, ref(xs[k % 2]), rtol=1e-4, atol=1e-4):
                        bad.append(k)
        ts = [threading.Thread(target=loop, args=(big, a, lambda v: v @ v + 1.0)),
              threading.Thread(target=loop, args=(small, b, lambda v: (v * 2.0 + 1.0) * v))]
        for t in ts: t.start()
        for t in ts: t.join()
        assert not bad, bad
        peaks = [lib.sn_plan_peak_bytes(c._plan) for f in (big, small) for c in f._cache.values()]
        shared = lib.sn_plan_memory_size(_function._plan_memory(b"cpu:0").h)
        print("peaks", *peaks, "shared", shared)
        """))
    assert r.returncode == 0, r.stderr
    w = r.stdout.split()
    peaks, shared = [int(w[1]), int(w[2])], int(w[4])
    assert len(w) == 5 and min(peaks) > 0, r.stdout
    assert max(peaks) <= shared < sum(peaks), r.stdout


# The custom-loop tests' data and model, run in this process or a child's (exec'd with np
# and tf in scope).
_TINY_CASE = """
rng = np.random.default_rng(1)
x = rng.standard_normal((32, 4, 4, 1)).astype(np.float32)
y = (np.arange(32) % 3).astype(np.int64)
def make():
    return tf.keras.Sequential([
        tf.keras.layers.Conv2D(4, 3, activation="relu", input_shape=(4, 4, 1)),
        tf.keras.layers.Flatten(), tf.keras.layers.Dense(8, activation="relu"),
        tf.keras.layers.Dense(3)])
"""


@pytest.mark.parametrize("make_opt", [
    lambda: tf.keras.optimizers.Adam(),
    lambda: tf.keras.optimizers.SGD(learning_rate=0.05, momentum=0.9, nesterov=True),
    lambda: tf.keras.optimizers.RMSprop(momentum=0.5),
    lambda: tf.keras.optimizers.AdamW()], ids=["adam", "sgd_nesterov", "rmsprop", "adamw"])
def test_custom_loop_adam_steps_equal_fit(make_opt):
    """The guide's two training paths are the same training: four steps of a traced
    GradientTape loop over the batches in order give the weights `fit` gives from the same
    start (shuffle off), within float32 rounding, for every optimizer (Adam is the guide's)."""
    case = {"np": np, "tf": tf}
    exec(_TINY_CASE, case)
    x, y, make = case["x"], case["y"], case["make"]
    fitted, looped = make(), make()
    w0 = fitted.get_weights()
    looped.set_weights(w0)
    fitted.compile(optimizer=make_opt(),
                   loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    fitted.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    opt = make_opt()

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            logits = looped(xb, training=True)
            loss = tf.nn.compute_average_loss(tf.keras.losses.sparse_categorical_crossentropy(
                yb, logits, from_logits=True), global_batch_size=8)
        g = tape.gradient(loss, looped.trainable_variables)
        opt.apply_gradients(zip(g, looped.trainable_variables))

    for i in range(0, 32, 8):
        step(tf.constant(x[i:i + 8]), tf.constant(y[i:i + 8]))
    assert int(opt.iterations.numpy()) == 4
    for a, b, w in zip(fitted.get_weights(), looped.get_weights(), w0):
        assert not np.allclose(a, w)  # both trained
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_mirrored_custom_loop_runs_replica_plans_and_equals_fit():
    """Under MirroredStrategy over two CPU replicas, the guide's custom loop (strategy.run of
    a GradientTape step, metric objects, a distributed dataset, a tf.range loop) runs one plan
    per replica on the replica threads, as fit does, and trains the same weights as fit under
    the same strategy from the same start (shuffle off), within float32 rounding."""
    r = run_py(textwrap.dedent("""
        import numpy as np
        import sinter as tf
        cpu = tf.config.list_physical_devices('CPU')[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        s = tf.distribute.MirroredStrategy()
        """) + _TINY_CASE + textwrap.dedent("""
        with s.scope():
            fitted, looped = make(), make()
            looped.set_weights(fitted.get_weights())
            w0 = fitted.get_weights()
            fitted.compile(optimizer="adam",
                           loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            opt = tf.keras.optimizers.Adam()
            acc = tf.keras.metrics.SparseCategoricalAccuracy("acc", dtype=tf.float32)
        fitted.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        it = iter(s.experimental_distribute_dataset(
            tf.data.Dataset.from_tensor_slices((x, y)).batch(8)))

        def fn(inputs):
            xb, yb = inputs
            with tf.GradientTape() as tape:
                logits = looped(xb, training=True)
                loss = tf.nn.compute_average_loss(tf.keras.losses.sparse_categorical_crossentropy(
                    yb, logits, from_logits=True), global_batch_size=8)
            g = tape.gradient(loss, looped.trainable_variables)
            opt.apply_gradients(zip(g, looped.trainable_variables))
            acc.update_state(yb, logits)

        @tf.function
        def step(it):
            s.run(fn, args=(next(it),))

        @tf.function
        def steps(it, n):
            for _ in tf.range(n):
                s.run(fn, args=(next(it),))
        step(it)
        steps(it, tf.constant(3))
        plans = [len(c._plans) for f in (step, steps) for c in f._cache.values()]
        print("plans", plans, "iterations", int(opt.iterations.numpy()))
        worst = max(float(np.max(np.abs(b - a) / (np.abs(a) + 1e-3)))
                    for a, b in zip(fitted.get_weights(), looped.get_weights()))
        trained = all(not np.allclose(a, w) for a, w in zip(looped.get_weights(), w0))
        print("worst", worst, "trained", trained)
        """))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("plans [2, 2] iterations 4"), r.stdout
    worst = float(lines[1].split()[1])
    assert worst < 1e-6 and lines[1].endswith("trained True"), r.stdout


def test_distribute_datasets_from_function_feeds_replicas_as_tensorflow(tmp_path):
    """distribute_datasets_from_function calls its function once per worker by default, and
    the worker's replicas take consecutive per-replica batches, so a function that ignores its
    InputContext (the TPU guide's) still gives every replica other examples; PER_REPLICA
    calls it once per replica. The contexts and every replica's elements, eager and traced,
    are TensorFlow's (tests/python/dist_dataset_cases.py, run by both)."""
    from conftest import run_pair
    script = str(Path(__file__).with_name("dist_dataset_cases.py"))
    ref, mine = run_pair(script, tmp_path)
    assert "per_worker contexts [(1, 0, 2, 2)]" in mine.stdout, mine.stdout
    assert "per_worker eager [[0.0, 1.0], [2.0, 3.0]]" in mine.stdout, mine.stdout
    assert mine.stdout == ref.stdout, f"sinter:\n{mine.stdout}\nTensorFlow:\n{ref.stdout}"
