"""keras.utils: set_random_seed, to_categorical."""
import random

import numpy as np

from .. import _random


def set_random_seed(seed):
    """Seeds Python's and NumPy's generators and sinter's weights and shuffles."""
    random.seed(seed)
    np.random.seed(seed)
    _random.set_seed(seed)


def to_categorical(x, num_classes=None):
    x = np.asarray(x, dtype="int64")
    shape = x.shape[:-1] if x.ndim > 1 and x.shape[-1] == 1 else x.shape
    x = x.reshape(-1)
    n = num_classes or int(x.max()) + 1
    out = np.zeros((x.size, n), dtype="float32")
    out[np.arange(x.size), x] = 1
    return out.reshape(shape + (n,))
