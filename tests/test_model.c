/* The Sequential model: summaries and parameter totals of the presets (38,375,818 for the CNN
 * of the "Use TPUs" guide), automatic names, shape errors that name the layer, build order
 * errors, and the weights round trip through HDF5 (identical predictions; a file of other
 * shapes is refused with the layer and both shapes named, and the weights stay as they were). */
#include <stdlib.h>
#include <unistd.h>

#include "nn/nn_impl.h"
#include "sn_test.h"

#define S1(a) {.ndim = 1, .dim = {a}}
#define S3(a, b, c) {.ndim = 3, .dim = {a, b, c}}

/* The summary as a string (caller frees). */
static char *summary_of(const sn_model *m) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    CHECK_OK(sn_model_summary(m, f));
    fclose(f);
    return buf;
}

#define CHECK_HAS(text, needle) \
    CHECK((text) && strstr((text), (needle)), "summary lacks '%s':\n%s", (needle), (text) ? (text) : "(null)")

static void test_presets(void) {
    const sn_shape img = S3(28, 28, 1);
    struct { const char *name, *total, *trainable; int layers; } c[] = {
        {"tpu_guide_cnn", " Total params: 38,375,818 (146.39 MB)\n", " Trainable params: 38,375,818 (146.39 MB)\n", 6},
        {"small_cnn", " Total params: 225,034 (879.04 KB)\n", " Trainable params: 225,034 (879.04 KB)\n", 7},
        {"mlp", " Total params: 101,770 (397.54 KB)\n", " Trainable params: 101,770 (397.54 KB)\n", 3},
    };
    for (int i = 0; i < 3; i++) {
        sn_model *m = NULL;
        CHECK_OK(sn_model_preset(c[i].name, &m));
        if (!m) continue;
        CHECK(sn_model_layer_count(m) == c[i].layers, "%s: %d layers", c[i].name, sn_model_layer_count(m));
        char *before = summary_of(m);
        CHECK_HAS(before, "0 (unbuilt)");
        CHECK_HAS(before, " Total params: 0 (0.00 B)\n");
        free(before);
        CHECK_OK(sn_model_build(m, &img, 1));
        char *s = summary_of(m);
        CHECK_HAS(s, c[i].total);
        CHECK_HAS(s, c[i].trainable);
        CHECK_HAS(s, " Non-trainable params: 0 (0.00 B)\n");
        if (i == 0) printf("%s", s ? s : "");
        free(s);
        sn_model_free(m);
    }
    /* small_cnn: the whole table as Keras 3 prints it on an 80-column terminal */
    sn_model *m = NULL;
    CHECK_OK(sn_model_preset("small_cnn", &m));
    if (m && sn_model_build(m, &img, 1) == SN_OK) {
        static const char *want =
            "Model: \"small_cnn\"\n"
            "┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┓\n"
            "┃ Layer (type)                    ┃ Output Shape           ┃       Param # ┃\n"
            "┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━┩\n"
            "│ conv2d (Conv2D)                 │ (None, 26, 26, 32)     │           320 │\n"
            "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
            "│ max_pooling2d (MaxPooling2D)    │ (None, 13, 13, 32)     │             0 │\n"
            "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
            "│ conv2d_1 (Conv2D)               │ (None, 11, 11, 64)     │        18,496 │\n"
            "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
            "│ max_pooling2d_1 (MaxPooling2D)  │ (None, 5, 5, 64)       │             0 │\n"
            "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
            "│ flatten (Flatten)               │ (None, 1600)           │             0 │\n"
            "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
            "│ dense (Dense)                   │ (None, 128)            │       204,928 │\n"
            "├─────────────────────────────────┼────────────────────────┼───────────────┤\n"
            "│ dense_1 (Dense)                 │ (None, 10)             │         1,290 │\n"
            "└─────────────────────────────────┴────────────────────────┴───────────────┘\n"
            " Total params: 225,034 (879.04 KB)\n"
            " Trainable params: 225,034 (879.04 KB)\n"
            " Non-trainable params: 0 (0.00 B)\n";
        char *s = summary_of(m);
        CHECK(s && strcmp(s, want) == 0, "small_cnn summary:\n%s\nwanted:\n%s", s ? s : "", want);
        free(s);
        CHECK(sn_model_param_count(m, false) == 225034, "param count");
        sn_shape os = sn_model_layer_output_shape(m, 3);
        CHECK(os.ndim == 3 && os.dim[0] == 5 && os.dim[2] == 64, "layer 3 output shape");
        CHECK(strcmp(sn_model_layer_class(m, 5), "Dense") == 0, "layer 5 class");
        sn_node v[4];
        CHECK(sn_model_layer_variables(m, 5, v, 4) == 2 &&
              strcmp(sn_node_name(sn_model_graph(m), v[0]), "dense/kernel") == 0 &&
              strcmp(sn_node_name(sn_model_graph(m), v[1]), "dense/bias") == 0, "dense variables");
        CHECK(sn_model_layer_variables(m, 1, v, 4) == 0, "pool has no variables");
        CHECK(sn_model_layer_name(m, 7) == NULL, "layer 7 of 7");
    }
    sn_model_free(m);
    m = (sn_model *)1;
    CHECK_ERR(sn_model_preset("resnet", &m), SN_ERR_NOT_FOUND, "'tpu_guide_cnn', 'small_cnn', 'mlp'");
    CHECK(m == NULL, "unknown preset leaves *out NULL");
}

static void test_names(void) {
    sn_model *m = sn_sequential_new(NULL);
    sn_layer *head = sn_layer_dense(3, SN_ACT_NONE);
    CHECK_OK(sn_layer_set_name(head, "head"));
    CHECK_OK(sn_model_add(m, sn_layer_dense(8, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_batch_norm()));
    CHECK_OK(sn_model_add(m, sn_layer_dense(8, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_dropout(0.5)));
    CHECK_OK(sn_model_add(m, sn_layer_dense(4, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, head));
    const char *want[] = {"dense", "batch_normalization", "dense_1", "dropout", "dense_2", "head"};
    for (int i = 0; i < 6; i++)
        CHECK(strcmp(sn_model_layer_name(m, i), want[i]) == 0, "layer %d named '%s', wanted '%s'", i,
              sn_model_layer_name(m, i), want[i]);
    sn_layer *dup = sn_layer_flatten();
    sn_layer_set_name(dup, "dense_1");
    CHECK_ERR(sn_model_add(m, dup), SN_ERR_INVALID, "'dense_1' already exists");
    CHECK_OK(sn_model_build(m, &(sn_shape)S1(5), 3));
    char *s = summary_of(m);
    CHECK_HAS(s, "│ batch_normalization             │ (None, 8)              │            32 │") ;
    free(s);
    s = summary_of(m);
    /* BN: 16 trainable (gamma, beta) + 16 non-trainable; Dense 48 + 72 + 36 + 15 */
    CHECK_HAS(s, " Total params: 203 (812.00 B)\n");
    CHECK_HAS(s, " Trainable params: 187 (748.00 B)\n");
    CHECK_HAS(s, " Non-trainable params: 16 (64.00 B)\n");
    CHECK_HAS(s, "Model: \"sequential\"\n");
    free(s);
    sn_model_free(m);
}

static void expect_build_error(const char *what, sn_layer *first, sn_layer *second, sn_shape in,
                               const char *n1, const char *n2, const char *n3) {
    sn_model *m = sn_sequential_new(what);
    sn_model_add(m, first);
    if (second) sn_model_add(m, second);
    sn_status s = sn_model_build(m, &in, 1);
    const char *e = sn_last_error();
    CHECK(s == SN_ERR_SHAPE && strstr(e, n1) && strstr(e, n2) && strstr(e, n3),
          "%s: %s '%s' (wanted '%s', '%s', '%s')", what, sn_status_name(s), e, n1, n2, n3);
    CHECK(sn_model_graph(m) == NULL, "%s: a failed build leaves no graph", what);
    sn_model_free(m);
}

static void test_errors(void) {
    expect_build_error("conv on rank 1", sn_layer_conv2d(4, 3, 3, SN_ACT_NONE), NULL, (sn_shape)S1(784),
                       "layer 'conv2d' (Conv2D)", "(None, 784)", "(None, height, width, channels)");
    { /* Dense on images applies to the channels, as Keras: (None, 28, 28, 1) -> (..., 10) */
        sn_model *m = sn_sequential_new("dense on 4-D");
        CHECK_OK(sn_model_add(m, sn_layer_dense(10, SN_ACT_NONE)));
        CHECK_OK(sn_model_build(m, &(sn_shape)S3(28, 28, 1), 1));
        sn_shape o = sn_model_layer_output_shape(m, 0);
        CHECK(o.ndim == 3 && o.dim[0] == 28 && o.dim[1] == 28 && o.dim[2] == 10,
              "dense on 4-D: output rank %d", o.ndim);
        sn_model_free(m);
    }
    expect_build_error("pool too big", sn_layer_conv2d(2, 3, 3, SN_ACT_NONE), sn_layer_max_pool2d(3, 3),
                       (sn_shape)S3(4, 4, 1), "layer 'max_pooling2d' (MaxPooling2D)", "(None, 2, 2, 2)",
                       "3x3 pool");
    expect_build_error("kernel too big", sn_layer_conv2d(2, 5, 5, SN_ACT_NONE), NULL, (sn_shape)S3(4, 8, 1),
                       "layer 'conv2d'", "(None, 4, 8, 1)", "height >= 5");

    sn_model *m = sn_sequential_new("twice");
    CHECK_ERR(sn_model_build(m, &(sn_shape)S1(3), 1), SN_ERR_STATE, "no layers");
    sn_model_add(m, sn_layer_dense(2, SN_ACT_NONE));
    CHECK_ERR(sn_model_forward(m, 0, false, NULL, &(sn_node){0}), SN_ERR_STATE, "not built");
    CHECK_OK(sn_model_build(m, &(sn_shape)S1(3), 1));
    CHECK_ERR(sn_model_build(m, &(sn_shape)S1(3), 1), SN_ERR_STATE, "already built");
    CHECK_ERR(sn_model_add(m, sn_layer_flatten()), SN_ERR_STATE, "already built");
    sn_node x = sn_input(sn_model_graph(m), "x", SN_F32, &(sn_shape){.ndim = 2, .dim = {4, 5}}), y;
    CHECK_ERR(sn_model_forward(m, x, false, NULL, &y), SN_ERR_SHAPE, "[4, 5]");
    sn_model_free(m);
}

/* ---- weights round trip ------------------------------------------------------------------- */
typedef struct net {
    sn_model *m;
    sn_node x, y;
    sn_plan *p;
} net;

/* Conv2D -> BatchNormalization -> MaxPooling2D -> Flatten -> Dropout -> Dense(units): layers
 * with and without variables, trainable and not. */
static bool net_new(net *n, int64_t units, uint64_t seed) {
    memset(n, 0, sizeof *n);
    n->m = sn_sequential_new("roundtrip");
    sn_model_add(n->m, sn_layer_conv2d(4, 3, 3, SN_ACT_RELU));
    sn_model_add(n->m, sn_layer_batch_norm());
    sn_model_add(n->m, sn_layer_max_pool2d(2, 2));
    sn_model_add(n->m, sn_layer_flatten());
    sn_model_add(n->m, sn_layer_dropout(0.3));
    sn_model_add(n->m, sn_layer_dense(units, SN_ACT_SOFTMAX));
    sn_status s = sn_model_build(n->m, &(sn_shape)S3(8, 8, 1), seed);
    if (s == SN_OK) {
        sn_graph *g = sn_model_graph(n->m);
        n->x = sn_input(g, "x", SN_F32, &(sn_shape){.ndim = 4, .dim = {3, 8, 8, 1}});
        s = sn_model_forward(n->m, n->x, false, NULL, &n->y);
        if (s == SN_OK) s = sn_plan_new(&n->p, g, 1, &n->y, NULL);
        /* moving statistics away from 0 and 1, so that loading them matters */
        sn_rng r;
        sn_rng_init(&r, seed, 99);
        float *mm = sn_variable_data(g, n->m->layers[1]->vars[2]), *mv = sn_variable_data(g, n->m->layers[1]->vars[3]);
        for (int c = 0; c < 4; c++) {
            mm[c] = (float)(0.1 * sn_rng_normal(&r));
            mv[c] = (float)(0.5 + sn_rng_uniform(&r));
        }
    }
    CHECK(s == SN_OK, "net: %s", sn_last_error());
    return s == SN_OK;
}

static void net_free(net *n) {
    sn_plan_free(n->p);
    sn_model_free(n->m);
}

static void predict(net *n, const float *x, float *out) {
    CHECK_OK(sn_plan_set_input(n->p, n->x, x, sizeof(float) * 3 * 64));
    CHECK_OK(sn_plan_run(n->p, 1, NULL, NULL));
    memcpy(out, sn_plan_buffer(n->p, n->y), sizeof(float) * 3 * 10);
}

static void test_weights(void) {
    char path[] = "/tmp/sinter_test_model_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    float x[3 * 64], pa[30], pb[30], pc[30];
    sn_rng r;
    sn_rng_init(&r, 5, 0);
    for (int i = 0; i < 3 * 64; i++) x[i] = (float)sn_rng_uniform(&r);
    net a, b, c;
    if (net_new(&a, 10, 1) && net_new(&b, 10, 2) && net_new(&c, 12, 3)) {
        predict(&a, x, pa);
        predict(&b, x, pb);
        CHECK(memcmp(pa, pb, sizeof pa) != 0, "seeds 1 and 2 predict the same");
        CHECK_OK(sn_model_save_weights(a.m, path));
        CHECK_OK(sn_model_load_weights(b.m, path));
        predict(&b, x, pb);
        CHECK(memcmp(pa, pb, sizeof pa) == 0, "predictions differ after save + load");
        size_t ba, bb;
        const void *va = sn_graph_variable_buffer(a.m->g, &ba), *vb = sn_graph_variable_buffer(b.m->g, &bb);
        CHECK(ba == bb && memcmp(va, vb, ba) == 0, "variables differ after save + load");

        /* Dense(12) against a file with Dense(10): refused, naming the layer and both shapes */
        size_t bc;
        const void *vc = sn_graph_variable_buffer(c.m->g, &bc);
        void *before = malloc(bc);
        memcpy(before, vc, bc);
        predict(&c, x, pc);
        CHECK_ERR(sn_model_load_weights(c.m, path), SN_ERR_SHAPE, "layer 'dense' (Dense)");
        const char *e = sn_last_error();
        CHECK(strstr(e, "[36, 10]") && strstr(e, "[36, 12]"), "mismatch message lacks both shapes: '%s'", e);
        CHECK(memcmp(before, sn_graph_variable_buffer(c.m->g, &bc), bc) == 0,
              "a refused load changed the weights");
        free(before);
    }
    net_free(&a);
    net_free(&b);
    net_free(&c);
    sn_model *u = sn_sequential_new("unbuilt");
    sn_model_add(u, sn_layer_dense(2, SN_ACT_NONE));
    CHECK_ERR(sn_model_save_weights(u, path), SN_ERR_STATE, "not built");
    sn_model_free(u);
    unlink(path);
}

/* Whole model, f64 (see test_layers.c): Conv2D same -> BatchNormalization (training) ->
 * MaxPooling2D -> Conv2D -> AveragePooling2D -> Flatten -> Dropout -> Dense relu -> Dense,
 * sparse cross-entropy; the gradient over all trainable parameters checked in one random
 * direction d: (L(w + eps d) - L(w - eps d)) / 2 eps == grad . d. */
static void test_directional(void) {
    sn_model *m = sn_sequential_new("directional");
    m->dtype = SN_F64;
    sn_conv2d_layer_opts o = sn_conv2d_layer_defaults(4, 3, 3);
    o.padding = SN_PAD_SAME;
    o.activation = SN_ACT_TANH;
    sn_model_add(m, sn_layer_conv2d_ex(&o));
    sn_model_add(m, sn_layer_batch_norm());
    sn_model_add(m, sn_layer_max_pool2d(2, 2));
    sn_model_add(m, sn_layer_conv2d(5, 2, 2, SN_ACT_SIGMOID));
    sn_model_add(m, sn_layer_avg_pool2d(2, 2));
    sn_model_add(m, sn_layer_flatten());
    sn_model_add(m, sn_layer_dropout(0.2));
    sn_model_add(m, sn_layer_dense(6, SN_ACT_RELU));
    sn_model_add(m, sn_layer_dense(3, SN_ACT_NONE));
    CHECK_OK(sn_model_build(m, &(sn_shape)S3(6, 6, 2), 21));
    sn_graph *g = sn_model_graph(m);
    sn_node x = sn_input(g, "x", SN_F64, &(sn_shape){.ndim = 4, .dim = {4, 6, 6, 2}});
    sn_node lab = sn_input(g, "y", SN_I32, &(sn_shape)S1(4)), logits = SN_NONE;
    CHECK_OK(sn_model_forward(m, x, true, NULL, &logits));
    sn_node loss = sn_reduce_mean(g, sn_sparse_softmax_xent(g, logits, lab), 0, NULL, false);
    sn_node vars[16], grads[16], t[17] = {loss};
    int nv = sn_graph_variables(g, true, vars, 16);
    CHECK(nv == 10, "trainable variables: %d", nv);
    sn_plan *p = NULL;
    sn_status s = sn_gradients(g, loss, nv, vars, grads);
    for (int i = 0; i < nv; i++) t[1 + i] = grads[i];
    if (s == SN_OK) s = sn_plan_new(&p, g, 1 + nv, t, NULL);
    CHECK(s == SN_OK, "directional: %s", sn_last_error());
    if (s == SN_OK) {
        sn_rng r;
        sn_rng_init(&r, 3, 0);
        double *xv = sn_plan_buffer(p, x);
        for (int i = 0; i < 4 * 72; i++) xv[i] = sn_rng_normal(&r);
        int32_t *yv = sn_plan_buffer(p, lab);
        for (int i = 0; i < 4; i++) yv[i] = (int32_t)sn_rng_below(&r, 3);
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        double gd = 0;
        double *d[16], *w0[16];
        int64_t n[16];
        for (int i = 0; i < nv; i++) {
            sn_shape vs = sn_node_shape(g, vars[i]);
            n[i] = sn_shape_numel(&vs);
            d[i] = malloc(sizeof(double) * (size_t)n[i]);
            w0[i] = malloc(sizeof(double) * (size_t)n[i]);
            memcpy(w0[i], sn_variable_data(g, vars[i]), sizeof(double) * (size_t)n[i]);
            const double *gv = sn_plan_buffer(p, grads[i]);
            for (int64_t j = 0; j < n[i]; j++) {
                d[i][j] = sn_rng_normal(&r);
                gd += gv[j] * d[i][j];
            }
        }
        const double eps = 1e-6;
        double l[2];
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < nv; i++) {
                double *w = sn_variable_data(g, vars[i]);
                for (int64_t j = 0; j < n[i]; j++) w[j] = w0[i][j] + (k ? -eps : eps) * d[i][j];
            }
            sn_plan_set_step(p, 0); /* the same dropout mask */
            CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
            l[k] = *(double *)sn_plan_buffer(p, loss);
        }
        double num = (l[0] - l[1]) / (2 * eps), err = fabs(num - gd) / fmax(1.0, fabs(gd));
        CHECK(err < 1e-6, "whole-model directional derivative: analytic %.10g numeric %.10g", gd, num);
        printf("ok  whole model directional: analytic %.10g numeric %.10g\n", gd, num);
        for (int i = 0; i < nv; i++) {
            free(d[i]);
            free(w0[i]);
        }
    }
    sn_plan_free(p);
    sn_model_free(m);
}

int main(void) {
    test_directional();
    test_presets();
    test_names();
    test_errors();
    test_weights();
    return sn_test_finish("test_model");
}
