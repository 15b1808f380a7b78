"""fit/evaluate with sample_weight and class_weight, written the Keras way, run by
tests/python/test_sample_weight.py twice: with sinter (`python sample_weight_cases.py sinter
OUT`) and with real Keras (`... keras OUT`). Every model starts from the same weights (drawn
here with NumPy, set with set_weights) and trains with plain SGD without shuffling, so both
runs must end with the same weights, History and evaluate results; each run writes them to
OUT/<mode>.npz and OUT/<mode>.json for the test to compare."""
import numpy as np

from keras_cases import keras_of_mode, record_weights, write

mode, out, keras, layers = keras_of_mode()

rng = np.random.default_rng(7)
N = 40
x = rng.normal(size=(N, 4)).astype("float32")
y = rng.integers(0, 3, size=N).astype("int32")
sw = rng.uniform(0.0, 2.0, size=N).astype("float32")
vx = rng.normal(size=(12, 4)).astype("float32")
vy = rng.integers(0, 3, size=12).astype("int32")
vsw = rng.uniform(0.0, 2.0, size=12).astype("float32")
yr = rng.normal(size=(N, 2)).astype("float32")
yb = rng.integers(0, 2, size=(N, 1)).astype("float32")
init = {}


def classifier(units=3, name="clf"):
    m = keras.Sequential([keras.Input((4,)), layers.Dense(8, activation="relu"),
                          layers.Dense(units)], name=name)
    key = (units, name)
    if key not in init:
        init[key] = [rng.normal(scale=0.5, size=w.shape).astype("float32")
                     for w in m.get_weights()]
    m.set_weights(init[key])
    return m


res = {}
arrays = {}


def record(name, m, h=None, ev=None):
    record_weights(arrays, name, m)
    if h is not None:
        res[f"{name}_history"] = h.history
    if ev is not None:
        res[f"{name}_evaluate"] = ev


# 1. sparse CCE from logits, per-sample weights, a partial last batch, weighted validation
m = classifier()
m.compile(optimizer=keras.optimizers.SGD(0.1),
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
          metrics=["sparse_categorical_accuracy"])
h = m.fit(x, y, sample_weight=sw, batch_size=16, epochs=2, shuffle=False, verbose=0,
          validation_data=(vx, vy, vsw))
ev = m.evaluate(x, y, sample_weight=sw, batch_size=16, verbose=0, return_dict=True)
ev_plain = m.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
record("sparse", m, h, {"weighted": ev, "plain": ev_plain})

# 2. class_weight from integer labels
m = classifier()
m.compile(optimizer=keras.optimizers.SGD(0.1),
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
          metrics=["sparse_categorical_accuracy"])
h = m.fit(x, y, class_weight={0: 1.0, 1: 3.0, 2: 0.25}, batch_size=8, epochs=1,
          shuffle=False, verbose=0)
record("class_weight", m, h)

# 3. class_weight from one-hot labels (argmax), categorical cross-entropy
m = classifier()
m.compile(optimizer=keras.optimizers.SGD(0.1),
          loss=keras.losses.CategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
          # Keras 3.15 on TensorFlow cannot trace a weighted categorical cross-entropy from
          # logits ("Cannot take the length of shape with unknown rank"); eagerly it runs
          run_eagerly=True)
onehot, cw = np.eye(3, dtype="float32")[y], {0: 2.0, 2: 0.5}
if mode == "keras":
    # Keras's own mapping of class_weight to per-sample weights (its fit path for one-hot
    # labels on TensorFlow fails as above, traced in the dataset map)
    from keras.src.trainers.data_adapters import data_adapter_utils
    kw = {"sample_weight": data_adapter_utils.class_weight_to_sample_weights(onehot, cw)}
else:
    kw = {"class_weight": cw}
h = m.fit(x, onehot, batch_size=10, epochs=1, shuffle=False, verbose=0, **kw)
record("onehot", m, h)

# 4. regression: mean squared error, weights of shape (N, 1), validation_split (the weights
# are split with the samples)
m = classifier(2, "reg")
m.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
h = m.fit(x, yr, sample_weight=sw[:, None], batch_size=16, epochs=2, shuffle=False,
          verbose=0, validation_split=0.25)
ev = m.evaluate(x, yr, sample_weight=sw[:, None], batch_size=40, verbose=0)
record("mse", m, h, ev)

# 5. binary cross-entropy with labels (N, 1) and class_weight
m = classifier(1, "bin")
m.compile(optimizer=keras.optimizers.SGD(0.1),
          loss=keras.losses.BinaryCrossentropy(from_logits=True))
h = m.fit(x, yb, class_weight={0: 0.3, 1: 1.7}, batch_size=16, epochs=1, shuffle=False,
          verbose=0)
record("binary", m, h)

write(out, mode, res, arrays)
