/* Learning-rate callbacks and schedules with Keras's semantics, and ModelCheckpoint:
 *   - keras.optimizers.schedules formulas (ExponentialDecay with and without staircase,
 *     PiecewiseConstantDecay at and around its boundaries, CosineDecay with alpha and warmup)
 *     against values computed here from Keras's formulas;
 *   - a rate set between executions is used by the next one without re-planning (SGD: the
 *     update of one step scales with it), and a model compiled with rate a then set to b
 *     trains bit-identically to one compiled with b;
 *   - ReduceLROnPlateau on a scripted val_loss: the rate trace Keras 3's algorithm gives
 *     (patience, min_delta, cooldown, min_lr, float32 rates), "learning_rate" in the logs;
 *   - LearningRateScheduler(epoch, lr) and its logged rates;
 *   - ModelCheckpoint: "{epoch:02d}-{val_loss:.2f}" names for every epoch, save_best_only
 *     with mode max on an accuracy, a full checkpoint that training resumes from
 *     bit-identically, and the errors for unknown fields and bad specs.
 * Exits 77 without Fashion-MNIST. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sinter/nn.h"
#include "sn_test.h"
#include "tmp_test_util.h"
#include "fmnist_test_util.h"

static sn_tensor *tx, *ty;

static void test_schedules(void) {
    sn_lr_schedule e = {.type = SN_LR_EXPONENTIAL_DECAY, .initial_learning_rate = 0.1,
                        .decay_steps = 10, .decay_rate = 0.5};
    CHECK_OK(sn_lr_schedule_check(&e));
    CHECK(sn_lr_schedule_value(&e, 0) == 0.1, "exp 0");
    CHECK(fabs(sn_lr_schedule_value(&e, 5) - 0.1 * pow(0.5, 0.5)) < 1e-15, "exp 5");
    CHECK(fabs(sn_lr_schedule_value(&e, 25) - 0.1 * pow(0.5, 2.5)) < 1e-15, "exp 25");
    e.staircase = true;
    CHECK(fabs(sn_lr_schedule_value(&e, 25) - 0.025) < 1e-15, "exp staircase 25: %g",
          sn_lr_schedule_value(&e, 25));
    CHECK(fabs(sn_lr_schedule_value(&e, 9) - 0.1) < 1e-15, "exp staircase 9");
    sn_lr_schedule p = {.type = SN_LR_PIECEWISE_CONSTANT_DECAY, .n_boundaries = 2,
                        .boundaries = {100, 200}, .values = {1.0, 0.5, 0.1}};
    CHECK_OK(sn_lr_schedule_check(&p));
    CHECK(sn_lr_schedule_value(&p, 0) == 1.0 && sn_lr_schedule_value(&p, 100) == 1.0 &&
          sn_lr_schedule_value(&p, 101) == 0.5 && sn_lr_schedule_value(&p, 200) == 0.5 &&
          sn_lr_schedule_value(&p, 201) == 0.1, "piecewise: values[i] while step <= b[i]");
    sn_lr_schedule c = {.type = SN_LR_COSINE_DECAY, .initial_learning_rate = 0.2,
                        .decay_steps = 100, .alpha = 0.1};
    CHECK_OK(sn_lr_schedule_check(&c));
    CHECK(fabs(sn_lr_schedule_value(&c, 0) - 0.2) < 1e-15, "cos 0");
    CHECK(fabs(sn_lr_schedule_value(&c, 50) - 0.2 * (0.9 * 0.5 + 0.1)) < 1e-15, "cos 50");
    CHECK(fabs(sn_lr_schedule_value(&c, 100) - 0.02) < 1e-15, "cos 100");
    CHECK(fabs(sn_lr_schedule_value(&c, 1000) - 0.02) < 1e-15, "cos past the end");
    c.warmup_steps = 10;
    c.warmup_target = 1.0;
    CHECK(fabs(sn_lr_schedule_value(&c, 5) - 0.6) < 1e-15, "warmup 5: %g",
          sn_lr_schedule_value(&c, 5));
    CHECK(fabs(sn_lr_schedule_value(&c, 60) - (0.9 * 0.5 + 0.1)) < 1e-15, "cos after warmup");
    sn_lr_schedule bad = p;
    bad.boundaries[1] = 50;
    CHECK_ERR(sn_lr_schedule_check(&bad), SN_ERR_INVALID, "boundaries must increase");
    bad = e;
    bad.decay_steps = 0;
    CHECK_ERR(sn_lr_schedule_check(&bad), SN_ERR_INVALID, "decay_steps 0");
}

static sn_model *mlp(double lr, sn_optimizer_type opt) {
    sn_model *m = sn_sequential_new("mlp");
    CHECK_OK(sn_model_add(m, sn_layer_flatten()));
    CHECK_OK(sn_model_add(m, sn_layer_dense(16, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_dense(10, SN_ACT_NONE)));
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {28, 28, 1}}, 9));
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer = sn_optimizer_defaults(opt);
    co.optimizer.learning_rate = lr;
    CHECK_OK(sn_model_compile(m, &co));
    return m;
}

static void copy_vars(sn_model *m, float *dst, size_t *n) {
    size_t b = 0;
    const void *p = sn_graph_variable_buffer(sn_model_graph(m), &b);
    memcpy(dst, p, b);
    *n = b;
}

static void test_set_lr(void) {
    sn_dataset *ds = fmnist_ds(tx, ty, 256, 32, 0, true);
    sn_fit_opts f = sn_fit_defaults();
    f.steps_per_epoch = 2;
    /* compiled with 0.3 then set to 0.05 == compiled with 0.05 */
    sn_model *a = mlp(0.3, SN_ADAM), *b = mlp(0.05, SN_ADAM);
    CHECK_OK(sn_model_set_learning_rate(a, 0.05));
    CHECK(sn_model_get_learning_rate(a) == 0.05, "get_learning_rate");
    CHECK_OK(sn_model_fit(a, ds, &f, NULL));
    CHECK_OK(sn_model_fit(b, ds, &f, NULL));
    size_t na = 0, nb = 0;
    const void *pa = sn_graph_variable_buffer(sn_model_graph(a), &na);
    const void *pb = sn_graph_variable_buffer(sn_model_graph(b), &nb);
    CHECK(na == nb && memcmp(pa, pb, na) == 0, "set_learning_rate before fit differs from compile");
    /* Between executions, with the plans built: plain SGD's update scales with the rate. */
    sn_model *m = mlp(0.01, SN_SGD);
    f.steps_per_epoch = 1;
    CHECK_OK(sn_model_fit(m, ds, &f, NULL));
    static float w0[1 << 16], w1[1 << 16], w2[1 << 16];
    size_t n = 0;
    copy_vars(m, w0, &n);
    CHECK(n <= sizeof w0, "buffer of %zu bytes", n);
    CHECK_OK(sn_model_set_learning_rate(m, 1e-30));
    CHECK_OK(sn_model_fit(m, ds, &f, NULL));
    copy_vars(m, w1, &n);
    CHECK_OK(sn_model_set_learning_rate(m, 0.5));
    CHECK_OK(sn_model_fit(m, ds, &f, NULL));
    copy_vars(m, w2, &n);
    /* the first kernel: unchanged at 1e-30, changed at 0.5 */
    int64_t k = 784 * 16;
    double d1 = 0, d2 = 0;
    for (int64_t i = 0; i < k; i++) {
        d1 += fabs((double)w1[i] - w0[i]);
        d2 += fabs((double)w2[i] - w1[i]);
    }
    CHECK(d1 == 0 && d2 > 0, "the new rate was not used: |dw| %g at 1e-30, %g at 0.5", d1, d2);
    CHECK_ERR(sn_model_set_learning_rate(m, -1), SN_ERR_INVALID, "-1");
    sn_model_free(a);
    sn_model_free(b);
    sn_model_free(m);
    sn_dataset_free(ds);
}

/* A callback that replaces val_loss by a scripted sequence, placed before ReduceLROnPlateau. */
typedef struct script {
    const double *vals;
    sn_logs *copy;
} script;

static const double plateau_losses[] = {1.0, 0.9, 0.95, 0.9, 0.92, 0.91, 0.899, 0.95,
                                        0.96, 0.97, 0.98, 0.99};

/* fit passes const logs; ReduceLROnPlateau reads val_loss from them: this wraps it. */
typedef struct wrap {
    sn_callback *inner;
    int calls;
    double lrs[16];
    sn_model *m;
} wrap;

static sn_status wrap_begin(void *user, sn_model *m) {
    wrap *w = user;
    w->m = m;
    return w->inner->on_train_begin(w->inner->user, m);
}

static sn_status wrap_end(void *user, const sn_logs *l, bool *stop) {
    wrap *w = user;
    sn_logs c = *l;
    for (int i = 0; i < c.n; i++)
        if (!strcmp(c.names[i], "val_loss")) c.values[i] = plateau_losses[w->calls];
    w->calls++;
    sn_status s = w->inner->on_epoch_end(w->inner->user, &c, stop);
    w->lrs[w->calls - 1] = sn_model_get_learning_rate(w->m);
    return s;
}

static void test_plateau(void) {
    sn_dataset *ds = fmnist_ds(tx, ty, 64, 32, 0, true);
    sn_dataset *va = fmnist_ds(tx, ty, 32, 32, 0, true);
    sn_model *m = mlp(1.0, SN_SGD);
    sn_reduce_lr_opts o = sn_reduce_lr_defaults();
    o.patience = 2;
    o.factor = 0.5;
    o.min_delta = 0.01;
    o.cooldown = 1;
    o.min_lr = 0.2;
    wrap w = {.inner = sn_callback_reduce_lr_on_plateau(&o)};
    CHECK(w.inner != NULL, "reduce_lr: %s", sn_last_error());
    sn_callback cb = {.user = &w, .on_train_begin = wrap_begin, .on_epoch_end = wrap_end};
    sn_callback *cbs[1] = {&cb};
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 12;
    f.steps_per_epoch = 1;
    f.validation = va;
    f.callbacks = cbs;
    f.n_callbacks = 1;
    /* Keras 3's ReduceLROnPlateau on these losses, by hand: best 1.0, 0.9; 0.95 wait 1,
     * 0.9 (not better by 0.01) wait 2 -> 0.5, cooldown 1; 0.92: cooldown 1->0, wait 0, no
     * improvement, in cooldown? counter now 0 so wait 1; 0.91 wait 2 -> 0.25, cooldown;
     * 0.899 (better than 0.9 - 0.01? no: 0.899 > 0.89): cooldown -> 0, wait 1; 0.95 wait 2
     * -> 0.2 (0.125 floored at min_lr), cooldown; 0.96: cooldown -> 0, wait 1; 0.97 wait 2:
     * lr 0.2 is not > min_lr, stays; 0.98 wait 3; 0.99 wait 4. */
    static const double want[] = {1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2, 0.2};
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, ds, &f, &h));
    for (int e = 0; e < 12; e++) {
        CHECK(w.lrs[e] == (double)(float)want[e], "epoch %d: lr %.9g, Keras's %.9g", e + 1,
              w.lrs[e], want[e]);
        /* the logged rate is the one the epoch ran with */
        double logged = sn_history_get(h, "learning_rate", e);
        double ran = e == 0 ? 1.0 : w.lrs[e - 1];
        CHECK(logged == ran, "epoch %d: logged learning_rate %g, ran with %g", e + 1, logged, ran);
    }
    sn_history_free(h);
    sn_callback_free(w.inner);
    o.factor = 1.5;
    CHECK(sn_callback_reduce_lr_on_plateau(&o) == NULL && strstr(sn_last_error(), "factor 1.5"),
          "factor 1.5 accepted: %s", sn_last_error());
    sn_model_free(m);
    sn_dataset_free(ds);
    sn_dataset_free(va);
}

static double halve_after_1(void *user, int epoch, double lr) {
    (void)user;
    return epoch < 1 ? lr : lr * 0.5;
}

static void test_scheduler(void) {
    sn_dataset *ds = fmnist_ds(tx, ty, 64, 32, 0, true);
    sn_model *m = mlp(0.1, SN_SGD);
    sn_callback *cbs[1] = {sn_callback_lr_scheduler(halve_after_1, NULL)};
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 3;
    f.callbacks = cbs;
    f.n_callbacks = 1;
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, ds, &f, &h));
    double want[3] = {(float)0.1, (float)((float)0.1 * 0.5), (float)((float)((float)0.1 * 0.5) * 0.5)};
    for (int e = 0; e < 3; e++)
        CHECK(sn_history_get(h, "learning_rate", e) == want[e], "epoch %d: learning_rate %.9g, "
              "want %.9g", e + 1, sn_history_get(h, "learning_rate", e), want[e]);
    sn_history_free(h);
    sn_callback_free(cbs[0]);
    /* A schedule by steps: 2 steps per epoch, piecewise at 2 -> epoch 2 runs at 0.01. */
    sn_lr_schedule s = {.type = SN_LR_PIECEWISE_CONSTANT_DECAY, .n_boundaries = 1,
                        .boundaries = {1}, .values = {0.1, 0.01}};
    cbs[0] = sn_callback_lr_schedule(&s);
    h = NULL;
    f.epochs = 2;
    CHECK_OK(sn_model_fit(m, ds, &f, &h));
    CHECK(sn_model_get_learning_rate(m) == (double)(float)0.01, "schedule rate %g",
          sn_model_get_learning_rate(m));
    sn_history_free(h);
    sn_callback_free(cbs[0]);
    sn_model_free(m);
    sn_dataset_free(ds);
}

static int count_files(const char *dir, const char *needle) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, needle)) n++;
    closedir(d);
    return n;
}

static void test_model_checkpoint(void) {
    char dir[128], pat[256];
    snprintf(dir, sizeof dir, "/tmp/sn_test_mckpt_%d", (int)getpid());
    test_rm_dir(dir);
    sn_dataset *ds = fmnist_ds(tx, ty, 256, 32, 4, true);
    sn_dataset *va = fmnist_ds(tx, ty, 64, 32, 0, true);
    sn_model *m = mlp(1e-3, SN_ADAM);
    snprintf(pat, sizeof pat, "%s/w-{epoch:02d}-{val_loss:.2f}.weights.h5", dir);
    sn_model_checkpoint_opts o = sn_model_checkpoint_defaults(pat);
    o.save_weights_only = true;
    char full[256];
    snprintf(full, sizeof full, "%s/full-{epoch}.h5", dir);
    sn_model_checkpoint_opts of = sn_model_checkpoint_defaults(full);
    char best[256];
    snprintf(best, sizeof best, "%s/best-{epoch}-{val_sparse_categorical_accuracy:.3f}.h5", dir);
    sn_model_checkpoint_opts ob = sn_model_checkpoint_defaults(best);
    ob.monitor = "val_sparse_categorical_accuracy";
    ob.save_best_only = true;
    ob.save_weights_only = true;
    sn_callback *cbs[3] = {sn_callback_model_checkpoint(&o), sn_callback_model_checkpoint(&of),
                           sn_callback_model_checkpoint(&ob)};
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 4;
    f.validation = va;
    f.callbacks = cbs;
    f.n_callbacks = 3;
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, ds, &f, &h));
    for (int e = 0; e < 4; e++) {
        char name[300];
        snprintf(name, sizeof name, "%s/w-%02d-%.2f.weights.h5", dir, e + 1,
                 sn_history_get(h, "val_loss", e));
        CHECK(access(name, R_OK) == 0, "missing %s", name);
    }
    int improvements = 0;
    double b = -INFINITY;
    for (int e = 0; e < 4; e++) {
        double v = sn_history_get(h, "val_sparse_categorical_accuracy", e);
        if (v > b) {
            b = v;
            improvements++;
        }
    }
    CHECK(count_files(dir, "best-") == improvements, "save_best_only wrote %d files, %d "
          "improvements", count_files(dir, "best-"), improvements);
    /* A full checkpoint after epoch 2 resumes to the same end. */
    char p2[300];
    snprintf(p2, sizeof p2, "%s/full-2.h5", dir);
    sn_model *r = mlp(1e-3, SN_ADAM);
    sn_dataset *ds2 = fmnist_ds(tx, ty, 256, 32, 4, true);
    sn_dataset *va2 = fmnist_ds(tx, ty, 64, 32, 0, true);
    sn_backup_opts bo = sn_backup_defaults();
    bo.resume_path = p2;
    sn_fit_opts f2 = sn_fit_defaults();
    f2.epochs = 4;
    f2.validation = va2;
    f2.backup = &bo;
    CHECK_OK(sn_model_fit(r, ds2, &f2, NULL));
    size_t n1 = 0, n2 = 0;
    const void *a = sn_graph_variable_buffer(sn_model_graph(m), &n1);
    const void *c = sn_graph_variable_buffer(sn_model_graph(r), &n2);
    CHECK(n1 == n2 && memcmp(a, c, n1) == 0, "resumed from ModelCheckpoint's file: differs");
    sn_history_free(h);
    for (int i = 0; i < 3; i++) sn_callback_free(cbs[i]);
    /* Errors: an unknown field, a d spec on a float. */
    snprintf(pat, sizeof pat, "%s/x-{val_los}.h5", dir);
    o = sn_model_checkpoint_defaults(pat);
    cbs[0] = sn_callback_model_checkpoint(&o);
    f.epochs = 1;
    f.n_callbacks = 1;
    CHECK_ERR(sn_model_fit(m, ds, &f, NULL), SN_ERR_NOT_FOUND, "'{val_los}'");
    sn_callback_free(cbs[0]);
    snprintf(pat, sizeof pat, "%s/x-{val_loss:03d}.h5", dir);
    o = sn_model_checkpoint_defaults(pat);
    cbs[0] = sn_callback_model_checkpoint(&o);
    CHECK_ERR(sn_model_fit(m, ds, &f, NULL), SN_ERR_INVALID, "is a float");
    sn_callback_free(cbs[0]);
    sn_model_free(m);
    sn_model_free(r);
    sn_dataset_free(ds);
    sn_dataset_free(va);
    sn_dataset_free(ds2);
    sn_dataset_free(va2);
    test_rm_dir(dir);
}

int main(void) {
    test_schedules();
    if (access(FMNIST "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("test_lr_callbacks: SKIPPED (Fashion-MNIST not installed)\n");
        return 77;
    }
    CHECK_OK(sn_mnist_load(FMNIST, "train", &tx, &ty));
    test_set_lr();
    test_plateau();
    test_scheduler();
    test_model_checkpoint();
    sn_tensor_free(tx);
    sn_tensor_free(ty);
    return sn_test_finish("test_lr_callbacks");
}
