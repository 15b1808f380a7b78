"""Every layer class of sinter.keras.layers gives the same get_config() as Keras 3's, with
Keras's defaults and with arguments (layer_configs.py run under both)."""
import json
import os

from conftest import HERE, keras_python, run_keras, run_py

SCRIPT = os.path.join(HERE, "layer_configs.py")


def _configs(result, who):
    assert result.returncode == 0, f"{who} run failed:\n{result.stderr[-3000:]}"
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def test_layer_configs_match_keras():
    mine = _configs(run_py(SCRIPT, "sinter"), "sinter")
    ref = _configs(run_keras(keras_python(), SCRIPT, "keras"), "Keras")
    assert len(mine) == len(ref) > 30
    for m, k in zip(mine, ref):
        assert m["case"] == k["case"]
        assert m["class"] == k["class"], m["case"]
        assert m["config"] == k["config"], \
            f"{m['case']}: get_config differs\n Keras:  {k['config']}\n sinter: {m['config']}"
