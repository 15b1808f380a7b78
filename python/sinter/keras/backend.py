"""keras.backend: the little a script needs."""
from . import _naming


def clear_session(free_memory=True):
    """Automatic names start again ("dense", "sequential", ...)."""
    _naming.reset()


def backend():
    return "sinter"


def floatx():
    return "float32"
