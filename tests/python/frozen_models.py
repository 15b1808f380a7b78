"""The transfer-learning tutorial's frozen base, written the Keras way and run by
tests/python/test_frozen.py twice: with sinter (`python frozen_models.py sinter OUT`) and with
real Keras (`... keras OUT`). A base model with BatchNormalization frozen after it was built
(base.trainable = False), called with training=False, a Dense frozen after the outer model was
built; the same weights from one numpy seed on both sides, summary() before and after one
epoch of SGD to stdout, the weights before and after the epoch and the trainable count to OUT."""
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
bi = keras.Input((6, 6, 3))
b = layers.Conv2D(4, 3, padding="same")(bi)
b = layers.ReLU()(layers.BatchNormalization()(b))
base = keras.Model(bi, b, name="base")
base.trainable = False
inp = keras.Input((6, 6, 3))
x = layers.Conv2D(3, 1)(inp)
x = base(x, training=False)
x = layers.GlobalAveragePooling2D()(x)
d = layers.Dense(5, activation="tanh")
x = d(x)
y = layers.Dense(3)(x)
m = keras.Model(inp, y)
d.trainable = False

rng = np.random.default_rng(0)
w0 = [rng.normal(size=w.shape).astype(np.float32) for w in m.get_weights()]
w0 = [np.abs(w) + 0.5 if w.ndim == 1 else w for w in w0]  # BN's moving variance > 0
m.set_weights(w0)
xs = rng.random((32, 6, 6, 3)).astype(np.float32)
ys = rng.integers(0, 3, (32,)).astype(np.int32)
m.summary()
m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
m.fit(xs, ys, batch_size=16, epochs=1, shuffle=False, verbose=0)
m.summary()
np.savez(f"{out}/frozen_{mode}.npz", *w0, *m.get_weights())
print("trainable variables:", len(m.trainable_variables))
# the flags survive a save and load_model on each side (sinter writes them in its config)
m.save(f"{out}/frozen_{mode}.keras")
m2 = keras.models.load_model(f"{out}/frozen_{mode}.keras")
print("reloaded trainable variables:", len(m2.trainable_variables))

# The fine-tuning phase (issue 23): the base unfrozen but still called with training=False.
# Keras 3's fit overrides that keyword with its own training=True (functional.py's
# operation_fn), so the base's BatchNormalization trains and updates its moving statistics, on
# both sides alike.
base.trainable = True
m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
m.fit(xs, ys, batch_size=16, epochs=1, shuffle=False, verbose=0)
print("fine-tuning trainable variables:", len(m.trainable_variables))
# A BatchNormalization and a Dropout called with training= keywords: predict runs both in
# inference mode whatever the keyword says (Keras 3's predict passes training=False).
i2 = keras.Input((4,))
h = layers.BatchNormalization()(layers.Dense(4)(i2), training=False)
h = layers.Dropout(0.5)(h, training=True)
m3 = keras.Model(i2, layers.Dense(2)(h), name="calls")
w3 = [rng.normal(size=w.shape).astype(np.float32) for w in m3.get_weights()]
m3.set_weights([np.abs(w) + 0.5 if w.ndim == 1 else w for w in w3])
p3 = m3.predict(rng.random((8, 4)).astype(np.float32), verbose=0)
np.savez(f"{out}/finetune_{mode}.npz", *m.get_weights(), p3)
# the keywords written back as Keras writes them (the saved files' config.json)
m.save(f"{out}/finetune_{mode}.keras")
m3.save(f"{out}/calls_{mode}.keras")
for name in ("finetune", "calls"):
    import json
    import zipfile
    with zipfile.ZipFile(f"{out}/{name}_{mode}.keras") as z:
        cfg = json.loads(z.read("config.json"))
    for e in cfg["config"]["layers"]:
        for k, node in enumerate(e["inbound_nodes"]):
            print(name, e["name"], k, "training:", node["kwargs"].get("training", "absent"))
