"""Shared fixtures of the Python package's tests (tests/test_python.sh runs them)."""
import os
import subprocess
import sys

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
