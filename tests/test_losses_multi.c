/* Keras's losses and metrics (binary/categorical cross-entropy, mean squared/absolute error,
 * Huber; binary and categorical accuracy): values against the formulas of keras/src/losses
 * written out in double precision here, gradients by finite differences in double precision;
 * and fit / evaluate / predict on Functional models of several inputs and outputs (a loss
 * per output summed with loss_weights, Keras 3's History keys, the compile settings in a
 * .keras file), with the errors a wrong dataset or compile gives. The numbers against real
 * Keras are tests/keras_losses_interop.py's. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "layer_test_util.h"
#include "nn/train/train_impl.h"
#include "sinter/data.h"
#include "sinter/dist.h"

enum { B = 5, C = 3 };

/* ---- reference formulas (keras/src/losses/losses.py, TF backend) ------------------------- */
static double clipd(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

static double ref_loss(const sn_loss_spec *l, const double *p, const double *y, int c) {
    const double eps = 1e-7;
    double s = 0;
    switch (l->type) {
    case SN_LOSS_BINARY_CROSSENTROPY:
        for (int j = 0; j < c; j++) {
            if (l->from_logits) {
                double z = p[j];
                s += fmax(z, 0) - z * y[j] + log1p(exp(-fabs(z)));
            } else {
                double q = clipd(p[j], eps, 1 - eps);
                s += -(y[j] * log(q + eps) + (1 - y[j]) * log(1 - q + eps));
            }
        }
        return s / c;
    case SN_LOSS_CATEGORICAL_CROSSENTROPY: {
        if (l->from_logits) {
            double mx = p[0], z = 0;
            for (int j = 1; j < c; j++) mx = fmax(mx, p[j]);
            for (int j = 0; j < c; j++) z += exp(p[j] - mx);
            for (int j = 0; j < c; j++) s -= y[j] * (p[j] - mx - log(z));
        } else {
            double t = 0;
            for (int j = 0; j < c; j++) t += p[j];
            for (int j = 0; j < c; j++) s -= y[j] * log(clipd(p[j] / t, eps, 1 - eps));
        }
        return s;
    }
    case SN_LOSS_MEAN_SQUARED_ERROR:
        for (int j = 0; j < c; j++) s += (p[j] - y[j]) * (p[j] - y[j]);
        return s / c;
    case SN_LOSS_MEAN_ABSOLUTE_ERROR:
        for (int j = 0; j < c; j++) s += fabs(p[j] - y[j]);
        return s / c;
    case SN_LOSS_HUBER:
        for (int j = 0; j < c; j++) {
            double a = fabs(p[j] - y[j]), q = fmin(a, l->delta);
            s += 0.5 * q * q + l->delta * (a - q);
        }
        return s / c;
    default: return NAN;
    }
}

/* Outputs and labels for a loss: probabilities in (0, 1) unless from logits, one-hot labels
 * for the categorical loss, 0/1 for binary, reals for regression. */
static void make_case(const sn_loss_spec *l, sn_rng *r, double *p, double *y) {
    for (int i = 0; i < B; i++) {
        int hot = (int)(sn_rng_below(r, C));
        for (int j = 0; j < C; j++) {
            double v = sn_rng_normal(r);
            bool prob = !l->from_logits && (l->type == SN_LOSS_BINARY_CROSSENTROPY ||
                                            l->type == SN_LOSS_CATEGORICAL_CROSSENTROPY);
            p[i * C + j] = prob ? 0.05 + 0.9 / (1 + exp(-2 * v)) : 1.5 * v;
            y[i * C + j] = l->type == SN_LOSS_CATEGORICAL_CROSSENTROPY ? (j == hot)
                           : l->type == SN_LOSS_BINARY_CROSSENTROPY    ? (double)sn_rng_below(r, 2)
                                                                       : sn_rng_normal(r);
        }
    }
}

static void test_loss(const char *what, sn_loss_spec l) {
    sn_graph *g = sn_graph_new();
    if (!g) return;
    sn_shape s = S2(B, C);
    sn_node out = sn_input(g, "out", SN_F64, &s), y = sn_input(g, "y", SN_F64, &s);
    sn_node per = sn_loss_per_example(g, &l, out, y);
    sn_node loss = sn_reduce_mean(g, per, 0, NULL, false);
    sn_node grad = SN_NONE;
    sn_status st = sn_gradients(g, loss, 1, &out, &grad);
    sn_plan *p = NULL;
    if (st == SN_OK) st = sn_plan_new(&p, g, 3, (sn_node[]){loss, per, grad}, NULL);
    CHECK(st == SN_OK, "%s: graph: %s", what, sn_last_error());
    if (st == SN_OK) {
        sn_rng r;
        sn_rng_init(&r, 11, 0);
        double *pv = sn_plan_buffer(p, out), *yv = sn_plan_buffer(p, y);
        make_case(&l, &r, pv, yv);
        double got = loss_of(p, loss), want = 0, worst_v = 0;
        const double *pe = sn_plan_buffer(p, per);
        for (int i = 0; i < B; i++) {
            double w = ref_loss(&l, pv + i * C, yv + i * C, C);
            worst_v = fmax(worst_v, fabs(pe[i] - w) / fmax(1, fabs(w)));
            want += w / B;
        }
        CHECK(fabs(got - want) <= 1e-12 * fmax(1, fabs(want)) && worst_v <= 1e-12,
              "%s: loss %.15g, formula %.15g (worst example %.3g)", what, got, want, worst_v);
        double ga[B * C], worst = 0;
        memcpy(ga, sn_plan_buffer(p, grad), sizeof ga);
        int bad = fd_check(what, p, loss, pv, ga, B * C, 1e-6, &worst);
        CHECK(bad == 0, "%s: %d gradient entries off (worst %.3g)", what, bad, worst);
        if (bad == 0) printf("ok  %-36s loss %.6f, gradient worst relative error %.2e\n", what,
                             got, worst);
    }
    sn_plan_free(p);
    sn_graph_free(g);
}

static double metric_value(sn_metric_spec m, sn_loss_spec l, const float *p, const float *y,
                           sn_shape s) {
    sn_graph *g = sn_graph_new();
    if (!g) return NAN;
    sn_node out = sn_input(g, "out", SN_F32, &s), yy = sn_input(g, "y", SN_F32, &s);
    sn_node sum = sn_metric_batch_sum(g, &m, &l, out, yy);
    sn_plan *pl = NULL;
    double v = NAN;
    if (sn_plan_new(&pl, g, 1, &sum, NULL) == SN_OK) {
        memcpy(sn_plan_buffer(pl, out), p, sizeof(float) * (size_t)sn_shape_numel(&s));
        memcpy(sn_plan_buffer(pl, yy), y, sizeof(float) * (size_t)sn_shape_numel(&s));
        if (sn_plan_run(pl, 1, NULL, NULL) == SN_OK) v = *(float *)sn_plan_buffer(pl, sum);
    } else {
        fprintf(stderr, "metric plan: %s\n", sn_last_error());
    }
    sn_plan_free(pl);
    sn_graph_free(g);
    return v;
}

static void test_metrics(void) {
    /* binary_accuracy: y == (p > threshold), strictly; a mean per example over its units. */
    const float p[4 * 2] = {0.5f, 0.51f, 0.2f, 0.9f, 0.7f, 0.1f, 0.3f, 0.3f};
    const float y[4 * 2] = {0, 1, 0, 0, 1, 1, 1, 0};
    sn_loss_spec bce = {.type = SN_LOSS_BINARY_CROSSENTROPY, .weight = 1};
    sn_metric_spec ba = {.type = SN_METRIC_BINARY_ACCURACY, .threshold = 0.5};
    /* hits: (1,1) (1,0) (1,0) (0,1) -> 2 + 1 + 1 + 1 = 5 of 8, per example 1 + .5 + .5 + .5 */
    double v = metric_value(ba, bce, p, y, (sn_shape)S2(4, 2));
    CHECK(fabs(v - 2.5) < 1e-6, "binary_accuracy sum %g, expected 2.5", v);
    ba.threshold = 0.25;
    v = metric_value(ba, bce, p, y, (sn_shape)S2(4, 2));
    /* p > 0.25: (1,1)(0,1)(1,0)(1,1) vs y: (0,1)(0,0)(1,1)(1,0): 1+.5... */
    CHECK(fabs(v - 2.0) < 1e-6, "binary_accuracy(threshold 0.25) sum %g, expected 2", v);
    /* categorical_accuracy: argmax(y) == argmax(p) (first of ties). */
    const float pc[3 * 3] = {0.1f, 0.7f, 0.2f, 0.5f, 0.2f, 0.3f, 0.3f, 0.3f, 0.4f};
    const float yc[3 * 3] = {0, 1, 0, 0, 0, 1, 0, 0, 1};
    sn_loss_spec cce = {.type = SN_LOSS_CATEGORICAL_CROSSENTROPY, .weight = 1};
    sn_metric_spec ca = {.type = SN_METRIC_CATEGORICAL_ACCURACY};
    v = metric_value(ca, cce, pc, yc, (sn_shape)S2(3, 3));
    CHECK(fabs(v - 2.0) < 1e-6, "categorical_accuracy sum %g, expected 2", v);
    /* with a regression loss too (the metric reads labels, not the loss) */
    sn_loss_spec mse = {.type = SN_LOSS_MEAN_SQUARED_ERROR, .weight = 1};
    v = metric_value(ca, mse, pc, yc, (sn_shape)S2(3, 3));
    CHECK(fabs(v - 2.0) < 1e-6, "categorical_accuracy with mse: sum %g, expected 2", v);
    CHECK_ERR(sn_metric_check(SN_METRIC_ACCURACY, SN_LOSS_HUBER), SN_ERR_INVALID,
              "not defined for the loss huber");
    CHECK_ERR(sn_metric_check(SN_METRIC_BINARY_ACCURACY, SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY),
              SN_ERR_INVALID, "binary_accuracy needs labels of the output's shape");
}

/* ---- several inputs and outputs -------------------------------------------------------- */

/* a [4], b [3] -> Concatenate -> Dense(5, relu) "h" -> "reg" Dense(2) (regression) and
 * "cls" Dense(1) (binary, logits). */
static sn_model *two_two(void) {
    sn_model *m = sn_functional_new("two_two");
    sn_ftensor a = {-1}, b = {-1}, t[2], h = {-1}, o[2];
    sn_functional_input_opts ia = sn_functional_input_defaults(&(sn_shape)S1(4));
    ia.name = "a";
    sn_functional_input_opts ib = sn_functional_input_defaults(&(sn_shape)S1(3));
    ib.name = "b";
    CHECK_OK(sn_functional_input(m, &ia, &a));
    CHECK_OK(sn_functional_input(m, &ib, &b));
    t[0] = a;
    t[1] = b;
    sn_ftensor c = {-1};
    CHECK_OK(sn_layer_call(m, sn_layer_concatenate(-1), t, 2, &c));
    sn_layer *hl = sn_layer_dense(5, SN_ACT_RELU), *rl = sn_layer_dense(2, SN_ACT_NONE),
             *cl = sn_layer_dense(1, SN_ACT_NONE);
    sn_layer_set_name(hl, "h");
    sn_layer_set_name(rl, "reg");
    sn_layer_set_name(cl, "cls");
    CHECK_OK(sn_layer_call(m, hl, &c, 1, &h));
    CHECK_OK(sn_layer_call(m, rl, &h, 1, &o[0]));
    CHECK_OK(sn_layer_call(m, cl, &h, 1, &o[1]));
    CHECK_OK(sn_functional_set_outputs(m, o, 2));
    CHECK_OK(sn_model_build(m, NULL, 7));
    return m;
}

enum { N = 24 };

/* The first n_components of (a, b, y_reg, y_cls), batched; with w (and n_components 4),
 * Keras's sample_weight [N] (or a bad [N, wcols]) is a fifth component after the labels. */
static sn_dataset *two_two_data(int batch, int n_components, const float *w, int wcols) {
    sn_rng r;
    sn_rng_init(&r, 3, 0);
    static float a[N * 4], b[N * 3], yr[N * 2], yc[N];
    for (int i = 0; i < N * 4; i++) a[i] = (float)sn_rng_normal(&r);
    for (int i = 0; i < N * 3; i++) b[i] = (float)sn_rng_normal(&r);
    for (int i = 0; i < N * 2; i++) yr[i] = (float)sn_rng_normal(&r);
    for (int i = 0; i < N; i++) yc[i] = (float)sn_rng_below(&r, 2);
    sn_tensor *ts[5] = {0};
    sn_tensor_from_data(&ts[0], SN_F32, &(sn_shape)S2(N, 4), a);
    sn_tensor_from_data(&ts[1], SN_F32, &(sn_shape)S2(N, 3), b);
    sn_tensor_from_data(&ts[2], SN_F32, &(sn_shape)S2(N, 2), yr);
    sn_tensor_from_data(&ts[3], SN_F32, &(sn_shape)S1(N), yc);
    if (w) {
        sn_shape ws = wcols == 1 ? (sn_shape)S1(N) : (sn_shape)S2(N, wcols);
        sn_tensor_from_data(&ts[4], SN_F32, &ws, w);
        n_components = 5;
    }
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&ds, n_components, ts));
    if (ds) CHECK_OK(sn_dataset_batch(&ds, batch, false));
    for (int i = 0; i < 5; i++) sn_tensor_free(ts[i]);
    return ds;
}

static sn_compile_opts two_two_compile(void) {
    sn_compile_opts c = sn_compile_defaults();
    c.optimizer = sn_optimizer_defaults(SN_SGD);
    c.optimizer.learning_rate = 0.05;
    c.huber_delta = 0.5;
    c.n_outputs = 2;
    c.outputs[0] = sn_output_loss_defaults(SN_LOSS_HUBER);
    c.outputs[0].loss_weight = 0.3;
    c.outputs[0].n_metrics = 0;
    c.outputs[1] = sn_output_loss_defaults(SN_LOSS_BINARY_CROSSENTROPY);
    c.outputs[1].from_logits = true;
    c.outputs[1].loss_weight = 2.0;
    c.outputs[1].n_metrics = 1;
    c.outputs[1].metrics[0] = SN_METRIC_BINARY_ACCURACY;
    return c;
}

static void test_multi_fit(void) {
    sn_model *m = two_two();
    sn_compile_opts c = two_two_compile();
    CHECK_OK(sn_model_compile(m, &c));
    sn_dataset *ds = two_two_data(8, 4, NULL, 0), *val = two_two_data(6, 4, NULL, 0);
    if (!ds || !val) goto out;
    /* evaluate before training: the loss is 0.3 huber + 2 bce of the raw outputs */
    double v[8] = {0};
    int nv = 0;
    CHECK_OK(sn_model_evaluate(m, ds, 0, v, 8, &nv));
    CHECK(nv == 4, "evaluate gave %d values, expected 4 (loss, reg_loss, cls_loss, "
          "cls_binary_accuracy)", nv);
    CHECK(fabs(v[0] - (0.3 * v[1] + 2.0 * v[2])) <= 1e-5 * fabs(v[0]),
          "evaluate: loss %.7g but 0.3 * reg_loss %.7g + 2 * cls_loss %.7g = %.7g", v[0], v[1],
          v[2], 0.3 * v[1] + 2.0 * v[2]);
    /* the same from predict_n's raw outputs and the reference formulas */
    {
        sn_compile_opts raw = c;
        raw.predict_raw = true;
        sn_model_compile(m, &raw);
        static float a[N * 4], b[N * 3], yr[N * 2], yc[N];
        sn_rng r;
        sn_rng_init(&r, 3, 0);
        for (int i = 0; i < N * 4; i++) a[i] = (float)sn_rng_normal(&r);
        for (int i = 0; i < N * 3; i++) b[i] = (float)sn_rng_normal(&r);
        for (int i = 0; i < N * 2; i++) yr[i] = (float)sn_rng_normal(&r);
        for (int i = 0; i < N; i++) yc[i] = (float)sn_rng_below(&r, 2);
        sn_tensor *x[2] = {0}, *o[2] = {0};
        sn_tensor_from_data(&x[0], SN_F32, &(sn_shape)S2(N, 4), a);
        sn_tensor_from_data(&x[1], SN_F32, &(sn_shape)S2(N, 3), b);
        CHECK_OK(sn_model_predict_n(m, 2, (const sn_tensor *const *)x, 2, o));
        if (o[0] && o[1]) {
            sn_loss_spec hub = {.type = SN_LOSS_HUBER, .delta = 0.5};
            sn_loss_spec bce = {.type = SN_LOSS_BINARY_CROSSENTROPY, .from_logits = true};
            double lr = 0, lc = 0, acc = 0;
            const float *pr = sn_tensor_cdata(o[0]), *pc = sn_tensor_cdata(o[1]);
            for (int i = 0; i < N; i++) {
                double pp[2] = {pr[2 * i], pr[2 * i + 1]}, yy[2] = {yr[2 * i], yr[2 * i + 1]};
                double zc = pc[i], ycd = yc[i];
                lr += ref_loss(&hub, pp, yy, 2) / N;
                lc += ref_loss(&bce, &zc, &ycd, 1) / N;
                acc += ((zc > 0.5) == (ycd > 0.5)) / (double)N; /* Keras: threshold on logits */
            }
            CHECK(fabs(lr - v[1]) <= 1e-5 * fmax(1, lr) && fabs(lc - v[2]) <= 1e-5 * fmax(1, lc)
                  && fabs(acc - v[3]) < 1e-6,
                  "evaluate (%.7g, %.7g, %.5g) differs from the formulas on predict_n's outputs "
                  "(%.7g, %.7g, %.5g)", v[1], v[2], v[3], lr, lc, acc);
        }
        for (int k = 0; k < 2; k++) {
            sn_tensor_free(x[k]);
            sn_tensor_free(o[k]);
        }
        CHECK_OK(sn_model_compile(m, &c));
    }
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 3;
    f.validation = val;
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, ds, &f, &h));
    static const char *keys[] = {"loss", "reg_loss", "cls_loss", "cls_binary_accuracy",
                                 "val_loss", "val_reg_loss", "val_cls_loss",
                                 "val_cls_binary_accuracy"};
    for (size_t k = 0; h && k < sizeof keys / sizeof keys[0]; k++)
        CHECK(isfinite(sn_history_get(h, keys[k], 2)), "History has no '%s' after epoch 3",
              keys[k]);
    if (h) {
        double l0 = sn_history_get(h, "loss", 0), l2 = sn_history_get(h, "loss", 2);
        CHECK(l2 < l0, "the training loss did not fall: %g -> %g", l0, l2);
        double s = 0.3 * sn_history_get(h, "val_reg_loss", 2) + 2 * sn_history_get(h, "val_cls_loss", 2);
        CHECK(fabs(sn_history_get(h, "val_loss", 2) - s) <= 1e-5 * fabs(s),
              "val_loss %.7g is not the weighted sum %.7g", sn_history_get(h, "val_loss", 2), s);
        printf("ok  multi-output fit: loss %.4f -> %.4f, History keys as Keras 3's\n", l0, l2);
    }
    sn_history_free(h);

    /* .keras keeps the per-output compile settings */
    char path[] = "/tmp/sn_test_multi_XXXXXX.keras";
    int fd = mkstemps(path, 6);
    if (fd >= 0) close(fd);
    CHECK_OK(sn_model_save(m, path));
    sn_model *m2 = NULL;
    sn_model_file_info info;
    CHECK_OK(sn_model_load(path, 0, &m2, &info));
    if (m2) {
        const sn_compile_opts *o = &info.compile;
        CHECK(info.has_compile && o->n_outputs == 2 && o->outputs[0].loss == SN_LOSS_HUBER &&
              o->outputs[1].loss == SN_LOSS_BINARY_CROSSENTROPY && o->outputs[1].from_logits &&
              o->outputs[0].loss_weight == 0.3 && o->outputs[1].loss_weight == 2.0 &&
              o->outputs[1].n_metrics == 1 &&
              o->outputs[1].metrics[0] == SN_METRIC_BINARY_ACCURACY &&
              o->outputs[0].n_metrics == 0 && o->huber_delta == 0.5,
              "the reloaded compile settings differ (n_outputs %d)", o->n_outputs);
        CHECK_OK(sn_model_compile(m2, &info.compile));
        double v2[8];
        int n2 = 0;
        CHECK_OK(sn_model_evaluate(m, ds, 0, v, 8, &nv));
        CHECK_OK(sn_model_evaluate(m2, ds, 0, v2, 8, &n2));
        CHECK(n2 == nv && fabs(v[0] - v2[0]) <= 1e-6 * fabs(v[0]),
              "the reloaded model evaluates to %.7g, the original to %.7g", v2[0], v[0]);
    }
    sn_model_free(m2);
    unlink(path);
out:
    sn_dataset_free(ds);
    sn_dataset_free(val);
    sn_model_free(m);
}

/* Each output's loss is sum(w * loss) / N (Keras 3's sum_over_batch_size, not / sum(w)); the
 * metric is unweighted; the total is the loss_weights' sum of those; a bad weight is refused. */
static void test_sample_weight(void) {
    sn_model *m = two_two();
    sn_compile_opts c = two_two_compile();
    c.predict_raw = true;
    CHECK_OK(sn_model_compile(m, &c));
    static float w[N], w2[2 * N];
    for (int i = 0; i < N; i++) w[i] = 0.25f * (float)(i % 4);
    sn_dataset *ds = two_two_data(8, 4, w, 1), *plain = two_two_data(8, 4, NULL, 0);
    double v[8] = {0}, pv[8] = {0};
    int nv = 0, np = 0;
    CHECK_OK(sn_model_evaluate(m, ds, 0, v, 8, &nv));
    CHECK_OK(sn_model_evaluate(m, plain, 0, pv, 8, &np));
    static float a[N * 4], b[N * 3], yr[N * 2], yc[N];
    sn_rng r;
    sn_rng_init(&r, 3, 0);
    for (int i = 0; i < N * 4; i++) a[i] = (float)sn_rng_normal(&r);
    for (int i = 0; i < N * 3; i++) b[i] = (float)sn_rng_normal(&r);
    for (int i = 0; i < N * 2; i++) yr[i] = (float)sn_rng_normal(&r);
    for (int i = 0; i < N; i++) yc[i] = (float)sn_rng_below(&r, 2);
    sn_tensor *x[2] = {0}, *o[2] = {0};
    sn_tensor_from_data(&x[0], SN_F32, &(sn_shape)S2(N, 4), a);
    sn_tensor_from_data(&x[1], SN_F32, &(sn_shape)S2(N, 3), b);
    CHECK_OK(sn_model_predict_n(m, 2, (const sn_tensor *const *)x, 2, o));
    if (o[0] && o[1] && nv == 4) {
        sn_loss_spec hub = {.type = SN_LOSS_HUBER, .delta = 0.5};
        sn_loss_spec bce = {.type = SN_LOSS_BINARY_CROSSENTROPY, .from_logits = true};
        double lr = 0, lc = 0;
        const float *pr = sn_tensor_cdata(o[0]), *pc = sn_tensor_cdata(o[1]);
        for (int i = 0; i < N; i++) {
            double pp[2] = {pr[2 * i], pr[2 * i + 1]}, yy[2] = {yr[2 * i], yr[2 * i + 1]};
            double zc = pc[i], ycd = yc[i];
            lr += w[i] * ref_loss(&hub, pp, yy, 2) / N;
            lc += w[i] * ref_loss(&bce, &zc, &ycd, 1) / N;
        }
        CHECK(fabs(lr - v[1]) <= 1e-5 * fmax(1, lr) && fabs(lc - v[2]) <= 1e-5 * fmax(1, lc),
              "weighted evaluate (%.7g, %.7g) differs from sum(w * loss) / N (%.7g, %.7g)",
              v[1], v[2], lr, lc);
        CHECK(fabs(v[0] - (0.3 * v[1] + 2.0 * v[2])) <= 1e-5 * fabs(v[0]),
              "weighted loss %.7g is not 0.3 * %.7g + 2 * %.7g", v[0], v[1], v[2]);
        CHECK(v[3] == pv[3], "the metric is weighted: %.7g, unweighted %.7g", v[3], pv[3]);
    } else {
        CHECK(0, "weighted evaluate gave %d values, expected 4", nv);
    }
    for (int k = 0; k < 2; k++) {
        sn_tensor_free(x[k]);
        sn_tensor_free(o[k]);
    }
    /* a weighted fit step moves the weights; all-zero weights leave them (SGD, no momentum) */
    sn_fit_opts f = sn_fit_defaults();
    CHECK_OK(sn_model_fit(m, ds, &f, NULL));
    for (int i = 0; i < N; i++) w[i] = 0;
    sn_dataset *zero = two_two_data(8, 4, w, 1);
    double before[8], after[8];
    int nb = 0;
    CHECK_OK(sn_model_evaluate(m, plain, 0, before, 8, &nb));
    CHECK_OK(sn_model_fit(m, zero, &f, NULL));
    CHECK_OK(sn_model_evaluate(m, plain, 0, after, 8, &nb));
    CHECK(before[0] == after[0], "zero weights changed the model: loss %.9g -> %.9g", before[0],
          after[0]);
    sn_dataset *bad = two_two_data(8, 4, w2, 2);
    CHECK_ERR(sn_model_fit(m, bad, &f, NULL), SN_ERR_SHAPE,
              "sample weights (the dataset's last component) of dtype float32 and shape [8, 2]");
    sn_dataset_free(bad);
    sn_dataset_free(zero);
    sn_dataset_free(ds);
    sn_dataset_free(plain);
    sn_model_free(m);
    printf("ok  sample weights: sum(w * loss) / N per output, unweighted metrics\n");
}

/* on_test_* hooks: what one evaluation pass calls, in order. */
typedef struct test_rec {
    int begin, end, n_begin, n_end;
    int64_t begin_steps[8], end_steps[8];
    double end_values[8];
    int end_n;
} test_rec;

static sn_status rec_test_begin(void *u) {
    ((test_rec *)u)->begin++;
    return SN_OK;
}
static sn_status rec_batch_begin(void *u, int64_t step) {
    test_rec *r = u;
    if (r->n_begin < 8) r->begin_steps[r->n_begin] = step;
    r->n_begin++;
    return SN_OK;
}
static sn_status rec_batch_end(void *u, const sn_logs *l) {
    test_rec *r = u;
    if (r->n_end < 8) r->end_steps[r->n_end] = l->step;
    r->n_end++;
    return SN_OK;
}
static sn_status rec_test_end(void *u, const sn_logs *l) {
    test_rec *r = u;
    r->end++;
    r->end_n = l->n;
    for (int i = 0; i < l->n && i < 8; i++) r->end_values[i] = l->values[i];
    return SN_OK;
}

static void test_test_hooks(void) {
    sn_model *m = two_two();
    sn_compile_opts c = two_two_compile();
    CHECK_OK(sn_model_compile(m, &c));
    sn_dataset *ds = two_two_data(8, 4, NULL, 0);
    test_rec r = {0};
    sn_callback cb = {.user = &r, .on_test_begin = rec_test_begin,
                      .on_test_batch_begin = rec_batch_begin,
                      .on_test_batch_end = rec_batch_end, .on_test_end = rec_test_end};
    sn_callback *cbs[1] = {&cb};
    double v[8] = {0}, plain[8] = {0};
    int nv = 0, np = 0;
    CHECK_OK(sn_model_evaluate_cb(m, ds, 0, 1, cbs, v, 8, &nv));
    CHECK_OK(sn_model_evaluate(m, ds, 0, plain, 8, &np));
    CHECK(r.begin == 1 && r.end == 1 && r.n_begin == 3 && r.n_end == 3,
          "evaluate of 3 batches called test_begin %d, batch_begin %d, batch_end %d, test_end %d "
          "times; expected 1, 3, 3, 1", r.begin, r.n_begin, r.n_end, r.end);
    for (int i = 0; i < 3 && r.n_begin == 3 && r.n_end == 3; i++)
        CHECK(r.begin_steps[i] == i && r.end_steps[i] == i + 1,
              "batch %d: begin step %lld (expected %d), end logs step %lld (expected %d)", i,
              (long long)r.begin_steps[i], i, (long long)r.end_steps[i], i + 1);
    CHECK(r.end_n == nv && nv == np, "test_end logs %d values, evaluate %d", r.end_n, nv);
    for (int i = 0; i < nv && i < 8; i++)
        CHECK(r.end_values[i] == v[i] && v[i] == plain[i],
              "value %d: test_end %.9g, evaluate_cb %.9g, evaluate %.9g", i, r.end_values[i], v[i],
              plain[i]);
    /* fit: once around each epoch's validation */
    memset(&r, 0, sizeof r);
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 2;
    f.validation = ds;
    f.n_callbacks = 1;
    f.callbacks = cbs;
    CHECK_OK(sn_model_fit(m, ds, &f, NULL));
    CHECK(r.begin == 2 && r.end == 2 && r.n_begin == 6 && r.n_end == 6,
          "fit of 2 epochs validated with test_begin %d, batch_begin %d, batch_end %d, test_end "
          "%d calls; expected 2, 6, 6, 2", r.begin, r.n_begin, r.n_end, r.end);
    CHECK_ERR(sn_model_evaluate_cb(m, ds, 0, 1, NULL, v, 8, &nv), SN_ERR_INVALID,
              "n_callbacks 1 with callbacks NULL");
    sn_dataset_free(ds);
    sn_model_free(m);
    printf("ok  on_test_* hooks around evaluate and fit's validation\n");
}

/* Two inputs and two outputs under MirroredStrategy over the two logical CPUs: each replica
 * takes its rows of both inputs, both labels and the sample weights, and the epochs' logs
 * (the loss, each output's loss, the metric) and the trained weights equal training on one
 * device from the same start, up to the order of the replicas' sums. */
static void test_multi_mirrored(void) {
    static float w[N];
    for (int i = 0; i < N; i++) w[i] = 0.25f + (float)(i % 5) * 0.5f;
    sn_model *ms[2] = {two_two(), two_two()}; /* the same seed: the same initial weights */
    sn_history *h[2] = {NULL, NULL};
    sn_strategy *strat = NULL;
    CHECK_OK(sn_strategy_mirrored(2, NULL, &strat));
    for (int k = 0; k < 2 && strat; k++) {
        sn_compile_opts c = two_two_compile();
        CHECK_OK(sn_model_compile(ms[k], &c));
        if (k == 1) CHECK_OK(sn_model_set_strategy(ms[k], strat));
        sn_dataset *ds = two_two_data(8, 4, w, 1);
        sn_fit_opts f = sn_fit_defaults();
        f.epochs = 2;
        if (ds) CHECK_OK(sn_model_fit(ms[k], ds, &f, &h[k]));
        sn_dataset_free(ds);
    }
    static const char *keys[] = {"loss", "reg_loss", "cls_loss", "cls_binary_accuracy"};
    for (int e = 0; e < 2 && h[0] && h[1]; e++)
        for (int i = 0; i < 4; i++) {
            double a = sn_history_get(h[0], keys[i], e), b = sn_history_get(h[1], keys[i], e);
            CHECK(fabs(a - b) <= 1e-5 * (fabs(a) + 1e-3),
                  "epoch %d %s: one device %.9g, mirrored over 2 replicas %.9g", e + 1, keys[i],
                  a, b);
        }
    sn_graph *g0 = sn_model_graph(ms[0]), *g1 = sn_model_graph(ms[1]);
    sn_node v0[16], v1[16];
    int n0 = sn_graph_variables(g0, true, v0, 16), n1 = sn_graph_variables(g1, true, v1, 16);
    CHECK(n0 == 6 && n1 == n0, "trainable variables: %d and %d, expected 6", n0, n1);
    double worst = 0, moved = 0;
    for (int i = 0; i < n0 && n1 == n0; i++) {
        const float *a = sn_variable_data(g0, v0[i]), *b = sn_variable_data(g1, v1[i]);
        sn_shape sh = sn_node_shape(g0, v0[i]);
        for (int64_t j = 0; j < sn_shape_numel(&sh); j++) {
            double d = fabs((double)a[j] - b[j]) / (fabs((double)a[j]) + 1e-3);
            if (d > worst) worst = d;
        }
    }
    /* and the weights did train: the first kernel moved from its start */
    sn_model *fresh = two_two();
    const float *a0 = sn_variable_data(sn_model_graph(fresh), v0[0]), *a1 = sn_variable_data(g0, v0[0]);
    for (int j = 0; j < 4 * 5 && fresh; j++) moved += fabs((double)a0[j] - a1[j]);
    CHECK(worst < 1e-5, "mirrored weights differ from one device's by %.3g (relative)", worst);
    CHECK(moved > 1e-3, "the first kernel moved by %.3g in total: it did not train", moved);
    sn_model_free(fresh);
    for (int k = 0; k < 2; k++) {
        sn_history_free(h[k]);
        sn_model_free(ms[k]);
    }
    sn_strategy_free(strat);
    printf("ok  two inputs and two outputs under MirroredStrategy, 2 replicas = one device\n");
}

static void test_multi_errors(void) {
    sn_model *m = two_two();
    sn_compile_opts c = sn_compile_defaults();
    c.loss = SN_LOSS_MEAN_SQUARED_ERROR;
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_INVALID, "give its metrics per output");
    c.n_metrics = 0;
    CHECK_OK(sn_model_compile(m, &c)); /* one loss for every output, as Keras */
    c = two_two_compile();
    c.n_outputs = 3;
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_INVALID, "n_outputs 3, but model 'two_two' has 2");
    c = two_two_compile();
    c.huber_delta = 0;
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_INVALID, "huber_delta 0");
    c = two_two_compile();
    c.outputs[1].loss = SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
    c.outputs[1].n_metrics = 0;
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_SHAPE, "output 1 ('cls')");
    c = two_two_compile();
    CHECK_OK(sn_model_compile(m, &c));
    /* under a strategy too, the labels must match the outputs */
    sn_strategy *strat = NULL;
    CHECK_OK(sn_strategy_one_device("cpu:0", &strat));
    if (strat) {
        sn_dataset *three = two_two_data(8, 3, NULL, 0);
        CHECK_OK(sn_model_set_strategy(m, strat));
        CHECK_ERR(sn_model_fit(m, three, NULL, NULL), SN_ERR_INVALID, "so it expects 4");
        CHECK_OK(sn_model_set_strategy(m, NULL));
        sn_dataset_free(three);
        sn_strategy_free(strat);
    }
    sn_dataset *two = two_two_data(8, 2, NULL, 0);
    CHECK_ERR(sn_model_fit(m, two, NULL, NULL), SN_ERR_INVALID,
              "model 'two_two' has 2 inputs and 2 outputs, so it expects 4");
    sn_dataset_free(two);
    sn_tensor *x = NULL, *o = NULL;
    sn_tensor_new(&x, SN_F32, &(sn_shape)S2(2, 4));
    CHECK_ERR(sn_model_predict(m, x, &o), SN_ERR_INVALID, "use sn_model_predict_n");
    sn_tensor *xs[2] = {x, x}, *os[2] = {0};
    CHECK_ERR(sn_model_predict_n(m, 2, (const sn_tensor *const *)xs, 2, os), SN_ERR_SHAPE,
              "model's input 'b' expects [B, [3]]");
    sn_tensor_free(x);
    sn_model_free(m);
}

/* ---- the Keras interop driver (tests/keras_losses_interop.py) ---------------------------
 * With SN_KERAS_LOSSES_DIR set, for each line "NAME ROWS LR" of its cases.txt: loads
 * NAME.keras (Keras's compile settings: losses, loss_weights, metrics), reads the inputs
 * NAME.in<k>.f32 and labels NAME.y<j>.f32, compiles with SGD(LR), and writes
 * NAME.eval.txt ("name value" per line: evaluate on the batch), NAME.keys.txt (the History's
 * keys after one fit step, validation on the same batch) and NAME.step.weights.h5 (the
 * weights after that step). */
static sn_status read_f32(const char *path, sn_shape s, sn_tensor **out) {
    SN_TRY(sn_tensor_new(out, SN_F32, &s));
    FILE *f = fopen(path, "rb");
    size_t n = (size_t)sn_shape_numel(&s), got = f ? fread(sn_tensor_data(*out), 4, n, f) : 0;
    if (f) fclose(f);
    if (got != n) return sn_errorf(SN_ERR_IO, "%s: read %zu of %zu floats", path, got, n);
    return SN_OK;
}

static void interop_case(const char *dir, const char *name, int64_t rows, double lr) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.keras", dir, name);
    sn_model *m = NULL;
    sn_model_file_info info;
    sn_status st = sn_model_load(path, 0, &m, &info);
    CHECK(st == SN_OK, "%s: load: %s", name, sn_last_error());
    if (st != SN_OK) return;
    int ni = sn_model_input_count(m), no = sn_model_output_count(m);
    /* sinter's own .keras of the model as loaded (Keras reopens it) */
    snprintf(path, sizeof path, "%s/%s.sinter.keras", dir, name);
    st = sn_model_save(m, path);
    sn_tensor *ts[SN_DATASET_MAX_COMPONENTS] = {0};
    for (int k = 0; k < ni + no && st == SN_OK; k++) {
        sn_shape e = k < ni ? m->fn->nodes[m->fn->inputs[k]].shape
                            : m->fn->nodes[m->fn->outputs[k - ni]].shape;
        sn_shape s = {.ndim = e.ndim + 1, .dim = {rows}};
        for (int d = 0; d < e.ndim; d++) s.dim[d + 1] = e.dim[d];
        snprintf(path, sizeof path, "%s/%s.%s%d.f32", dir, name, k < ni ? "in" : "y",
                 k < ni ? k : k - ni);
        st = read_f32(path, s, &ts[k]);
    }
    sn_dataset *ds = NULL;
    if (st == SN_OK) st = sn_dataset_from_tensors(&ds, ni + no, ts);
    if (st == SN_OK) st = sn_dataset_batch(&ds, rows, false);
    sn_compile_opts c = info.compile;
    c.optimizer = sn_optimizer_defaults(SN_SGD);
    c.optimizer.learning_rate = lr;
    if (st == SN_OK) st = sn_model_compile(m, &c);
    if (st == SN_OK) { /* predict, raw outputs: NAME.out<k>.f32 */
        sn_compile_opts raw = c;
        raw.predict_raw = true;
        st = sn_model_compile(m, &raw);
        sn_tensor *o[SN_DATASET_MAX_COMPONENTS] = {0};
        if (st == SN_OK) st = sn_model_predict_n(m, ni, (const sn_tensor *const *)ts, no, o);
        for (int k = 0; st == SN_OK && k < no; k++) {
            snprintf(path, sizeof path, "%s/%s.out%d.f32", dir, name, k);
            FILE *f = fopen(path, "wb");
            if (f) {
                fwrite(sn_tensor_cdata(o[k]), 4, (size_t)sn_tensor_numel(o[k]), f);
                fclose(f);
            }
        }
        for (int k = 0; k < no; k++) sn_tensor_free(o[k]);
        if (st == SN_OK) st = sn_model_compile(m, &c);
    }
    double v[SN_ACC_MAX];
    int nv = 0;
    if (st == SN_OK) st = sn_model_evaluate(m, ds, 0, v, SN_ACC_MAX, &nv);
    if (st == SN_OK) {
        snprintf(path, sizeof path, "%s/%s.eval.txt", dir, name);
        FILE *f = fopen(path, "w");
        for (int i = 0; f && i < nv; i++)
            fprintf(f, "%s %.9g\n", sn_train_log_name(m->train, i), v[i]);
        if (f) fclose(f);
    }
    sn_history *h = NULL;
    if (st == SN_OK) {
        sn_fit_opts fo = sn_fit_defaults();
        fo.validation = ds;
        st = sn_model_fit(m, ds, &fo, &h);
    }
    if (st == SN_OK) {
        const char *names[SN_LOGS_MAX];
        int n = sn_history_names(h, names);
        snprintf(path, sizeof path, "%s/%s.keys.txt", dir, name);
        FILE *f = fopen(path, "w");
        for (int i = 0; f && i < n; i++) fprintf(f, "%s\n", names[i]);
        if (f) fclose(f);
        snprintf(path, sizeof path, "%s/%s.step.weights.h5", dir, name);
        st = sn_model_save_weights(m, path);
    }
    CHECK(st == SN_OK, "%s: %s", name, sn_last_error());
    if (st == SN_OK) printf("ok  interop case %s (%d inputs, %d outputs)\n", name, ni, no);
    sn_history_free(h);
    sn_dataset_free(ds);
    for (int k = 0; k < ni + no; k++) sn_tensor_free(ts[k]);
    sn_model_free(m);
}

static int interop(const char *dir) {
    char path[1024], name[256];
    snprintf(path, sizeof path, "%s/cases.txt", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "cannot open %s", path);
    long long rows;
    double lr;
    while (f && fscanf(f, "%255s %lld %lf", name, &rows, &lr) == 3)
        interop_case(dir, name, rows, lr);
    if (f) fclose(f);
    return sn_test_finish("test_losses_multi (Keras interop driver)");
}

int main(void) {
    const char *dir = getenv("SN_KERAS_LOSSES_DIR");
    if (dir && *dir) return interop(dir);
    /* tests/test_multi_io_cli.sh: the two-input, two-output model as a file */
    const char *save = getenv("SN_SAVE_TWO_TWO");
    if (save && *save) {
        sn_model *m = two_two();
        sn_compile_opts c = two_two_compile();
        CHECK_OK(sn_model_compile(m, &c));
        CHECK_OK(sn_model_save(m, save));
        sn_model_free(m);
        return sn_test_finish("test_losses_multi (saving the two-output model)");
    }
    /* two logical CPUs for test_multi_mirrored's replicas */
    CHECK_OK(sn_device_configure_cpu(2));
    (void)fx_build;
    (void)fx_plan;
    (void)fx_free;
    (void)set_var;
    (void)run;
    (void)expect;
    (void)grad_case;
    static const struct { const char *what; sn_loss_spec l; } cases[] = {
        {"binary_crossentropy", {SN_LOSS_BINARY_CROSSENTROPY, false, 1, 1}},
        {"binary_crossentropy from_logits", {SN_LOSS_BINARY_CROSSENTROPY, true, 1, 1}},
        {"categorical_crossentropy", {SN_LOSS_CATEGORICAL_CROSSENTROPY, false, 1, 1}},
        {"categorical_crossentropy from_logits", {SN_LOSS_CATEGORICAL_CROSSENTROPY, true, 1, 1}},
        {"mean_squared_error", {SN_LOSS_MEAN_SQUARED_ERROR, false, 1, 1}},
        {"mean_absolute_error", {SN_LOSS_MEAN_ABSOLUTE_ERROR, false, 1, 1}},
        {"huber (delta 1)", {SN_LOSS_HUBER, false, 1, 1}},
        {"huber (delta 0.5)", {SN_LOSS_HUBER, false, 1, 0.5}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_loss(cases[i].what, cases[i].l);
    test_metrics();
    test_multi_fit();
    test_multi_errors();
    test_multi_mirrored();
    test_sample_weight();
    test_test_hooks();
    return sn_test_finish("test_losses_multi");
}
