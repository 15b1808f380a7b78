"""Reference values from real Keras 3 (TensorFlow backend) for tests/test_keras_reference.c.

Prints one line per value:
  act NAME X Y          keras.activations.get(NAME)(X), float32
  grad NAME X DYDX      its derivative by tf.GradientTape (TensorFlow's gradient kernels)
  init NAME RANK MEAN VAR MIN MAX   statistics of keras.initializers.get(NAME)(shape)
"""
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

ACTS = ["gelu", "silu", "swish", "elu", "leaky_relu", "relu6"]
# a grid over both tails plus the kinks themselves (0 for all, 6 for relu6)
x = np.concatenate([np.linspace(-8, 8, 161), [0.0, 6.0, -1e-3, 1e-3, 5.999, 6.001, -12.0]])
x = x.astype("float32")
xt = tf.constant(x)
for name in ACTS:
    f = keras.activations.get(name)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = f(xt)
    g = tape.gradient(y, xt)
    for a, b, d in zip(x, y.numpy(), g.numpy()):
        print(f"act {name} {float(a):.9g} {float(b):.9g}")
        print(f"grad {name} {float(a):.9g} {float(d):.9g}")

INITS = ["glorot_uniform", "glorot_normal", "he_uniform", "he_normal", "lecun_uniform",
         "lecun_normal", "random_uniform", "random_normal", "truncated_normal", "orthogonal"]
for name in INITS:
    for shape in [(200, 300), (3, 3, 64, 32)]:
        init = keras.initializers.get({"class_name": name, "config": {"seed": 1}})
        v = keras.ops.convert_to_numpy(init(shape, dtype="float32")).astype("float64")
        print(f"init {name} {len(shape)} {v.mean():.9g} {v.var():.9g} {v.min():.9g} {v.max():.9g}")
