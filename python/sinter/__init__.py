"""sinter: Keras's API over sinter's C training engine (libsinter, through ctypes).

    import sinter
    from sinter import keras

`sinter` also answers to the names a TensorFlow script uses (`tf.keras`, `tf.data`,
`tf.config`, `tf.distribute`), so `import sinter as tf` runs such a script. docs/python.md.
"""
from . import _lib  # noqa: F401  (loads libsinter first: a clear ImportError if missing)
from . import config, data, distribute, keras  # noqa: F401
from ._lib import SinterError, UnsupportedError  # noqa: F401
# tensors, sinter.function, GradientTape (issue 25)
from ._tensor import (DType, TensorShape, add, as_dtype, bfloat16, bool_ as bool,  # noqa: F401
                      cast, constant, convert_to_tensor, device, divide, exp, float32,
                      float64, int32, int64, is_tensor, log, matmul, multiply, reduce_mean,
                      reduce_sum, relu, reshape, sigmoid, sqrt, subtract, tanh, uint8)
from ._tensor import EagerTensor as Tensor  # noqa: F401
from ._function import GradientTape, Variable, function  # noqa: F401
from ._function import range_ as range  # noqa: F401,A001
from . import nn  # noqa: F401

__version__ = "0.1.0"
