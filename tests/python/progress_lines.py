"""What fit, evaluate and predict print, run by tests/python/test_progress.py with sinter
(`python progress_lines.py sinter`) and with real Keras (`... keras`): the test compares the
epoch-end lines after masking the times and the digits of the values."""
import sys

import numpy as np

if sys.argv[1] == "keras":
    import keras
else:
    from sinter import keras

keras.utils.set_random_seed(1)
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 8)).astype("float32")
y = rng.integers(0, 3, 64)
m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
m.compile(optimizer="sgd", metrics=["sparse_categorical_accuracy", "accuracy"],
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
m.fit(x, y, epochs=2, verbose=2, validation_split=0.25,
      callbacks=[keras.callbacks.ReduceLROnPlateau(patience=0)])
print("=====", flush=True)
m.fit(x, y, epochs=1, verbose=1, batch_size=16, validation_split=0.25)
print("=====", flush=True)
m.fit(x, y, epochs=1, verbose=2, batch_size=8)
print("=====", flush=True)
m.evaluate(x, y, verbose=1)
print("=====", flush=True)
m.evaluate(x, y, verbose=2)
print("=====", flush=True)
m.predict(x, verbose=2)
print("=====", flush=True)
r = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
r.compile(optimizer="sgd", loss="mse")
r.fit(x, -100 - x[:, :1], epochs=1, verbose=2)  # a large loss
print("=====", flush=True)
