"""A stand-in for tensorflow_datasets.load over the machine's MNIST and Fashion-MNIST copies
(keras.datasets' IDX readers): `from sinter import tfds` in place of
`import tensorflow_datasets as tfds` (issue 25). Elements are (image uint8 [28, 28, 1],
label int64), as tfds gives them with as_supervised=True; sinter's Dataset holds images as
float32 and labels as int32 (data.py).

$SINTER_TFDS_MAX_EXAMPLES (a test knob) keeps only the first N examples of each split."""
import os
import types

import numpy as np

from . import data

_cache = {}


def _arrays(name, split):
    from .keras import datasets
    if name not in ("mnist", "fashion_mnist"):
        raise NotImplementedError(f"tfds.load(name={name!r}): sinter's stand-in has 'mnist' "
                                  "and 'fashion_mnist'")
    if name not in _cache:
        (x, y), (xt, yt) = getattr(datasets, name).load_data()
        _cache[name] = {"train": (x, y), "test": (xt, yt)}
    base = split.split("[")[0]
    if base not in ("train", "test"):
        raise ValueError(f"tfds.load: split {split!r}; the stand-in has 'train' and 'test'")
    if "[" in split:
        raise NotImplementedError(f"tfds.load: split slicing {split!r} in sinter's stand-in")
    x, y = _cache[name][base]
    cap = os.environ.get("SINTER_TFDS_MAX_EXAMPLES")
    if cap:
        x, y = x[:int(cap)], y[:int(cap)]
    return x, y


def load(name, split=None, data_dir=None, batch_size=None, shuffle_files=False,
         download=True, as_supervised=False, with_info=False, try_gcs=False, **kwargs):
    if split is None:
        raise NotImplementedError("tfds.load without split= in sinter's stand-in")
    if not as_supervised:
        raise NotImplementedError("tfds.load(as_supervised=False) (dict elements) in sinter's "
                                  "stand-in")
    x, y = _arrays(name, split)
    ds = data.Dataset.from_tensor_slices((x[..., None], y.astype(np.int64)))
    if batch_size:
        ds = ds.batch(batch_size)
    if not with_info:
        return ds
    info = types.SimpleNamespace(
        name=name,
        splits={s: types.SimpleNamespace(num_examples=len(_arrays(name, s)[0]))
                for s in ("train", "test")},
        features={"image": types.SimpleNamespace(shape=(28, 28, 1), dtype="uint8"),
                  "label": types.SimpleNamespace(num_classes=10)})
    return ds, info
