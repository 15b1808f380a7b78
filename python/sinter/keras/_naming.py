"""Keras's automatic object names: "dense", "dense_1", ... counted per name in the session,
as keras.src.backend.common.global_state does, so a script's layers and models get the names
Keras would give them (summary() and saved files show them)."""
import re
import threading

_lock = threading.Lock()
_counts = {}


def snake_case(name):
    name = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def unique(base):
    with _lock:
        n = _counts.get(base, 0)
        _counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


def reset():
    """keras.backend.clear_session(): names start again from "dense"."""
    with _lock:
        _counts.clear()
