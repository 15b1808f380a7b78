"""Seeds. keras.utils.set_random_seed(s) makes a script deterministic, as in Keras: model
weights are drawn from s (sn_model_from_json's seed) and fit's shuffle from s plus the number
of earlier fit calls, so `set_random_seed(1)` + fit matches `sinter train --seed 1`. Without
it, each model and fit draws a fresh seed, as Keras's unseeded runs differ."""
import random
import threading

_lock = threading.Lock()
_seed = None


def set_seed(seed):
    global _seed
    with _lock:
        _seed = int(seed)


def next_seed():
    with _lock:
        return _seed if _seed is not None else random.SystemRandom().getrandbits(63)


def fit_seed(calls):
    with _lock:
        if _seed is None:
            return random.SystemRandom().getrandbits(63)
        return _seed + calls
