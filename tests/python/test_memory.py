"""Objects free their C memory: 1,000 predict calls do not grow the process, nor do 100
models made and dropped."""
import ctypes
import gc

import numpy as np

from sinter import keras
from sinter.keras import layers


try:  # glibc: hand freed heap pages back first, so RSS counts live memory, not the
    # allocator's free lists (without it, 300 models made and dropped drifted by up to 22 MB
    # in one run of ten; with it, 0.1 MB over 800)
    _trim = ctypes.CDLL("libc.so.6").malloc_trim
except (OSError, AttributeError):
    _trim = None


def rss_mb():
    gc.collect()
    if _trim:
        _trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def model():
    m = keras.Sequential([keras.Input((28, 28)), layers.Flatten(),
                          layers.Dense(64, activation="relu"), layers.Dense(10)])
    m.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(True))
    return m


def test_predict_1000_calls_no_growth():
    m = model()
    x = np.random.default_rng(0).random((50, 28, 28))  # float64: converted on each call
    for _ in range(50):  # warm: plans for batch 32 and 18, allocator pools
        m.predict(x, verbose=0)
    gc.collect()
    before = rss_mb()
    for _ in range(1000):
        m.predict(x, verbose=0)
    gc.collect()
    grown = rss_mb() - before
    # a leak of one output (2 KB) or one input (300 KB) per call would be 2 MB or 300 MB
    assert grown < 1.5, f"RSS grew {grown:.2f} MB over 1,000 predict calls"


def test_models_are_freed():
    x = np.zeros((8, 28, 28), np.float32)
    for _ in range(100):  # the allocator's arenas settle over the first ~100 (4-5 MB)
        model().predict(x, verbose=0)
    gc.collect()
    before = rss_mb()
    for _ in range(300):
        model().predict(x, verbose=0)
    gc.collect()
    grown = rss_mb() - before
    # a model holds ~0.6 MB (variables, Adam slots, its prediction plan), so leaking them
    # would grow 180 MB here; after malloc_trim the drift measured 0.1 MB
    assert grown < 20, f"RSS grew {grown:.2f} MB over 300 models made and dropped"


def test_replaced_model_freed_by_next_fit():
    """The guide rebinds `model` to a new one and fits it: the old model, held only by its own
    reference cycles (its layers, its History), must free its C side before the new fit
    instead of whenever Python's cycle collector runs (8 replicas of the guide's CNN each)."""
    x, y = np.zeros((8, 28, 28), np.float32), np.zeros(8, np.int32)
    was = gc.isenabled()
    gc.disable()  # the collector must not be what frees it
    try:
        m = model()
        m.fit(x, y, epochs=1, verbose=0)
        first = m._fin
        m = model()
        m.fit(x, y, epochs=1, verbose=0)
        assert not first.alive, "the replaced model's C side outlived the next fit"
    finally:
        if was:
            gc.enable()
