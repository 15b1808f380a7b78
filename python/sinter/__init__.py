"""sinter: Keras's API over sinter's C training engine (libsinter, through ctypes).

    import sinter
    from sinter import keras

`sinter` also answers to the names a TensorFlow script uses (`tf.keras`, `tf.data`,
`tf.config`, `tf.distribute`), so `import sinter as tf` runs such a script. docs/python.md.
"""
from . import _lib  # noqa: F401  (loads libsinter first: a clear ImportError if missing)
from . import config, data, distribute, keras  # noqa: F401
from ._lib import SinterError, UnsupportedError  # noqa: F401

__version__ = "0.1.0"
