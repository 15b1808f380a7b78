"""tf.data over sinter's C datasets (sinter/data.h).

A Dataset here is a recipe: a source (arrays, or TFRecord files) and the transforms applied
to it. tf.data datasets are values (ds.batch(32) leaves ds as it was), while a C transform
takes over its source; so the C chain is built from the recipe when fit, evaluate, predict or
a Python loop uses the dataset, each time anew, starting from the beginning. The arrays are
converted once, when the dataset is made (the first component to float32, integer labels to
int32, other float components to float32); building a chain copies them into C memory once.
"""
import ctypes as C
import os

import numpy as np

from . import _lib
from . import _random

AUTOTUNE = -1
_lib_ = _lib.lib


class Dataset:
    def __init__(self, source, ops=()):
        self._source = source
        self._ops = tuple(ops)

    # ---- sources --------------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors, name=None):
        single = not isinstance(tensors, (tuple, list))
        parts = [tensors] if single else list(tensors)
        if isinstance(tensors, dict) or any(isinstance(p, dict) for p in parts):
            raise NotImplementedError("from_tensor_slices: dict elements are not supported; "
                                      "pass an array or a tuple (x, y)")
        if len(parts) > 8:
            raise ValueError(f"from_tensor_slices: at most 8 components; got {len(parts)}")
        arrays = []
        for i, p in enumerate(parts):
            a = np.asarray(p)
            if a.ndim == 0:
                raise ValueError("from_tensor_slices: each component needs a first dimension")
            if i > 0 and a.dtype.kind in "biu":
                arrays.append((np.ascontiguousarray(a, np.int32), _lib.SN_I32))
            else:
                arrays.append((np.ascontiguousarray(a, np.float32), _lib.SN_F32))
        n = {len(a) for a, _ in arrays}
        if len(n) != 1:
            raise ValueError(f"from_tensor_slices: the components have different lengths "
                             f"{sorted(n)}")
        return Dataset(("tensors", arrays, single))

    from_tensors_slices = from_tensor_slices

    # ---- transforms (each returns a new Dataset) --------------------------------------------
    def _with(self, *op):
        return Dataset(self._source, self._ops + (op,))

    def shuffle(self, buffer_size, seed=None, reshuffle_each_iteration=True, name=None):
        seed = _random.next_seed() if seed is None else int(seed)
        return self._with("shuffle", int(buffer_size), seed, bool(reshuffle_each_iteration))

    def batch(self, batch_size, drop_remainder=False, num_parallel_calls=None,
              deterministic=None, name=None):
        return self._with("batch", int(batch_size), bool(drop_remainder))

    def repeat(self, count=None, name=None):
        return self._with("repeat", -1 if count is None else int(count))

    def cache(self, filename="", name=None):
        if filename:
            raise NotImplementedError("cache(filename): sinter caches in memory only")
        return self._with("cache")

    def prefetch(self, buffer_size, name=None):
        return self._with("prefetch", 2 if buffer_size in (None, AUTOTUNE) else int(buffer_size))

    def take(self, count, name=None):
        return self._with("take", int(count))

    def skip(self, count, name=None):
        return self._with("skip", int(count))

    def shard(self, num_shards, index, name=None):
        return self._with("shard", int(num_shards), int(index))

    def map(self, map_func, num_parallel_calls=None, deterministic=None, name=None):
        from ._function import dataset_map  # issue 25
        return dataset_map(self, map_func)

    # ---- the C chain ----------------------------------------------------------------------
    def _materialize(self):
        from .keras.models import _CDataset, _dataset_from_arrays
        kind = self._source[0]
        if kind == "tensors":
            ds = _CDataset(_dataset_from_arrays(self._source[1]))
        else:
            _, paths, spec_args, normalize = self._source
            spec = _lib_.sn_tfrecord_image_spec_defaults()
            keep = [p.encode() for p in paths]
            spec.image_key, spec.label_key = spec_args[0].encode(), spec_args[1].encode()
            spec.image_shape = _lib.Shape.of(spec_args[2])
            arr = (C.c_char_p * len(keep))(*keep)
            h = C.c_void_p()
            _lib.check(_lib_.sn_dataset_from_tfrecord_images(C.byref(h), arr, len(keep),
                                                             C.byref(spec)), "TFRecordDataset")
            ds = _CDataset(h)
        fns = {"shuffle": _lib_.sn_dataset_shuffle, "batch": _lib_.sn_dataset_batch,
               "repeat": _lib_.sn_dataset_repeat, "cache": _lib_.sn_dataset_cache,
               "prefetch": _lib_.sn_dataset_prefetch, "take": _lib_.sn_dataset_take,
               "skip": _lib_.sn_dataset_skip, "shard": _lib_.sn_dataset_shard}
        for op in self._ops:
            ds.apply(fns[op[0]], *op[1:], what=f"Dataset.{op[0]}")
        if kind == "tfrecord":
            # u8 images reach the model as float32 (Keras casts them); normalize divides by 255
            if self._source[3]:
                ds.apply(_lib_.sn_dataset_map_normalize, 0, False, what="TFRecordDataset")
            else:
                ds.apply(_lib_.sn_dataset_map_cast, 0, _lib.SN_F32, what="TFRecordDataset")
        return ds

    def _element_shape(self, i):
        if self._source[0] == "tensors":
            return self._source[1][i][0].shape[1:]
        return tuple(self._source[2][2]) if i == 0 else ()

    def __iter__(self):
        from .keras.models import array_from_tensor
        ds = self._materialize()
        try:
            n = _lib_.sn_dataset_num_components(ds.h)
            comps = (C.c_void_p * n)()
            end = C.c_bool()
            single = self._source[0] == "tensors" and self._source[2]
            while True:
                _lib.check(_lib_.sn_dataset_next(ds.h, comps, C.byref(end)), "Dataset")
                if end.value:
                    return
                out = tuple(array_from_tensor(comps[i]) for i in range(n))
                yield out[0] if single else out
        finally:
            ds.close()

    def as_numpy_iterator(self):
        return iter(self)

    def cardinality(self):
        ds = self._materialize()
        try:
            return int(_lib_.sn_dataset_cardinality(ds.h))
        finally:
            ds.close()

    def __len__(self):
        n = self.cardinality()
        if n < 0:
            raise TypeError("the dataset's length is infinite or unknown")
        return n


INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


def TFRecordDataset(filenames, compression_type=None, buffer_size=None,
                    num_parallel_reads=None, name=None, image_key="image", label_key="label",
                    image_shape=(28, 28), normalize=False):
    """(image, label) elements from TFRecord files of tf.train.Example, parsed in C
    (sn_dataset_from_tfrecord_images): a sinter extension of tf.data.TFRecordDataset, which
    yields the serialized records for a Python parse function instead. Gzip files are read as
    the C reader detects them."""
    paths = [filenames] if isinstance(filenames, (str, os.PathLike)) else list(filenames)
    paths = [os.fspath(p) for p in paths]
    return Dataset(("tfrecord", paths, (image_key, label_key, tuple(image_shape)),
                    bool(normalize)))


class experimental:  # noqa: N801  (tf.data.experimental)
    AUTOTUNE = AUTOTUNE
    INFINITE_CARDINALITY = INFINITE_CARDINALITY
    UNKNOWN_CARDINALITY = UNKNOWN_CARDINALITY
