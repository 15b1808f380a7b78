"""Issue 25's two timings, with the guide's own code on sinter: a custom-loop step (the guide's
`train_step`, one traced call per step) against `fit` with steps_per_execution 1, and the
guide's `train_multiple_steps` (a `tf.range` loop of 50 steps in one traced call) against
`fit` with steps_per_execution 50. The guide's CNN, batch 200, MirroredStrategy over 8 logical
CPU devices, the dataset through sinter.tfds as in the guide.

    PYTHONPATH=python SINTER_LIBRARY=build/libsinter.so build/pyvenv/bin/python \
        bench/guide_loops.py [--rounds 2] [--steps 20] [--dataset fashion_mnist]

Each variant is warmed up first (its trace and plan built), then timed in alternating rounds;
prints each round's ms/step and the medians' ratios: custom/fit1 (aim <= 1.10) and
range/fit50 (aim <= 1.03). Run it on a quiet machine.
"""
import argparse
import statistics
import time

import sinter as tf
from sinter import tfds

ap = argparse.ArgumentParser()
ap.add_argument("--rounds", type=int, default=2)
ap.add_argument("--steps", type=int, default=20, help="steps of the spe-1 variants per round")
ap.add_argument("--spe", type=int, default=50, help="steps per execution of the many-step pair")
ap.add_argument("--batch", type=int, default=200)
ap.add_argument("--dataset", default="fashion_mnist")
ap.add_argument("--only", default="fit_spe1,custom,fit_spe50,range50",
                help="variants to run (each holds its own plans: fewer need less memory)")
args = ap.parse_args()

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 8)
strategy = tf.distribute.MirroredStrategy()
batch_size = args.batch
SPE = args.spe


def create_model():  # the guide's
    return tf.keras.Sequential(
        [tf.keras.layers.Conv2D(256, 3, activation="relu", input_shape=(28, 28, 1)),
         tf.keras.layers.Conv2D(256, 3, activation="relu"),
         tf.keras.layers.Flatten(),
         tf.keras.layers.Dense(256, activation="relu"),
         tf.keras.layers.Dense(128, activation="relu"),
         tf.keras.layers.Dense(10)])


def get_dataset(batch_size):  # the guide's, training split
    dataset, info = tfds.load(name=args.dataset, split="train", with_info=True,
                              as_supervised=True, try_gcs=True)

    def scale(image, label):
        image = tf.cast(image, tf.float32)
        image /= 255.0
        return image, label
    return dataset.map(scale).shuffle(10000).repeat().batch(batch_size)


def fit_model(spe):
    with strategy.scope():
        m = create_model()
        m.compile(optimizer="adam", steps_per_execution=spe,
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["sparse_categorical_accuracy"])
    ds = get_dataset(batch_size)
    return lambda n: m.fit(ds, epochs=1, steps_per_epoch=n, verbose=0)


# the custom loop's objects, as the guide makes them
with strategy.scope():
    model = create_model()
    optimizer = tf.keras.optimizers.Adam()
    training_loss = tf.keras.metrics.Mean("training_loss", dtype=tf.float32)
    training_accuracy = tf.keras.metrics.SparseCategoricalAccuracy("training_accuracy",
                                                                   dtype=tf.float32)
per_replica_batch_size = batch_size // strategy.num_replicas_in_sync
train_iterator = iter(strategy.experimental_distribute_datasets_from_function(
    lambda _: get_dataset(per_replica_batch_size)))


def step_fn(inputs):
    images, labels = inputs
    with tf.GradientTape() as tape:
        logits = model(images, training=True)
        loss = tf.keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        loss = tf.nn.compute_average_loss(loss, global_batch_size=batch_size)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(list(zip(grads, model.trainable_variables)))
    training_loss.update_state(loss * strategy.num_replicas_in_sync)
    training_accuracy.update_state(labels, logits)


@tf.function
def train_step(iterator):
    strategy.run(step_fn, args=(next(iterator),))


@tf.function
def train_multiple_steps(iterator, steps):
    for _ in tf.range(steps):
        strategy.run(step_fn, args=(next(iterator),))


def custom(n):
    for _ in range(n):
        train_step(train_iterator)
    optimizer.iterations.numpy()  # wait for the last step


def ranged(n):
    for _ in range(n // SPE):
        train_multiple_steps(train_iterator, tf.convert_to_tensor(SPE))
    optimizer.iterations.numpy()


makers = {"fit_spe1": lambda: (fit_model(1), args.steps), "custom": lambda: (custom, args.steps),
          "fit_spe50": lambda: (fit_model(SPE), SPE), "range50": lambda: (ranged, SPE)}
variants = {k: makers[k]() for k in args.only.split(",")}
for name, (run, n) in variants.items():  # warm-up: traces, plans, the datasets' buffers
    t = time.perf_counter()
    run(min(n, 2) if n < SPE else SPE)
    print(f"warm-up {name}: {time.perf_counter() - t:.1f} s", flush=True)
ms = {k: [] for k in variants}
for r in range(args.rounds):
    for name, (run, n) in variants.items():
        t = time.perf_counter()
        run(n)
        ms[name].append(1e3 * (time.perf_counter() - t) / n)
        print(f"round {r + 1} {name}: {ms[name][-1]:.1f} ms/step ({n} steps)", flush=True)
med = {k: statistics.median(v) for k, v in ms.items()}
print("medians (ms/step): " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()))
if "custom" in med and "fit_spe1" in med:
    print(f"custom / fit_spe1 = {med['custom'] / med['fit_spe1']:.3f} (aim <= 1.10)")
if "range50" in med and "fit_spe50" in med:
    print(f"range50 / fit_spe50 = {med['range50'] / med['fit_spe50']:.3f} (aim <= 1.03)")
