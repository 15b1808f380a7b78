"""Functional models written the Keras way, run by tests/python/test_functional.py twice: with
sinter (`python functional_models.py sinter OUT`) and with real Keras (`... keras OUT`). Each
model's summary() goes to stdout; sinter saves its weights and predictions to OUT, Keras loads
the same weights (set_weights) and saves its own predictions, which the test compares."""
import sys

import numpy as np

mode, out = sys.argv[1], sys.argv[2]
if mode == "keras":
    import keras
    from keras import layers
else:
    from sinter import keras
    from sinter.keras import layers

keras.utils.set_random_seed(3)
models = {}

# several inputs and outputs, fan-out, merges, a named input
a = keras.Input(shape=(8,), name="a")
b = keras.Input(shape=(4,))
d = layers.Dense(16, activation="relu")
h1 = d(a)
h2 = layers.Dense(16)(b)
s = layers.Add()([h1, h2])
c = layers.Concatenate()([s, h1])
models["multi_io"] = keras.Model([a, b], [layers.Dense(5)(c), layers.Dense(3, name="o2")(s)])

# one input, one output: a shared layer called twice, the input itself in a merge, every merge
x = keras.Input((6,))
shared = layers.Dense(6, activation="tanh")
y = shared(shared(x))
z = layers.Concatenate()([x, y, layers.Multiply()([x, y])])
p = layers.Dense(4)(z)
q = layers.Dense(4, activation="relu")(y)
m = layers.concatenate([layers.Subtract()([p, q]), layers.Average()([p, q]),
                        layers.Maximum()([p, q]), layers.Minimum()([p, q]),
                        layers.add([p, q, p])])
m = layers.LeakyReLU(negative_slope=0.2)(m)
out_t = layers.Softmax()(layers.Dense(3)(layers.ReLU()(layers.Dense(8)(m))))
models["graph"] = keras.Model(inputs=x, outputs=out_t, name="graph")

# images: two branches of convolutions over one input, joined
img = keras.Input((10, 10, 2))
r = layers.Rescaling(0.5, offset=-1.0)(img)
c1 = layers.Conv2D(4, 3, padding="same", activation="relu")(r)
c2 = layers.Conv2D(4, 1)(layers.ZeroPadding2D(1)(layers.MaxPooling2D(2)(r)))
c2 = layers.Conv2D(4, 3)(layers.Conv2D(4, 3, padding="same")(c2))
j = layers.Concatenate(axis=-1)([layers.GlobalMaxPooling2D()(c1),
                                 layers.GlobalAveragePooling2D()(c1),
                                 layers.Flatten()(layers.AveragePooling2D(4)(c2))])
models["images"] = keras.Model(img, layers.Dense(2)(j))

# the convolution family of MobileNet/Xception/U-Net-style nets
img = keras.Input((12, 12, 3))
c = layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2)(img)
c = layers.ReLU(max_value=6.0)(layers.BatchNormalization()(c))
c = layers.SeparableConv2D(8, 3, strides=2, padding="same", activation="relu")(c)
u = layers.UpSampling2D(2)(c)
t = layers.Conv2DTranspose(4, 3, strides=2, padding="same")(c)
j = layers.Concatenate()([layers.Cropping2D(((1, 1), (2, 0)))(u),
                          layers.Cropping2D(((1, 1), (2, 0)))(t)])
j = layers.PReLU()(layers.ELU(alpha=0.5)(j))
models["convs"] = keras.Model(img, layers.Dense(3)(layers.GlobalAveragePooling2D()(j)))

# sequences: Conv1D, 1-D pools, Permute, Bidirectional over LSTM and GRU
seq = keras.Input((16, 4))
s1 = layers.Conv1D(6, 3, padding="same", activation="relu")(seq)
s1 = layers.MaxPooling1D(2)(s1)
s2 = layers.AveragePooling1D(2, strides=1, padding="same")(s1)
s3 = layers.Permute((2, 1))(layers.Permute((2, 1))(s2))
b1 = layers.Bidirectional(layers.LSTM(5, return_sequences=True))(s3)
b2 = layers.Bidirectional(layers.GRU(3), merge_mode="sum")(b1)
g = layers.Concatenate()([b2, layers.GlobalMaxPooling1D()(s1),
                          layers.GlobalAveragePooling1D()(b1)])
models["seq"] = keras.Model(seq, layers.Dense(2)(g))

# attention: a pre-LayerNorm causal block, residual adds, a GELU feed-forward
tok = keras.Input((8, 16))
h = layers.LayerNormalization(epsilon=1e-5)(tok)
a = layers.MultiHeadAttention(num_heads=2, key_dim=8)(h, h, use_causal_mask=True)
r = layers.Add()([tok, a])
f = layers.Dense(16)(layers.Dense(32, activation="gelu")(layers.LayerNormalization()(r)))
models["attn"] = keras.Model(tok, layers.Dense(5)(layers.Add()([r, f])))

# cross-attention with a separate key and an attention_mask input
qx, ctx, keys = keras.Input((5, 8)), keras.Input((7, 6)), keras.Input((7, 4))
amask = keras.Input((5, 7))
ca = layers.MultiHeadAttention(num_heads=2, key_dim=4)(qx, ctx, keys, attention_mask=amask)
models["cross_attn"] = keras.Model([qx, ctx, keys, amask], layers.Dense(3)(ca))

# a Functional model with two outputs used as a layer (nested), called on two inputs
i = keras.Input((6,))
h = layers.Dense(5, activation="relu")(i)
enc = keras.Model(i, [layers.Dense(4)(h), h], name="enc")
x1, x2 = keras.Input((6,)), keras.Input((6,))
a1, b1 = enc(x1)
a2, _ = enc(x2)
models["nested"] = keras.Model([x1, x2], layers.Dense(2, name="head")(
    layers.Concatenate()([a1, b1, a2])), name="outer")

# value_dim != key_dim, output_shape, and key by keyword given after attention_mask: Keras
# writes key among the kwargs, in the call's order (issue 26); the JSON lines below compare it
qx2, ctx2, keys2 = keras.Input((5, 8)), keras.Input((7, 6)), keras.Input((7, 4))
amask2 = keras.Input((5, 7))
ka = layers.MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3, output_shape=6)(
    qx2, ctx2, attention_mask=amask2, key=keys2)
kb = layers.MultiHeadAttention(num_heads=3, key_dim=2, value_dim=5)(
    ka, ctx2, key=keys2, use_causal_mask=True)
models["key_kw"] = keras.Model([qx2, ctx2, keys2, amask2], layers.Dense(3)(kb))

rng = np.random.default_rng(0)
inputs = {"graph": rng.normal(size=(32, 6)).astype("float32"),
          "images": rng.normal(size=(16, 10, 10, 2)).astype("float32"),
          "convs": rng.normal(size=(4, 12, 12, 3)).astype("float32"),
          "seq": rng.normal(size=(8, 16, 4)).astype("float32"),
          "attn": rng.normal(size=(4, 8, 16)).astype("float32"),
          "cross_attn": [rng.normal(size=(3, 5, 8)).astype("float32"),
                         rng.normal(size=(3, 7, 6)).astype("float32"),
                         rng.normal(size=(3, 7, 4)).astype("float32"),
                         (rng.random((3, 5, 7)) > 0.3).astype("float32")],
          "nested": [rng.normal(size=(5, 6)).astype("float32"),
                     rng.normal(size=(5, 6)).astype("float32")],
          "key_kw": [rng.normal(size=(3, 5, 8)).astype("float32"),
                     rng.normal(size=(3, 7, 6)).astype("float32"),
                     rng.normal(size=(3, 7, 4)).astype("float32"),
                     (rng.random((3, 5, 7)) > 0.3).astype("float32")]}
for name, model in models.items():
    print(f"MODEL {name} {[l.name for l in model.layers]}")
    model.summary()
    import json
    for e in json.loads(model.to_json())["config"]["layers"]:  # how each MHA call is written
        if e["class_name"] == "MultiHeadAttention":
            print("CALLS", e["config"]["name"], e["config"]["value_dim"],
                  e["config"]["output_shape"],
                  [(len(n["args"]), list(n["kwargs"])) for n in e["inbound_nodes"]])
    wfile = f"{out}/{name}_weights.npz"
    if mode == "keras":
        w = np.load(wfile)
        model.set_weights([w[f"w{i}"] for i in range(len(w.files))])
    else:
        np.savez(wfile, **{f"w{i}": v for i, v in enumerate(model.get_weights())})
    if name in inputs:
        np.save(f"{out}/{name}_{mode}.npy", model.predict(inputs[name], verbose=0))
