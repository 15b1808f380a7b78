/* Devices, strategies, per-replica values, reductions, distributed datasets, and data-parallel
 * training: one replica, two mirrored replicas and, under
 * mpirun (tests/test_mpi.sh), two MPI workers end with the same weights.
 *
 *   test_dist                          the in-process tests (CTest runs this)
 *   test_dist --train KIND OUT         K training steps under KIND (none, one_device,
 *                                      mirrored2, multi_worker, multi_worker2: two local
 *                                      replicas per worker) and write the
 *                                      trainable weights (f32) to OUT (rank 0 only)
 *   test_dist --train-die STEP         multi_worker training forever; rank 1 kills itself
 *                                      with SIGKILL at STEP (the dead-worker test)
 *   test_dist --train-hang STEP        the same, but rank 1 stops responding (sleeps)
 *   test_dist --bench PRESET B STEPS   under mpirun: ms/step of a preset model and how much
 *                                      of the gradient all-reduce waited after the backward
 *                                      pass (docs/distributed.md)
 *   test_dist --threads                under mpirun: the worker's thread count after
 *                                      making a multi_worker strategy
 *   test_dist --bench-local PRESET B STEPS N   ms/step mirrored on N logical CPU devices
 *                                      ($SN_DIST_CONCURRENT=0: replicas one after another;
 *                                      $SN_BENCH_SPE=K: K steps per execution, default 1) */
#include <signal.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "distribute/distribute_impl.h"
#include "nn/train/train_impl.h"
#include "sinter/dist.h"
#include "sinter/nn.h"
#include "sn_test.h"

/* ---- devices ------------------------------------------------------------------------------ */

static void test_devices(void) {
    CHECK_ERR(sn_device_configure_cpu(0), SN_ERR_INVALID, "expected 1 to");
    CHECK_OK(sn_device_configure_cpu(4));
    CHECK(sn_device_count() == 4, "count %d", sn_device_count());
    int total = 0;
    for (int i = 0; i < 4; i++) {
        sn_device_info d;
        CHECK_OK(sn_device_get(i, &d));
        char want[96];
        snprintf(want, sizeof want, "/job:localhost/replica:0/task:0/device:CPU:%d", i);
        CHECK(!strcmp(d.name, want), "name %s", d.name);
        CHECK(d.threads >= 1, "threads %d", d.threads);
        total += d.threads;
    }
    int cores = sn_num_threads();
    CHECK(total == (cores >= 4 ? cores : 4), "threads add up to %d with %d cores", total, cores);
    int idx = -1;
    CHECK_OK(sn_device_find("/job:localhost/replica:0/task:0/device:CPU:3", &idx));
    CHECK(idx == 3, "idx %d", idx);
    CHECK_OK(sn_device_find("cpu:2", &idx));
    CHECK(idx == 2, "idx %d", idx);
    CHECK_ERR(sn_device_find("cpu:4", &idx), SN_ERR_NOT_FOUND, "4 logical device(s)");
    CHECK_ERR(sn_device_find("gpu:0", &idx), SN_ERR_NOT_FOUND, "does not exist");
    CHECK_ERR(sn_device_find("tpu", &idx), SN_ERR_NOT_FOUND, "unknown device");
    /* A plan placed on a configured device, and one on a missing device. */
    sn_graph *g = sn_graph_new();
    float a[] = {1, 2, 3, 4};
    sn_shape s = {.ndim = 2, .dim = {2, 2}};
    sn_node c = sn_matmul(g, sn_const(g, SN_F32, &s, a), sn_const(g, SN_F32, &s, a), false, false);
    sn_tensor *t = NULL;
    CHECK_OK(sn_eval(g, c, "cpu:3", &t));
    CHECK(t && sn_tensor_get(t, 0) == 7 && sn_tensor_get(t, 3) == 22, "matmul on cpu:3");
    sn_tensor_free(t);
    CHECK_ERR(sn_eval(g, c, "/device:CPU:7", &t), SN_ERR_NOT_FOUND, "CPU:0 to CPU:3");
    sn_graph_free(g);
}

/* ---- strategies, run, print, reduce ------------------------------------------------------- */

static sn_status matmul_fn(void *ctx, const sn_replica_context *rc, sn_tensor **out) {
    (void)ctx;
    sn_graph *g = sn_graph_new();
    if (!g) return SN_ERR_NOMEM;
    float a[] = {1, 2, 3, 4, 5, 6};
    sn_shape sa = {.ndim = 2, .dim = {2, 3}}, sb = {.ndim = 2, .dim = {3, 2}};
    sn_node c = sn_matmul(g, sn_const(g, SN_F32, &sa, a), sn_const(g, SN_F32, &sb, a), false, false);
    sn_status s = sn_eval(g, c, rc->device, out);
    sn_graph_free(g);
    return s;
}

static sn_status id_fn(void *ctx, const sn_replica_context *rc, sn_tensor **out) {
    (void)ctx;
    float v[3] = {(float)rc->replica_id_in_sync_group, 1.0f, 0.5f};
    sn_shape s = {.ndim = 1, .dim = {3}};
    return sn_tensor_from_data(out, SN_F32, &s, v);
}

static void test_strategies(void) {
    sn_strategy *s = NULL;
    CHECK_ERR(sn_strategy_one_device("cpu:9", &s), SN_ERR_NOT_FOUND, "cpu:9");
    CHECK_ERR(sn_strategy_mirrored(5, NULL, &s), SN_ERR_INVALID, "4 logical device(s)");
    const char *dup[] = {"cpu:1", "/device:CPU:1"};
    CHECK_ERR(sn_strategy_mirrored(2, dup, &s), SN_ERR_INVALID, "listed twice");
    const char *two[] = {"cpu:2", "cpu:0"};
    CHECK_OK(sn_strategy_mirrored(2, two, &s));
    CHECK(s && sn_strategy_num_replicas(s) == 2 &&
          !strcmp(sn_strategy_replica_device(s, 0), "/job:localhost/replica:0/task:0/device:CPU:2"),
          "listed devices");
    sn_strategy_free(s);

    CHECK_OK(sn_strategy_mirrored(0, NULL, &s));
    CHECK(sn_strategy_num_replicas(s) == 4 && sn_strategy_is_chief(s) &&
          sn_strategy_num_workers(s) == 1, "mirrored over all 4 devices");
    CHECK(!strcmp(sn_strategy_name(s), "MirroredStrategy"), "name %s", sn_strategy_name(s));

    sn_per_replica *r = NULL;
    CHECK_OK(sn_strategy_run(s, matmul_fn, NULL, &r));
    CHECK(sn_per_replica_count(r) == 4, "count %d", sn_per_replica_count(r));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_OK(sn_per_replica_print(r, f));
    fclose(f);
    const char *one = "tf.Tensor(\n[[22. 28.]\n [49. 64.]], shape=(2, 2), dtype=float32)";
    char want[1024] = "PerReplica:{\n";
    for (int i = 0; i < 4; i++) {
        char line[160];
        snprintf(line, sizeof line, "  %d: %s%s\n", i, one, i < 3 ? "," : "");
        strcat(want, line);
    }
    strcat(want, "}");
    CHECK(buf && !strcmp(buf, want), "printed:\n%s\nwanted:\n%s", buf ? buf : "", want);
    free(buf);
    sn_tensor *sum = NULL;
    CHECK_OK(sn_strategy_reduce(s, SN_REDUCE_SUM, r, -1, &sum));
    CHECK(sum && sn_tensor_get(sum, 0) == 88 && sn_tensor_get(sum, 3) == 256, "sum of matmuls");
    sn_tensor_free(sum);
    sn_per_replica_free(r);

    /* Values that differ per replica: [id, 1, 0.5]. */
    CHECK_OK(sn_strategy_run(s, id_fn, NULL, &r));
    sn_tensor *t = NULL;
    CHECK_OK(sn_strategy_reduce(s, SN_REDUCE_SUM, r, -1, &t));
    CHECK(t && sn_tensor_get(t, 0) == 6 && sn_tensor_get(t, 1) == 4 && sn_tensor_get(t, 2) == 2,
          "SUM over replicas");
    sn_tensor_free(t);
    CHECK_OK(sn_strategy_reduce(s, SN_REDUCE_MEAN, r, -1, &t));
    CHECK(t && sn_tensor_get(t, 0) == 1.5 && sn_tensor_get(t, 1) == 1 && sn_tensor_get(t, 2) == 0.5,
          "MEAN over replicas");
    sn_tensor_free(t);
    CHECK_OK(sn_strategy_reduce(s, SN_REDUCE_SUM, r, 0, &t));
    CHECK(t && sn_tensor_shape(t)->ndim == 0 && sn_tensor_get(t, 0) == 12, "SUM axis 0: %g",
          t ? sn_tensor_get(t, 0) : -1);
    sn_tensor_free(t);
    CHECK_OK(sn_strategy_reduce(s, SN_REDUCE_MEAN, r, 0, &t));
    CHECK(t && sn_tensor_get(t, 0) == 1.0, "MEAN axis 0 (12 / 12 elements): %g",
          t ? sn_tensor_get(t, 0) : -1);
    sn_tensor_free(t);
    CHECK_ERR(sn_strategy_reduce(s, SN_REDUCE_SUM, r, 2, &t), SN_ERR_INVALID, "axis 2");
    f = open_memstream(&buf, &len);
    sn_tensor_print_tf(sn_per_replica_get(r, 3), f);
    fclose(f);
    CHECK(!strcmp(buf, "tf.Tensor([3.  1.  0.5], shape=(3,), dtype=float32)"), "1-D print: %s", buf);
    free(buf);
    sn_per_replica_free(r);
    sn_strategy_free(s);
}

/* ---- distributed datasets ------------------------------------------------------------------ */

static sn_dataset *counting_dataset(int64_t n, int64_t batch) {
    sn_shape xs = {.ndim = 2, .dim = {n, 2}}, ys = {.ndim = 1, .dim = {n}};
    sn_tensor *x = NULL, *y = NULL;
    sn_tensor_new(&x, SN_F32, &xs);
    sn_tensor_new(&y, SN_I32, &ys);
    for (int64_t i = 0; i < n; i++) {
        ((float *)sn_tensor_data(x))[2 * i] = (float)i;
        ((float *)sn_tensor_data(x))[2 * i + 1] = (float)-i;
        ((int32_t *)sn_tensor_data(y))[i] = (int32_t)i;
    }
    sn_dataset *ds = NULL;
    sn_tensor *xy[2] = {x, y};
    sn_dataset_from_tensors(&ds, 2, xy);
    sn_tensor_free(x);
    sn_tensor_free(y);
    if (ds && batch > 0) sn_dataset_batch(&ds, batch, false);
    return ds;
}

static sn_status shard_fn(void *ctx, const sn_input_context *ic, sn_dataset **out) {
    int64_t per;
    SN_TRY(sn_input_context_per_replica_batch(ic, 8, &per));
    sn_dataset *ds = counting_dataset(32, 0);
    if (!ds) return SN_ERR_NOMEM;
    SN_TRY(sn_dataset_shard(&ds, ic->num_input_pipelines, ic->input_pipeline_id));
    SN_TRY(sn_dataset_batch(&ds, per, true));
    *(int *)ctx = ic->num_replicas_in_sync;
    *out = ds;
    return SN_OK;
}

static void test_datasets(void) {
    sn_strategy *s = NULL;
    CHECK_OK(sn_strategy_mirrored(0, NULL, &s)); /* 4 replicas */
    sn_dataset *ds = counting_dataset(20, 10);
    sn_dist_dataset *dd = NULL;
    CHECK_OK(sn_strategy_distribute_dataset(s, ds, &dd));
    sn_per_replica *c[SN_DATASET_MAX_COMPONENTS];
    bool end = false;
    int steps = 0;
    for (;;) {
        CHECK_OK(sn_dist_dataset_next(dd, c, &end));
        if (end) break;
        /* 10 rows over 4 replicas: 3, 3, 2, 2, in order. */
        int64_t want_lo[4] = {0, 3, 6, 8}, want_n[4] = {3, 3, 2, 2};
        for (int r = 0; r < 4; r++) {
            sn_tensor *x = sn_per_replica_get(c[0], r), *y = sn_per_replica_get(c[1], r);
            CHECK(sn_tensor_shape(x)->dim[0] == want_n[r] && sn_tensor_shape(y)->dim[0] == want_n[r],
                  "replica %d rows", r);
            CHECK(sn_tensor_get(y, 0) == steps * 10 + want_lo[r] &&
                      sn_tensor_get(x, 1) == -(steps * 10 + want_lo[r]),
                  "replica %d first row %g", r, sn_tensor_get(y, 0));
        }
        sn_per_replica_free(c[0]);
        sn_per_replica_free(c[1]);
        steps++;
    }
    CHECK(steps == 2, "steps %d", steps);
    sn_dist_dataset_free(dd);
    sn_dataset_free(ds);

    int seen = 0;
    CHECK_OK(sn_strategy_distribute_datasets_from_function(s, shard_fn, &seen, &dd));
    CHECK(seen == 4, "input context num_replicas_in_sync %d", seen);
    steps = 0;
    for (;;) {
        CHECK_OK(sn_dist_dataset_next(dd, c, &end));
        if (end) break;
        for (int r = 0; r < 4; r++) {
            sn_tensor *y = sn_per_replica_get(c[1], r);
            CHECK(sn_tensor_shape(y)->dim[0] == 2 && sn_tensor_get(y, 0) == steps * 8 + 2 * r,
                  "from_function replica %d batch", r);
        }
        sn_per_replica_free(c[0]);
        sn_per_replica_free(c[1]);
        steps++;
    }
    CHECK(steps == 4, "from_function steps %d", steps);
    sn_dist_dataset_free(dd);
    sn_strategy_free(s);
}

/* ---- training --------------------------------------------------------------------------------- */

enum { IMG = 10, CLASSES = 5, GLOBAL_BATCH = 24, STEPS = 6 };

typedef struct feeder {
    const float *x;
    const int32_t *y;
    int64_t next; /* the next global batch */
    sn_cached_plan *cp;
} feeder;

/* The same contract as fit's: the global batch; each replica copies its rows. */
static sn_status feed(void *ctx, int64_t step, const void **x, const void **y) {
    (void)step;
    feeder *f = ctx;
    int64_t b = f->next++ % 4;
    size_t xn = (size_t)GLOBAL_BATCH * IMG * IMG;
    *x = f->x + b * xn;
    *y = f->y + b * GLOBAL_BATCH;
    return SN_OK;
}

/* With regularizers (L2 on the conv kernel, L1L2 on the hidden Dense kernel, L2 on the output
 * bias), large enough that counting the penalty once per replica instead of once per step
 * would move the weights far past the tolerances below. */
static sn_model *make_model_spe(bool bn_dropout, int spe) {
    sn_model *m = sn_sequential_new("dist_test");
    sn_conv2d_layer_opts co2 = sn_conv2d_layer_defaults(4, 3, 3);
    co2.activation = SN_ACT_RELU;
    co2.kernel_regularizer.l2 = 0.01;
    sn_model_add(m, sn_layer_conv2d_ex(&co2));
    if (bn_dropout) { /* BatchNormalization then its relu: the fused pair (plan_fuse.c) */
        sn_model_add(m, sn_layer_batch_norm());
        sn_model_add(m, sn_layer_activation(SN_ACT_RELU));
    }
    sn_model_add(m, sn_layer_max_pool2d(2, 2));
    sn_model_add(m, sn_layer_flatten());
    if (bn_dropout) sn_model_add(m, sn_layer_dropout(0.25));
    sn_dense_layer_opts hidden = sn_dense_layer_defaults(16), last = sn_dense_layer_defaults(CLASSES);
    hidden.activation = SN_ACT_RELU;
    hidden.kernel_regularizer = (sn_regularizer){.l1 = 1e-3, .l2 = 1e-2};
    last.bias_regularizer.l2 = 0.05;
    sn_model_add(m, sn_layer_dense_ex(&hidden));
    sn_model_add(m, sn_layer_dense_ex(&last));
    sn_shape in = {.ndim = 3, .dim = {IMG, IMG, 1}};
    if (sn_model_build(m, &in, 7) != SN_OK) return NULL;
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer.learning_rate = 0.01;
    co.steps_per_execution = spe;
    if (sn_model_compile(m, &co) != SN_OK) return NULL;
    return m;
}

static sn_model *make_model(bool bn_dropout) { return make_model_spe(bn_dropout, 1); }

/* STEPS steps of the same 4 global batches (a fixed synthetic set) under strategy s (NULL:
 * fit's own plan); returns the model (the caller frees it) or NULL. */
static float *data_x;
static int32_t *data_y;

static void make_data(void) {
    if (!data_x) {
        size_t n = (size_t)4 * GLOBAL_BATCH * IMG * IMG;
        data_x = malloc(n * sizeof *data_x);
        data_y = malloc((size_t)4 * GLOBAL_BATCH * sizeof *data_y);
        sn_rng rng;
        sn_rng_init(&rng, 99, 0);
        for (size_t i = 0; i < n; i++) data_x[i] = (float)sn_rng_uniform(&rng);
        for (int i = 0; i < 4 * GLOBAL_BATCH; i++) {
            data_y[i] = (int32_t)sn_rng_below(&rng, CLASSES);
            /* a learnable signal: brighten a class-dependent pixel */
            data_x[(size_t)i * IMG * IMG + (size_t)data_y[i] * 7] += 2.0f;
        }
    }
}

static sn_model *train(sn_strategy *s, bool bn_dropout, int64_t steps, double *loss) {
    make_data();
    sn_model *m = make_model(bn_dropout);
    if (!m) return NULL;
    sn_model_set_strategy(m, s);
    sn_shape ys = {.ndim = 1, .dim = {GLOBAL_BATCH}};
    feeder f = {.x = data_x, .y = data_y};
    sn_status st = sn_train_plan(m, SN_PLAN_TRAIN, GLOBAL_BATCH, &ys, SN_I32, &f.cp);
    if (st == SN_OK) st = sn_train_run(m, f.cp, steps, feed, &f);
    if (st != SN_OK) {
        fprintf(stderr, "train: %s\n", sn_last_error());
        sn_model_set_strategy(m, NULL);
        sn_model_free(m);
        return NULL;
    }
    sn_train_state *t = m->train;
    double sum = *(float *)sn_variable_data(m->g, t->acc[0][0]);
    double cnt = *(float *)sn_variable_data(m->g, t->acc[0][t->opts.n_metrics + 1]);
    if (loss) *loss = sum / cnt;
    return m;
}

/* The trainable weights, concatenated (the caller frees). */
static float *weights(sn_model *m, size_t *n) {
    sn_node v[64];
    int nv = sn_graph_variables(m->g, true, v, 64);
    size_t tot = 0;
    for (int i = 0; i < nv; i++) {
        sn_shape s = sn_node_shape(m->g, v[i]);
        tot += (size_t)sn_shape_numel(&s);
    }
    float *w = malloc(tot * sizeof *w);
    size_t o = 0;
    for (int i = 0; i < nv; i++) {
        sn_shape s = sn_node_shape(m->g, v[i]);
        size_t k = (size_t)sn_shape_numel(&s);
        memcpy(w + o, sn_variable_data(m->g, v[i]), k * sizeof *w);
        o += k;
    }
    *n = tot;
    return w;
}

static double max_rel_diff(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs((double)a[i]) + 1e-3);
        if (d > worst) worst = d;
    }
    return worst;
}

static void free_model(sn_model *m) {
    if (!m) return;
    sn_model_set_strategy(m, NULL);
    sn_model_free(m);
}

static void test_training(void) {
    sn_strategy *one = NULL, *mir = NULL;
    CHECK_OK(sn_device_configure_cpu(2));
    CHECK_OK(sn_strategy_one_device("cpu:1", &one));
    CHECK_OK(sn_strategy_mirrored(2, NULL, &mir));
    double l0 = 0, l1 = 0, l2 = 0, l3 = 0;
    sn_model *m0 = train(NULL, false, STEPS, &l0);
    sn_model *m1 = train(one, false, STEPS, &l1);
    sn_model *m2 = train(mir, false, STEPS, &l2);
    sn_model *m3 = train(mir, false, STEPS, &l3);
    CHECK(m0 && m1 && m2 && m3, "training ran");
    if (m0 && m1 && m2 && m3) {
        size_t n0, n1, n2, n3;
        float *w0 = weights(m0, &n0), *w1 = weights(m1, &n1), *w2 = weights(m2, &n2),
              *w3 = weights(m3, &n3);
        CHECK(n0 == n1 && n0 == n2 && n0 == n3, "weight counts");
        /* The batch split changes the order of the sums inside the kernels, so one replica and
         * two agree to float rounding, not bitwise: ~1e-7 per step relative, compounded over
         * STEPS Adam steps; 1e-4 leaves a wide margin and still catches a wrong scale (a
         * missing 1/replicas is 100%). */
        double d01 = max_rel_diff(w0, w1, n0), d02 = max_rel_diff(w0, w2, n0),
               d23 = max_rel_diff(w2, w3, n0);
        printf("max relative weight difference after %d steps: one_device %.3g, mirrored(2) "
               "%.3g, mirrored run twice %.3g\n", STEPS, d01, d02, d23);
        CHECK(d01 < 1e-4, "one_device vs fit's plan: %g", d01);
        CHECK(d02 < 1e-4, "mirrored(2) vs one replica: %g", d02);
        CHECK(d23 == 0, "mirrored run twice differs: %g", d23);
        CHECK(fabs(l0 - l2) < 1e-4 * fabs(l0), "mean loss %g vs %g", l0, l2);
        free(w0);
        free(w1);
        free(w2);
        free(w3);
    }
    free_model(m0);
    free_model(m1);
    free_model(m2);
    free_model(m3);

    /* Batch normalization and dropout: per-replica statistics and masks, so only sanity. */
    double lb0 = 0, lb = 0;
    sn_model *b0 = train(mir, true, 1, &lb0);
    sn_model *b = train(mir, true, 40, &lb);
    CHECK(b0 && b && isfinite(lb) && lb < lb0, "BN + dropout under mirrored: loss %g after 1 "
          "step, %g mean over 40", lb0, lb);
    if (b) {
        /* moving variance moved away from 1 and stayed positive */
        sn_node v[64];
        int nv = sn_graph_variables(b->g, false, v, 64);
        bool found = false;
        for (int i = 0; i < nv; i++)
            if (strstr(sn_node_name(b->g, v[i]), "moving_variance")) {
                float mv = *(float *)sn_variable_data(b->g, v[i]);
                CHECK(mv > 0 && mv != 1.0f, "moving variance %g", mv);
                found = true;
            }
        CHECK(found, "a moving_variance variable");
    }
    free_model(b0);
    free_model(b);

    /* A global batch smaller than the replicas. */
    sn_strategy *many = NULL;
    CHECK_OK(sn_device_configure_cpu(32));
    CHECK_OK(sn_strategy_mirrored(32, NULL, &many));
    sn_model *m = make_model(false);
    sn_model_set_strategy(m, many);
    sn_cached_plan *cp;
    sn_shape ys = {.ndim = 1, .dim = {GLOBAL_BATCH}};
    CHECK_ERR(sn_train_plan(m, SN_PLAN_TRAIN, GLOBAL_BATCH, &ys, SN_I32, &cp), SN_ERR_SHAPE,
              "cannot give each of the 32 replicas");
    free_model(m);
    sn_strategy_free(many);
    sn_strategy_free(one);
    sn_strategy_free(mir);
}

/* ---- modes for tests/test_mpi.sh ------------------------------------------------------------ */

static int train_mode(const char *kind, const char *out) {
    sn_strategy *s = NULL;
    sn_status st = SN_OK;
    if (!strcmp(kind, "one_device")) st = sn_strategy_one_device(NULL, &s);
    else if (!strcmp(kind, "mirrored2")) {
        st = sn_device_configure_cpu(2);
        if (st == SN_OK) st = sn_strategy_mirrored(2, NULL, &s);
    } else if (!strcmp(kind, "multi_worker")) st = sn_strategy_multi_worker(1, &s);
    else if (!strcmp(kind, "multi_worker2")) { /* 2 local replicas per worker */
        st = sn_device_configure_cpu(2);
        if (st == SN_OK) st = sn_strategy_multi_worker(2, &s);
    }
    else if (strcmp(kind, "none") != 0) {
        fprintf(stderr, "test_dist: unknown kind '%s'\n", kind);
        return 2;
    }
    if (st != SN_OK) {
        fprintf(stderr, "test_dist: %s\n", sn_last_error());
        sn_dist_shutdown(false);
        return 1;
    }
    sn_model *m = train(s, false, STEPS, NULL);
    if (!m) {
        sn_dist_shutdown(false);
        return 1;
    }
    if (sn_strategy_is_chief(s) && sn_strategy_num_workers(s) > 1) {
        /* test_mpi.sh reads this line: with small buckets, some must start during the
         * backward pass (unless $SN_DIST_OVERLAP=0). */
        int64_t nb, early;
        double wait_s;
        sn_dist_allreduce_stats(m, &nb, &early, &wait_s);
        printf("test_dist: rank 0: %lld all-reduces, %lld started during the backward "
               "pass; %.3f ms/step waited after it\n", (long long)nb, (long long)early,
               1e3 * wait_s / (double)STEPS);
    }
    if (sn_strategy_is_chief(s)) {
        size_t n;
        float *w = weights(m, &n);
        FILE *f = fopen(out, "wb");
        if (!f || fwrite(w, sizeof *w, n, f) != n) {
            fprintf(stderr, "test_dist: cannot write %s\n", out);
            return 1;
        }
        fclose(f);
        free(w);
    }
    free_model(m);
    sn_strategy_free(s);
    sn_dist_shutdown(true);
    return 0;
}

static int die_mode(int64_t die_at, bool hang) {
    sn_strategy *s = NULL;
    if (sn_strategy_multi_worker(1, &s) != SN_OK) {
        fprintf(stderr, "test_dist: %s\n", sn_last_error());
        return 1;
    }
    sn_model *m = train(s, false, 1, NULL);
    for (int64_t step = 1; m; step++) {
        if (step == die_at && sn_strategy_worker_rank(s) == 1) {
            fprintf(stderr, "test_dist: worker 1 %s at step %lld\n",
                    hang ? "stops responding" : "kills itself", (long long)step);
            if (hang)
                for (;;) pause();
            raise(SIGKILL);
        }
        sn_shape ys = {.ndim = 1, .dim = {GLOBAL_BATCH}};
        sn_cached_plan *cp;
        if (sn_train_plan(m, SN_PLAN_TRAIN, GLOBAL_BATCH, &ys, SN_I32, &cp) != SN_OK) break;
        /* Feed nothing new: the plans' inputs keep the last batch. */
        if (sn_train_run(m, cp, 1, NULL, NULL) != SN_OK) {
            fprintf(stderr, "test_dist: worker %d: %s\n", sn_strategy_worker_rank(s),
                    sn_last_error());
            sn_dist_shutdown(false);
            return 1;
        }
    }
    return 1;
}

typedef struct bench_batch {
    float *x;
    int32_t *y;
} bench_batch;

static int64_t bench_spe; /* steps per execution ($SN_BENCH_SPE, default 1) */

static sn_status bench_next(void *ctx, int64_t step, const void **x, const void **y) {
    (void)step;
    bench_batch *b = ctx;
    *x = b->x;
    *y = b->y;
    return SN_OK;
}

/* The measurement in docs/distributed.md: STEPS steps (after one warm-up) of a preset on
 * synthetic 28x28 images under multi_worker; rank 0 prints ms/step and how much of the
 * all-reduce the backward pass hid ($SN_DIST_OVERLAP=0 for the all-reduce after it). */
static int bench_mode(const char *preset, int64_t batch, int64_t steps, int devices) {
    sn_strategy *s = NULL;
    sn_model *m = NULL;
    sn_cached_plan *cp = NULL;
    sn_shape in = {.ndim = 3, .dim = {28, 28, 1}}, ys = {.ndim = 1, .dim = {batch}};
    sn_status st = devices > 0 ? sn_device_configure_cpu(devices) : SN_OK;
    if (st == SN_OK)
        st = devices > 0 ? sn_strategy_mirrored(devices, NULL, &s) : sn_strategy_multi_worker(1, &s);
    if (st == SN_OK) st = sn_model_preset(preset, &m);
    if (st == SN_OK) st = sn_model_build(m, &in, 3);
    if (st == SN_OK) {
        sn_compile_opts co = sn_compile_defaults();
        st = sn_model_compile(m, &co);
    }
    if (st == SN_OK) st = sn_model_set_strategy(m, s);
    if (st == SN_OK) st = sn_train_plan(m, SN_PLAN_TRAIN, batch, &ys, SN_I32, &cp);
    /* Synthetic inputs (the speed does not depend on the values), fed every step as fit does:
     * each replica copies its rows. */
    bench_batch bb = {0};
    if (st == SN_OK) {
        bb.x = malloc((size_t)batch * 28 * 28 * sizeof *bb.x);
        bb.y = malloc((size_t)batch * sizeof *bb.y);
        for (int64_t i = 0; bb.x && bb.y && i < batch * 28 * 28; i++) bb.x[i] = (float)(i % 17) / 17.0f;
        for (int64_t i = 0; bb.x && bb.y && i < batch; i++) bb.y[i] = (int32_t)(i % 10);
        st = bb.x && bb.y ? sn_train_run(m, cp, 1, bench_next, &bb) : SN_ERR_NOMEM;
    }
    int64_t nb0 = 0, e0 = 0, nb = 0, early = 0;
    double w0 = 0, w = 0, t0 = sn_now();
    sn_dist_allreduce_stats(m, &nb0, &e0, &w0);
    /* The steps per execution of the last argument (default 1): one entry of the executor
     * per that many steps. */
    int64_t spe = bench_spe > 0 ? bench_spe : 1;
    for (int64_t done = 0; st == SN_OK && done < steps; done += spe)
        st = sn_train_run(m, cp, steps - done < spe ? steps - done : spe, bench_next, &bb);
    double dt = sn_now() - t0;
    sn_dist_allreduce_stats(m, &nb, &early, &w);
    if (st != SN_OK) {
        fprintf(stderr, "test_dist --bench: %s\n", sn_last_error());
        sn_dist_shutdown(false);
        return 1;
    }
    if (devices > 0)
        printf("bench %s batch %lld, mirrored on %d logical CPU device(s) of %d thread(s), "
               "replicas %s: %.2f ms/step\n", preset, (long long)batch, devices,
               sn_device_threads(0), s->concurrent && devices > 1 ? "at once" : "one after another",
               1e3 * dt / (double)steps);
    else if (sn_strategy_is_chief(s))
        printf("bench %s batch %lld, %d workers, overlap %s: %.2f ms/step; %lld all-reduces/step, "
               "%lld started during the backward pass; %.3f ms/step waited after it\n", preset,
               (long long)batch, sn_strategy_num_workers(s),
               s->workers > 1 && s->overlap ? "on" : "off", 1e3 * dt / (double)steps,
               (long long)((nb - nb0) / steps), (long long)((early - e0) / steps),
               1e3 * (w - w0) / (double)steps);
    /* What the plans hold (sn_plan_memory_bytes) and the process's peak, for the memory of
     * mirrored replicas (docs/distributed.md): replica 0 and any other, and the variables. */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    if (sn_strategy_is_chief(s))
        printf("memory: variables %.1f MB, replica 0's plan %.1f MB, replica %d's %.1f MB, "
               "peak RSS %.1f MB\n", m->g->vars_bytes / 1e6,
               sn_plan_memory_bytes(cp->rep ? cp->rep[0].plan : cp->plan) / 1e6,
               cp->rep ? cp->n_rep - 1 : 0,
               sn_plan_memory_bytes(cp->rep ? cp->rep[cp->n_rep - 1].plan : cp->plan) / 1e6,
               ru.ru_maxrss / 1024.0);
    free_model(m);
    sn_strategy_free(s);
    free(bb.x);
    free(bb.y);
    sn_dist_shutdown(true);
    return 0;
}

/* Replicas run at once (one host thread each, distribute/replicas.c) give the bits of the replicas
 * run one after another ($SN_DIST_CONCURRENT=0): every variable (weights, optimizer slots,
 * batch normalization's moving statistics) and the loss. Four logical devices on a 2-core
 * machine also checks more devices than cores (each a one-thread share, threads sharing
 * cores). */
static void test_concurrent(void) {
    CHECK_OK(sn_device_configure_cpu(4));
    for (int bn = 0; bn < 2; bn++) {
        sn_strategy *seq = NULL, *par = NULL;
        setenv("SN_DIST_CONCURRENT", "0", 1);
        CHECK_OK(sn_strategy_mirrored(4, NULL, &seq));
        unsetenv("SN_DIST_CONCURRENT");
        CHECK_OK(sn_strategy_mirrored(4, NULL, &par));
        double ls = 0, lp = 0;
        sn_model *ms = seq ? train(seq, bn, STEPS, &ls) : NULL;
        sn_model *mp = par ? train(par, bn, STEPS, &lp) : NULL;
        CHECK(ms && mp, "training 4 replicas one after another and at once (bn/dropout %d)", bn);
        if (ms && mp) {
            sn_node vs[64], vp[64];
            int ns = sn_graph_variables(ms->g, false, vs, 64);
            int np = sn_graph_variables(mp->g, false, vp, 64);
            CHECK(ns == np && ns > 0, "variable counts %d and %d", ns, np);
            int differ = 0;
            for (int i = 0; i < ns && i < np; i++) {
                sn_shape sh = sn_node_shape(ms->g, vs[i]);
                size_t bytes = (size_t)sn_shape_numel(&sh) * sn_dtype_size(sn_node_dtype(ms->g, vs[i]));
                if (memcmp(sn_variable_data(ms->g, vs[i]), sn_variable_data(mp->g, vp[i]), bytes)) {
                    fprintf(stderr, "variable %s differs\n", sn_node_name(ms->g, vs[i]));
                    differ++;
                }
            }
            CHECK(differ == 0, "%d of %d variables differ between replicas at once and one after "
                  "another (bn/dropout %d)", differ, ns, bn);
            CHECK(ls == lp, "mean loss %.9g one after another, %.9g at once", ls, lp);
        }
        free_model(ms);
        free_model(mp);
        sn_strategy_free(seq);
        sn_strategy_free(par);
    }
}

/* Mirrored variables on CPU devices: the replicas share the graph's buffer (replica 0 applies
 * the update, the others read it), so a weight changed by the host between executions reaches
 * every replica, and a replica but the first holds no copy of the weights and optimizer slots.
 * That copy is what made 8 replicas of the guide's CNN (37.7 M weights) take 16 GB. Memory is
 * checked without timing, from what the plans hold (sn_plan_memory_bytes) plus the graph's
 * variables, on a model whose weights dominate (a Dense of 400 K weights): 4 replicas at the
 * same global batch hold at most 2x what one device's plan does (measured: 1.78x; 4.21x when
 * each replica had its own copy). */
static sn_model *make_wide_model(void) {
    sn_model *m = sn_sequential_new("dist_wide");
    sn_dense_layer_opts hidden = sn_dense_layer_defaults(4096), last = sn_dense_layer_defaults(CLASSES);
    hidden.activation = SN_ACT_RELU;
    sn_model_add(m, sn_layer_flatten());
    sn_model_add(m, sn_layer_dense_ex(&hidden));
    sn_model_add(m, sn_layer_dense_ex(&last));
    sn_shape in = {.ndim = 3, .dim = {IMG, IMG, 1}};
    sn_compile_opts co = sn_compile_defaults();
    if (sn_model_build(m, &in, 7) != SN_OK || sn_model_compile(m, &co) != SN_OK) {
        sn_model_free(m);
        return NULL;
    }
    return m;
}

/* What training m under s at GLOBAL_BATCH holds beyond the data: the graph's variables plus
 * every replica's plan (after 2 steps, so every lazily made buffer exists). 0 on failure. */
static size_t training_bytes(sn_model *m, sn_strategy *s, sn_cached_plan **cp_out) {
    sn_model_set_strategy(m, s);
    sn_shape ys = {.ndim = 1, .dim = {GLOBAL_BATCH}};
    feeder f = {.x = data_x, .y = data_y};
    if (sn_train_plan(m, SN_PLAN_TRAIN, GLOBAL_BATCH, &ys, SN_I32, &f.cp) != SN_OK ||
        sn_train_run(m, f.cp, 2, feed, &f) != SN_OK) {
        fprintf(stderr, "training_bytes: %s\n", sn_last_error());
        return 0;
    }
    size_t bytes = m->g->vars_bytes;
    if (f.cp->rep)
        for (int r = 0; r < f.cp->n_rep; r++) bytes += sn_plan_memory_bytes(f.cp->rep[r].plan);
    else bytes += sn_plan_memory_bytes(f.cp->plan);
    *cp_out = f.cp;
    return bytes;
}

static void test_replica_memory(void) {
    CHECK_OK(sn_device_configure_cpu(4));
    sn_strategy *mir = NULL;
    CHECK_OK(sn_strategy_mirrored(4, NULL, &mir));
    sn_model *m1 = make_wide_model(), *m4 = make_wide_model();
    CHECK(m1 && m4 && mir, "the wide model and the strategy");
    make_data();
    if (!m1 || !m4 || !mir) goto out;
    sn_cached_plan *c1 = NULL, *c4 = NULL;
    size_t one = training_bytes(m1, NULL, &c1), four = training_bytes(m4, mir, &c4);
    CHECK(one > 0 && four > 0 && c4 && c4->n_rep == 4, "training the wide model on 1 and 4 replicas");
    if (!one || !four || !c4 || c4->n_rep != 4) goto out;
    printf("test_dist: the wide model holds %.2f MB on one device, %.2f MB on 4 replicas "
           "(%.2fx; variables %.2f MB)\n", one / 1e6, four / 1e6, (double)four / one,
           m4->g->vars_bytes / 1e6);
    CHECK(four <= 2 * one, "4 replicas hold %zu bytes, more than 2x one device's %zu", four, one);
    for (int r = 1; r < 4; r++)
        CHECK(sn_plan_memory_bytes(c4->rep[r].plan) < m4->g->vars_bytes,
              "replica %d's plan holds %zu bytes, as much as the variables (%zu): a private copy",
              r, sn_plan_memory_bytes(c4->rep[r].plan), m4->g->vars_bytes);
    /* A host write between executions reaches every replica: they read the graph's buffer. */
    sn_node v[64];
    int n = sn_graph_variables(m4->g, false, v, 64), compared = 0, shared = 0;
    float *w = sn_variable_data(m4->g, v[0]);
    w[0] += 0.5f;
    for (int i = 0; i < n; i++) {
        const void *mine = sn_plan_buffer(c4->rep[3].plan, v[i]);
        if (!mine) continue; /* not read by the training plan (evaluation's accumulators) */
        compared++;
        shared += mine == sn_variable_cdata(m4->g, v[i]);
    }
    CHECK(compared > 0 && shared == compared, "replica 3 reads %d of its %d variables from the "
          "graph's buffer; want all", shared, compared);
out:
    free_model(m1);
    free_model(m4);
    sn_strategy_free(mir);
}

/* steps_per_execution under a strategy: fit enters each replica's plan once per N steps (the
 * executor runs the N steps, all-reduce and update included, without returning), and the
 * weights are bitwise those of one step per execution. 9 batches of 24 and a last one of 10:
 * with N = 4, executions of 4, 4 and 1 full batches, then the partial batch's own plan. */
static void test_steps_per_execution(void) {
    enum { FULL = 9, LAST = 10 };
    int64_t n = FULL * GLOBAL_BATCH + LAST;
    sn_shape xs = {.ndim = 4, .dim = {n, IMG, IMG, 1}}, ys = {.ndim = 1, .dim = {n}};
    sn_tensor *x = NULL, *y = NULL;
    CHECK_OK(sn_tensor_new(&x, SN_F32, &xs));
    CHECK_OK(sn_tensor_new(&y, SN_I32, &ys));
    if (!x || !y) return;
    sn_rng rng;
    sn_rng_init(&rng, 5, 0);
    float *xd = sn_tensor_data(x);
    int32_t *yd = sn_tensor_data(y);
    for (int64_t i = 0; i < n * IMG * IMG; i++) xd[i] = (float)sn_rng_uniform(&rng);
    for (int64_t i = 0; i < n; i++) {
        yd[i] = (int32_t)sn_rng_below(&rng, CLASSES);
        xd[i * IMG * IMG + yd[i] * 7] += 2.0f;
    }
    CHECK_OK(sn_device_configure_cpu(2));
    sn_strategy *mir = NULL;
    CHECK_OK(sn_strategy_mirrored(2, NULL, &mir));
    sn_model *ms[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        int spe = k == 0 ? 1 : 4;
        sn_dataset *ds = NULL;
        CHECK_OK(sn_dataset_from_tensors(&ds, 2, (sn_tensor *[]){x, y}));
        CHECK_OK(sn_dataset_batch(&ds, GLOBAL_BATCH, false));
        sn_model *m = ms[k] = make_model_spe(true, spe);
        CHECK(m != NULL, "model with steps_per_execution %d", spe);
        if (!m || !ds) {
            sn_dataset_free(ds);
            continue;
        }
        CHECK_OK(sn_model_set_strategy(m, mir));
        sn_fit_opts fo = sn_fit_defaults();
        fo.epochs = 2;
        CHECK_OK(sn_model_fit(m, ds, &fo, NULL));
        CHECK(sn_model_distributed_steps(m) == 2 * (FULL + 1), "%lld distributed steps, want %d",
              (long long)sn_model_distributed_steps(m), 2 * (FULL + 1));
        const sn_train_state *t = m->train;
        int found = 0;
        for (int i = 0; i < t->n_plans; i++) {
            const sn_cached_plan *cp = &t->plans[i];
            if (cp->kind != SN_PLAN_TRAIN) continue;
            CHECK(cp->n_rep == 2, "batch %lld: %d replica plans", (long long)cp->batch, cp->n_rep);
            /* per epoch: ceil(9 / spe) executions of the full batch, one of the partial one */
            int64_t want = cp->batch == GLOBAL_BATCH ? 2 * ((FULL + spe - 1) / spe) : 2;
            for (int r = 0; r < cp->n_rep; r++) {
                int64_t runs = sn_plan_run_count(cp->rep[r].plan);
                CHECK(runs == want, "steps_per_execution %d, batch %lld: replica %d's plan was "
                      "entered %lld times, want %lld", spe, (long long)cp->batch, r,
                      (long long)runs, (long long)want);
            }
            found++;
        }
        CHECK(found == 2, "%d training plans (full and partial batch), want 2", found);
        sn_dataset_free(ds);
    }
    if (ms[0] && ms[1]) {
        sn_node v0[64], v1[64];
        int n0 = sn_graph_variables(ms[0]->g, false, v0, 64);
        int n1 = sn_graph_variables(ms[1]->g, false, v1, 64);
        CHECK(n0 == n1 && n0 > 0, "variable counts %d and %d", n0, n1);
        int differ = 0;
        for (int i = 0; i < n0 && i < n1; i++) {
            sn_shape sh = sn_node_shape(ms[0]->g, v0[i]);
            size_t bytes = (size_t)sn_shape_numel(&sh) * sn_dtype_size(sn_node_dtype(ms[0]->g, v0[i]));
            if (memcmp(sn_variable_data(ms[0]->g, v0[i]), sn_variable_data(ms[1]->g, v1[i]), bytes)) {
                fprintf(stderr, "variable %s differs\n", sn_node_name(ms[0]->g, v0[i]));
                differ++;
            }
        }
        CHECK(differ == 0, "%d variables differ between 1 and 4 steps per execution under "
              "mirrored (BN and dropout on)", differ);
    }
    free_model(ms[0]);
    free_model(ms[1]);
    sn_strategy_free(mir);
    sn_tensor_free(x);
    sn_tensor_free(y);
}

/* Under mpirun: the thread count a multi_worker strategy leaves this worker with (printed
 * as "rank R threads N cores C"), for test_mpi.sh's check that unbound workers share the
 * node's cores instead of each taking all of them. */
static int threads_mode(void) {
    sn_strategy *s = NULL;
    if (sn_strategy_multi_worker(1, &s) != SN_OK) {
        fprintf(stderr, "test_dist --threads: %s\n", sn_last_error());
        return 1;
    }
    printf("rank %d threads %d cores %d\n", sn_strategy_worker_rank(s), sn_num_threads(),
           sn_num_cores());
    fflush(stdout);
    sn_strategy_free(s);
    sn_dist_shutdown(true);
    return 0;
}

int main(int argc, char **argv) {
    const char *spe = getenv("SN_BENCH_SPE");
    bench_spe = spe ? atoll(spe) : 1;
    if (argc == 5 && !strcmp(argv[1], "--bench"))
        return bench_mode(argv[2], atoll(argv[3]), atoll(argv[4]), 0);
    if (argc == 6 && !strcmp(argv[1], "--bench-local"))
        return bench_mode(argv[2], atoll(argv[3]), atoll(argv[4]), atoi(argv[5]));
    if (argc == 2 && !strcmp(argv[1], "--threads")) return threads_mode();
    if (argc == 4 && !strcmp(argv[1], "--train")) return train_mode(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "--train-die")) return die_mode(atoll(argv[2]), false);
    if (argc == 3 && !strcmp(argv[1], "--train-hang")) return die_mode(atoll(argv[2]), true);
    test_devices();
    test_strategies();
    test_datasets();
    test_training();
    test_concurrent();
    test_steps_per_execution();
    test_replica_memory();
    return sn_test_finish("test_dist");
}
