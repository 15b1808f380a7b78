"""keras.datasets.mnist / fashion_mnist: load_data() from the machine's IDX files, read by
sinter's C reader (sn_mnist_load). Keras downloads them; sinter reads a folder with the four
IDX files (.gz or not): `path`, else $SINTER_MNIST_DIR / $SINTER_FASHION_MNIST_DIR, else the
Debian package's folder."""
import ctypes as C
import os
import types

from .. import _lib
from .models import array_from_tensor

_DIRS = {
    "fashion_mnist": ("SINTER_FASHION_MNIST_DIR", ["/usr/share/datasets/fashion-mnist"]),
    "mnist": ("SINTER_MNIST_DIR", ["/usr/share/datasets/mnist"]),
}


def _split(d, split):
    x, y = C.c_void_p(), C.c_void_p()
    _lib.check(_lib.lib.sn_mnist_load(d.encode(), split.encode(), C.byref(x), C.byref(y)),
               "load_data")
    try:
        return array_from_tensor(x), array_from_tensor(y)
    finally:
        _lib.lib.sn_tensor_free(x)
        _lib.lib.sn_tensor_free(y)


def _loader(name):
    env, defaults = _DIRS[name]

    def load_data(path=None):
        """-> (x_train, y_train), (x_test, y_test): uint8 [n, 28, 28] and uint8 [n]."""
        d = path or os.environ.get(env)
        if d is None:
            d = next((p for p in defaults if os.path.isdir(p)), None)
        if d is None:
            raise OSError(f"{name}.load_data: no data folder; pass path= (a folder with the "
                          f"four IDX files) or set {env}; looked in {', '.join(defaults)}")
        if os.path.isfile(d):
            d = os.path.dirname(d)
        return _split(d, "train"), _split(d, "test")
    return types.SimpleNamespace(load_data=load_data)


mnist = _loader("mnist")
fashion_mnist = _loader("fashion_mnist")
