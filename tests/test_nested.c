/* Nested models (sn_model_call, src/nn/model/functional_nested.c): a Functional model of two
 * outputs used as a layer, once and twice (shared weights): predictions against the layers'
 * formulas in double precision, gradients by finite differences in double precision through
 * both calls, the weights in Keras's nested layout written and read back, the summary's
 * row for the nested model, the .keras written and read back, and the errors of a wrong
 * call. The numbers against real Keras are
 * tests/keras_losses_interop.py's (nested_two, nested_shared). */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "layer_test_util.h"

static sn_ftensor input(sn_model *m, const char *name, int64_t d) {
    sn_shape s = S1(d);
    sn_functional_input_opts o = sn_functional_input_defaults(&s);
    o.name = name;
    sn_ftensor t = {-1};
    CHECK_OK(sn_functional_input(m, &o, &t));
    return t;
}

static sn_ftensor call(sn_model *m, sn_layer *l, const char *name, sn_ftensor x) {
    if (name) sn_layer_set_name(l, name);
    sn_ftensor o = {-1};
    CHECK_OK(sn_layer_call(m, l, &x, 1, &o));
    return o;
}

/* ei [6] -> e1 Dense(5, relu) -> e2 Dense(4, tanh); outputs [e1, e2]. */
static sn_model *encoder(void) {
    sn_model *e = sn_functional_new("enc");
    sn_ftensor x = input(e, "ei", 6);
    sn_ftensor h = call(e, sn_layer_dense(5, SN_ACT_RELU), "e1", x);
    sn_ftensor g = call(e, sn_layer_dense(4, SN_ACT_TANH), "e2", h);
    sn_ftensor o[2] = {h, g};
    CHECK_OK(sn_functional_set_outputs(e, o, 2));
    return e;
}

/* x [6] -> enc -> Concatenate(e1, e2) -> out Dense(3). */
static sn_model *nested_two(sn_dtype dt, uint64_t seed) {
    sn_model *m = sn_functional_new("nested_two");
    m->dtype = dt;
    sn_ftensor x = input(m, "x", 6), ab[2], c = {-1};
    CHECK_OK(sn_model_call(m, encoder(), &x, 1, ab, 2));
    CHECK_OK(sn_layer_call(m, sn_layer_concatenate(-1), ab, 2, &c));
    sn_ftensor o = call(m, sn_layer_dense(3, SN_ACT_NONE), "out", c);
    CHECK_OK(sn_functional_set_outputs(m, &o, 1));
    CHECK_OK(sn_model_build(m, NULL, seed));
    return m;
}

/* x, y [6] -> enc twice -> Add(e2(x), e2(y)) -> o Dense(2). */
static sn_model *nested_shared(sn_dtype dt) {
    sn_model *m = sn_functional_new("nested_shared");
    m->dtype = dt;
    sn_ftensor x = input(m, "x", 6), y = input(m, "y", 6), a[2], b[2], s = {-1};
    sn_model *enc = encoder();
    CHECK_OK(sn_model_call(m, enc, &x, 1, a, 2));
    CHECK_OK(sn_model_call(m, enc, &y, 1, b, 2));
    sn_ftensor two[2] = {a[1], b[1]};
    CHECK_OK(sn_layer_call(m, sn_layer_merge(SN_MERGE_ADD), two, 2, &s));
    sn_ftensor o = call(m, sn_layer_dense(2, SN_ACT_NONE), "o", s);
    CHECK_OK(sn_functional_set_outputs(m, &o, 1));
    CHECK_OK(sn_model_build(m, NULL, 5));
    return m;
}

static const sn_layer *layer(const sn_model *m, const char *name) {
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i]->name, name)) return m->layers[i];
    return NULL;
}

/* y = act(x W + b) for one row, in double. */
static void dense(const sn_model *m, const char *name, const double *x, int in, int out,
                  int act, double *y) {
    const sn_layer *l = layer(m, name);
    const float *w = sn_variable_cdata(m->g, l->vars[0]), *b = sn_variable_cdata(m->g, l->vars[1]);
    for (int j = 0; j < out; j++) {
        double s = b[j];
        for (int i = 0; i < in; i++) s += x[i] * w[i * out + j];
        y[j] = act == 1 ? fmax(s, 0) : act == 2 ? tanh(s) : s;
    }
}

static void test_predict_and_weights(void) {
    sn_model *m = nested_two(SN_F32, 3);
    CHECK(m->n_layers == 4, "the outer model holds %d layers, expected 4 (e1, e2, "
          "concatenate, out)", m->n_layers);
    enum { B = 4 };
    float xv[B * 6];
    sn_rng r;
    sn_rng_init(&r, 9, 0);
    for (int i = 0; i < B * 6; i++) xv[i] = (float)sn_rng_normal(&r);
    sn_tensor *x = NULL, *p = NULL;
    sn_tensor_from_data(&x, SN_F32, &(sn_shape)S2(B, 6), xv);
    CHECK_OK(sn_model_predict(m, x, &p));
    double worst = 0;
    for (int b = 0; p && b < B; b++) {
        double xr[6], h[5], g[4], c[9], o[3];
        for (int i = 0; i < 6; i++) xr[i] = xv[b * 6 + i];
        dense(m, "e1", xr, 6, 5, 1, h);
        dense(m, "e2", h, 5, 4, 2, g);
        memcpy(c, h, sizeof h);
        memcpy(c + 5, g, sizeof g);
        dense(m, "out", c, 9, 3, 0, o);
        for (int j = 0; j < 3; j++)
            worst = fmax(worst, fabs(o[j] - ((const float *)sn_tensor_cdata(p))[b * 3 + j]));
    }
    CHECK(p && worst < 1e-5, "nested predict differs from the formulas by %g", worst);
    /* the weights in Keras's nested layout, back into a model of other initial values */
    char path[] = "/tmp/sn_test_nested_XXXXXX.weights.h5";
    int fd = mkstemps(path, 11);
    if (fd >= 0) close(fd);
    CHECK_OK(sn_model_save_weights(m, path));
    sn_model *m2 = nested_two(SN_F32, 77);
    sn_tensor *p2 = NULL, *p3 = NULL;
    CHECK_OK(sn_model_predict(m2, x, &p2));
    CHECK_OK(sn_model_load_weights(m2, path));
    CHECK_OK(sn_model_predict(m2, x, &p3));
    if (p && p2 && p3) {
        CHECK(memcmp(sn_tensor_cdata(p), sn_tensor_cdata(p2), 4 * B * 3) != 0,
              "the second model predicted the same before loading (same seed?)");
        CHECK(memcmp(sn_tensor_cdata(p), sn_tensor_cdata(p3), 4 * B * 3) == 0,
              "after loading the nested weights the predictions differ");
    }
    printf("ok  nested predict within %.2g of the formulas; weights round trip\n", worst);
    /* the summary: one row for the nested model (Keras's table byte for byte is
     * keras_losses_interop.py's check) */
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    CHECK_OK(sn_model_summary(m, mem));
    fclose(mem);
    CHECK(text && strstr(text, "│ enc (Functional)    │ [(None, 5),       │         59 │ x[0][0]") &&
          strstr(text, "│ enc[0][0],") && strstr(text, "│ enc[0][1]"),
          "the summary has no row for the nested model or no 'enc[0][1]':\n%s", text);
    free(text);
    /* .keras in Keras's nested layout, read back: the same model */
    char kpath[] = "/tmp/sn_test_nested_XXXXXX.keras";
    fd = mkstemps(kpath, 6);
    if (fd >= 0) close(fd);
    CHECK_OK(sn_model_save(m, kpath));
    sn_model *m3 = NULL;
    sn_tensor *p4 = NULL;
    CHECK_OK(sn_model_load(kpath, 0, &m3, NULL));
    if (m3) CHECK_OK(sn_model_predict(m3, x, &p4));
    CHECK(p && p4 && memcmp(sn_tensor_cdata(p), sn_tensor_cdata(p4), 4 * B * 3) == 0,
          "the nested model read back from .keras predicts differently");
    sn_tensor_free(p4);
    sn_model_free(m3);
    unlink(kpath);
    sn_tensor_free(x);
    sn_tensor_free(p);
    sn_tensor_free(p2);
    sn_tensor_free(p3);
    sn_model_free(m);
    sn_model_free(m2);
    unlink(path);
}

/* d sum(out * r) / d (inputs, every weight) against central differences, in double. */
static void test_gradients(void) {
    sn_model *m = nested_shared(SN_F64);
    if (!m->built) {
        sn_model_free(m);
        return;
    }
    sn_graph *g = m->g;
    enum { B = 3, MAXW = 16 };
    sn_node xs[2], out, wrt[MAXW], grads[MAXW];
    int nw = 0;
    for (int k = 0; k < 2; k++) xs[k] = wrt[nw++] = sn_input(g, "x", SN_F64, &(sn_shape)S2(B, 6));
    sn_updates u = {0};
    CHECK_OK(sn_model_forward_n(m, xs, true, &u, &out));
    sn_rng r;
    sn_rng_init(&r, 4, 0);
    double rv[B * 2];
    for (int i = 0; i < B * 2; i++) rv[i] = sn_rng_normal(&r);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, out, sn_const(g, SN_F64, &(sn_shape)S2(B, 2), rv)),
                                 0, NULL, false);
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_vars && nw < MAXW; j++) wrt[nw++] = m->layers[i]->vars[j];
    sn_plan *p = NULL;
    sn_status s = sn_gradients(g, loss, nw, wrt, grads);
    sn_node t[1 + MAXW] = {loss};
    for (int i = 0; i < nw; i++) t[1 + i] = grads[i];
    if (s == SN_OK) s = sn_plan_new(&p, g, 1 + nw, t, NULL);
    CHECK(s == SN_OK, "gradients/plan: %s", sn_last_error());
    if (s == SN_OK) {
        for (int k = 0; k < 2; k++) {
            double *xv = sn_plan_buffer(p, xs[k]);
            for (int i = 0; i < B * 6; i++) {
                double v = sn_rng_normal(&r);
                xv[i] = (v < 0 ? -0.2 : 0.2) + v;
            }
        }
        loss_of(p, loss);
        double worst = 0;
        int bad = fd_check_all(g, p, loss, nw, wrt, grads, 2, 1e-5, &worst);
        CHECK(bad == 0, "nested (shared) model: %d gradient entries off (worst %.3g)", bad, worst);
        if (bad == 0)
            printf("ok  grad through a nested model called twice: worst relative error %.2e\n",
                   worst);
    }
    sn_plan_free(p);
    sn_updates_free(&u);
    sn_model_free(m);
}

static void test_errors(void) {
    sn_model *m = sn_functional_new("outer");
    sn_ftensor x = input(m, "x", 6), o[2];
    sn_model *built = encoder();
    CHECK_OK(sn_model_build(built, NULL, 1));
    CHECK_ERR(sn_model_call(m, built, &x, 1, o, 2), SN_ERR_UNSUPPORTED,
              "model 'enc' is nested in model 'outer' but is already built");
    CHECK_ERR(sn_model_call(m, encoder(), &x, 1, o, 1), SN_ERR_INVALID,
              "nested model 'enc' has 1 inputs and 2 outputs; it is called on 1 and gives 1");
    sn_model_free(m);
}

/* Keras's trainable = false on a nested model (before it is called) and on a
 * BatchNormalization: the frozen weights leave the trainable count and do not move in fit,
 * bit for bit, the others do; the frozen BatchNormalization runs in inference mode in training
 * (its moving statistics stay); the config written says so and reads back frozen. The numbers
 * against real Keras: keras_models_interop.py's frozen_base and tests/python/test_frozen.py. */
static void test_frozen(void) {
    sn_model *m = sn_functional_new("frozen");
    sn_ftensor x = input(m, "x", 6), ab[2], c = {-1};
    sn_model *enc = encoder();
    CHECK_OK(sn_model_set_trainable(enc, false));
    CHECK_OK(sn_model_call(m, enc, &x, 1, ab, 2));
    CHECK_OK(sn_layer_call(m, sn_layer_concatenate(-1), ab, 2, &c));
    sn_batch_norm_layer_opts bo = sn_batch_norm_layer_defaults();
    sn_layer *bn = sn_layer_batch_norm_ex(&bo);
    CHECK_OK(sn_layer_set_trainable(bn, false));
    c = call(m, bn, "bn", c);
    sn_ftensor o = call(m, sn_layer_dense(3, SN_ACT_NONE), "out", c);
    CHECK_OK(sn_functional_set_outputs(m, &o, 1));
    CHECK_OK(sn_model_build(m, NULL, 3));
    /* enc 35 + 24, bn 4 x 9, out 9 x 3 + 3 */
    CHECK(sn_model_param_count(m, true) == 30 && sn_model_param_count(m, false) == 125,
          "trainable/total params %lld/%lld, expected 30/125",
          (long long)sn_model_param_count(m, true), (long long)sn_model_param_count(m, false));
    sn_graph *g = sn_model_graph(m);
    enum { MAXV = 16, N = 16 };
    float *before[MAXV] = {0};
    sn_node vs[MAXV];
    int nv = 0;
    for (int i = 0; i < sn_model_layer_count(m); i++) {
        sn_node lv[8];
        int k = sn_model_layer_variables(m, i, lv, 8);
        for (int j = 0; j < k && nv < MAXV; j++) {
            sn_shape s = sn_node_shape(g, lv[j]);
            size_t bytes = sizeof(float) * (size_t)sn_shape_numel(&s);
            vs[nv] = lv[j];
            before[nv] = malloc(bytes);
            if (before[nv]) memcpy(before[nv], sn_variable_data(g, lv[j]), bytes);
            nv++;
        }
    }
    CHECK(nv == 10, "%d variables, expected 10", nv);
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer = sn_optimizer_defaults(SN_SGD);
    co.optimizer.learning_rate = 0.1;
    co.loss = SN_LOSS_MEAN_SQUARED_ERROR;
    co.n_metrics = 0;
    CHECK_OK(sn_model_compile(m, &co));
    sn_shape sx = S2(N, 6), sy = S2(N, 3);
    sn_tensor *xt = NULL, *yt = NULL;
    CHECK_OK(sn_tensor_new(&xt, SN_F32, &sx));
    CHECK_OK(sn_tensor_new(&yt, SN_F32, &sy));
    sn_rng r;
    sn_rng_init(&r, 5, 0);
    float *xd = sn_tensor_data(xt), *yd = sn_tensor_data(yt);
    for (int i = 0; i < N * 6; i++) xd[i] = (float)sn_rng_normal(&r);
    for (int i = 0; i < N * 3; i++) yd[i] = (float)sn_rng_normal(&r);
    sn_dataset *ds = NULL;
    sn_tensor *xy[2] = {xt, yt};
    CHECK_OK(sn_dataset_from_tensors(&ds, 2, xy));
    CHECK_OK(sn_dataset_batch(&ds, 8, true));
    sn_fit_opts fo = sn_fit_defaults();
    fo.epochs = 1;
    CHECK_OK(sn_model_fit(m, ds, &fo, NULL));
    for (int v = 0; v < nv; v++) {
        sn_shape s = sn_node_shape(g, vs[v]);
        const char *name = sn_node_name(g, vs[v]);
        bool same = before[v] && !memcmp(before[v], sn_variable_data(g, vs[v]),
                                         sizeof(float) * (size_t)sn_shape_numel(&s));
        bool frozen = strncmp(name, "out/", 4) != 0; /* enc's e1, e2 and bn (moving stats too) */
        CHECK(same == frozen, "variable '%s' %s in fit", name, same ? "did not move" : "moved");
        free(before[v]);
    }
    char *js = NULL;
    CHECK_OK(sn_model_to_json(m, &js));
    sn_model *m2 = NULL;
    sn_model_file_info info;
    if (js) CHECK_OK(sn_model_from_json(js, strlen(js), 1, &m2, &info));
    CHECK(m2 && sn_model_param_count(m2, true) == 30, "read back: %lld trainable params, "
          "expected 30\n%s", m2 ? (long long)sn_model_param_count(m2, true) : -1LL, js);
    CHECK(js && strstr(js, "\"trainable\": false"), "the config has no \"trainable\": false");
    free(js);
    sn_model_free(m2);
    sn_dataset_free(ds);
    sn_tensor_free(xt);
    sn_tensor_free(yt);
    sn_model_free(m);
}

int main(void) {
    (void)fx_build;
    (void)fx_plan;
    (void)fx_free;
    (void)set_var;
    (void)run;
    (void)expect;
    (void)grad_case;
    test_predict_and_weights();
    test_gradients();
    test_errors();
    test_frozen();
    return sn_test_finish("test_nested");
}
