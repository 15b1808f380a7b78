"""Keras's API over sinter (docs/python.md says what is there and what is not):

    import sinter as tf                      # then the guide's tf.keras code runs as written
    model = tf.keras.Sequential([tf.keras.layers.Flatten(input_shape=(28, 28)),
                                 tf.keras.layers.Dense(128, activation="relu"),
                                 tf.keras.layers.Dense(10)])
"""
from . import activations, callbacks, datasets, initializers, layers, losses, metrics  # noqa
from . import mixed_precision, models, optimizers, regularizers, utils, backend  # noqa
from .layers import Input, InputLayer  # noqa: F401
from .models import Model, Sequential  # noqa: F401

__version__ = "3.0.0-sinter"
