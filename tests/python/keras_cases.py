"""What the *_cases.py scripts share: each is run twice, with sinter (`python X_cases.py sinter
OUT`) and with real Keras (`... keras OUT`, the interop venv, without pytest or sinter on the
path), and writes what it recorded to OUT/<mode>.npz and OUT/<mode>.json for its test to
compare (conftest.same_as_keras)."""
import json
import sys

import numpy as np


def keras_of_mode():
    """(mode, out, keras, layers) from the command line: the Keras API of that mode."""
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "keras":
        import keras
        from keras import layers
    else:
        from sinter import keras
        from sinter.keras import layers
    return mode, out, keras, layers


def record_weights(arrays, name, m):
    for i, w in enumerate(m.get_weights()):
        arrays[f"{name}_w{i}"] = w


def write(out, mode, res, arrays):
    np.savez(f"{out}/{mode}.npz", **arrays)
    with open(f"{out}/{mode}.json", "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    print("ok")
