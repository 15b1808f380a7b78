"""Writes ../shared/guide/tpu_guide.py as it runs on sinter (issue 25, item 6).

Only the lines tagged [platform] change: the import, the TPU resolver (8 logical CPU devices
under a MirroredStrategy instead), the device names and the tfds loader (sinter.tfds; the
dataset is Fashion-MNIST where MNIST is not on the machine). The step counts are read from
the environment so that a test can shrink them; unset, they are the guide's numbers:
SINTER_GUIDE_EPOCHS (5), SINTER_GUIDE_STEPS (60000 // batch_size), SINTER_GUIDE_VAL_STEPS
(10000 // batch_size), SINTER_GUIDE_BATCH (200).

Usage: python tpu_guide_platform.py GUIDE OUT [DATASET]
"""
import sys

PLATFORM = {
    "import tensorflow as tf  # [platform]": "import sinter as tf  # [platform]",
    "import tensorflow_datasets as tfds  # [platform]": "from sinter import tfds  # [platform]",
    "resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='')  # [platform]":
        "tf.config.set_logical_device_configuration(tf.config.list_physical_devices('CPU')[0], "
        "[tf.config.LogicalDeviceConfiguration()] * 8)  # [platform]",
    "tf.config.experimental_connect_to_cluster(resolver)  # [platform]": "pass  # [platform]",
    "tf.tpu.experimental.initialize_tpu_system(resolver)  # [platform]": "pass  # [platform]",
    "print(\"All devices: \", tf.config.list_logical_devices('TPU'))  # [platform] "
    "(the device type)": "print(\"All devices: \", tf.config.list_logical_devices('CPU'))"
                         "  # [platform]",
    "with tf.device('/TPU:0'):  # [platform] (the device name)":
        "with tf.device('/CPU:0'):  # [platform]",
    "strategy = tf.distribute.TPUStrategy(resolver)  # [platform]":
        "strategy = tf.distribute.MirroredStrategy()  # [platform]",
    "  dataset, info = tfds.load(name='mnist', split=split, with_info=True,  # [platform]":
        "  dataset, info = tfds.load(name='{dataset}', split=split, with_info=True,  # [platform]",
}
# the step counts: (text, replacement, occurrences in the guide)
STEPS = [
    ("batch_size = 200\n", "batch_size = int(os.environ.get('SINTER_GUIDE_BATCH', 200))\n", 1),
    ("steps_per_epoch = 60000 // batch_size\n",
     "steps_per_epoch = int(os.environ.get('SINTER_GUIDE_STEPS', 60000 // batch_size))\n", 1),
    ("validation_steps = 10000 // batch_size\n",
     "validation_steps = int(os.environ.get('SINTER_GUIDE_VAL_STEPS', 10000 // batch_size))\n",
     1),
    ("epochs=5,", "epochs=int(os.environ.get('SINTER_GUIDE_EPOCHS', 5)),", 2),
    ("for epoch in range(5):", "for epoch in range(int(os.environ.get('SINTER_GUIDE_EPOCHS', "
     "5))):", 1),
]


def platform_source(text, dataset="mnist"):
    lines = text.split("\n")
    seen = set()
    for i, line in enumerate(lines):
        if "[platform]" in line and not line.startswith("#"):
            if line not in PLATFORM:
                raise ValueError(f"guide line {i + 1} is tagged [platform] but unknown: {line!r}")
            lines[i] = PLATFORM[line].replace("{dataset}", dataset)
            seen.add(line)
    missing = set(PLATFORM) - seen
    if missing:
        raise ValueError(f"the guide lacks the [platform] lines {sorted(missing)}")
    out = "\n".join(lines)
    for old, new, count in STEPS:
        if out.count(old) != count:
            raise ValueError(f"the guide has {out.count(old)} of {old!r}; expected {count}")
        out = out.replace(old, new)
    return out


if __name__ == "__main__":
    src = open(sys.argv[1]).read()
    open(sys.argv[2], "w").write(platform_source(src, sys.argv[3] if len(sys.argv) > 3
                                                 else "mnist"))
