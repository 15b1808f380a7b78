"""The TPU guide's own program (../shared/guide/tpu_guide.py) on sinter (issue 25, item 6):
only its [platform] lines changed (tpu_guide_platform.py: the import, 8 logical CPU devices
under a MirroredStrategy instead of the TPU resolver, the device names, sinter's tfds
stand-in) and its step counts shrunk through the environment. Checks what it prints.

Minutes long (the guide's CNN has 37.7M weights, trained by two fits and a custom loop over 8
replicas), so test_python's run skips it; tests/test_tpu_guide.sh runs it as its own CTest
entry with SINTER_GUIDE_TEST=1."""
import os
import re

import pytest

from conftest import SRC, run_py
from tpu_guide_platform import platform_source

GUIDE = os.path.join(os.path.dirname(SRC), "shared", "guide", "tpu_guide.py")
STEPS, EPOCHS, BATCH, VAL = 2, 1, 16, 1


def test_tpu_guide(tmp_path):
    if os.environ.get("SINTER_GUIDE_TEST") != "1":
        pytest.skip("minutes long: tests/test_tpu_guide.sh runs it (SINTER_GUIDE_TEST=1)")
    guide = os.environ.get("SINTER_GUIDE", GUIDE)
    if not os.path.isfile(guide):
        pytest.skip(f"the guide's program is not here ({guide})")
    dataset = next((n for n, d in (("mnist", "/usr/share/datasets/mnist"),
                                   ("fashion_mnist", "/usr/share/datasets/fashion-mnist"))
                    if os.path.isdir(os.environ.get(f"SINTER_{n.upper()}_DIR", d))), None)
    if dataset is None:
        pytest.skip("neither MNIST nor Fashion-MNIST is on this machine")
    prog = tmp_path / "tpu_guide_sinter.py"
    prog.write_text(platform_source(open(guide).read(), dataset))
    r = run_py(str(prog), env={"SINTER_GUIDE_STEPS": str(STEPS),
                               "SINTER_GUIDE_EPOCHS": str(EPOCHS),
                               "SINTER_GUIDE_BATCH": str(BATCH),
                               "SINTER_GUIDE_VAL_STEPS": str(VAL),
                               "SINTER_TFDS_MAX_EXAMPLES": "512"}, timeout=840)
    out = r.stdout
    assert r.returncode == 0, f"the guide failed:\n{out[-3000:]}\n{r.stderr[-3000:]}"
    devs = ", ".join(f"LogicalDevice(name='/device:CPU:{i}', device_type='CPU')"
                     for i in range(8))
    assert f"All devices:  [{devs}]\n" in out, out[:2000]
    product = "tf.Tensor(\n[[22. 28.]\n [49. 64.]], shape=(2, 2), dtype=float32)"
    assert f"c device:  /job:localhost/replica:0/task:0/device:CPU:0\n{product}\n" in out
    per_replica = "PerReplica:{\n" + ",\n".join(f"  {i}: {product}" for i in range(8)) + "\n}\n"
    assert per_replica in out, out[:3000]
    # the two Keras fits: one log line per epoch with the validation metrics
    fits = re.findall(r"^Epoch 1/1\n(\d+)/(\d+) .* - loss: [0-9.e+-]+ - "
                      r"sparse_categorical_accuracy: [0-9.e+-]+ - val_loss: [0-9.e+-]+ - "
                      r"val_sparse_categorical_accuracy: [0-9.e+-]+$", out, re.M)
    assert fits == [(str(STEPS), str(STEPS))] * 2, out
    # the custom loop: optimizer.iterations counts the steps run; then the multi-step function
    # runs steps_per_epoch more in one execution
    lines = re.findall(r"^Current step: (\d+), training loss: ([0-9.]+), accuracy: ([0-9.]+)%$",
                       out, re.M)
    assert [int(s) for s, _, _ in lines] == [STEPS * (e + 1) for e in range(EPOCHS)] + \
        [STEPS * EPOCHS + STEPS], out
    for _, loss, acc in lines:
        assert 0 < float(loss) < 20 and 0 <= float(acc) <= 100, out
    assert re.findall(r"^Epoch: (\d+)/5$", out, re.M) == [str(e) for e in range(EPOCHS)]
