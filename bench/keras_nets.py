"""Issue 23's speed workloads in Keras 3 (TensorFlow 2.21), for bench/compare.sh.

Two models at batch 32 on synthetic 96x96x3 images and 10 classes (the issue's sizes, the same
as tests/keras_models_interop.py builds): about 0.2-1 s a training step on 2 cores.
  mobilenetv2  keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3), classes=10):
               softmax output, sparse categorical cross-entropy on its probabilities
  xception     keras.io's "Image classification from scratch" make_model without its
               augmentation block, ending in Dense(10) logits (keras.io's 2-class form ends in
               Dense(1) and binary cross-entropy; 10 classes keep one label format, class
               indices, for all three frameworks), sparse categorical cross-entropy from logits
Both compiled with Adam(1e-3), no metrics.

  python keras_nets.py prepare --out DIR   writes DIR/{mobilenetv2,xception}.keras (fp32, Keras's
                                           own save) and DIR/x.npy, DIR/y.npy (64 examples), and
                                           prints each model's parameter count
  python keras_nets.py fit MODEL [--bf16 1] [--steps N] [--warmup N] [--threads N]
                                           TF's side: model.fit (steps_per_execution 1) on the same
                                           synthetic batches; ms_per_step is the median of the
                                           per-batch times after the warm-up steps
--bf16 1 sets keras.mixed_precision's mixed_bfloat16 policy before the model is built.
Prints one key=value line like ../shared/bench's scripts.
"""
import argparse, os, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf
import keras
import keras_xception  # the net's one definition, beside this file

S, C, B, N = 96, 10, 32, 64


def mobilenetv2():
    m = keras.applications.MobileNetV2(weights=None, input_shape=(S, S, 3), classes=C)
    return m, keras.losses.SparseCategoricalCrossentropy()


def xception():
    return keras_xception.xception_small(S, C), \
        keras.losses.SparseCategoricalCrossentropy(from_logits=True)


MODELS = {"mobilenetv2": mobilenetv2, "xception": xception}


def build(name):
    keras.utils.set_random_seed(1)
    m, loss = MODELS[name]()
    m.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss, steps_per_execution=1)
    return m


def data():
    rng = np.random.default_rng(1)
    return (rng.uniform(-1, 1, (N, S, S, 3)).astype(np.float32),
            rng.integers(0, C, N).astype(np.int64))


p = argparse.ArgumentParser()
p.add_argument("mode", choices=["prepare", "fit"])
p.add_argument("model", nargs="?", choices=sorted(MODELS))
p.add_argument("--out", default=".")
p.add_argument("--bf16", type=int, default=0)
p.add_argument("--steps", type=int, default=10)
p.add_argument("--warmup", type=int, default=2)
p.add_argument("--threads", type=int, default=2)
a = p.parse_args()
tf.config.threading.set_intra_op_parallelism_threads(a.threads)
tf.config.threading.set_inter_op_parallelism_threads(1)

if a.mode == "prepare":
    os.makedirs(a.out, exist_ok=True)
    x, y = data()
    np.save(os.path.join(a.out, "x.npy"), x)
    np.save(os.path.join(a.out, "y.npy"), y)
    for name in sorted(MODELS):
        m = build(name)
        m.save(os.path.join(a.out, name + ".keras"))
        print(f"framework=keras{keras.__version__} workload={name} params={m.count_params()}")
else:
    if a.model is None:
        p.error("fit needs a MODEL")
    if a.bf16:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    m = build(a.model)
    x, y = data()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(B, drop_remainder=True).prefetch(2)
    ends = []

    class T(keras.callbacks.Callback):
        def on_train_begin(self, logs=None): ends.append(time.perf_counter())
        def on_train_batch_end(self, batch, logs=None): ends.append(time.perf_counter())

    n = a.warmup + a.steps
    m.fit(ds, epochs=1, steps_per_epoch=n, verbose=0, callbacks=[T()])
    per = np.diff(ends)[a.warmup:]  # one interval per step; the first holds tracing
    print(f"framework=tf{tf.__version__} workload={a.model}{'_bf16' if a.bf16 else ''} "
          f"params={m.count_params()} threads={a.threads} batch={B} steps={a.steps} "
          f"warmup={a.warmup} ms_per_step={1e3 * np.median(per):.2f} "
          f"mean_ms_per_step={1e3 * per.mean():.2f} policy={keras.mixed_precision.global_policy().name}")
