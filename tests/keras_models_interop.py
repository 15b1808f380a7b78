#!/usr/bin/env python3
"""Keras model files, both ways, against real Keras 3 (run by tests/test_keras_interop.sh).

Usage: python keras_models_interop.py BUILD_DIR WORK_DIR

 (a) Keras builds the models below, saves each as NAME.keras, NAME.json (model.to_json())
     and NAME.weights.h5 (for the JSON twin), and predicts a few random inputs;
 (b) sinter (BUILD_DIR/tests/test_model_files with SN_KERAS_MODELS_DIR) loads every .keras
     and .json, predicts the same inputs and writes its own NAME.<kind>.sinter.keras;
 (c) sinter's predictions must equal Keras's within TOL (max abs, on probabilities);
 (d) Keras loads sinter's .keras files with keras.models.load_model: same weights bit for bit,
     predictions within TOL again;
 (e) the sinter command on the guide's .keras file: summary reports Keras's parameter count,
     and one training step's loss includes the guide's L2(1e-5) penalty (it equals Keras's
     cross-entropy + sum(model.losses) on the same 32 images, and differs from the
     cross-entropy alone by more than the tolerance).
 (g) the RNN text classifier (text_classifier below: Embedding(mask_zero) ->
     Bidirectional(LSTM) -> Dense -> Dense(1)), a 1D CNN (Conv1D, the 1D pools, ELU, Permute, PReLU)
     a masked Bidirectional(GRU) into GlobalAveragePooling1D, and a Functional
     Embedding(mask_zero) -> LSTM -> Dense -> GRU (Keras saves its mask as a NotEqual op
     layer passed as mask=), on 64 padded sequences,
     checked as (f) is, their steps by binary cross-entropy from logits;
 (f) Functional models (FUNCTIONAL below: a residual CNN, two inputs / two outputs with a
     shared layer, Concatenate and Subtract, a mix of the other merge and activation
     layers, the convolution family, Normalization with its int64 count; with
     SN_INTEROP_ONLY also the STOCK models,
     MobileNetV2 at 96x96, keras.io's small Xception and the segmentation tutorial's U-Net,
     labels per pixel), saved by Keras as .keras: `sinter summary`
     prints Keras's table byte for byte, sinter predicts every output within TOL, one SGD
     step (sinter's fit for the one-output model, BatchNormalization's moving statistics
     included; the graph's gradients of the summed MSEs for the other) changes every weight as
     Keras's train_on_batch does within STEP_TOL relative, and Keras loads sinter's .keras and
     predicts the same within TOL. Five of them are issue 26's: a Transformer of Keras's
     built-in layers (token and position Embeddings, causal MultiHeadAttention, Adds,
     LayerNormalization, a GELU feed-forward), transformer_masked (an attention_mask input
     with a query that sees no key, cross-attention with a key input of its own, a [1, S]
     padding mask), transformer_padded (Embedding(mask_zero=True) masks into self- and
     cross-attention), transformer_vdim (value_dim != key_dim, output_shape, key= given by
     keyword), and the char_transformer_small preset as `sinter export` writes it,
     opened by Keras.
The text models (Embedding+LSTM with return_sequences, Embedding+GRU with reset_after True and
False) take integer ids:
Keras predicts int32 ids, sinter reads the same ids as float32.
SN_INTEROP_ONLY=name1,name2 runs part (f) for those models alone (development).
Exit status 0 when everything matched, 1 on a mismatch, 77 (SKIPPED) when a part could not
be checked yet.
"""
import contextlib
import csv
import io
import json
import os
import struct
import subprocess
import sys
import zipfile

import keras_reference  # noqa: F401  (sets Keras's environment: before keras)
import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import layers, regularizers  # noqa: E402

# keras.io's small Xception has one definition, shared with the speed workload (bench/)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import keras_xception  # noqa: E402

# float32 end to end; sinter and Keras sum in different orders, so probabilities agree to a
# few float32 ulps of the logits' size, far inside 1e-5.
TOL = 1e-5


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def guide():
    """The "Use TPUs" guide's create_model(), with its L2(1e-5) regularizers."""
    reg = regularizers.L2(1e-5)
    m = keras.Sequential([
        keras.Input((28, 28, 1)),
        layers.Conv2D(256, 3, activation="relu", kernel_regularizer=reg),
        layers.Conv2D(256, 3, activation="relu", kernel_regularizer=reg),
        layers.Flatten(),
        layers.Dense(256, activation="relu", kernel_regularizer=reg),
        layers.Dense(128, activation="relu", kernel_regularizer=reg),
        layers.Dense(10, kernel_regularizer=reg),
    ], name="guide")
    m.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["sparse_categorical_accuracy"])
    return m, True, 4


def bn_cnn():
    """A small CNN with BatchNormalization and GlobalAveragePooling2D."""
    m = keras.Sequential([
        keras.Input((16, 16, 3)),
        layers.Conv2D(8, 3, padding="same", use_bias=False,
                      kernel_initializer=keras.initializers.HeNormal(seed=3)),
        layers.BatchNormalization(momentum=0.9, epsilon=1e-3),
        layers.Activation("relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(16, 3, activation="relu", kernel_regularizer=regularizers.L2(1e-4)),
        layers.AveragePooling2D(2, strides=1),
        layers.GlobalAveragePooling2D(),
        layers.Dropout(0.3),
        layers.Dense(5, activation="softmax"),
    ], name="bn_cnn")
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05, momentum=0.9, nesterov=True),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m, False, 16


def mlp_gelu():
    """An MLP with gelu as a Functional chain, not compiled."""
    inp = keras.Input((20,))
    x = layers.Dense(32, activation="gelu",
                     kernel_regularizer=regularizers.L1L2(l1=1e-5, l2=1e-4))(inp)
    x = layers.Dropout(0.2)(x)
    x = layers.Reshape((4, 8))(x)
    x = layers.Flatten()(x)
    out = layers.Dense(4, activation="softmax")(x)
    return keras.Model(inp, out, name="mlp_gelu"), False, 16


def text_lstm():
    """An Embedding+LSTM character model: ids -> next-id logits at every step."""
    m = keras.Sequential([
        keras.Input((10,), dtype="int32"),
        layers.Embedding(20, 8, embeddings_regularizer=regularizers.L2(1e-4)),
        layers.LSTM(16, return_sequences=True, kernel_regularizer=regularizers.L2(1e-5)),
        layers.Dense(20),
    ], name="text_lstm")
    m.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m, True, 4


def text_gru():
    """An Embedding+GRU classifier (last state only), not compiled."""
    m = keras.Sequential([
        keras.Input((10,), dtype="int32"),
        layers.Embedding(20, 8),
        layers.GRU(12),
        layers.Dense(20, activation="softmax"),
    ], name="text_gru")
    return m, False, 4


def text_gru_rb():
    """Keras's other GRU, reset_after=False (bias (3*units,), reset gate before the recurrent
    product), returning the whole sequence, then logits."""
    m = keras.Sequential([
        keras.Input((10,), dtype="int32"),
        layers.Embedding(20, 8),
        layers.GRU(12, reset_after=False, return_sequences=True),
        layers.Dense(20),
    ], name="text_gru_rb")
    m.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m, True, 4


def text_lstm_stateful():
    """A stateful LSTM: the batch size (4) lives in the Input's batch_shape. Predictions from
    fresh (zero) states on both sides."""
    m = keras.Sequential([
        keras.Input((10,), batch_size=4, dtype="int32"),
        layers.Embedding(20, 8),
        layers.LSTM(16, return_sequences=True, stateful=True),
        layers.Dense(20),
    ], name="text_lstm_stateful")
    m.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m, True, 4


MODELS = {"guide": guide, "bn_cnn": bn_cnn, "mlp_gelu": mlp_gelu, "text_lstm": text_lstm,
          "text_gru": text_gru, "text_gru_rb": text_gru_rb,
          "text_lstm_stateful": text_lstm_stateful}


def residual():
    """Input -> Conv2D -> BN -> ReLU -> Conv2D -> Add(skip) -> GlobalAveragePooling2D -> Dense;
    trained with sparse categorical cross-entropy from logits. The Conv2D before BN has no
    bias, as in Keras's own applications: BN's batch mean takes a bias away, so its gradient
    is 0 in exact arithmetic and only rounding noise in float32 (see STEP_TOL)."""
    inp = keras.Input((8, 8, 3))
    x = layers.Conv2D(4, 3, padding="same", use_bias=False)(inp)
    x = layers.BatchNormalization()(x)
    x = layers.ReLU()(x)
    y = layers.Conv2D(4, 3, padding="same")(x)
    x = layers.Add()([x, y])
    x = layers.GlobalAveragePooling2D()(x)
    out = layers.Dense(5)(x)
    m = keras.Model(inp, out, name="residual")
    return m, keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def two_in_two_out():
    """Two inputs through one shared Dense, Concatenate and Subtract, two outputs; trained
    with the sum of each output's mean squared error."""
    a = keras.Input((6,), name="a")
    b = keras.Input((6,), name="b")
    shared = layers.Dense(4, activation="relu", name="shared")
    xa, xb = shared(a), shared(b)
    o1 = layers.Dense(3, name="o1")(layers.Concatenate()([xa, xb]))
    o2 = layers.Dense(1, name="o2")(layers.Subtract()([xa, xb]))
    return keras.Model([a, b], [o1, o2], name="two_in_two_out"), ["mse", "mse"]


def layer_mix():
    """The other merges and the layer-form activations: Rescaling, LeakyReLU, Multiply,
    Average, Maximum, Minimum, Concatenate, ZeroPadding2D, ReLU(max_value=6),
    GlobalMaxPooling2D, Softmax; fan-out of the input into four uses."""
    inp = keras.Input((6, 6, 2))
    r = layers.Rescaling(0.5, offset=-0.25)(inp)
    lk = layers.LeakyReLU(0.2)(r)
    q = layers.Conv2D(2, 1, activation="tanh")(inp)
    av = layers.Average()([layers.Multiply()([lk, q, r]), q, inp])
    c = layers.Concatenate()([layers.Maximum()([av, lk]), layers.Minimum()([av, q])])
    z = layers.ReLU(max_value=6.0)(layers.ZeroPadding2D(((1, 0), (2, 1)))(c))
    s = layers.Softmax()(layers.GlobalMaxPooling2D()(z))
    out = layers.Dense(3)(s)
    m = keras.Model(inp, out, name="layer_mix")
    return m, keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def transformer():
    """A decoder-only Transformer of Keras's built-in layers only (issue 26, item 4): token ids
    and their positions (a second int input) through two Embeddings and an Add, one pre-
    LayerNorm block (causal MultiHeadAttention, residual Add, LayerNormalization, a GELU
    feed-forward, residual Add), a final LayerNormalization and Dense to the vocabulary.
    Trained with mean squared error on the logits (the graph-gradient path of a two-input
    model); the inputs are ids, so xs come from inputs() below."""
    T, V, d = 8, 11, 16
    tok = keras.Input((T,), dtype="int32", name="tokens")
    pos = keras.Input((T,), dtype="int32", name="positions")
    x = layers.Add()([layers.Embedding(V, d)(tok), layers.Embedding(T, d)(pos)])
    h = layers.LayerNormalization(epsilon=1e-5)(x)
    h = layers.MultiHeadAttention(num_heads=2, key_dim=8)(h, h, use_causal_mask=True)
    x = layers.Add()([x, h])
    h = layers.LayerNormalization(epsilon=1e-5)(x)
    h = layers.Dense(4 * d, activation="gelu")(h)
    x = layers.Add()([x, layers.Dense(d)(h)])
    out = layers.Dense(V)(layers.LayerNormalization(epsilon=1e-5)(x))
    m = keras.Model([tok, pos], out, name="transformer")

    def inputs(rng, rows):
        return [rng.integers(0, V, (rows, T)).astype(np.int32),
                np.tile(np.arange(T, dtype=np.int32), (rows, 1))]
    return m, ["mse"], inputs


def transformer_masked():
    """MultiHeadAttention's masks and cross-attention (issue 26): token and position
    Embeddings, a self-attention given an attention_mask input [T, T] (0/1 floats, ANDed with
    use_causal_mask; each batch row pads its own tail, and row 0's query 2 sees no key at
    all: Keras gives it the mean of the values and no gradient to its query or keys), then a
    cross-attention of the sequence over a context input [S, c] with S != T and c != d, its
    keys from a third input [S, k] (mha(q, value, key)), then a cross-attention over the
    context alone with a [1, S] padding mask, and Dense to the vocabulary; mean squared error
    on the logits."""
    T, S, V, d = 9, 6, 11, 16
    tok = keras.Input((T,), dtype="int32", name="tokens")
    pos = keras.Input((T,), dtype="int32", name="positions")
    mask = keras.Input((T, T), name="mask")
    ctx = keras.Input((S, 5), name="context")
    ckey = keras.Input((S, 3), name="context_keys")
    cpad = keras.Input((1, S), name="context_mask")
    x = layers.Add()([layers.Embedding(V, d)(tok), layers.Embedding(T, d)(pos)])
    h = layers.LayerNormalization(epsilon=1e-5)(x)
    h = layers.MultiHeadAttention(num_heads=2, key_dim=8)(h, h, attention_mask=mask,
                                                           use_causal_mask=True)
    x = layers.Add()([x, h])
    h = layers.MultiHeadAttention(num_heads=2, key_dim=4)(x, ctx, ckey)
    x = layers.Add()([x, h])
    h = layers.MultiHeadAttention(num_heads=1, key_dim=16)(x, ctx, attention_mask=cpad)
    x = layers.Add()([x, h])
    out = layers.Dense(V)(layers.LayerNormalization(epsilon=1e-5)(x))
    m = keras.Model([tok, pos, mask, ctx, ckey, cpad], out, name="transformer_masked")

    def inputs(rng, rows):
        length = rng.integers(3, T + 1, rows)
        pad = (np.arange(T)[None, :] < length[:, None]).astype(np.float32)  # [rows, T]
        mk = pad[:, None, :] * (rng.random((rows, T, T)) > 0.2)
        mk[0, 2, :] = 0
        clen = rng.integers(1, S + 1, rows)
        cp = (np.arange(S)[None, :] < clen[:, None]).astype(np.float32)[:, None, :]
        return [rng.integers(0, V, (rows, T)).astype(np.int32),
                np.tile(np.arange(T, dtype=np.int32), (rows, 1)), mk.astype(np.float32),
                rng.standard_normal((rows, S, 5)).astype(np.float32),
                rng.standard_normal((rows, S, 3)).astype(np.float32), cp]
    return m, ["mse"], inputs


def transformer_vdim():
    """value_dim != key_dim and output_shape (issue 26, sinter's materialised attention): an
    Embedding, a causal self-attention with value_dim 6 over key_dim 4, a cross-attention
    over a context input whose keys come from a third input given by keyword (key=, written
    among Keras's kwargs) after an attention_mask (row 0's query 1 sees no key), with
    value_dim 5 and output_shape 12 (the width), then one with output_shape 7 of its own
    into Dense; mean squared error on the logits."""
    T, S, V, d = 7, 5, 11, 12
    tok = keras.Input((T,), dtype="int32", name="tokens")
    ctx = keras.Input((S, 6), name="context")
    ckey = keras.Input((S, 3), name="context_keys")
    cmask = keras.Input((T, S), name="context_mask")
    x = layers.Embedding(V, d)(tok)
    h = layers.MultiHeadAttention(num_heads=3, key_dim=4, value_dim=6)(x, x,
                                                                       use_causal_mask=True)
    x = layers.Add()([x, h])
    h = layers.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=5, output_shape=d)(
        x, ctx, attention_mask=cmask, key=ckey)
    x = layers.Add()([x, h])
    h = layers.MultiHeadAttention(num_heads=2, key_dim=4, output_shape=7)(x, ctx, key=ckey)
    out = layers.Dense(V)(h)
    m = keras.Model([tok, ctx, ckey, cmask], out, name="transformer_vdim")

    def inputs(rng, rows):
        mk = (rng.random((rows, T, S)) > 0.3).astype(np.float32)
        mk[0, 1, :] = 0
        return [rng.integers(0, V, (rows, T)).astype(np.int32),
                rng.standard_normal((rows, S, 6)).astype(np.float32),
                rng.standard_normal((rows, S, 3)).astype(np.float32), mk]
    return m, ["mse"], inputs


def transformer_padded():
    """Keras's masks into MultiHeadAttention (issue 26): token ids with padded tails through
    Embedding(mask_zero=True), a LayerNormalization (passes the mask), self-attention
    mha(h, h) (query mask over the queries, value mask over the keys: padded queries see no
    key, so Keras gives them the mean of the values), the residual Add (the OR of two
    masks), a cross-attention over a second padded id sequence of another length embedded
    with mask_zero (its mask over the keys; one row all padding), and Dense to the
    vocabulary; mean squared error on the logits."""
    T, S, V, d = 8, 5, 11, 16
    tok = keras.Input((T,), dtype="int32", name="tokens")
    src = keras.Input((S,), dtype="int32", name="source")
    x = layers.Embedding(V, d, mask_zero=True)(tok)
    h = layers.LayerNormalization(epsilon=1e-5)(x)
    h = layers.MultiHeadAttention(num_heads=2, key_dim=8)(h, h)
    x = layers.Add()([x, h])
    c = layers.Embedding(V, 6, mask_zero=True)(src)
    h = layers.MultiHeadAttention(num_heads=2, key_dim=4)(x, c)
    x = layers.Add()([x, h])
    out = layers.Dense(V)(layers.LayerNormalization(epsilon=1e-5)(x))
    m = keras.Model([tok, src], out, name="transformer_padded")

    def inputs(rng, rows):
        def padded(n, lo):
            ids = rng.integers(1, V, (rows, n)).astype(np.int32)
            ids[np.arange(n)[None, :] >= rng.integers(lo, n + 1, rows)[:, None]] = 0
            return ids
        t, c = padded(T, 2), padded(S, 1)
        c[1, :] = 0
        return [t, c]
    return m, ["mse"], inputs


def char_transformer_small():
    """The char_transformer_small preset as `sinter export` writes it (its Keras twin:
    tokens and positions inputs, Embeddings, 4 pre-LN blocks of Keras's own layers), opened
    by keras.models.load_model; the rest of part (f) then runs on it as on the others
    (test_attention_layers checks that the twin computes the preset's logits)."""
    text = os.path.join(WORK, "chars.txt")
    with open(text, "w") as f:
        f.write("To be, or not to be, that is the question:\n" * 4)
    path = os.path.join(WORK, "char_transformer_small.export.keras")
    r = subprocess.run([os.path.join(BUILD, "sinter"), "export", "--model",
                        "char_transformer_small", "--data", text, "--to", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"sinter export --model char_transformer_small: {r.stderr.strip()}")
    m = keras.models.load_model(path, compile=False)
    V, T = m.outputs[0].shape[-1], m.inputs[0].shape[1]

    def inputs(rng, rows):
        return [rng.integers(0, V, (rows, T)).astype(np.int32),
                np.tile(np.arange(T, dtype=np.int32), (rows, 1))]
    return m, ["mse"], inputs


def mobilenet_v2():
    """keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10), as
    issue 23 names it: ZeroPadding2D, Conv2D, BatchNormalization, ReLU(6), DepthwiseConv2D
    (strides 1 and 2), Add, GlobalAveragePooling2D, Dense softmax. Trained with sparse
    categorical cross-entropy on its probabilities (from_logits=False)."""
    m = keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10)
    return m, keras.losses.SparseCategoricalCrossentropy()


def xception_small():
    """keras.io's "Image classification from scratch" make_model without its augmentation
    block, at 96x96: Rescaling, Conv2D, BatchNormalization, SeparableConv2D, MaxPooling2D
    same, residual Conv2D 1x1 stride 2 and add, GlobalAveragePooling2D, Dropout, Dense. With
    10 classes (a Dense(10) of logits): keras.io's 2-class form ends in Dense(1) and binary
    cross-entropy from logits, a loss this harness's SGD step does not take yet."""
    m = keras_xception.xception_small(96, 10)
    return m, keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def unet():
    """The TensorFlow image-segmentation tutorial's U-Net at its 128x128 (issue 23's size; 64x64
    until 2026-12-02: about 3 minutes of 2 cores here against 1): keras.applications.MobileNetV2(include_top=False, weights=None)
    cut at five activations into a nested model of five outputs (down_stack), the decoder of
    pix2pix upsample blocks, each a nested Sequential (Conv2DTranspose stride 2 without bias,
    RandomNormal(0, 0.02) -> BatchNormalization -> ReLU), Concatenate skips and a last
    Conv2DTranspose to 3 classes; sparse categorical cross-entropy from logits over every
    pixel. The tutorial freezes down_stack (ImageNet weights); with weights=None it trains
    here, so the step moves the encoder too."""
    s = 128
    base = keras.applications.MobileNetV2(input_shape=[s, s, 3], include_top=False,
                                          weights=None)
    names = ["block_1_expand_relu", "block_3_expand_relu", "block_6_expand_relu",
             "block_13_expand_relu", "block_16_project"]
    down_stack = keras.Model(inputs=base.input, outputs=[base.get_layer(n).output for n in names])

    def upsample(filters, size):  # tensorflow_examples' pix2pix.upsample, batchnorm, no dropout
        result = keras.Sequential()
        result.add(layers.Conv2DTranspose(filters, size, strides=2, padding="same",
                                          kernel_initializer=keras.initializers.RandomNormal(
                                              0.0, 0.02), use_bias=False))
        result.add(layers.BatchNormalization())
        result.add(layers.ReLU())
        return result

    up_stack = [upsample(512, 3), upsample(256, 3), upsample(128, 3), upsample(64, 3)]
    inputs = keras.Input(shape=[s, s, 3])
    skips = down_stack(inputs)
    x = skips[-1]
    for up, skip in zip(up_stack, reversed(skips[:-1])):
        x = up(x)
        x = layers.Concatenate()([x, skip])
    x = layers.Conv2DTranspose(filters=3, kernel_size=3, strides=2, padding="same")(x)
    m = keras.Model(inputs=inputs, outputs=x)
    return m, keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def conv_family():
    """The rest of the convolution family on a small image: DepthwiseConv2D (depth_multiplier
    2, same, stride 2, relu6, bias), SeparableConv2D (valid, stride 1, depth_multiplier 2),
    Conv2DTranspose (same stride 2, and valid stride 1), UpSampling2D, Cropping2D."""
    inp = keras.Input((9, 8, 3))
    x = layers.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2,
                               activation="relu6")(inp)
    x = layers.SeparableConv2D(5, (3, 2), depth_multiplier=2, activation="tanh")(x)
    t = layers.Conv2DTranspose(4, 3, strides=2, padding="same")(x)
    u = layers.Conv2DTranspose(4, (2, 3), strides=(1, 2), activation="tanh")(t)
    u = layers.Cropping2D(((1, 0), (2, 3)))(u)
    v = layers.UpSampling2D((2, 1))(layers.Cropping2D(((1, 1), (0, 0)))(x))
    z = layers.Concatenate()([layers.GlobalAveragePooling2D()(u),
                              layers.GlobalMaxPooling2D()(v)])
    out = layers.Dense(3)(z)
    m = keras.Model(inp, out, name="conv_family")
    return m, keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def normalization():
    """Normalization (axis -1) over [B, 4, 6] after adapt(): mean and variance [6] and the
    int64 count as weights (the .weights.h5 holds count as int64), then Flatten and Dense
    logits; randomize() gives mean and variance other values, keeps count."""
    inp = keras.Input((4, 6))
    norm = layers.Normalization()
    norm.adapt(np.random.default_rng(5).random((30, 4, 6)).astype(np.float32))
    for v in norm.weights:  # Keras 3's adapt leaves count 0: a value that shows a lost one
        if v.path.endswith("count"):
            v.assign(123)
    x = layers.Flatten()(norm(inp))
    out = layers.Dense(3)(layers.Dense(8, activation="tanh")(x))
    m = keras.Model(inp, out, name="normalization")
    return m, keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def frozen_base():
    """The transfer-learning tutorial's pattern (issue 23): a base model with BatchNormalization
    frozen (base.trainable = False) and nested, called with training=False, between trainable
    layers (gradients pass through it), a frozen nested Sequential with BatchNormalization, and
    one frozen Dense in the outer model. Frozen weights must not move in the step and frozen
    BatchNormalization runs in inference mode (Keras 3), so its moving statistics stay too."""
    bi = keras.Input((8, 8, 4))
    b = layers.Conv2D(6, 3, padding="same")(bi)
    b = layers.ReLU()(layers.BatchNormalization()(b))
    b = layers.BatchNormalization()(layers.DepthwiseConv2D(3)(b))
    base = keras.Model(bi, b, name="base")
    base.trainable = False
    head = keras.Sequential([layers.Dense(8), layers.BatchNormalization(), layers.ReLU()],
                            name="head")
    head.trainable = False
    inp = keras.Input((8, 8, 3))
    x = layers.Conv2D(4, 1)(inp)
    x = base(x, training=False)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(8, activation="tanh")(x)
    x = head(x)
    x = layers.Dense(6, trainable=False)(x)
    out = layers.Dense(5)(x)
    m = keras.Model(inp, out, name="frozen_base")
    return m, keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def finetune_base():
    """The transfer-learning tutorial's fine-tuning phase (issue 23): the base unfrozen
    (trainable) but still called with training=False, and a BatchNormalization layer called
    with training=False. Keras 3 does not keep them in inference mode: fit's training=True
    overrides every inner call's (keras/src/models/functional.py, operation_fn; the guide was
    corrected in keras-team/keras#20298), so their BatchNormalizations use the batch statistics
    and update their moving ones, as sinter's do. The step check below holds sinter to that;
    check_training_kw checks the keyword is written back. The base's convolutions have no bias,
    as MobileNetV2's: before a BatchNormalization in training mode a bias's gradient is 0 in
    exact arithmetic, rounding noise on both sides (see STEP_TOL)."""
    bi = keras.Input((8, 8, 4))
    b = layers.Conv2D(6, 3, padding="same", use_bias=False)(bi)
    b = layers.ReLU()(layers.BatchNormalization()(b))
    b = layers.BatchNormalization()(layers.DepthwiseConv2D(3, use_bias=False)(b))
    base = keras.Model(bi, b, name="base")
    inp = keras.Input((8, 8, 3))
    # tanh between: a shift (or scale) that reaches a BatchNormalization in training mode
    # through linear layers alone has (almost) no gradient, rounding noise on both sides
    x = layers.Conv2D(4, 1, activation="tanh")(inp)
    x = layers.BatchNormalization()(x, training=False)
    x = layers.Activation("tanh")(x)
    x = base(x, training=False)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(8, activation="tanh")(x)
    out = layers.Dense(5)(x)
    m = keras.Model(inp, out, name="finetune_base")
    return m, keras.losses.SparseCategoricalCrossentropy(from_logits=True)


FUNCTIONAL = {"residual": residual, "two_in_two_out": two_in_two_out, "layer_mix": layer_mix,
              "transformer": transformer, "transformer_masked": transformer_masked,
              "transformer_padded": transformer_padded, "transformer_vdim": transformer_vdim,
              "char_transformer_small": char_transformer_small,
              "conv_family": conv_family, "normalization": normalization,
              "frozen_base": frozen_base, "finetune_base": finetune_base}
BUILD = WORK = None  # set by main() for char_transformer_small
# Issue 23's stock architectures: minutes each, so tests/test_keras_stock_models.sh runs them
# (SN_INTEROP_ONLY=mobilenet_v2,xception_small) as a test of their own.
STOCK = {"mobilenet_v2": mobilenet_v2, "xception_small": xception_small, "unet": unet}

TEXT_STEPS = 20  # a fixed sequence length (sinter's shapes are static)


def text_classifier():
    """The TensorFlow RNN text-classification tutorial's model without its TextVectorization
    (ids in, vocabulary 1000): Embedding(mask_zero=True) -> Bidirectional(LSTM(64)) ->
    Dense(64, relu) -> Dense(1), binary cross-entropy from logits. Its inputs are padded
    sequences (padding_rows below)."""
    m = keras.Sequential([
        keras.Input((TEXT_STEPS,), dtype="int32"),
        layers.Embedding(1000, 64, mask_zero=True),
        layers.Bidirectional(layers.LSTM(64)),
        layers.Dense(64, activation="relu"),
        layers.Dense(1),
    ], name="text_classifier")
    return m, keras.losses.BinaryCrossentropy(from_logits=True)


def padding_rows(rng, rows, steps, vocab, empty):
    """Sequences of 0 to `steps` ids in [1, vocab), padded with 0 at the end (TextVectorization)
    for even rows, at the start (pad_sequences' default) for odd ones; row 0 is all padding
    when `empty` (else a full row: a masked average is 0/0 there), row 1 has none, row 2 has
    padding inside."""
    x = np.zeros((rows, steps), np.int32)
    for r in range(rows):
        n = steps if r == 1 or (r == 0 and not empty) else 0 if r == 0 else \
            int(rng.integers(1, steps + 1))
        ids = rng.integers(1, vocab, n)
        if r % 2 == 0:
            x[r, :n] = ids
        else:
            x[r, steps - n:] = ids
    x[2, 3] = 0
    return x


def text_cnn():
    """The 1D layers, ELU, Permute and PReLU on ids (no mask): Conv1D same and strided, both
    1D pools, GlobalMaxPooling1D."""
    m = keras.Sequential([
        keras.Input((TEXT_STEPS,), dtype="int32"),
        layers.Embedding(1000, 16),
        layers.Conv1D(8, 3, padding="same", activation="relu"),
        layers.MaxPooling1D(2),
        layers.AveragePooling1D(3, strides=1, padding="same"),
        layers.ELU(0.5),
        layers.Permute((2, 1)),
        layers.Conv1D(4, 2, strides=2),
        layers.PReLU(shared_axes=[1]),
        layers.GlobalMaxPooling1D(),
        layers.Dense(1),
    ], name="text_cnn")
    return m, keras.losses.BinaryCrossentropy(from_logits=True)


def text_bigru_avg():
    """The mask through Bidirectional(GRU) returning sequences (masked steps output zero) into
    GlobalAveragePooling1D's masked average; merge_mode ave."""
    m = keras.Sequential([
        keras.Input((TEXT_STEPS,), dtype="int32"),
        layers.Embedding(1000, 16, mask_zero=True),
        layers.Bidirectional(layers.GRU(8, return_sequences=True), merge_mode="ave"),
        layers.GlobalAveragePooling1D(),
        layers.Dense(1),
    ], name="text_bigru_avg")
    return m, keras.losses.BinaryCrossentropy(from_logits=True)


def text_functional_mask():
    """Embedding(mask_zero=True) in a Functional model: Keras 3 saves the mask as a NotEqual op
    layer called on the ids, passed as mask= to every later layer (the LSTM returning
    sequences, the Dense that carries it on, the GRU that consumes it)."""
    ids = keras.Input((TEXT_STEPS,), dtype="int32")
    x = layers.Embedding(1000, 16, mask_zero=True)(ids)
    x = layers.LSTM(12, return_sequences=True)(x)
    x = layers.Dense(8, activation="tanh")(x)
    x = layers.GRU(8)(x)
    out = layers.Dense(1)(x)
    return keras.Model(ids, out, name="text_functional_mask"), \
        keras.losses.BinaryCrossentropy(from_logits=True)


TEXT = {"text_classifier": text_classifier, "text_cnn": text_cnn,
        "text_bigru_avg": text_bigru_avg, "text_functional_mask": text_functional_mask}
# One SGD step of sinter (float32) is compared with Keras's step in float64 from the same
# weights and batch: through BatchNormalization the kernel gradient of the first Conv2D sums
# 4096 terms that cancel, and Keras's own float32 step is 1.5e-5 away from the float64 one
# (sinter's 5e-6), so float32 Keras is no reference at 1e-5. Each element's change must
# agree within STEP_TOL of the variable's largest change plus 2 float32 ulps of the weight
# (sinter rounds w - lr * g to float32: a change of 4e-4 on a weight near 1 is exact to 1.5e-4
# of itself only). A change that vanishes in exact arithmetic (a Conv2D bias before BN, which
# the batch mean takes away) would be rounding noise on both sides: residual() has none.
STEP_TOL = 1e-5
# The deep stock models: there float32 itself is the limit. On MobileNetV2 (64 rows, 96x96),
# Keras's own float32 step is a median 1.6% (up to 5%) away from its float64 step, and sinter's
# a median 0.8%; the betas of BatchNormalization layers whose output feeds a Conv2D and
# another BatchNormalization get a gradient that is 0 in exact arithmetic (the next batch mean
# takes it away), rounding noise on both sides. For these, each variable's change must be as
# close to the float64 step as Keras's float32 one is (within STEP_KERAS_FACTOR of its
# distance, or STEP_TOL), the bound printed beside the result.
STEP_KERAS_RELATIVE = {"mobilenet_v2", "xception_small", "unet"}
STEP_KERAS_FACTOR = 4.0  # measured sinter/Keras ratios 1.5-2.2: the float32 noise is chaotic
# Where the float32 step cannot be held to STEP_TOL, sinter also takes the step in float64
# (reference kernels; test_model_files' sgd_step_f64), held to STEP_TOL against Keras's
# float64 step: that the two compute the same step, to float64's precision.
STEP_F64 = {"mobilenet_v2", "unet"}  # the Xception: ~30x the work, too slow on the reference kernels
STEP_LR = 1.0
ROWS = 64


def keras_summary(m):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        m.summary()
    return buf.getvalue()


def keras_step(path, loss, xs, ys, w0, f64):
    """Keras's train_on_batch with SGD(STEP_LR) from weights w0, in float32 or float64 (the
    same config with every dtype policy float64); returns the weights after the step."""
    if f64:
        with zipfile.ZipFile(path) as z:
            cfg = z.read("config.json").decode()
        m = keras.models.model_from_json(cfg.replace('"float32"', '"float64"'))
        m.set_weights([w.astype(np.float64) if w.dtype == np.float32 else w for w in w0])
        for layer in m.layers:  # Normalization reads its weights in finalize_state() only
            if isinstance(layer, layers.Normalization):
                layer.finalize_state()
        xs = [x.astype(np.float64) if x.dtype == np.float32 else x for x in xs]
        ys = [y.astype(np.float64) if y.dtype == np.float32 else y for y in ys]
    else:
        m = keras.models.load_model(path)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=STEP_LR), loss=loss)
    m.train_on_batch(xs if len(xs) > 1 else xs[0], ys if len(ys) > 1 else ys[0])
    return [np.asarray(w, np.float64) for w in m.get_weights()]


def check_functional(build, work, rng, models=FUNCTIONAL, sub="functional", part="f"):
    """Part (f) (and (g), the text classifier); returns True when everything matched."""
    ok = True
    work = os.path.join(work, sub)  # its own folder: test_model_files does only these
    os.makedirs(work, exist_ok=True)
    sinter = os.path.join(build, "sinter")
    names = []
    ref = {}
    only = os.environ.get("SN_INTEROP_ONLY")  # a comma list: run just these models
    pool = {**models, **STOCK} if models is FUNCTIONAL else models
    for name, make in pool.items():
        if (only and name not in only.split(",")) or (not only and name in STOCK):
            continue
        m, loss, *inputs = make()
        randomize(m, rng)
        if inputs:  # ids: Keras takes int32, sinter reads the same ids as float32
            xs = inputs[0](rng, ROWS)
        else:  # ids for an Embedding are padded sequences, which sinter reads as float32
            xs = [padding_rows(rng, ROWS, t.shape[1], 1000, name == "text_classifier")
                  if "int" in str(t.dtype) else
                  rng.random((ROWS,) + tuple(t.shape[1:])).astype(np.float32) for t in m.inputs]
        for k, x in enumerate(xs):
            x.astype(np.float32).tofile(os.path.join(work, f"{name}.in{k}.f32"))
        if isinstance(loss, keras.losses.BinaryCrossentropy):
            ys = [rng.integers(0, 2, (ROWS,)).astype(np.float32)]
            ys[0].tofile(os.path.join(work, f"{name}.y0.f32"))
        elif isinstance(loss, list):
            ys = [rng.standard_normal((ROWS,) + tuple(t.shape[1:])).astype(np.float32)
                  for t in m.outputs]
            for j, y in enumerate(ys):
                y.tofile(os.path.join(work, f"{name}.y{j}.f32"))
        else:
            # one class per example, or per pixel of a [B, H, W, C] output (the U-Net)
            ys = [rng.integers(0, m.outputs[0].shape[-1],
                               (ROWS,) + tuple(m.outputs[0].shape[1:-1])).astype(np.int32)]
            ys[0].tofile(os.path.join(work, f"{name}.y0.i32"))
        path = os.path.join(work, f"{name}.keras")
        m.save(path)
        pred = m.predict(xs if len(xs) > 1 else xs[0], verbose=0)
        pred = [np.asarray(p) for p in (pred if isinstance(pred, list) else [pred])]
        ref[name] = (m, loss, xs, ys, pred, keras_summary(m))
        probs = not isinstance(loss, list) and not getattr(loss, "from_logits", True)
        names.append(f"{name} {ROWS} {STEP_LR}" + (" probs" if probs else " logits")
                     + (" f64" if name in STEP_F64 else ""))
    with open(os.path.join(work, "functional.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    exe = os.path.join(build, "tests", "test_model_files")
    r = subprocess.run([exe], env=dict(os.environ, SN_KERAS_MODELS_DIR=work),
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stdout.strip())
        print(r.stderr.strip())
        print("FAIL (f) sinter could not load, predict or train a Functional model")
        ok = False
    for name, (m, loss, xs, ys, pred, table) in ref.items():
        path = os.path.join(work, f"{name}.keras")
        r = subprocess.run([sinter, "summary", "--model", path], capture_output=True, text=True,
                           env=dict(os.environ, COLUMNS="80"))
        good = r.returncode == 0 and r.stdout == table
        ok &= good
        print(f"{'OK  ' if good else 'FAIL'} ({part}) sinter summary --model {name}.keras "
              f"{'equals' if good else 'differs from'} Keras's table")
        if not good:
            print("Keras:\n" + table + "sinter:\n" + r.stdout + r.stderr)
        d = 0.0
        for j, p in enumerate(pred):
            f = os.path.join(work, f"{name}.out{j}.f32")
            got = np.fromfile(f, np.float32).reshape(p.shape) if os.path.exists(f) else None
            d = max(d, float(np.max(np.abs(got - p))) if got is not None else float("inf"))
        good = d <= TOL
        ok &= good
        print(f"{'OK  ' if good else 'FAIL'} ({part}) sinter predicts {name} ({len(pred)} outputs, "
              f"{ROWS} rows) like Keras: max abs diff {d:.3g} (bound {TOL})")
        # one SGD step from the same weights and batch, against Keras's in float64
        w0 = [np.asarray(w) for w in m.get_weights()]
        w32 = keras_step(path, loss, xs, ys, w0, False)
        w64 = keras_step(path, loss, xs, ys, w0, True)
        ms = keras.models.load_model(path)
        step = os.path.join(work, f"{name}.step.weights.h5")
        worst, where, k32 = float("inf"), "no weights from sinter", 0.0
        rel_keras = name in STEP_KERAS_RELATIVE
        worst_ratio, bad = 0.0, []
        # the whole step's largest change: a variable whose exact change is below 1e-9 of it
        # moves by rounding noise alone (see STEP_KERAS_RELATIVE) and is left out of `worst`
        big = max((float(np.max(np.abs(b - a))) for a, b in zip(w0, w64)), default=0.0)
        if os.path.exists(step):
            ms.load_weights(step)
            worst, where = 0.0, "all equal"
            # A change that vanishes in exact arithmetic (MultiHeadAttention's key bias: the
            # softmax of q.(k + b) over the keys does not see q.b) is rounding noise on both
            # sides; it is held to STEP_TOL of the model's largest change instead.
            top = max(float(np.max(np.abs(b - a))) for a, b in zip(w0, w64))
            for v, a, b, c, k in zip(m.weights, w0, w64, [np.asarray(w) for w in ms.get_weights()], w32):
                dr, ds = b - a, c - a
                scale = float(np.max(np.abs(dr)))
                if scale <= 1e-10 * top:
                    dr, scale = np.zeros_like(dr), top
                excess = np.maximum(np.abs(ds - dr) - 2 * np.spacing(np.abs(c)), 0)
                e = float(np.max(excess)) / scale if scale > 0 else float(np.max(excess))
                ek = float(np.max(np.abs((k - a) - dr))) / scale if scale > 0 else \
                    float(np.max(np.abs((k - a) - dr)))
                if rel_keras:
                    if e > max(STEP_TOL, STEP_KERAS_FACTOR * ek):
                        bad.append(f"{v.path} {e:.3g} (Keras float32 {ek:.3g})")
                    if ek > 0:
                        worst_ratio = max(worst_ratio, e / max(ek, STEP_TOL))
                if rel_keras and scale < 1e-9 * big:
                    continue
                if e > worst:
                    worst, where = e, v.path
                if scale > 0:
                    k32 = max(k32, ek)
        # a frozen layer's weights (and a frozen BatchNormalization's moving statistics) must
        # come out of sinter's step bit for bit as they went in
        held = {v.path for l in _sublayers(m) if not l.trainable for v in l.weights}
        if held:
            moved = [v.path for v, a, c in zip(m.weights, w0, ms.get_weights())
                     if v.path in held and not np.array_equal(a, np.asarray(c))]
            good = os.path.exists(step) and not moved
            ok &= good
            print(f"{'OK  ' if good else 'FAIL'} ({part}) one SGD step of {name}: the "
                  f"{len(held)} weights of frozen layers unchanged bit for bit"
                  + ("" if good else f"; moved: {moved[:5]}"))
        if rel_keras:
            good = os.path.exists(step) and not bad
            ok &= good
            print(f"{'OK  ' if good else 'FAIL'} ({part}) one SGD step of {name} (lr {STEP_LR}): every "
                  f"weight's change within {STEP_KERAS_FACTOR:g}x Keras's own float32 distance "
                  f"(or {STEP_TOL}) of Keras's float64 step: worst sinter/Keras ratio "
                  f"{worst_ratio:.3g}; sinter's largest distance {worst:.3g} relative ({where}), "
                  f"Keras float32's {k32:.3g}" + ("" if good else "; over: " + "; ".join(bad[:5])))
        else:
            good = worst <= STEP_TOL
            ok &= good
            print(f"{'OK  ' if good else 'FAIL'} ({part}) one SGD step of {name} (lr {STEP_LR}): every "
                  f"weight's change as Keras's in float64 within {worst:.3g} relative beyond 2 "
                  f"float32 ulps (worst: {where}; bound {STEP_TOL}; Keras's own float32 step: "
                  f"{k32:.3g})")
        if name in STEP_F64:
            step64 = os.path.join(work, f"{name}.step64.weights.h5")
            worst, where = float("inf"), "no float64 step from sinter"
            if os.path.exists(step64):
                ms.load_weights(step64)
                worst, where = 0.0, "all equal"
                for v, a, b, c in zip(m.weights, w0, w64, [np.asarray(w) for w in ms.get_weights()]):
                    dr, ds = b - a, c - a
                    scale = float(np.max(np.abs(dr)))
                    excess = np.maximum(np.abs(ds - dr) - 2 * np.spacing(np.abs(c)), 0)
                    e = float(np.max(excess)) / max(scale, 1e-300) if np.max(excess) > 0 else 0.0
                    if e > worst:
                        worst, where = e, v.path
            good = worst <= STEP_TOL
            ok &= good
            print(f"{'OK  ' if good else 'FAIL'} ({part}) one SGD step of {name} in float64 (sinter's "
                  f"reference kernels against Keras's float64 step): every weight's change within "
                  f"{worst:.3g} relative beyond 2 float32 ulps (worst: {where}; bound {STEP_TOL})")
        # Keras reopens sinter's .keras
        sp = os.path.join(work, f"{name}.sinter.keras")
        d2 = float("inf")
        if os.path.exists(sp):
            m2 = keras.models.load_model(sp)
            p2 = m2.predict(xs if len(xs) > 1 else xs[0], verbose=0)
            p2 = [np.asarray(p) for p in (p2 if isinstance(p2, list) else [p2])]
            d2 = max(float(np.max(np.abs(a - b))) for a, b in zip(p2, pred))
        good = d2 <= TOL
        ok &= good
        print(f"{'OK  ' if good else 'FAIL'} ({part}) Keras {keras.__version__} loads sinter's "
              f"{name}.sinter.keras and predicts within {d2:.3g} of the original (bound {TOL})")
        ok &= check_training_kw(name, path, sp, part)
        if name == "finetune_base":
            ok &= check_finetune_step(m, w0, w64, ms, step, part)
    return ok


def training_kws(path):
    """Every call's training= keyword in a .keras file's config, nested models' calls
    included: {(model, layer, call): value, or "absent"}."""
    with zipfile.ZipFile(path) as z:
        cfg = json.loads(z.read("config.json"))
    out = {}

    def walk(c):
        for e in c["config"]["layers"]:
            for k, node in enumerate(e.get("inbound_nodes", [])):
                kw = node.get("kwargs", {}) if isinstance(node, dict) else {}
                out[(c["config"]["name"], e["name"], k)] = kw.get("training", "absent")
            if e.get("class_name") == "Functional":
                walk(e)
    walk(cfg)
    return out


def check_training_kw(name, keras_path, sinter_path, part):
    """sinter's file gives every call the training= keyword Keras's gave it (or none)."""
    want = training_kws(keras_path)
    got = training_kws(sinter_path) if os.path.exists(sinter_path) else {}
    diff = [f"{k}: Keras {want[k]}, sinter {got.get(k, 'no such call')}" for k in want
            if got.get(k, "no such call") != want[k]]
    given = sum(v != "absent" for v in want.values())
    print(f"{'OK  ' if not diff else 'FAIL'} ({part}) sinter's {name}.sinter.keras writes the "
          f"training= keyword of every call as Keras's file has it ({given} given)"
          + ("" if not diff else "; " + "; ".join(diff[:5])))
    return not diff


def check_finetune_step(m, w0, w64, ms, step, part):
    """finetune_base's step: the BatchNormalizations called with training=False (the base's
    and the outer one) update their moving statistics in Keras 3's step and in sinter's alike
    (the step check holds their values), and the base's kernels train."""
    if not os.path.exists(step):
        return False
    ms.load_weights(step)
    after = [np.asarray(w) for w in ms.get_weights()]
    base = m.get_layer("base")
    moving = {v.path for l in _sublayers(m) if isinstance(l, layers.BatchNormalization)
              for v in (l.moving_mean, l.moving_variance)}
    kernels = {v.path for l in base.layers for v in l.trainable_weights}
    moved_k = moved_s = 0
    for v, a, b, c in zip(m.weights, w0, w64, after):
        if v.path in moving or v.path in kernels:
            moved_k += not np.array_equal(a, b)
            moved_s += not np.array_equal(a, c)
    n = len(moving) + len(kernels)
    good = moved_k == n and moved_s == n
    print(f"{'OK  ' if good else 'FAIL'} ({part}) one SGD step of finetune_base: the moving "
          f"statistics of the 3 BatchNormalizations called with training=False and the base's "
          f"{len(kernels)} trainable weights move in Keras's step ({moved_k} of {n}) and in "
          f"sinter's ({moved_s} of {n}): Keras 3's fit overrides training=False")
    return good


def _sublayers(m):
    """Every layer of m, nested models' layers included (Keras's _flatten_layers)."""
    out = []
    for l in m.layers:
        out.append(l)
        if isinstance(l, keras.Model):
            out += _sublayers(l)
    return out


def randomize(m, rng):
    """Random values in every small variable (BN moving variance > 0), so that a swapped or
    lost variable shows; the guide keeps Keras's own initial values (38M of them)."""
    if m.count_params() > 1_000_000:
        # deep stock models (MobileNetV2, the small Xception) keep Keras's initial kernels, which
        # keep their activations in range; BatchNormalization's four variables get random
        # values so that its moving statistics and affine parameters are exercised
        if any("moving_variance" in w.path for w in m.weights) and "guide" not in m.name:
            m.set_weights([(rng.random(w.shape) + 0.5).astype(np.float32) if "variance" in w.path
                           else (1 + 0.2 * rng.standard_normal(w.shape)).astype(np.float32)
                           if "gamma" in w.path
                           else (0.2 * rng.standard_normal(w.shape)).astype(np.float32)
                           if "beta" in w.path or "moving_mean" in w.path
                           else np.asarray(w) for w in m.weights])
        return
    m.set_weights([np.asarray(w) if "int" in str(w.dtype)  # Normalization's count
                   else (rng.random(w.shape) + 0.5).astype(np.float32) if "variance" in w.path
                   else (0.3 * rng.standard_normal(w.shape)).astype(np.float32)
                   for w in m.weights])
    for layer in m.layers:  # Normalization computes from its weights in finalize_state() only
        if isinstance(layer, layers.Normalization):
            layer.finalize_state()


def write_idx(path, arr):
    """An uncompressed IDX file of u8 (the MNIST format sinter's --data-dir reads)."""
    with open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 0x08, arr.ndim))
        for d in arr.shape:
            f.write(struct.pack(">I", d))
        f.write(arr.astype(np.uint8).tobytes())


def main():
    global BUILD, WORK
    build, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    BUILD, WORK = build, work
    rng = np.random.default_rng(0)
    keras.utils.set_random_seed(0)
    if os.environ.get("SN_INTEROP_ONLY"):  # development: part (f) for the listed models only
        ok = check_functional(build, work, rng)
        print("PASS (part f only)" if ok else "FAIL")
        return 0 if ok else 1
    ok, skipped = True, False
    ref = {}
    lines = []
    for name, make in MODELS.items():
        m, logits, rows = make()
        randomize(m, rng)
        shape = (rows,) + tuple(m.input_shape[1:])
        if "int" in str(m.inputs[0].dtype):  # ids for an Embedding (sinter reads f32 ids)
            x = rng.integers(0, 20, shape).astype(np.int32)
        else:
            x = rng.random(shape).astype(np.float32)
        x.astype(np.float32).tofile(os.path.join(work, f"{name}.in.f32"))
        y = np.asarray(m.predict(x, verbose=0))
        ref[name] = (softmax(y) if logits else y, logits, x, m.get_weights())
        m.save(os.path.join(work, f"{name}.keras"))
        with open(os.path.join(work, f"{name}.json"), "w") as f:
            f.write(m.to_json())
        m.save_weights(os.path.join(work, f"{name}.weights.h5"))
        lines += [f"{name}.keras {rows}", f"{name}.json {rows}"]
    with open(os.path.join(work, "models.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")

    # (b) sinter loads, predicts and writes .keras files.
    exe = os.path.join(build, "tests", "test_model_files")
    r = subprocess.run([exe], env=dict(os.environ, SN_KERAS_MODELS_DIR=work),
                       capture_output=True, text=True)
    print(r.stdout.strip())
    if r.returncode != 0:
        print(r.stderr.strip())
        print("FAIL (b) sinter could not load or predict some of Keras's models")
        ok = False

    # (c) and (d)
    for name, (probs, logits, x, weights) in ref.items():
        for kind in ("keras", "json"):
            if not os.path.exists(os.path.join(work, f"{name}.{kind}.sinter.keras")):
                print(f"FAIL (c) no predictions or model from sinter for {name}.{kind}")
                continue
            got = np.fromfile(os.path.join(work, f"{name}.{kind}.sinter.f32"), np.float32)
            got = got.reshape(probs.shape)
            d = float(np.max(np.abs(got - probs)))
            good = d <= TOL
            ok &= good
            print(f"{'OK  ' if good else 'FAIL'} (c) sinter predicts {name}.{kind} like Keras: "
                  f"max abs diff {d:.3g} (bound {TOL})")
            m2 = keras.models.load_model(os.path.join(work, f"{name}.{kind}.sinter.keras"))
            same = len(m2.get_weights()) == len(weights) and all(
                a.shape == b.shape and a.tobytes() == b.tobytes()
                for a, b in zip(m2.get_weights(), weights))
            y2 = np.asarray(m2.predict(x, verbose=0))
            p2 = softmax(y2) if logits else y2
            d2 = float(np.max(np.abs(p2 - probs)))
            d3 = float(np.max(np.abs(p2 - got)))
            good = same and d2 <= TOL and d3 <= TOL
            ok &= good
            print(f"{'OK  ' if good else 'FAIL'} (d) Keras {keras.__version__} loads sinter's "
                  f"{name}.{kind}.sinter.keras: weights {'bit-identical' if same else 'DIFFER'}, "
                  f"max abs diff {d2:.3g} to Keras's predictions, {d3:.3g} to sinter's")
            if kind == "keras" and name == "bn_cnn":
                cc = m2.get_compile_config() if hasattr(m2, "get_compile_config") else None
                opt = m2.optimizer
                good = (opt is not None and type(opt).__name__ == "SGD" and
                        abs(float(opt.learning_rate) - 0.05) < 1e-7 and opt.nesterov)
                ok &= good
                print(f"{'OK  ' if good else 'FAIL'} (d) compile settings survive: "
                      f"{type(opt).__name__ if opt else None}, compile_config={bool(cc)}")

    # (e) the command line on the guide's file.
    sinter = os.path.join(build, "sinter")
    guide_path = os.path.join(work, "guide.keras")
    r = subprocess.run([sinter, "summary", "--model", guide_path], capture_output=True, text=True)
    good = r.returncode == 0 and "Total params: 38,375,818" in r.stdout
    ok &= good
    print(f"{'OK  ' if good else 'FAIL'} (e) sinter summary --model guide.keras: "
          f"{[l for l in r.stdout.splitlines() if 'Total params' in l] or r.stderr.strip()}")

    # One training step on 32 images with a learning rate too small to move a weight: the loss
    # fit logs is the loss of Keras's initial weights on those images, L2 penalty included.
    data = os.path.join(work, "idx")
    os.makedirs(data, exist_ok=True)
    imgs = rng.integers(0, 256, (32, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, (32,), dtype=np.uint8)
    for split in ("train", "t10k"):
        write_idx(os.path.join(data, f"{split}-images-idx3-ubyte"), imgs)
        write_idx(os.path.join(data, f"{split}-labels-idx1-ubyte"), labels)
    log = os.path.join(work, "guide_train.csv")
    r = subprocess.run([sinter, "train", "--model", guide_path, "--data-dir", data, "--epochs", "1",
                        "--batch-size", "32", "--learning-rate", "1e-30", "--csv", log,
                        "--quiet"], capture_output=True, text=True)
    if r.returncode != 0:
        ok = False
        print(f"FAIL (e) sinter train --model guide.keras: {r.stderr.strip()}")
    else:
        with open(log) as f:
            row = next(csv.DictReader(f))
        loss = float(row["loss"])
        g = keras.models.load_model(guide_path)
        xs = (imgs.astype(np.float32) / 255.0)[..., None]
        logits = g(xs, training=False)
        ce = float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits))
        l2 = float(sum(float(v) for v in g.losses))
        good = abs(loss - (ce + l2)) <= 1e-4 and abs(loss - ce) > 10 * 1e-4
        # sinter's compile adds the penalties in a separate change; until it lands the loss is
        # the cross-entropy alone: say so and report SKIPPED rather than pass.
        pending = abs(loss - ce) <= 1e-4
        ok &= good or pending
        skipped |= pending
        print(f"{'OK  ' if good else 'SKIPPED' if pending else 'FAIL'} (e) sinter train --model "
              f"guide.keras: first-step loss {loss:.6f}; Keras: cross-entropy {ce:.6f} + L2 "
              f"{l2:.6f} = {ce + l2:.6f} (bound 1e-4)"
              + (" -- sinter's fit does not add the regularizers' penalty yet" if pending else ""))
    ok &= check_functional(build, work, rng)
    ok &= check_functional(build, work, rng, TEXT, "text", "g")
    print("PASS" if ok and not skipped else "SKIPPED (part)" if ok else "FAIL")
    return 1 if not ok else 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
