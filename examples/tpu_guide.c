/* TensorFlow's "Use TPUs" guide, step by step, with sinter's C API (the host's CPU plays the
 * accelerator). Each section prints what the guide's Python prints:
 *
 *   1. list the logical devices             (tf.config.list_logical_devices)
 *   2. manual device placement              (with tf.device('/CPU:0'): c = tf.matmul(a, b))
 *   3. Keras: compile with steps_per_execution and fit the guide's CNN on the input pipeline
 *   4. a hand-written training loop          (tf.GradientTape + optimizer.apply_gradients)
 *   5. several steps inside one execution    (train_multiple_steps: a loop in one tf.function)
 *
 * The guide's "distribution strategies" section (TPUStrategy.run over replicas) is left to the
 * strategy API. Defaults keep the whole program to a few seconds: the guide's CNN costs about
 * 2.3 GFLOP per image for a training step, so section 3 runs 2 steps of 16 images; pass
 * --steps, --batch-size and --epochs for more (or --model small_cnn for a fast full run).
 *
 *     build/examples/tpu_guide [--data-dir DIR] [--model tpu_guide_cnn|small_cnn|mlp]
 *                              [--epochs N] [--steps N] [--batch-size N]
 *                              [--loop-steps N] [--loop-batch-size N]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sinter/data.h"
#include "sinter/device.h"
#include "sinter/graph.h"
#include "sinter/nn.h"

typedef struct args {
    const char *data_dir, *model;
    long epochs, steps, batch, loop_steps, loop_batch;
} args;

static int fail(const char *what) {
    fprintf(stderr, "tpu_guide: %s: %s\n", what, sn_last_error());
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --name N or --name=N; returns false (with a message) on anything else. */
static bool parse_args(int argc, char **argv, args *a) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            printf("usage: tpu_guide [--data-dir DIR] [--model tpu_guide_cnn|small_cnn|mlp] "
                   "[--epochs N] [--steps N] [--batch-size N] [--loop-steps N] "
                   "[--loop-batch-size N]\n"
                   "defaults: Fashion-MNIST in /usr/share/datasets/fashion-mnist, tpu_guide_cnn, "
                   "1 epoch of 2 steps of 16 images; hand-written loop: 10 steps of 32 images\n");
            exit(0);
        }
        static const char *names[] = {"--data-dir", "--model", "--epochs", "--steps",
                                      "--batch-size", "--loop-steps", "--loop-batch-size"};
        int k = -1;
        const char *val = NULL;
        for (int j = 0; j < 7 && k < 0; j++) {
            size_t n = strlen(names[j]);
            if (!strncmp(arg, names[j], n) && (arg[n] == '\0' || arg[n] == '=')) {
                k = j;
                val = arg[n] == '=' ? arg + n + 1 : (i + 1 < argc ? argv[++i] : NULL);
            }
        }
        if (k < 0 || !val) {
            fprintf(stderr, "tpu_guide: %s '%s' (see --help)\n", k < 0 ? "unknown flag" : "missing value for", arg);
            return false;
        }
        if (k == 0) { a->data_dir = val; continue; }
        if (k == 1) { a->model = val; continue; }
        char *end;
        long v = strtol(val, &end, 10);
        if (*end || !*val || v < 1 || v > 1000000) {
            fprintf(stderr, "tpu_guide: %s: '%s' is not an integer from 1 to 1000000\n", names[k], val);
            return false;
        }
        long *dst[] = {NULL, NULL, &a->epochs, &a->steps, &a->batch, &a->loop_steps, &a->loop_batch};
        *dst[k] = v;
    }
    return true;
}

/* The guide's get_dataset(): scale to [0, 1], shuffle and repeat for training, batch with a
 * fixed size (drop_remainder, as TPUs need static shapes). */
static sn_status get_dataset(const char *dir, int64_t batch, bool training, sn_dataset **out) {
    sn_tensor *x = NULL, *y = NULL;
    sn_status s = sn_mnist_load(dir, training ? "train" : "test", &x, &y);
    if (s != SN_OK) return s;
    sn_dataset *ds = NULL;
    sn_tensor *xy[2] = {x, y};
    s = sn_dataset_from_tensors(&ds, 2, xy);
    sn_tensor_free(x);
    sn_tensor_free(y);
    if (s != SN_OK) return s;
    if (training) {
        s = sn_dataset_shuffle(&ds, 10000, 1, true);
        if (s == SN_OK) s = sn_dataset_repeat(&ds, -1);
    }
    if (s == SN_OK) s = sn_dataset_map_normalize(&ds, 0, true);
    if (s == SN_OK) s = sn_dataset_map_cast(&ds, 1, SN_I32);
    if (s == SN_OK) s = sn_dataset_batch(&ds, batch, true);
    if (s == SN_OK) s = sn_dataset_prefetch(&ds, 2);
    if (s != SN_OK) {
        sn_dataset_free(ds);
        return s;
    }
    *out = ds;
    return SN_OK;
}

/* ---- 1 and 2: devices, manual placement --------------------------------------------------- */

static int devices_and_placement(void) {
    printf("== Devices ==\nAll devices: [");
    for (int i = 0; i < sn_device_count(); i++) {
        sn_device_info d;
        if (sn_device_get(i, &d) != SN_OK) return fail("sn_device_get");
        printf("%sLogicalDevice(name='%s', device_type='%s')", i ? ", " : "", d.name,
               d.kind == SN_DEVICE_GPU ? "GPU" : "CPU");
    }
    printf("]\n\n== Manual device placement ==\n");

    /* a = tf.constant([[1., 2., 3.], [4., 5., 6.]]); b = [[1., 2.], [3., 4.], [5., 6.]] */
    const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 2, 3, 4, 5, 6};
    sn_shape sa = {.ndim = 2, .dim = {2, 3}}, sb = {.ndim = 2, .dim = {3, 2}};
    sn_graph *g = sn_graph_new();
    if (!g) return fail("sn_graph_new");
    sn_node c = sn_matmul(g, sn_const(g, SN_F32, &sa, a), sn_const(g, SN_F32, &sb, b), false, false);
    sn_tensor *t = NULL;
    int idx = 0;
    sn_device_info info;
    /* with tf.device('/CPU:0'): c = tf.matmul(a, b) -- an eager op is a one-node plan run now */
    if (sn_eval(g, c, "/cpu:0", &t) != SN_OK || sn_device_find("/cpu:0", &idx) != SN_OK ||
        sn_device_get(idx, &info) != SN_OK) {
        sn_tensor_free(t);
        sn_graph_free(g);
        return fail("matmul on /cpu:0");
    }
    printf("c device:  %s\n", info.name);
    sn_status ps = sn_tensor_print_tf(t, stdout);
    putchar('\n');
    sn_tensor_free(t);
    sn_graph_free(g);
    return ps == SN_OK ? 0 : fail("printing c");
}

/* ---- 3: Keras compile/fit with steps_per_execution --------------------------------------- */

static int keras_fit(const args *a, const char *dir) {
    printf("\n== Train a model using Keras high-level APIs (%s) ==\n", a->model);
    sn_model *m = NULL;
    sn_dataset *train = NULL, *test = NULL;
    sn_callback *bar = NULL;
    int rc = 1;
    if (sn_model_preset(a->model, &m) != SN_OK ||
        sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {28, 28, 1}}, 1) != SN_OK) {
        rc = fail("create_model");
        goto done;
    }
    /* model.compile(optimizer='adam', steps_per_execution=50,
     *               loss=SparseCategoricalCrossentropy(from_logits=True),
     *               metrics=['sparse_categorical_accuracy']) -- steps_per_execution is capped at
     * the steps of an epoch, so a short run still executes all its steps in one call. */
    sn_compile_opts co = sn_compile_defaults();
    co.steps_per_execution = a->steps < 50 ? (int)a->steps : 50;
    if (sn_model_compile(m, &co) != SN_OK) {
        rc = fail("compile");
        goto done;
    }
    if (get_dataset(dir, a->batch, true, &train) != SN_OK ||
        get_dataset(dir, a->batch, false, &test) != SN_OK) {
        rc = fail("get_dataset");
        goto done;
    }
    if (!(bar = sn_callback_progress_bar(stdout, 1))) {
        rc = fail("progress bar");
        goto done;
    }
    sn_fit_opts fo = sn_fit_defaults();
    fo.epochs = (int)a->epochs;
    fo.steps_per_epoch = a->steps;
    fo.validation = test;
    fo.validation_steps = a->steps;
    fo.n_callbacks = 1;
    fo.callbacks = &bar;
    printf("model.fit: %ld epoch(s) of %ld steps of %ld images, steps_per_execution=%d\n",
           a->epochs, a->steps, a->batch, co.steps_per_execution);
    fflush(stdout);
    double t0 = now_s();
    if (sn_model_fit(m, train, &fo, NULL) != SN_OK) {
        rc = fail("fit");
        goto done;
    }
    printf("fit took %.2f s\n", now_s() - t0);
    rc = 0;
done:
    sn_callback_free(bar);
    sn_model_free(m);
    sn_dataset_free(train);
    sn_dataset_free(test);
    return rc;
}

/* ---- 4 and 5: a hand-written training loop ----------------------------------------------- */

/* The model of the loop, written with graph ops: conv 3x3x1x32 + relu, max-pool 2x2, dense 128
 * + relu, dense 10 (logits). Variables come zeroed; init_uniform fills kernels as Keras's
 * glorot_uniform does. */
typedef struct loop_model {
    sn_graph *g;
    sn_node x, y;                     /* inputs: images [B, 28, 28, 1], labels [B] */
    sn_node w[6];                     /* conv kernel, conv bias, dense kernels and biases */
    sn_node loss_sum, correct, seen;  /* metrics accumulated on the device */
    sn_node targets[16];
    int ntargets;
} loop_model;

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void init_uniform(float *p, int64_t n, double fan_in, double fan_out, uint64_t *rng) {
    double limit = sqrt(6.0 / (fan_in + fan_out));
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(limit * (2.0 * (double)(splitmix(rng) >> 11) / 9007199254740992.0 - 1.0));
}

static sn_status build_loop_model(loop_model *lm, int64_t batch, double lr) {
    sn_graph *g = lm->g = sn_graph_new();
    if (!g) return SN_ERR_NOMEM;
    lm->x = sn_input(g, "images", SN_F32, &(sn_shape){.ndim = 4, .dim = {batch, 28, 28, 1}});
    lm->y = sn_input(g, "labels", SN_I32, &(sn_shape){.ndim = 1, .dim = {batch}});
    const sn_shape shapes[6] = {{4, {3, 3, 1, 32}}, {1, {32}}, {2, {13 * 13 * 32, 128}},
                                {1, {128}},        {2, {128, 10}}, {1, {10}}};
    const char *names[6] = {"conv/kernel", "conv/bias", "dense/kernel", "dense/bias",
                            "dense_1/kernel", "dense_1/bias"};
    for (int i = 0; i < 6; i++) lm->w[i] = sn_variable(g, names[i], SN_F32, &shapes[i], true);
    lm->loss_sum = sn_variable(g, "training_loss", SN_F32, &(sn_shape){0}, false);
    lm->correct = sn_variable(g, "training_correct", SN_F32, &(sn_shape){0}, false);
    lm->seen = sn_variable(g, "training_seen", SN_F32, &(sn_shape){0}, false);
    if (sn_graph_status(g) != SN_OK) return sn_graph_status(g);
    /* Storage moves while variables are added, so initialise after the last one. */
    uint64_t rng = 42;
    init_uniform(sn_variable_data(g, lm->w[0]), 9 * 32, 9, 9 * 32, &rng);
    init_uniform(sn_variable_data(g, lm->w[2]), 13 * 13 * 32 * 128, 13 * 13 * 32, 128, &rng);
    init_uniform(sn_variable_data(g, lm->w[4]), 128 * 10, 128, 10, &rng);

    /* logits = model(images, training=True) */
    sn_conv2d_opts copt = sn_conv2d_opts_defaults();
    sn_pool2d_opts popt = sn_pool2d_opts_defaults();
    sn_node h = sn_relu(g, sn_bias_add(g, sn_conv2d(g, lm->x, lm->w[0], &copt), lm->w[1]));
    h = sn_flatten(g, sn_max_pool2d(g, h, &popt));
    h = sn_relu(g, sn_bias_add(g, sn_matmul(g, h, lm->w[2], false, false), lm->w[3]));
    sn_node logits = sn_bias_add(g, sn_matmul(g, h, lm->w[4], false, false), lm->w[5]);
    /* loss = compute_average_loss(sparse_categorical_crossentropy(labels, logits)) */
    sn_node loss = sn_reduce_mean(g, sn_sparse_softmax_xent(g, logits, lm->y), 0, NULL, false);
    if (sn_graph_status(g) != SN_OK) return sn_graph_status(g);

    /* grads = tape.gradient(loss, model.trainable_variables) */
    sn_node grads[6];
    sn_status s = sn_gradients(g, loss, 6, lm->w, grads);
    if (s != SN_OK) return s;
    /* optimizer.apply_gradients: plain SGD, w <- w - lr * g. Side effects run after every
     * other node of the step, so all gradients see the weights from before the update. */
    sn_node lrn = sn_scalar(g, SN_F32, lr);
    lm->ntargets = 0;
    for (int i = 0; i < 6; i++)
        lm->targets[lm->ntargets++] = sn_assign(g, lm->w[i], sn_sub(g, lm->w[i], sn_mul(g, lrn, grads[i])));
    /* training_loss.update_state(loss); training_accuracy.update_state(labels, logits) */
    lm->targets[lm->ntargets++] = sn_assign_add(g, lm->loss_sum, loss);
    lm->targets[lm->ntargets++] = sn_assign_add(
        g, lm->correct, sn_reduce_sum(g, sn_sparse_accuracy(g, logits, lm->y), 0, NULL, false));
    lm->targets[lm->ntargets++] = sn_assign_add(g, lm->seen, sn_scalar(g, SN_F32, (double)batch));
    return sn_graph_status(g);
}

typedef struct feeder {
    sn_dataset *ds;
    sn_node x, y;
} feeder;

/* next(iterator): fills the plan's inputs before each step. */
static sn_status feed(void *ctx, sn_plan *p, int64_t step) {
    (void)step;
    feeder *f = ctx;
    sn_tensor *b[2];
    bool end = false;
    sn_status s = sn_dataset_next(f->ds, b, &end);
    if (s != SN_OK) return s;
    if (end) return SN_ERR_STATE; /* the training set repeats forever; never reached */
    const sn_shape *xs = sn_tensor_shape(b[0]);
    s = sn_plan_set_input(p, f->x, sn_tensor_cdata(b[0]), (size_t)sn_shape_numel(xs) * sizeof(float));
    if (s != SN_OK) return s;
    return sn_plan_set_input(p, f->y, sn_tensor_cdata(b[1]), (size_t)sn_tensor_numel(b[1]) * sizeof(int32_t));
}

/* Prints the guide's line and resets the metrics (training_loss.reset_states()). */
static void report_and_reset(loop_model *lm, sn_plan *p) {
    float *ls = sn_variable_data(lm->g, lm->loss_sum), *co = sn_variable_data(lm->g, lm->correct),
          *seen = sn_variable_data(lm->g, lm->seen);
    double steps = *seen > 0 ? (double)*seen : 1.0;
    int64_t batch = sn_node_shape(lm->g, lm->y).dim[0];
    printf("Current step: %lld, training loss: %.4f, accuracy: %.2f%%\n", (long long)sn_plan_step(p),
           (double)*ls / (steps / (double)batch), 100.0 * (double)*co / steps);
    *ls = *co = *seen = 0;
}

static int custom_loop(const args *a, const char *dir) {
    printf("\n== Train a model using a custom training loop ==\n");
    loop_model lm = {0};
    sn_plan *p = NULL;
    feeder f = {0};
    int rc = 1;
    if (build_loop_model(&lm, a->loop_batch, 0.1) != SN_OK) {
        rc = fail("building the loop's graph");
        goto done;
    }
    if (get_dataset(dir, a->loop_batch, true, &f.ds) != SN_OK) {
        rc = fail("get_dataset");
        goto done;
    }
    f.x = lm.x;
    f.y = lm.y;
    sn_plan_opts po = sn_plan_opts_defaults();
    po.device = "/cpu:0";
    if (sn_plan_new(&p, lm.g, lm.ntargets, lm.targets, &po) != SN_OK) {
        rc = fail("planning the training step");
        goto done;
    }
    printf("training step: %d nodes, %.1f MB planned arena, %s\n", sn_plan_node_count(p),
           (double)sn_plan_peak_bytes(p) / 1e6, sn_plan_device(p));
    /* One step per host call: for step in range(steps_per_epoch): train_step(train_iterator) */
    double t_one = 0, t_multi = 0;
    for (long epoch = 0; epoch < a->epochs; epoch++) {
        printf("Epoch: %ld/%ld\n", epoch, a->epochs);
        double t0 = now_s();
        for (long step = 0; step < a->loop_steps; step++) {
            if (sn_plan_run(p, 1, feed, &f) != SN_OK) {
                rc = fail("train_step");
                goto done;
            }
        }
        t_one += now_s() - t0;
        report_and_reset(&lm, p);
    }

    printf("\n== Improving performance with multiple steps inside one execution ==\n");
    /* train_multiple_steps(train_iterator, steps_per_epoch): the loop runs inside the
     * executor, so the host is called once per epoch. */
    for (long epoch = 0; epoch < a->epochs; epoch++) {
        double t0 = now_s();
        if (sn_plan_run(p, a->loop_steps, feed, &f) != SN_OK) {
            rc = fail("train_multiple_steps");
            goto done;
        }
        t_multi += now_s() - t0;
        report_and_reset(&lm, p);
    }
    printf("%ld steps one per call: %.3f s; in executions of %ld steps: %.3f s\n",
           a->epochs * a->loop_steps, t_one, a->loop_steps, t_multi);
    rc = 0;
done:
    sn_plan_free(p);
    sn_graph_free(lm.g);
    sn_dataset_free(f.ds);
    return rc;
}

int main(int argc, char **argv) {
    args a = {.data_dir = NULL, .model = "tpu_guide_cnn", .epochs = 1, .steps = 2, .batch = 16,
              .loop_steps = 10, .loop_batch = 32};
    if (!parse_args(argc, argv, &a)) return 2;
    const char *dir = a.data_dir ? a.data_dir : "/usr/share/datasets/fashion-mnist";

    if (devices_and_placement() != 0) return 1;
    if (keras_fit(&a, dir) != 0) return 1;
    if (custom_loop(&a, dir) != 0) return 1;
    return 0;
}
