"""TensorFlow's basic-classification tutorial runs with only its import line changed, and
under real Keras the same script gives the same History keys and summary() text."""
import os
import re
import subprocess

import pytest

from conftest import FASHION, HERE, SRC, keras_python, need_fashion, run_py

SCRIPT = os.path.join(HERE, "basic_classification.py")


def marked(out, key):
    return [l for l in out.splitlines() if l.startswith(key + " ")][0][len(key) + 1:]


def summary(out):
    return out.split("SUMMARY_BEGIN\n", 1)[1].split("SUMMARY_END", 1)[0]


@pytest.fixture(scope="module")
def sinter_run():
    need_fashion()
    r = run_py(SCRIPT)
    assert r.returncode == 0, f"the tutorial failed under sinter:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def test_tutorial_trains(sinter_run):
    out = sinter_run
    assert marked(out, "HISTORY_KEYS") == "['accuracy', 'loss'] ['accuracy', 'loss']"
    acc = float(marked(out, "TEST_ACCURACY"))
    # the tutorial reports ~0.88 after 10 epochs; a model that did not learn stays near 0.1
    assert acc > 0.85, f"test accuracy {acc} after 10 epochs; expected > 0.85"
    dtype, shape, s = re.match(r"(\S+) (\(.*\)) (\S+)", marked(out, "PRED_DTYPE")).groups()
    assert dtype == "float32" and shape == "(10000, 10)", (dtype, shape)
    assert abs(float(s) - 1) < 1e-5, f"softmax probabilities of image 0 sum to {s}"
    assert out.count("Epoch ") == 10
    # outside a terminal: one progress line per epoch, as Keras writes to a file
    assert len(re.findall(r"^\x1b\[1m1875/1875\x1b\[0m ", out, re.M)) == 10


def test_same_keys_and_summary_as_keras(sinter_run, tmp_path):
    py = keras_python()
    text = open(SCRIPT).read()
    assert "import sinter as tf\n" in text
    # the one line that differs; one epoch is enough for keys and summary
    text = text.replace("import sinter as tf\n", "import tensorflow as tf\n")
    text = text.replace("epochs=10", "epochs=1")
    script = tmp_path / "keras_tutorial.py"
    script.write_text(text)
    # Keras downloads Fashion-MNIST into KERAS_HOME/datasets/fashion-mnist unless the files
    # are there: give it the machine's copy (no network at test time).
    home = tmp_path / "keras_home"
    (home / "datasets" / "fashion-mnist").mkdir(parents=True)
    for f in os.listdir(FASHION):
        if f.endswith(".gz"):
            os.symlink(os.path.join(FASHION, f), home / "datasets" / "fashion-mnist" / f)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow",
               PYTHONPATH="", KERAS_HOME=str(home))
    r = subprocess.run([py, str(script)], env=env, capture_output=True, text=True,
                       timeout=1800, cwd=os.path.join(SRC, "tests", "python"))
    if r.returncode != 0 and "fashion" in r.stderr.lower() and "url" in r.stderr.lower():
        pytest.skip("real Keras could not download Fashion-MNIST here")
    assert r.returncode == 0, f"the tutorial failed under Keras:\n{r.stderr[-3000:]}"
    assert marked(r.stdout, "HISTORY_KEYS") == marked(sinter_run, "HISTORY_KEYS")
    assert summary(r.stdout) == summary(sinter_run), \
        f"summary differs:\nKeras:\n{summary(r.stdout)}\nsinter:\n{summary(sinter_run)}"
