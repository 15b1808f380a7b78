"""Prints get_config() of each layer class sinter's Python package has, built with Keras's
defaults and with arguments, as JSON lines: run with sinter (`python layer_configs.py sinter`)
and with real Keras (`... keras`) by tests/python/test_layer_configs.py, which compares them."""
import json
import sys

if sys.argv[1] == "keras":
    from keras import layers
else:
    from sinter.keras import layers

CASES = [
    "Conv1D(4, 3)", "Conv1D(8, 5, strides=2, padding='same', activation='relu', use_bias=False)",
    "DepthwiseConv2D(3)", "DepthwiseConv2D((3, 3), strides=2, padding='same', depth_multiplier=2)",
    "SeparableConv2D(4, 3)", "SeparableConv2D(16, (3, 3), padding='same', use_bias=False)",
    "Conv2DTranspose(4, 3)", "Conv2DTranspose(8, 3, strides=2, padding='same')",
    "MaxPooling1D()", "MaxPooling1D(3, strides=1, padding='same')", "AveragePooling1D(2)",
    "GlobalMaxPooling1D()", "GlobalAveragePooling1D(keepdims=True)",
    "Cropping2D()", "Cropping2D(((1, 2), (3, 4)))", "Cropping2D(2)",
    "UpSampling2D()", "UpSampling2D((3, 2))", "ELU()", "ELU(alpha=0.5)", "PReLU()",
    "PReLU(shared_axes=[1, 2])", "Permute((2, 1))", "LayerNormalization()",
    "LayerNormalization(epsilon=1e-5, center=False)", "MultiHeadAttention(2, 4)",
    "MultiHeadAttention(num_heads=4, key_dim=32, value_dim=16, use_bias=False)",
    "MultiHeadAttention(2, 4, value_dim=3, output_shape=7, dropout=0.1)",
    "MultiHeadAttention(2, 4, output_shape=(5,))",
    "Bidirectional(LSTM(3))", "Bidirectional(GRU(4, return_sequences=True), merge_mode='sum')",
    "Dense(3)", "Conv2D(8, 3, padding='same')", "BatchNormalization()", "Embedding(10, 4)",
]
for i, case in enumerate(CASES):
    layer = eval("layers." + case.replace("LSTM(", "layers.LSTM(").replace("GRU(", "layers.GRU("),
                 {"layers": layers})
    print(json.dumps({"case": case, "class": type(layer).__name__,
                      "config": layer.get_config()}, sort_keys=True))
