/* Keras-style training end to end: compile, fit (steps_per_execution, callbacks, history),
 * evaluate and predict on a Fashion-MNIST subset, plus determinism and the errors users meet.
 * Skips (exit 77) when the data set is not installed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/train/train_impl.h"
#include "sn_test.h"
#include "fmnist_test_util.h"

/* Keras 3's progress bar: 20 heavy horizontals (U+2501) */
#define BAR20                                                                                  \
    "\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501"                      \
    "\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501"

#define N_TRAIN 2000
#define N_TEST 1000

static sn_tensor *train_x, *train_y, *test_x, *test_y;

/* Flatten, Dense(hidden, relu), [Dropout], Dense(out, out_act), built for 28x28x1. */
static sn_model *mlp(int64_t hidden, double dropout, int64_t out, sn_activation out_act,
                     uint64_t seed) {
    sn_model *m = sn_sequential_new("mlp");
    CHECK_OK(sn_model_add(m, sn_layer_flatten()));
    CHECK_OK(sn_model_add(m, sn_layer_dense(hidden, SN_ACT_RELU)));
    if (dropout > 0) CHECK_OK(sn_model_add(m, sn_layer_dropout(dropout)));
    CHECK_OK(sn_model_add(m, sn_layer_dense(out, out_act)));
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {28, 28, 1}}, seed));
    return m;
}

static char *slurp(FILE *f) {
    fflush(f);
    long n = ftell(f);
    char *s = calloc((size_t)n + 1, 1);
    rewind(f);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    return s;
}

/* " - name: 0.1234" right after `after` in line; returns the value or NAN. */
static double field(const char *line, const char *name) {
    char key[96];
    snprintf(key, sizeof key, " - %s: ", name);
    const char *p = strstr(line, key);
    if (!p) return NAN;
    p += strlen(key);
    /* four decimals exactly: d.dddd */
    const char *dot = strchr(p, '.');
    if (!dot || dot - p > 3) return NAN;
    for (int i = 1; i <= 4; i++)
        if (dot[i] < '0' || dot[i] > '9') return NAN;
    if (dot[5] != ' ' && dot[5] != '\n' && dot[5] != 0) return NAN;
    return atof(p);
}

/* ---- training reaches a stated accuracy; logs, history, CSV, progress bar ------------------ */
static void test_train_and_logs(void) {
    sn_model *m = mlp(64, 0, 10, SN_ACT_NONE, 42);
    sn_compile_opts c = sn_compile_defaults();
    c.steps_per_execution = 8;
    CHECK_OK(sn_model_compile(m, &c));
    sn_dataset *tr = fmnist_ds(train_x, train_y, N_TRAIN, 32, 7, true);
    sn_dataset *te = fmnist_ds(test_x, test_y, N_TEST, 100, 0, true);

    FILE *bar = tmpfile();
    char csv[64];
    snprintf(csv, sizeof csv, "/tmp/sn_test_fit_%d.csv", (int)getpid());
    sn_callback *cbs[2] = {sn_callback_progress_bar(bar, 1), sn_callback_csv_logger(csv)};
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 3;
    f.validation = te;
    f.callbacks = cbs;
    f.n_callbacks = 2;
    sn_history *h = NULL;
    double t0 = sn_now();
    CHECK_OK(sn_model_fit(m, tr, &f, &h));
    double secs = sn_now() - t0;
    CHECK(sn_history_epochs(h) == 3, "history has %d epochs", sn_history_epochs(h));
    double l0 = sn_history_get(h, "loss", 0), l2 = sn_history_get(h, "loss", 2);
    double va = sn_history_get(h, "val_sparse_categorical_accuracy", 2);
    double vl = sn_history_get(h, "val_loss", 2);
    printf("mlp 64, %d images, 3 epochs, batch 32, 8 steps/execution: %.2f s; loss %.4f -> "
           "%.4f, val_loss %.4f, val_accuracy %.4f\n", N_TRAIN, secs, l0, l2, vl, va);
    CHECK(l2 < l0 * 0.8, "loss did not fall: %g -> %g", l0, l2);
    /* measured 0.77; a broken update or metric gives ~0.1 */
    CHECK(va >= 0.72, "val accuracy %g < 0.72", va);
    CHECK(isnan(sn_history_get(h, "nope", 0)) && isnan(sn_history_get(h, "loss", 3)),
          "absent history entries are NaN");

    /* evaluate on the same data with the same weights gives the last val_* exactly */
    double v[4];
    int nv = 0;
    CHECK_OK(sn_model_evaluate(m, te, 0, v, 4, &nv));
    CHECK(nv == 2 && v[0] == vl && v[1] == va, "evaluate %d values %g %g vs val %g %g", nv, v[0],
          v[1], vl, va);
    CHECK_OK(sn_model_evaluate(m, te, 3, v, 4, &nv)); /* 3 of 10 batches */
    CHECK(nv == 2 && v[1] >= 0 && v[1] <= 1, "evaluate with steps");

    /* progress bar, not a terminal: "Epoch i/3" then one final line per epoch, Keras 3's bar
     * with its escape codes (Keras writes them to files too) */
#define FULL_BAR(n) "\x1b[1m" n "\x1b[0m \x1b[32m" BAR20 "\x1b[0m\x1b[37m\x1b[0m \x1b[1m"
    static const char head[] = "Epoch 1/3\n" FULL_BAR("63/63");
    char *text = slurp(bar);
    CHECK(text && strncmp(text, head, strlen(head)) == 0, "progress text starts: %.160s",
          text ? text : "");
    const char *e3 = text ? strstr(text, "Epoch 3/3\n") : NULL;
    CHECK(e3 != NULL, "no Epoch 3/3 line");
    if (e3) {
        const char *line = e3 + strlen("Epoch 3/3\n");
        /* "<bar> \e[1m1s\e[0m 4ms/step - loss: ..." */
        const char *p = line + strlen(FULL_BAR("63/63"));
        char *end;
        strtol(p, &end, 10);
        CHECK(end > p && !strncmp(end, "s\x1b[0m ", 6), "elapsed field: %.40s", p);
        long per = strtol(end + 6, &end, 10);
        CHECK(per >= 0 && (strncmp(end, "ms/step", 7) == 0 || strncmp(end, "us/step", 7) == 0 ||
                           strncmp(end, "s/step", 6) == 0),
              "per-step field: %.40s", end);
        CHECK(fabs(field(line, "loss") - l2) < 6e-5, "bar loss %g vs history %g",
              field(line, "loss"), l2);
        CHECK(fabs(field(line, "val_sparse_categorical_accuracy") - va) < 6e-5,
              "bar val accuracy %g vs %g", field(line, "val_sparse_categorical_accuracy"), va);
        CHECK(!isnan(field(line, "sparse_categorical_accuracy")) &&
                  !isnan(field(line, "val_loss")),
              "bar fields: %s", line);
        const char *nl = strchr(line, '\n');
        CHECK(nl && nl[1] == 0, "one line after Epoch 3/3: %s", line);
        CHECK(!strchr(text, '\r'), "no redraws when not a terminal");
        /* Keras 3's order: the training logs by name, then the val_ logs by name */
        const char *k1 = strstr(line, " - loss: "), *k2 = strstr(line, " - sparse_categorical_acc"),
                   *k3 = strstr(line, " - val_loss: "), *k4 = strstr(line, " - val_sparse_cat");
        CHECK(k1 && k2 && k3 && k4 && k1 < k2 && k2 < k3 && k3 < k4, "log order: %s", line);
    }
    free(text);
    fclose(bar);

    /* CSV: Keras's sorted keys, epoch from 0, values that read back to the history */
    FILE *cf = fopen(csv, "r");
    CHECK(cf != NULL, "csv %s missing", csv);
    if (cf) {
        char line[512];
        CHECK(fgets(line, sizeof line, cf) &&
                  strcmp(line, "epoch,loss,sparse_categorical_accuracy,val_loss,"
                               "val_sparse_categorical_accuracy\n") == 0,
              "csv header: %s", line);
        int rows = 0;
        while (fgets(line, sizeof line, cf)) {
            int ep;
            double lo;
            CHECK(sscanf(line, "%d,%lf,", &ep, &lo) == 2 && ep == rows &&
                      lo == sn_history_get(h, "loss", rows),
                  "csv row %d: %s", rows, line);
            rows++;
        }
        CHECK(rows == 3, "csv has %d rows", rows);
        fclose(cf);
        remove(csv);
    }

    /* predict: probabilities [B, 10] (softmax applied for a from_logits loss) */
    sn_tensor *xb = NULL, *pred = NULL;
    sn_tensor *b[2];
    bool end;
    CHECK_OK(sn_dataset_reset(te));
    CHECK_OK(sn_dataset_next(te, b, &end));
    sn_shape five = sn_shape_make(4, (int64_t)5, (int64_t)28, (int64_t)28, (int64_t)1);
    CHECK_OK(sn_tensor_from_data(&xb, SN_F32, &five, sn_tensor_cdata(b[0])));
    CHECK_OK(sn_model_predict(m, xb, &pred));
    if (pred) {
        const sn_shape *ps = sn_tensor_shape(pred);
        CHECK(ps->ndim == 2 && ps->dim[0] == 5 && ps->dim[1] == 10, "predict shape");
        const float *pp = sn_tensor_cdata(pred);
        for (int i = 0; i < 5; i++) {
            double s = 0;
            for (int k = 0; k < 10; k++) s += pp[i * 10 + k];
            CHECK(fabs(s - 1) < 1e-5, "row %d sums to %g", i, s);
        }
    }
    sn_tensor_free(pred);
    sn_tensor *bad = NULL;
    sn_shape s2 = sn_shape_make(3, (int64_t)5, (int64_t)28, (int64_t)28);
    CHECK_OK(sn_tensor_new(&bad, SN_F32, &s2));
    CHECK_ERR(sn_model_predict(m, bad, &pred), SN_ERR_SHAPE, "[5, 28, 28]");
    sn_tensor_free(bad);
    sn_tensor_free(xb);

    sn_history_free(h);
    sn_callback_free(cbs[0]);
    sn_callback_free(cbs[1]);
    sn_dataset_free(tr);
    sn_dataset_free(te);
    sn_model_free(m);
}

/* ---- a small CNN: 2 epochs on 2,000 images -------------------------------------------------- */
static void test_cnn(void) {
    sn_model *m = sn_sequential_new("cnn");
    CHECK_OK(sn_model_add(m, sn_layer_conv2d(16, 3, 3, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_max_pool2d(2, 2)));
    CHECK_OK(sn_model_add(m, sn_layer_flatten()));
    CHECK_OK(sn_model_add(m, sn_layer_dense(10, SN_ACT_NONE)));
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {28, 28, 1}}, 7));
    sn_compile_opts c = sn_compile_defaults();
    c.steps_per_execution = 50;
    CHECK_OK(sn_model_compile(m, &c));
    sn_dataset *tr = fmnist_ds(train_x, train_y, N_TRAIN, 32, 11, true);
    sn_dataset *te = fmnist_ds(test_x, test_y, N_TEST, 100, 0, true);
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 2;
    sn_history *h = NULL;
    double t0 = sn_now();
    CHECK_OK(sn_model_fit(m, tr, &f, &h));
    double secs = sn_now() - t0, v[2] = {NAN, NAN};
    int nv = 0;
    CHECK_OK(sn_model_evaluate(m, te, 0, v, 2, &nv));
    printf("cnn conv16-pool-dense, %d images, 2 epochs, batch 32, 50 steps/execution: %.2f s; "
           "loss %.4f -> %.4f; test loss %.4f, test accuracy %.4f\n", N_TRAIN, secs,
           sn_history_get(h, "loss", 0), sn_history_get(h, "loss", 1), v[0], v[1]);
    CHECK(sn_history_get(h, "loss", 1) < sn_history_get(h, "loss", 0), "cnn loss did not fall");
    /* measured 0.76 */
    CHECK(v[1] >= 0.70, "cnn test accuracy %g < 0.70", v[1]);
    sn_history_free(h);
    sn_dataset_free(tr);
    sn_dataset_free(te);
    sn_model_free(m);
}

/* ---- determinism: same seed twice, and 1 vs 50 steps per execution -------------------------- */
static unsigned char *train_weights(int spe, size_t *bytes, double *loss) {
    sn_model *m = mlp(32, 0.25, 10, SN_ACT_NONE, 123); /* dropout: masks keyed by the step */
    sn_compile_opts c = sn_compile_defaults();
    c.steps_per_execution = spe;
    CHECK_OK(sn_model_compile(m, &c));
    /* 1000 / 64: 15 full batches and a partial one of 40 */
    sn_dataset *tr = fmnist_ds(train_x, train_y, 1000, 64, 99, true);
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 2;
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, tr, &f, &h));
    *loss = sn_history_get(h, "loss", 1);
    size_t n = 0;
    const void *buf = sn_graph_variable_buffer(sn_model_graph(m), &n);
    unsigned char *copy = malloc(n);
    memcpy(copy, buf, n);
    *bytes = n;
    sn_history_free(h);
    sn_dataset_free(tr);
    sn_model_free(m);
    return copy;
}

static void test_determinism(void) {
    size_t n1, n2, n3;
    double l1, l2, l3;
    unsigned char *a = train_weights(1, &n1, &l1);
    unsigned char *b = train_weights(1, &n2, &l2);
    unsigned char *c = train_weights(50, &n3, &l3);
    CHECK(n1 == n2 && n1 == n3 && n1 > 0, "buffer sizes %zu %zu %zu", n1, n2, n3);
    CHECK(n1 == n2 && memcmp(a, b, n1) == 0, "same seed twice: weights differ");
    CHECK(n1 == n3 && memcmp(a, c, n1) == 0, "1 vs 50 steps per execution: weights differ");
    CHECK(l1 == l2 && l1 == l3, "losses %.9g %.9g %.9g", l1, l2, l3);
    free(a);
    free(b);
    free(c);
}

/* ---- callbacks: early stopping, terminate on NaN, stop flags -------------------------------- */
static sn_status count_batches(void *user, const sn_logs *l, bool *stop) {
    int *k = user;
    (*k)++;
    if (l->step > l->steps || l->steps != 8) return sn_errorf(SN_ERR_INVALID, "bad logs");
    return SN_OK;
}

typedef struct begin_log {
    int n, epoch;
    int64_t step[8];
} begin_log;

static sn_status log_batch_begin(void *user, int epoch, int64_t step) {
    begin_log *b = user;
    if (b->n < 8) b->step[b->n] = step;
    b->n++;
    b->epoch = epoch;
    return SN_OK;
}

static void test_callbacks(void) {
    sn_model *m = mlp(16, 0, 10, SN_ACT_NONE, 5);
    sn_compile_opts c = sn_compile_defaults();
    c.steps_per_execution = 3;
    CHECK_OK(sn_model_compile(m, &c));
    sn_dataset *tr = fmnist_ds(train_x, train_y, 512, 64, 3, true); /* 8 batches */

    /* Batch callbacks run between executions: 8 steps in executions of 3 -> 3, 6, 8; the
     * batch-begin hook before each, with the index of its first step: 0, 3, 6. */
    int calls = 0;
    begin_log bl = {0};
    sn_callback counter = {.user = &calls, .on_batch_end = count_batches};
    sn_callback beginner = {.user = &bl, .on_batch_begin = log_batch_begin};
    sn_callback *two[2] = {&counter, &beginner};
    sn_fit_opts f = sn_fit_defaults();
    f.callbacks = two;
    f.n_callbacks = 2;
    CHECK_OK(sn_model_fit(m, tr, &f, NULL));
    CHECK(calls == 3, "%d batch callbacks for 8 steps at 3 per execution", calls);
    CHECK(bl.n == 3 && bl.step[0] == 0 && bl.step[1] == 3 && bl.step[2] == 6 && bl.epoch == 0,
          "batch-begin calls: %d, steps %lld %lld %lld", bl.n, (long long)bl.step[0],
          (long long)bl.step[1], (long long)bl.step[2]);

    /* Early stopping on loss with an improvement nothing reaches: stops after epoch 2. */
    sn_callback *es = sn_callback_early_stopping("loss", 10.0, 1);
    sn_callback *cbs[1] = {es};
    f.callbacks = cbs;
    f.n_callbacks = 1;
    f.epochs = 10;
    f.steps_per_epoch = 2;
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, tr, &f, &h));
    CHECK(sn_history_epochs(h) == 2, "early stopping ran %d epochs", sn_history_epochs(h));
    sn_history_free(h);
    /* Patience 3 without improvement: epochs 0..3 */
    sn_callback_free(es);
    es = sn_callback_early_stopping("sparse_categorical_accuracy", 1.0, 3);
    cbs[0] = es;
    CHECK_OK(sn_model_fit(m, tr, &f, &h));
    CHECK(sn_history_epochs(h) == 4, "patience 3 ran %d epochs", sn_history_epochs(h));
    sn_history_free(h);
    /* A monitor the logs lack is an error naming what is there */
    sn_callback_free(es);
    es = sn_callback_early_stopping(NULL, 0, 0); /* val_loss without validation data */
    cbs[0] = es;
    CHECK_ERR(sn_model_fit(m, tr, &f, NULL), SN_ERR_NOT_FOUND, "available: loss");
    sn_callback_free(es);

    /* Terminate on NaN: an image of 3e38 in batch 6 (1-based) overflows the first layer to
     * +-Inf and the second to NaN (a NaN pixel alone may vanish in relu) */
    sn_tensor *x = NULL, *y = NULL;
    sn_shape xs = sn_shape_make(4, (int64_t)64, (int64_t)28, (int64_t)28, (int64_t)1);
    sn_shape ys = sn_shape_make(1, (int64_t)64);
    CHECK_OK(sn_tensor_new(&x, SN_F32, &xs));
    CHECK_OK(sn_tensor_new(&y, SN_I32, &ys));
    for (int i = 0; i < 784; i++) ((float *)sn_tensor_data(x))[5 * 8 * 784 + i] = 3e38f;
    for (int i = 0; i < 64; i++) ((int32_t *)sn_tensor_data(y))[i] = i % 10;
    sn_dataset *nds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&nds, 2, (sn_tensor *[]){x, y}));
    CHECK_OK(sn_dataset_batch(&nds, 8, true));
    sn_callback *tn = sn_callback_terminate_on_nan();
    cbs[0] = tn;
    f = sn_fit_defaults();
    f.epochs = 2;
    f.callbacks = cbs;
    f.n_callbacks = 1;
    sn_compile_opts c1 = sn_compile_defaults();
    CHECK_OK(sn_model_compile(m, &c1));
    CHECK_ERR(sn_model_fit(m, nds, &f, &h), SN_ERR_NUMERIC, "loss became NaN at epoch 1, step 6");
    CHECK(h && sn_history_epochs(h) == 0, "history after the NaN stop");
    sn_history_free(h);
    sn_callback_free(tn);
    sn_dataset_free(nds);
    sn_tensor_free(x);
    sn_tensor_free(y);
    sn_dataset_free(tr);
    sn_model_free(m);
}

/* ---- a NaN pixel reaches small_cnn's loss -------------------------------------------------- */
/* One NaN pixel in batch 6 (1-based) of small_cnn's training data: relu and max-pool let it
 * through (they turned it into 0 once, and the loss stayed finite), so TerminateOnNaN stops
 * at step 6; with steps_per_execution 4 it names steps 5-8, the execution that held it. */
static void test_nan_pixel(void) {
    sn_shape xs = sn_shape_make(4, (int64_t)64, (int64_t)28, (int64_t)28, (int64_t)1);
    sn_shape ys = sn_shape_make(1, (int64_t)64);
    sn_tensor *x = NULL, *y = NULL;
    CHECK_OK(sn_tensor_new(&x, SN_F32, &xs));
    CHECK_OK(sn_tensor_new(&y, SN_I32, &ys));
    if (!x || !y) return;
    float *xd = sn_tensor_data(x);
    for (int64_t i = 0; i < 64 * 784; i++) xd[i] = (float)((i * 37) % 256) / 255.0f;
    xd[(5 * 8 + 3) * 784 + 14 * 28 + 9] = NAN; /* batch 6, example 3, row 14, col 9 */
    for (int i = 0; i < 64; i++) ((int32_t *)sn_tensor_data(y))[i] = i % 10;
    const int spe[2] = {1, 4};
    const char *want[2] = {"loss became NaN at epoch 1, step 6 (TerminateOnNaN)",
                           "loss became NaN at epoch 1, in steps 5-8"};
    for (int k = 0; k < 2; k++) {
        sn_model *m = NULL;
        CHECK_OK(sn_model_preset("small_cnn", &m));
        if (!m) break;
        CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {28, 28, 1}}, 1));
        sn_compile_opts c = sn_compile_defaults();
        c.steps_per_execution = spe[k];
        CHECK_OK(sn_model_compile(m, &c));
        sn_dataset *ds = NULL;
        CHECK_OK(sn_dataset_from_tensors(&ds, 2, (sn_tensor *[]){x, y}));
        CHECK_OK(sn_dataset_batch(&ds, 8, true));
        sn_callback *tn = sn_callback_terminate_on_nan();
        sn_fit_opts f = sn_fit_defaults();
        f.callbacks = &tn;
        f.n_callbacks = 1;
        CHECK_ERR(sn_model_fit(m, ds, &f, NULL), SN_ERR_NUMERIC, want[k]);
        sn_callback_free(tn);
        sn_dataset_free(ds);
        sn_model_free(m);
    }
    sn_tensor_free(x);
    sn_tensor_free(y);
}

/* ---- BatchNormalization: its moving statistics are updated by the training plan ------------- */
static void test_batch_norm(void) {
    sn_model *m = sn_sequential_new("bn");
    CHECK_OK(sn_model_add(m, sn_layer_flatten()));
    CHECK_OK(sn_model_add(m, sn_layer_dense(16, SN_ACT_NONE)));
    CHECK_OK(sn_model_add(m, sn_layer_batch_norm()));
    CHECK_OK(sn_model_add(m, sn_layer_activation(SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_dense(10, SN_ACT_NONE)));
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {28, 28, 1}}, 3));
    sn_compile_opts c = sn_compile_defaults();
    c.steps_per_execution = 5;
    CHECK_OK(sn_model_compile(m, &c));
    sn_dataset *tr = fmnist_ds(train_x, train_y, 500, 50, 3, true);
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 2;
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, tr, &f, &h));
    sn_node v[4];
    int nv = sn_model_layer_variables(m, 2, v, 4);
    CHECK(nv == 4, "BN has %d variables", nv);
    if (nv == 4) {
        const float *mean = sn_variable_data(sn_model_graph(m), v[2]);
        const float *var = sn_variable_data(sn_model_graph(m), v[3]);
        CHECK(mean[0] != 0 && var[0] != 1, "moving mean %g, variance %g not updated", mean[0],
              var[0]);
    }
    CHECK(sn_history_get(h, "loss", 1) < sn_history_get(h, "loss", 0), "BN model loss");
    double ev[2];
    CHECK_OK(sn_model_evaluate(m, tr, 0, ev, 2, NULL));
    /* 20 steps at momentum 0.99 leave the moving statistics near their start (as in Keras):
     * only better than chance */
    CHECK(ev[1] > 0.2, "BN model accuracy with moving statistics %g", ev[1]);
    sn_history_free(h);
    sn_dataset_free(tr);
    sn_model_free(m);
}

/* ---- progress bar on a terminal (a pseudo-terminal) and verbose 2 --------------------------- */

/* Reads the master side of a pty into buf (cap - 1 bytes at most) until the slave side is
 * closed (read returns 0 or EIO), buf is full, or deadline_ms passes. Returns the count. */
static size_t read_pty(int master, char *buf, size_t cap, int deadline_ms) {
    size_t n = 0;
    double end = sn_now() + deadline_ms / 1000.0;
    while (n + 1 < cap) {
        int left = (int)((end - sn_now()) * 1000);
        if (left <= 0) break;
        struct pollfd pfd = {.fd = master, .events = POLLIN};
        int pr = poll(&pfd, 1, left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) break; /* deadline */
        ssize_t r = read(master, buf + n, cap - 1 - n);
        if (r > 0) n += (size_t)r;
        else if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        else break; /* 0 or EIO: the writer is closed and everything is read */
    }
    return n;
}
static void test_progress_tty(void) {
    sn_model *m = mlp(16, 0, 10, SN_ACT_NONE, 5);
    sn_compile_opts c = sn_compile_defaults();
    c.steps_per_execution = 2;
    CHECK_OK(sn_model_compile(m, &c));
    sn_dataset *tr = fmnist_ds(train_x, train_y, 256, 32, 3, true); /* 8 batches */
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 2;
    f.initial_epoch = 1; /* one epoch, shown as 2/2 */
    f.n_callbacks = 1;

    int master = posix_openpt(O_RDWR | O_NOCTTY);
    FILE *tty = NULL;
    if (master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0) {
        int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
        if (slave >= 0) tty = fdopen(slave, "w");
    }
    if (tty) {
        sn_callback *bar = sn_callback_progress_bar(tty, 1);
        f.callbacks = &bar;
        sn_history *h = NULL;
        CHECK_OK(sn_model_fit(m, tr, &f, &h));
        CHECK(sn_history_epochs(h) == 1, "initial_epoch 1 of 2: %d epochs", sn_history_epochs(h));
        sn_history_free(h);
        fclose(tty);
        /* The writer is closed: read until EOF/EIO (everything it wrote has arrived), with a
         * generous deadline so a broken pty cannot hang the suite. One read() may return only
         * part of the text, since the tty layer hands it over in pieces. */
        char buf[16384];
        size_t n = read_pty(master, buf, sizeof buf, 60000);
        buf[n] = 0;
        /* the pty turns \n into \r\n; redraws start with \r and show the ETA where the
         * final line shows the elapsed time */
        CHECK(strstr(buf, "Epoch 2/2") != NULL, "tty text: %s", buf);
        CHECK(strstr(buf, "\r\x1b[1m2/8\x1b[0m \x1b[32m\u2501\u2501\u2501\u2501\u2501\x1b[0m"
                          "\x1b[37m\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501"
                          "\u2501\u2501\u2501\u2501\u2501\x1b[0m \x1b[1m") != NULL,
              "no in-place redraw: %s", buf);
        CHECK(strstr(buf, "\r" FULL_BAR("8/8")) != NULL, "no final line: %s", buf);
        sn_callback_free(bar);
    } else {
        sn_test_skip("progress bar on a terminal (no pseudo-terminal)");
    }
    if (master >= 0) close(master);

    /* verbose 2: "8/8 - 0s - 3ms/step - loss: ..." */
    FILE *out = tmpfile();
    sn_callback *bar2 = sn_callback_progress_bar(out, 2);
    f.callbacks = &bar2;
    f.initial_epoch = 0;
    f.epochs = 1;
    CHECK_OK(sn_model_fit(m, tr, &f, NULL));
    char *text = slurp(out);
    /* one epoch: no "Epoch 1/1" line, as Keras 3 */
    CHECK(text && strncmp(text, "8/8 - ", 6) == 0 && strstr(text, "/step - loss: ") &&
              !strchr(text, '['),
          "verbose 2: %s", text ? text : "");
    free(text);
    fclose(out);
    sn_callback_free(bar2);
    sn_dataset_free(tr);
    sn_model_free(m);
}

/* ---- other losses: categorical (one-hot), binary (logits and sigmoid), MSE, from probs ------ */
static sn_dataset *custom_ds(int kind, int64_t n) {
    /* kind 0: one-hot f32 [n, 10]; 1: binary f32 [n, 1] (class >= 5); 2: binary [n] */
    sn_tensor *x = NULL, *y = NULL;
    sn_shape xs = sn_shape_make(4, n, (int64_t)28, (int64_t)28, (int64_t)1);
    sn_shape ys = kind == 0 ? sn_shape_make(2, n, (int64_t)10)
                  : kind == 1 ? sn_shape_make(2, n, (int64_t)1)
                              : sn_shape_make(1, n);
    CHECK_OK(sn_tensor_new(&x, SN_F32, &xs));
    CHECK_OK(sn_tensor_new(&y, SN_F32, &ys));
    const uint8_t *px = sn_tensor_cdata(train_x), *py = sn_tensor_cdata(train_y);
    float *fx = sn_tensor_data(x), *fy = sn_tensor_data(y);
    for (int64_t i = 0; i < n * 784; i++) fx[i] = px[i] / 255.0f;
    for (int64_t i = 0; i < n; i++) {
        if (kind == 0) fy[i * 10 + py[i]] = 1;
        else fy[i] = py[i] >= 5;
    }
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&ds, 2, (sn_tensor *[]){x, y}));
    CHECK_OK(sn_dataset_batch(&ds, 50, false));
    sn_tensor_free(x);
    sn_tensor_free(y);
    return ds;
}

static void fit_loss(const char *label, sn_model *m, sn_loss_type loss, bool from_logits,
                     sn_dataset *ds, double min_acc) {
    sn_compile_opts c = sn_compile_defaults();
    c.loss = loss;
    c.from_logits = from_logits;
    c.metrics[0] = SN_METRIC_ACCURACY;
    c.n_metrics = loss == SN_LOSS_MEAN_SQUARED_ERROR ? 0 : 1;
    c.steps_per_execution = 4;
    CHECK_OK(sn_model_compile(m, &c));
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 2;
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, ds, &f, &h));
    double l0 = sn_history_get(h, "loss", 0), l1 = sn_history_get(h, "loss", 1);
    double acc = sn_history_get(h, "accuracy", 1);
    printf("%s: loss %.4f -> %.4f, accuracy %.4f\n", label, l0, l1, acc);
    CHECK(isfinite(l1) && l1 < l0, "%s: loss %g -> %g", label, l0, l1);
    if (min_acc > 0) CHECK(acc >= min_acc, "%s: accuracy %g < %g", label, acc, min_acc);
    sn_history_free(h);
    sn_model_free(m);
}

static void test_losses(void) {
    sn_dataset *oh = custom_ds(0, 1000), *bin = custom_ds(1, 1000), *bin1 = custom_ds(2, 1000);
    fit_loss("categorical from logits", mlp(32, 0, 10, SN_ACT_NONE, 1),
             SN_LOSS_CATEGORICAL_CROSSENTROPY, true, oh, 0.6);
    fit_loss("categorical from softmax", mlp(32, 0, 10, SN_ACT_SOFTMAX, 1),
             SN_LOSS_CATEGORICAL_CROSSENTROPY, false, oh, 0.6);
    fit_loss("binary from logits", mlp(32, 0, 1, SN_ACT_NONE, 1), SN_LOSS_BINARY_CROSSENTROPY,
             true, bin, 0.8);
    fit_loss("binary from sigmoid, labels [B]", mlp(32, 0, 1, SN_ACT_SIGMOID, 1),
             SN_LOSS_BINARY_CROSSENTROPY, false, bin1, 0.8);
    fit_loss("mse", mlp(32, 0, 10, SN_ACT_NONE, 1), SN_LOSS_MEAN_SQUARED_ERROR, false, oh, 0);
    sn_dataset *sp = fmnist_ds(train_x, train_y, 1000, 50, 0, true);
    fit_loss("sparse from softmax", mlp(32, 0, 10, SN_ACT_SOFTMAX, 1),
             SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY, false, sp, 0.6);
    sn_dataset_free(sp);
    sn_dataset_free(oh);
    sn_dataset_free(bin);
    sn_dataset_free(bin1);
}

/* ---- the errors users meet -------------------------------------------------------------------- */
static void test_bad_inputs(void) {
    sn_dataset *ds = fmnist_ds(train_x, train_y, 100, 10, 0, true);
    sn_compile_opts c = sn_compile_defaults();

    sn_model *raw = sn_sequential_new("raw");
    CHECK_OK(sn_model_add(raw, sn_layer_dense(10, SN_ACT_NONE)));
    CHECK_ERR(sn_model_compile(raw, &c), SN_ERR_STATE, "not built");
    sn_model_free(raw);

    sn_model *m = mlp(8, 0, 10, SN_ACT_NONE, 1);
    CHECK_ERR(sn_model_fit(m, ds, NULL, NULL), SN_ERR_STATE, "not compiled");
    double v[2];
    CHECK_ERR(sn_model_evaluate(m, ds, 0, v, 2, NULL), SN_ERR_STATE, "not compiled");
    c.steps_per_execution = 0;
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_INVALID, "steps_per_execution 0");
    c = sn_compile_defaults();
    c.optimizer.learning_rate = -1;
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_INVALID, "learning_rate -1");
    c = sn_compile_defaults();
    c.loss = SN_LOSS_MEAN_SQUARED_ERROR;
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_INVALID, "sparse_categorical_accuracy");
    c.metrics[0] = SN_METRIC_ACCURACY;
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_INVALID, "mean_squared_error");
    c = sn_compile_defaults();
    CHECK_OK(sn_model_compile(m, &c));

    /* images without the channel axis */
    sn_dataset *nc = fmnist_ds(train_x, train_y, 100, 10, 0, false);
    CHECK_ERR(sn_model_fit(m, nc, NULL, NULL), SN_ERR_SHAPE,
              "fit: batch 0 has images of shape [28, 28] but the model expects [28, 28, 1]");
    sn_dataset_free(nc);

    /* u8 labels */
    sn_tensor *vv[2] = {NULL, NULL};
    sn_shape xs = sn_shape_make(3, (int64_t)100, (int64_t)28, (int64_t)28), ys = sn_shape_make(1, (int64_t)100);
    CHECK_OK(sn_tensor_view(&vv[0], train_x, &xs, NULL, 0));
    CHECK_OK(sn_tensor_view(&vv[1], train_y, &ys, NULL, 0));
    sn_dataset *u8 = NULL;
    CHECK_OK(sn_dataset_from_tensors(&u8, 2, vv));
    CHECK_OK(sn_dataset_map_normalize(&u8, 0, true));
    CHECK_OK(sn_dataset_batch(&u8, 10, false));
    CHECK_ERR(sn_model_fit(m, u8, NULL, NULL), SN_ERR_SHAPE, "labels of dtype uint8");
    sn_dataset_free(u8);
    sn_tensor_free(vv[0]);
    sn_tensor_free(vv[1]);

    /* a label out of range: the kernel's message with the epoch and step */
    sn_tensor *x = NULL, *y = NULL;
    sn_shape bx = sn_shape_make(4, (int64_t)30, (int64_t)28, (int64_t)28, (int64_t)1),
             by = sn_shape_make(1, (int64_t)30);
    CHECK_OK(sn_tensor_new(&x, SN_F32, &bx));
    CHECK_OK(sn_tensor_new(&y, SN_I32, &by));
    ((int32_t *)sn_tensor_data(y))[23] = 10;
    sn_dataset *oor = NULL;
    CHECK_OK(sn_dataset_from_tensors(&oor, 2, (sn_tensor *[]){x, y}));
    CHECK_OK(sn_dataset_batch(&oor, 10, false));
    sn_status s = sn_model_fit(m, oor, NULL, NULL);
    CHECK(s != SN_OK && strstr(sn_last_error(), "fit: epoch 1, step 3") &&
              strstr(sn_last_error(), "10"),
          "label out of range: %s: %s", sn_status_name(s), sn_last_error());
    printf("label out of range: %s\n", sn_last_error());
    sn_dataset_free(oor);
    sn_tensor_free(x);
    sn_tensor_free(y);
    /* the model still trains after a failed step */
    CHECK_OK(sn_model_fit(m, ds, NULL, NULL));

    /* empty dataset */
    sn_dataset *empty = fmnist_ds(train_x, train_y, 100, 10, 0, true);
    CHECK_OK(sn_dataset_take(&empty, 0));
    CHECK_ERR(sn_model_fit(m, empty, NULL, NULL), SN_ERR_INVALID, "empty");
    sn_dataset_free(empty);

    /* bad options and callbacks */
    sn_fit_opts f = sn_fit_defaults();
    f.n_callbacks = 1;
    CHECK_ERR(sn_model_fit(m, ds, &f, NULL), SN_ERR_INVALID, "callbacks NULL");
    CHECK(sn_callback_progress_bar(NULL, 1) == NULL, "progress bar without a FILE");
    CHECK(sn_callback_early_stopping("loss", 0, -1) == NULL, "negative patience");
    sn_callback *csv = sn_callback_csv_logger("/nonexistent-dir/x.csv");
    f.callbacks = &csv;
    CHECK_ERR(sn_model_fit(m, ds, &f, NULL), SN_ERR_IO, "/nonexistent-dir/x.csv");
    sn_callback_free(csv);
    sn_model_free(m);
    sn_dataset_free(ds);
}

int main(void) {
    if (access(FMNIST, R_OK) != 0) {
        printf("test_fit: SKIPPED (%s not installed)\n", FMNIST);
        return SN_TEST_SKIP_CODE;
    }
    CHECK_OK(sn_mnist_load(FMNIST, "train", &train_x, &train_y));
    CHECK_OK(sn_mnist_load(FMNIST, "test", &test_x, &test_y));
    if (!train_x || !test_x) return sn_test_finish("test_fit");
    double t0 = sn_now();
    test_train_and_logs();
    test_cnn();
    test_determinism();
    test_callbacks();
    test_nan_pixel();
    test_batch_norm();
    test_progress_tty();
    test_losses();
    test_bad_inputs();
    printf("test_fit: %.1f s\n", sn_now() - t0);
    sn_tensor_free(train_x);
    sn_tensor_free(train_y);
    sn_tensor_free(test_x);
    sn_tensor_free(test_y);
    return sn_test_finish("test_fit");
}
