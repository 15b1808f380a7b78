"""distribute_datasets_from_function as TensorFlow does it, run by sinter and by real
TensorFlow (test_tensors.py compares what the two print): which InputContexts the function
gets, and which elements each replica takes, eagerly and inside a traced function, under a
MirroredStrategy over two logical CPUs, in the default PER_WORKER mode and in PER_REPLICA.

    python dist_dataset_cases.py sinter|keras OUT"""
import sys

import numpy as np

if sys.argv[1] == "sinter":
    import sinter as tf
else:
    import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy()


def run(name, options):
    seen = []

    def dataset_fn(ctx):
        seen.append((ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync,
                     ctx.get_per_replica_batch_size(4)))
        # a function that ignores its context, as the TPU guide's does
        return tf.data.Dataset.from_tensor_slices(np.arange(40, dtype=np.float32)).batch(2)

    dist = strategy.distribute_datasets_from_function(dataset_fn, options)
    it = iter(dist)
    print(name, "contexts", sorted(seen))
    eager = next(it)
    print(name, "eager", [v.numpy().tolist() for v in eager.values])

    @tf.function
    def step(iterator):
        return strategy.run(lambda x: x * 10.0, args=(next(iterator),))

    for _ in range(2):
        print(name, "traced", [v.numpy().tolist() for v in step(it).values])


run("per_worker", None)
run("per_replica", tf.distribute.InputOptions(
    experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA))
