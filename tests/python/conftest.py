"""Shared fixtures of the Python package's tests (tests/test_python.sh runs them)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
FASHION = os.environ.get("SINTER_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


@pytest.fixture(autouse=True)
def fresh_names():
    """Each test starts Keras's automatic names from "dense", "sequential", ... again."""
    import sinter
    sinter.keras.backend.clear_session()
    sinter.keras.mixed_precision.set_global_policy("float32")
    yield


def need_fashion():
    if not os.path.isdir(FASHION):
        pytest.skip(f"Fashion-MNIST not installed ({FASHION})")


def run_py(code_or_path, *args, env=None, timeout=900, **kw):
    """Runs Python (a file path or code) in a child with this environment."""
    e = dict(os.environ)
    e.update(env or {})
    cmd = [sys.executable] + ([code_or_path] if os.path.exists(code_or_path)
                              else ["-c", code_or_path]) + list(args)
    return subprocess.run(cmd, env=e, timeout=timeout, capture_output=True, text=True, **kw)


def keras_python():
    """The interop venv's python (real Keras on TensorFlow, scripts/pyenv.sh), or skip."""
    build = os.environ.get("SN_BUILD_DIR")
    if not build:
        pytest.skip("SN_BUILD_DIR not set (run through tests/test_python.sh)")
    r = subprocess.run(["bash", os.path.join(SRC, "scripts/pyenv.sh"), build],
                       capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        pytest.skip(f"no interop venv with real Keras: {r.stderr.strip()[-300:]}")
    return r.stdout.strip().splitlines()[-1]


def run_keras(py, script, *args, cwd=None, timeout=900):
    """Runs a script under real Keras (TensorFlow backend, quiet logs, no sinter on the path)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow", PYTHONPATH="")
    return subprocess.run([py, str(script)] + list(args), env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def close(path, a, b, tol=1e-5):
    """Keras's values `a` (nested dicts of numbers and arrays) and sinter's `b` agree within
    `tol` relative to max(1, |a|); `path` names the place for the message."""
    if isinstance(a, dict):
        assert sorted(a) == sorted(b), f"{path}: keys {sorted(b)} (sinter) != {sorted(a)} (Keras)"
        for k in a:
            close(f"{path}/{k}", a[k], b[k], tol)
        return
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape, f"{path}: shape {b.shape} (sinter) != {a.shape} (Keras)"
    err = float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(a)))) if a.size else 0.0
    assert err <= tol, f"{path}: sinter {b.tolist()} vs Keras {a.tolist()} (error {err:.3g})"


def run_pair(script, tmp_path):
    """Runs a script (`script MODE OUT`) with sinter and with real Keras, each to success;
    returns the two finished processes: (Keras's, sinter's)."""
    mine = run_py(script, "sinter", str(tmp_path))
    assert mine.returncode == 0, f"sinter run failed:\n{mine.stderr[-3000:]}"
    py = keras_python()
    ref = run_keras(py, script, "keras", str(tmp_path))
    assert ref.returncode == 0, f"Keras run failed:\n{ref.stderr[-3000:]}"
    return ref, mine


def same_stdout_as_keras(script, tmp_path, what="outputs"):
    """run_pair, and the two runs printed the same text (`what` names it in the message)."""
    ref, mine = run_pair(script, tmp_path)
    assert mine.stdout == ref.stdout, \
        f"{what} differ:\n--- Keras\n{ref.stdout}\n--- sinter\n{mine.stdout}"


def run_both(script, tmp_path):
    """Runs a case script (`script MODE OUT`) with sinter and with real Keras; returns what each
    wrote to OUT/<mode>.json: (Keras's, sinter's)."""
    run_pair(script, tmp_path)
    with open(tmp_path / "keras.json") as f:
        kj = json.load(f)
    with open(tmp_path / "sinter.json") as f:
        sj = json.load(f)
    return kj, sj


def same_as_keras(script, tmp_path):
    """run_both on a keras_cases.py script, then what the two runs wrote (<mode>.json and
    <mode>.npz) compared with close()."""
    kj, sj = run_both(script, tmp_path)
    close("", kj, sj)
    kw, sw = np.load(tmp_path / "keras.npz"), np.load(tmp_path / "sinter.npz")
    assert sorted(kw.files) == sorted(sw.files)
    for k in kw.files:
        close(k, kw[k], sw[k])
