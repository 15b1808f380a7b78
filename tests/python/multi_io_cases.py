"""fit, evaluate and predict on Functional models of several inputs and outputs, written the
Keras way, run by tests/python/test_multi_io.py twice: with sinter (`python multi_io_cases.py
sinter OUT`) and with real Keras (`... keras OUT`). x and y as dicts by Input/output layer name
and as lists; loss, loss_weights and metrics as dicts and lists; sample weights. Every model
starts from the same weights (NumPy, set_weights) and trains with SGD without shuffling; each run
writes its weights, History, evaluate results and predictions to OUT/<mode>.npz and .json.

Every batch here is full: with a partial last batch Keras 3.15 on TensorFlow logs each output's
loss ("cls_loss") as the plain mean of the batch means (its tracker's weight, the batch's static
size, is unknown inside tf.function), while its "loss" weighs each batch by its size; sinter
weighs both by the batch size, so its output losses add up to its loss."""
import numpy as np

from keras_cases import keras_of_mode, record_weights, write

mode, out, keras, layers = keras_of_mode()

rng = np.random.default_rng(11)
N = 36
xa = rng.normal(size=(N, 4)).astype("float32")
xb = rng.normal(size=(N, 3)).astype("float32")
ycls = rng.integers(0, 3, size=N).astype("int32")
yreg = rng.normal(size=(N, 2)).astype("float32")
ybin = rng.integers(0, 2, size=(N, 1)).astype("float32")
sw = rng.uniform(0.0, 2.0, size=N).astype("float32")
res, arrays = {}, {}


def start(m):
    m.set_weights([rng.normal(scale=0.5, size=w.shape).astype("float32")
                   for w in m.get_weights()])
    return m


def record(name, m, h, ev, ev_list, pred):
    record_weights(arrays, name, m)
    for i, p in enumerate(pred if isinstance(pred, list) else [pred]):
        arrays[f"{name}_pred{i}"] = p
    res[f"{name}_history"] = h.history
    res[f"{name}_evaluate"] = ev
    res[f"{name}_evaluate_list"] = ev_list


# 1. two named inputs, two named outputs; dicts everywhere
a = keras.Input((4,), name="a")
b = keras.Input((3,), name="b")
h = layers.Dense(6, activation="relu")(layers.Concatenate()([a, b]))
m = start(keras.Model([a, b], [layers.Dense(3, name="cls")(h), layers.Dense(2, name="reg")(h)]))
m.compile(optimizer=keras.optimizers.SGD(0.1),
          loss={"cls": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "reg": "mse"},
          loss_weights={"cls": 1.0, "reg": 0.5},
          metrics={"cls": ["sparse_categorical_accuracy"]})
hist = m.fit({"a": xa, "b": xb}, {"cls": ycls, "reg": yreg}, batch_size=12, epochs=2,
             shuffle=False, verbose=0,
             validation_data=({"a": xa[:10], "b": xb[:10]}, {"cls": ycls[:10], "reg": yreg[:10]}))
ev = m.evaluate({"a": xa, "b": xb}, {"cls": ycls, "reg": yreg}, batch_size=12, verbose=0,
                return_dict=True)
ev_list = m.evaluate({"a": xa, "b": xb}, {"cls": ycls, "reg": yreg}, batch_size=12, verbose=0)
record("dicts", m, hist, ev, ev_list, m.predict({"a": xa, "b": xb}, batch_size=10, verbose=0))

# 2. automatic names, lists everywhere, sample weights on both outputs, validation_split
a = keras.Input((4,))
b = keras.Input((3,))
h = layers.Dense(5, activation="tanh")(layers.Add()([layers.Dense(3)(a), b]))
m = start(keras.Model([a, b], [layers.Dense(1)(h), layers.Dense(2)(h)]))
m.compile(optimizer=keras.optimizers.SGD(0.05),
          loss=[keras.losses.BinaryCrossentropy(from_logits=True), "mse"],
          loss_weights=[2.0, 1.0], metrics=[["binary_accuracy"], []])
hist = m.fit([xa, xb], [ybin, yreg], sample_weight=sw, batch_size=9, epochs=2, shuffle=False,
             verbose=0, validation_split=0.25)
ev = m.evaluate([xa, xb], [ybin, yreg], sample_weight=sw, batch_size=12, verbose=0,
                return_dict=True)
ev_list = m.evaluate([xa, xb], [ybin, yreg], batch_size=36, verbose=0)
record("lists", m, hist, ev, ev_list, m.predict([xa, xb], verbose=0))

# 3. one input, two outputs, one loss for both
a = keras.Input((4,))
h = layers.Dense(4, activation="relu")(a)
m = start(keras.Model(a, [layers.Dense(2)(h), layers.Dense(2)(a)]))
m.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
hist = m.fit(xa, [yreg, yreg * 2], batch_size=12, epochs=1, shuffle=False, verbose=0)
ev = m.evaluate(xa, [yreg, yreg * 2], batch_size=18, verbose=0, return_dict=True)
ev_list = m.evaluate(xa, [yreg, yreg * 2], batch_size=18, verbose=0)
record("one_in", m, hist, ev, ev_list, m.predict(xa, verbose=0))

write(out, mode, res, arrays)
