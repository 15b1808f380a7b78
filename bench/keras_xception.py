"""keras.io's "Image classification from scratch" make_model without its augmentation block,
ending in Dense(classes) logits: the one definition that bench/keras_nets.py (the speed
workload) and tests/keras_models_interop.py (the stock interop case) both build, so the net
that is timed is the net that is checked. The caller imports keras first (the interop test
sets Keras's environment before that)."""
import keras
from keras import layers


def xception_small(size=96, classes=10):
    """Rescaling, Conv2D, BatchNormalization, SeparableConv2D, MaxPooling2D same, residual
    Conv2D 1x1 stride 2 and add, GlobalAveragePooling2D, Dropout, Dense (no activation)."""
    inputs = keras.Input(shape=(size, size, 3))
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(128, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    previous_block_activation = x
    for width in [256, 512, 728]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(width, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(width, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = layers.Conv2D(width, 1, strides=2, padding="same")(previous_block_activation)
        x = layers.add([x, residual])
        previous_block_activation = x
    x = layers.SeparableConv2D(1024, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.25)(x)
    outputs = layers.Dense(classes, activation=None)(x)
    return keras.Model(inputs, outputs, name="xception_small")
