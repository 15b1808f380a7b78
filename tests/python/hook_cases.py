"""The order and logs of callback hooks around fit's validation and evaluate, run by
tests/python/test_callbacks_more.py twice: with sinter (`python hook_cases.py sinter
OUT`) and with real Keras (`... keras OUT`). A recording callback writes every call of
on_epoch_begin/end, on_test_begin/end and on_test_batch_begin/end (the batch index, the log
names and values) to OUT/<mode>.json for the test to compare."""
import json
import sys

import numpy as np

mode, out = sys.argv[1], sys.argv[2]
if mode == "keras":
    import keras
    from keras import layers
else:
    from sinter import keras
    from sinter.keras import layers

rng = np.random.default_rng(4)
x = rng.normal(size=(40, 4)).astype("float32")
y = rng.integers(0, 3, size=40).astype("int32")
events = []


class Recorder(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        events.append(["epoch_begin", epoch])

    def on_epoch_end(self, epoch, logs=None):
        events.append(["epoch_end", epoch, sorted(logs)])

    def on_test_begin(self, logs=None):
        events.append(["test_begin"])

    def on_test_batch_begin(self, batch, logs=None):
        events.append(["test_batch_begin", batch])

    def on_test_batch_end(self, batch, logs=None):
        events.append(["test_batch_end", batch, {k: float(v) for k, v in logs.items()}])

    def on_test_end(self, logs=None):
        events.append(["test_end", {k: float(v) for k, v in logs.items()}])


m = keras.Sequential([keras.Input((4,)), layers.Dense(5, activation="relu"), layers.Dense(3)])
m.set_weights([rng.normal(scale=0.5, size=w.shape).astype("float32") for w in m.get_weights()])
m.compile(optimizer=keras.optimizers.SGD(0.1), metrics=["sparse_categorical_accuracy"],
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
m.fit(x[:30], y[:30], batch_size=10, epochs=2, shuffle=False, verbose=0,
      validation_data=(x[30:], y[30:]), validation_batch_size=4, callbacks=[Recorder()])
events.append(["evaluate"])
m.evaluate(x, y, batch_size=16, verbose=0, callbacks=[Recorder()])
events.append(["lambda"])
m.evaluate(x, y, batch_size=40, verbose=0, callbacks=[keras.callbacks.LambdaCallback(
    on_test_end=lambda logs: events.append(["lambda_test_end", sorted(logs)]))])
with open(f"{out}/{mode}.json", "w") as f:
    json.dump(events, f, indent=1)
print("ok")
