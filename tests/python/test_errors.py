"""C errors become the Python exception of their kind, carrying sinter's message."""
import numpy as np
import pytest

import sinter
from sinter import keras
from sinter.keras import layers


def small():
    return keras.Sequential([keras.Input((4,)), layers.Dense(3)])


def test_bad_config_value_is_value_error():
    m = keras.Sequential([keras.Input((4,)), layers.Dense(0)])
    with pytest.raises(ValueError, match=r"units"):
        m.build((None, 4))


def test_unsupported_is_not_implemented_with_field():
    m = keras.Sequential([keras.Input((8, 8, 1)), layers.Conv2D(2, 3, dilation_rate=2)])
    with pytest.raises(NotImplementedError) as e:
        m.build((None, 8, 8, 1))
    assert "dilation_rate" in str(e.value) and isinstance(e.value, sinter.UnsupportedError)


def test_predict_shape_mismatch_names_shapes():
    m = small()
    with pytest.raises(ValueError, match=r"4"):
        m.predict(np.zeros((2, 5), np.float32), verbose=0)


def test_missing_file_is_os_error(tmp_path):
    m = small()
    m.build((None, 4))
    with pytest.raises(OSError) as e:
        m.load_weights(str(tmp_path / "nope.weights.h5"))
    assert "nope.weights.h5" in str(e.value)
    with pytest.raises(OSError):
        keras.models.load_model(str(tmp_path / "nope.keras"))


def test_corrupt_model_file_is_value_error(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"class_name": "Sequential", "config": {"layers": [{"class_name": "Nope"}]}}')
    with pytest.raises((ValueError, NotImplementedError)) as e:
        keras.models.load_model(str(p))
    assert "Nope" in str(e.value)


def test_fit_before_compile_is_runtime_error():
    with pytest.raises(RuntimeError, match="compile"):
        small().fit(np.zeros((4, 4)), np.zeros(4), verbose=0)


def test_label_out_of_range_fails_cleanly_and_model_stays_usable():
    m = small()
    m.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    with pytest.raises(ValueError):
        m.fit(np.zeros((4, 4)), np.ones((5,)), verbose=0)  # 4 samples, 5 labels
    m.fit(np.zeros((4, 4)), np.ones((4,)), verbose=0)


def test_unknown_names():
    with pytest.raises(ValueError, match="optimizer"):
        small().compile(optimizer="adagradx", loss="mse")
    with pytest.raises(NotImplementedError, match="loss"):
        small().compile(optimizer="adam", loss="poisson")
    with pytest.raises(TypeError):
        layers.Dense(3, nonsense=1)
    with pytest.raises(ValueError, match="cpu:7|CPU:7"):
        sinter.distribute.OneDeviceStrategy("cpu:7")
