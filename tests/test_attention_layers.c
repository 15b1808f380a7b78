/* The attention layers (nn/layers/layers_attention.c): gradients by finite differences in double
 * (tolerance 1e-5 as test_layers.c's for layers whose loss sums many products)
 * (LayerNormalization with and without center/scale, MultiHeadAttention plain and causal,
 * the internal decoder block), MultiHeadAttention's forward against Keras's einsums written
 * out in double (checks the [d, heads, key_dim] / [heads, key_dim, d] layouts and the
 * 1/sqrt(key_dim) scale) and with value_dim != key_dim and output_shape (the materialised
 * path), attention dropout (inference equals dropout=0 bit for bit, different masks per
 * step, the mean of many training steps is the undropped output; its gradient is checked
 * with one fixed mask), constructor refusals, the Keras config round trip of both layers
 * through a .keras file (same predictions), config refusals, the char_transformer
 * presets' shapes, generation with the cache, and the presets' Keras twin (same logits; its
 * MultiHeadAttention calls as Keras writes them, and the Functional reader's refusals of
 * cross-attention, an attention_mask tensor and use_causal_mask differing between calls). */
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#include "layer_test_util.h"
#include "nn/layers/layers_attention.h"
#include "nn/keras/model_config.h"
#include "sinter/io.h"

static char dir[256];

static void test_grads(void) {
    grad_case("LayerNormalization", sn_layer_layer_norm(), (sn_shape)S2(3, 5), 2, false, 1e-5);
    sn_layer_norm_opts o = sn_layer_norm_defaults();
    o.center = false;
    grad_case("LayerNormalization no center", sn_layer_layer_norm_ex(&o), (sn_shape)S1(4), 3,
              false, 1e-5);
    o = sn_layer_norm_defaults();
    o.scale = false;
    grad_case("LayerNormalization no scale", sn_layer_layer_norm_ex(&o), (sn_shape)S2(2, 4), 2,
              false, 1e-5);
    sn_mha_layer_opts m = sn_mha_layer_defaults(2, 3);
    grad_case("MultiHeadAttention", sn_layer_mha_ex(&m), (sn_shape)S2(4, 5), 2, false, 1e-5);
    m.use_causal_mask = true;
    m.use_bias = false;
    grad_case("MultiHeadAttention causal no bias", sn_layer_mha_ex(&m), (sn_shape)S2(5, 4), 2,
              false, 1e-5);
    m = sn_mha_layer_defaults(2, 3);
    m.value_dim = 2;
    m.output_dim = 3;
    grad_case("MultiHeadAttention value_dim 2 output_shape 3", sn_layer_mha_ex(&m),
              (sn_shape)S2(4, 5), 2, false, 1e-5);
    m.use_causal_mask = true;
    m.dropout = 0.4;
    grad_case("MultiHeadAttention causal value_dim 2 dropout 0.4 (training, one mask)",
              sn_layer_mha_ex(&m), (sn_shape)S2(4, 5), 2, true, 1e-5);
    m = sn_mha_layer_defaults(2, 3);
    m.dropout = 0.3;
    grad_case("MultiHeadAttention dropout 0.3 (training, one mask)", sn_layer_mha_ex(&m),
              (sn_shape)S2(4, 5), 2, true, 1e-5);
    m.use_causal_mask = true; /* the fused kernel's dropout (value_dim = key_dim) */
    grad_case("MultiHeadAttention causal dropout 0.3 (training, one mask)", sn_layer_mha_ex(&m),
              (sn_shape)S2(5, 5), 2, true, 1e-5);
    grad_case("TransformerBlock causal", sn_layer_transformer_block(2, 4, 8, true, 1e-5),
              (sn_shape)S2(3, 4), 2, false, 1e-5);
}

/* Causal scaled dot-product attention in double, Keras's softmax(q k^T / sqrt(D)) v per batch
 * row and head: q, k are [B, T, H, D], v and o are [B, T, H, Dv]. */
static void causal_attention(int B, int T, int H, int D, int Dv, const double *q, const double *k,
                             const double *v, double *o) {
#define AT(t_, b_, i_, h_, e_, n_) t_[(((size_t)(b_) * T + (i_)) * H + (h_)) * (n_) + (e_)]
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                double s[T], mx = -1e300, sum = 0;
                for (int j = 0; j <= i; j++) {
                    s[j] = 0;
                    for (int e = 0; e < D; e++)
                        s[j] += AT(q, b, i, h, e, D) / sqrt((double)D) * AT(k, b, j, h, e, D);
                    if (s[j] > mx) mx = s[j];
                }
                for (int j = 0; j <= i; j++) sum += (s[j] = exp(s[j] - mx));
                for (int e = 0; e < Dv; e++) {
                    AT(o, b, i, h, e, Dv) = 0;
                    for (int j = 0; j <= i; j++)
                        AT(o, b, i, h, e, Dv) += s[j] / sum * AT(v, b, j, h, e, Dv);
                }
            }
#undef AT
}

/* Keras: q = einsum("abc,cde->abde", x, Wq) + bq (likewise k, v); scores =
 * einsum("aecd,abcd->acbe", k, q / sqrt(D)); softmax over e; o = einsum("acbe,aecd->abcd",
 * P, v); y = einsum("abcd,cde->abe", o, Wo) + bo. */
static void test_mha_values(void) {
    enum { B = 2, T = 3, d = 4, H = 2, D = 3 };
    sn_mha_layer_opts mo = sn_mha_layer_defaults(H, D);
    mo.use_causal_mask = true;
    fixture f;
    if (!fx_build(&f, sn_layer_mha_ex(&mo), (sn_shape)S2(T, d), 5, SN_F32) || !fx_plan(&f, B, false)) {
        fx_free(&f);
        return;
    }
    sn_rng r;
    sn_rng_init(&r, 3, 0);
    float w[8][d * H * D], x[B * T * d];
    for (int j = 0; j < 8; j++) {
        for (int i = 0; i < d * H * D; i++) w[j][i] = (float)(0.5 * sn_rng_normal(&r));
        set_var(&f, j, w[j]);
    }
    for (int i = 0; i < B * T * d; i++) x[i] = (float)sn_rng_normal(&r);
    const float *y = run(&f, x);
    double q[B][T][H][D], k[B][T][H][D], v[B][T][H][D], o[B][T][H][D];
    double (*pr[3])[T][H][D] = {q, k, v};
    for (int p = 0; p < 3; p++)
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                for (int h = 0; h < H; h++)
                    for (int e = 0; e < D; e++) {
                        double s = w[2 * p + 1][h * D + e];
                        for (int c = 0; c < d; c++)
                            s += x[(b * T + t) * d + c] * w[2 * p][(c * H + h) * D + e];
                        pr[p][b][t][h][e] = s;
                    }
    causal_attention(B, T, H, D, D, &q[0][0][0][0], &k[0][0][0][0], &v[0][0][0][0],
                     &o[0][0][0][0]);
    float want[B * T * d];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < d; c++) {
                double s = w[7][c];
                for (int h = 0; h < H; h++)
                    for (int e = 0; e < D; e++) s += o[b][t][h][e] * w[6][(h * D + e) * d + c];
                want[(b * T + t) * d + c] = (float)s;
            }
    expect("MultiHeadAttention vs Keras's einsums", y, want, B * T * d, 1e-5);
    fx_free(&f);
}

/* value_dim != key_dim and output_shape (the materialised path), causal, against Keras's
 * einsums written out in double: value kernel [d, H, Dv], output kernel [H, Dv, out]. */
static void test_mha_value_dim(void) {
    enum { B = 2, T = 4, d = 5, H = 2, D = 3, Dv = 2, O = 3 };
    sn_mha_layer_opts mo = sn_mha_layer_defaults(H, D);
    mo.use_causal_mask = true;
    mo.value_dim = Dv;
    mo.output_dim = O;
    fixture f;
    if (!fx_build(&f, sn_layer_mha_ex(&mo), (sn_shape)S2(T, d), 5, SN_F32) ||
        !fx_plan(&f, B, false)) {
        fx_free(&f);
        return;
    }
    sn_shape ys = sn_node_shape(f.m->g, f.y);
    CHECK(ys.ndim == 3 && ys.dim[2] == O, "output_shape %d: output is [%lld, %lld, %lld]", O,
          (long long)ys.dim[0], (long long)ys.dim[1], (long long)ys.dim[2]);
    const int64_t sz[8] = {d * H * D, H * D, d * H * D, H * D, d * H * Dv, H * Dv, H * Dv * O, O};
    sn_rng r;
    sn_rng_init(&r, 4, 0);
    float w[8][d * H * D], x[B * T * d];
    for (int j = 0; j < 8; j++) {
        sn_shape vs = sn_node_shape(f.m->g, f.l->vars[j]);
        CHECK(sn_shape_numel(&vs) == sz[j], "variable %d has %lld values, expected %lld", j,
              (long long)sn_shape_numel(&vs), (long long)sz[j]);
        for (int64_t i = 0; i < sz[j]; i++) w[j][i] = (float)(0.5 * sn_rng_normal(&r));
        set_var(&f, j, w[j]);
    }
    for (int i = 0; i < B * T * d; i++) x[i] = (float)sn_rng_normal(&r);
    const float *y = run(&f, x);
    double q[B][T][H][D], k[B][T][H][D], v[B][T][H][Dv], o[B][T][H][Dv];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                for (int e = 0; e < D; e++) {
                    double sq = w[1][h * D + e], sk = w[3][h * D + e];
                    for (int c = 0; c < d; c++) {
                        sq += x[(b * T + t) * d + c] * w[0][(c * H + h) * D + e];
                        sk += x[(b * T + t) * d + c] * w[2][(c * H + h) * D + e];
                    }
                    q[b][t][h][e] = sq;
                    k[b][t][h][e] = sk;
                }
                for (int e = 0; e < Dv; e++) {
                    double sv = w[5][h * Dv + e];
                    for (int c = 0; c < d; c++) sv += x[(b * T + t) * d + c] * w[4][(c * H + h) * Dv + e];
                    v[b][t][h][e] = sv;
                }
            }
    causal_attention(B, T, H, D, Dv, &q[0][0][0][0], &k[0][0][0][0], &v[0][0][0][0],
                     &o[0][0][0][0]);
    float want[B * T * O];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < O; c++) {
                double s = w[7][c];
                for (int h = 0; h < H; h++)
                    for (int e = 0; e < Dv; e++) s += o[b][t][h][e] * w[6][(h * Dv + e) * O + c];
                want[(b * T + t) * O + c] = (float)s;
            }
    expect("MultiHeadAttention value_dim 2 output_shape 3 vs Keras's einsums", y, want,
           B * T * O, 1e-5);
    fx_free(&f);
}

/* Attention dropout: at inference the layer is exactly the dropout=0 one (the fused kernel
 * runs); in training the masks change from step to step and the mean over many steps is
 * the undropped output (inverted dropout's expected value). */
static void test_mha_dropout(void) {
    enum { B = 2, T = 4, d = 4, N = 4000 };
    sn_mha_layer_opts a = sn_mha_layer_defaults(2, 2), b = a;
    b.dropout = 0.5;
    fixture f0, f1, f2;
    bool ok = fx_build(&f0, sn_layer_mha_ex(&a), (sn_shape)S2(T, d), 9, SN_F32) &&
              fx_plan(&f0, B, false);
    ok = fx_build(&f1, sn_layer_mha_ex(&b), (sn_shape)S2(T, d), 9, SN_F32) &&
         fx_plan(&f1, B, false) && ok;
    ok = fx_build(&f2, sn_layer_mha_ex(&b), (sn_shape)S2(T, d), 9, SN_F32) &&
         fx_plan(&f2, B, true) && ok;
    if (ok) {
        sn_rng r;
        sn_rng_init(&r, 6, 0);
        float w[2 * 2 * d], x[B * T * d], y0[B * T * d], y1[B * T * d];
        for (int j = 0; j < 8; j++) {
            sn_shape vs = sn_node_shape(f0.m->g, f0.l->vars[j]);
            for (int64_t i = 0; i < sn_shape_numel(&vs); i++) w[i] = (float)(0.7 * sn_rng_normal(&r));
            set_var(&f0, j, w);
            set_var(&f1, j, w);
            set_var(&f2, j, w);
        }
        for (int i = 0; i < B * T * d; i++) x[i] = (float)sn_rng_normal(&r);
        memcpy(y0, run(&f0, x), sizeof y0);
        memcpy(y1, run(&f1, x), sizeof y1);
        CHECK(!memcmp(y0, y1, sizeof y0), "dropout 0.5 at inference differs from dropout 0");
        double mean[B * T * d] = {0}, sq[B * T * d] = {0}, first[B * T * d];
        int changed = 0;
        for (int s = 0; s < N; s++) {
            const float *y = run(&f2, x);
            for (int i = 0; i < B * T * d; i++) {
                if (s == 0) first[i] = y[i];
                else if (s == 1) changed += y[i] != first[i];
                mean[i] += y[i] / (double)N;
                sq[i] += (double)y[i] * y[i] / (double)N;
            }
        }
        CHECK(changed > 0, "dropout: the second training step gave the first's output");
        /* each output's mean against the undropped one in standard errors (sample spread /
         * sqrt(N)): 5 of them is far outside chance for 32 outputs, and the seeds are fixed */
        double worst = 0, worst_abs = 0;
        for (int i = 0; i < B * T * d; i++) {
            double se = sqrt(fmax(sq[i] - mean[i] * mean[i], 1e-12) / N);
            worst = fmax(worst, fabs(mean[i] - y0[i]) / se);
            worst_abs = fmax(worst_abs, fabs(mean[i] - y0[i]));
        }
        CHECK(worst < 5, "dropout: the mean of %d training outputs is %.3g standard errors "
              "from the undropped output (bound 5)", N, worst);
        fprintf(stderr, "  dropout 0.5: mean of %d training steps within %.3g standard errors "
                "(%.3g absolute) of inference\n", N, worst, worst_abs);
    }
    fx_free(&f0);
    fx_free(&f1);
    fx_free(&f2);
}

/* The fused kernel's dropout against the materialised path's (the graph ops the layer uses
 * for value_dim != key_dim: scores, softmax, sn_dropout on [B, H, Tq, Tk], P v) on the same
 * seed, mask key and step: the masks are the same draws, so the outputs and the gradients of
 * q, k and v agree to rounding (the fused kernel never stores a mask). Also the undropped
 * output, to show that dropout dropped. */
static void fused_vs_materialised(bool causal, int64_t T, int64_t step) {
    enum { B = 2, H = 2, D = 8 };
    const double rate = 0.3, scale = 1.0 / sqrt((double)D);
    const uint64_t seed = 4242;
    sn_graph *g = sn_graph_new();
    sn_shape s4 = {.ndim = 4, .dim = {B, T, H, D}};
    sn_node q = sn_input(g, "q", SN_F32, &s4), k = sn_input(g, "k", SN_F32, &s4),
            v = sn_input(g, "v", SN_F32, &s4), r = sn_input(g, "r", SN_F32, &s4);
    sn_node fused = sn_attention_dropout(g, q, k, v, SN_NONE, scale, causal, rate, seed);
    if (fused != SN_NONE) g->nodes[fused].attr.attn.drop_node = 0; /* as the layer keys it */
    sn_node plain = sn_attention(g, q, k, v, scale, causal, 0);
    const int perm[4] = {0, 2, 1, 3};
    sn_node sc = sn_mul(g, sn_matmul(g, sn_transpose(g, q, perm), sn_transpose(g, k, perm),
                                     false, true), sn_scalar(g, SN_F32, scale));
    if (causal) {
        float *c = malloc(sizeof *c * (size_t)(T * T));
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < T; j++) c[i * T + j] = j <= i;
        sn_node m = sn_const(g, SN_F32, &(sn_shape){.ndim = 2, .dim = {T, T}}, c);
        free(c);
        sc = sn_add(g, sn_mul(g, sc, m), sn_mul(g, sn_sub(g, m, sn_scalar(g, SN_F32, 1.0)),
                                                sn_scalar(g, SN_F32, 1e9)));
    }
    sn_node p = sn_dropout(g, sn_softmax(g, sc, 3), rate, seed);
    if (p != SN_NONE) g->nodes[p].attr.dropout.mask_node = 0;
    sn_node mat = sn_transpose(g, sn_matmul(g, p, sn_transpose(g, v, perm), false, false), perm);
    sn_node lf = sn_reduce_sum(g, sn_mul(g, fused, r), 0, NULL, false);
    sn_node lm = sn_reduce_sum(g, sn_mul(g, mat, r), 0, NULL, false);
    sn_node wrt[3] = {q, k, v}, gf[3], gm[3];
    CHECK_OK(sn_gradients(g, lf, 3, wrt, gf));
    CHECK_OK(sn_gradients(g, lm, 3, wrt, gm));
    sn_node tg[9] = {fused, mat, plain, gf[0], gf[1], gf[2], gm[0], gm[1], gm[2]};
    sn_plan *pl = NULL;
    CHECK_OK(sn_plan_new(&pl, g, 9, tg, NULL));
    if (!pl) {
        sn_graph_free(g);
        return;
    }
    sn_rng rng;
    sn_rng_init(&rng, 77, (uint64_t)T);
    int64_t n = sn_shape_numel(&s4);
    sn_node ins[4] = {q, k, v, r};
    for (int i = 0; i < 4; i++) {
        float *x = sn_plan_buffer(pl, ins[i]);
        for (int64_t j = 0; j < n; j++) x[j] = (float)sn_rng_normal(&rng);
    }
    sn_plan_set_step(pl, step);
    CHECK_OK(sn_plan_run(pl, 1, NULL, NULL));
    double worst = 0, moved = 0;
    for (int t = 0; t < 4; t++) {
        const float *a = sn_plan_buffer(pl, t == 0 ? fused : gf[t - 1]);
        const float *b = sn_plan_buffer(pl, t == 0 ? mat : gm[t - 1]);
        for (int64_t j = 0; j < n; j++) worst = fmax(worst, fabs(a[j] - b[j]) / (1 + fabs(b[j])));
    }
    const float *a = sn_plan_buffer(pl, fused), *u = sn_plan_buffer(pl, plain);
    for (int64_t j = 0; j < n; j++) moved = fmax(moved, fabs(a[j] - u[j]));
    CHECK(worst < 1e-5, "fused dropout (T %lld%s, step %lld) differs from the materialised "
          "path's by %.3g (bound 1e-5)", (long long)T, causal ? " causal" : "", (long long)step,
          worst);
    CHECK(moved > 0.1, "fused dropout (T %lld) moved the output by only %.3g", (long long)T,
          moved);
    fprintf(stderr, "  fused dropout T %lld%s step %lld: output and dq, dk, dv within %.3g of "
            "the materialised path (undropped output %.3g away)\n", (long long)T,
            causal ? " causal" : "", (long long)step, worst, moved);
    sn_plan_free(pl);
    sn_graph_free(g);
}

static void test_fused_dropout(void) {
    fused_vs_materialised(false, 5, 0);
    fused_vs_materialised(true, 5, 3);
    fused_vs_materialised(false, 70, 11);
    fused_vs_materialised(true, 130, 1000003);
}

static void test_refusals(void) {
    sn_mha_layer_opts m = sn_mha_layer_defaults(2, 8);
    m.dropout = 1;
    CHECK(sn_layer_mha_ex(&m) == NULL && strstr(sn_last_error(), "dropout 1"),
          "dropout: '%s'", sn_last_error());
    m = sn_mha_layer_defaults(2, 8);
    m.value_dim = -4;
    CHECK(sn_layer_mha_ex(&m) == NULL && strstr(sn_last_error(), "value_dim -4"),
          "value_dim: '%s'", sn_last_error());
    m = sn_mha_layer_defaults(0, 8);
    CHECK(sn_layer_mha_ex(&m) == NULL && strstr(sn_last_error(), "num_heads 0"),
          "num_heads: '%s'", sn_last_error());
    sn_model *mm = sn_sequential_new("t");
    sn_model_add(mm, sn_layer_mha_ex(&(sn_mha_layer_opts){.num_heads = 2, .key_dim = 4,
                                                          .use_bias = true}));
    CHECK_ERR(sn_model_build(mm, &(sn_shape)S1(8), 1), SN_ERR_SHAPE, "(None, steps, features)");
    sn_model_free(mm);
}

static sn_tensor *rows(int64_t b, int64_t t, int64_t c) {
    sn_tensor *x = NULL;
    sn_tensor_new(&x, SN_F32, &(sn_shape){.ndim = 3, .dim = {b, t, c}});
    float *p = sn_tensor_data(x);
    for (int64_t i = 0; i < b * t * c; i++) p[i] = (float)sin(0.37 * (double)i);
    return x;
}

/* Dense -> LayerNormalization -> MultiHeadAttention -> Dense saved as .keras and read back:
 * the same config and the same predictions; then fields sinter refuses. */
static void test_config_round_trip(void) {
    sn_model *m = sn_sequential_new("attn");
    sn_mha_layer_opts mo = sn_mha_layer_defaults(2, 4);
    sn_layer_norm_opts lo = sn_layer_norm_defaults();
    lo.epsilon = 1e-5;
    sn_model_add(m, sn_layer_dense(8, SN_ACT_GELU));
    sn_model_add(m, sn_layer_layer_norm_ex(&lo));
    sn_model_add(m, sn_layer_mha_ex(&mo));
    sn_model_add(m, sn_layer_dense(3, SN_ACT_NONE));
    CHECK_OK(sn_model_build(m, &(sn_shape)S2(5, 6), 4));
    sn_tensor *x = rows(2, 5, 6), *y0 = NULL, *y1 = NULL;
    CHECK_OK(sn_model_predict(m, x, &y0));
    char path[300];
    snprintf(path, sizeof path, "%s/attn.keras", dir);
    CHECK_OK(sn_model_save(m, path));
    sn_model *r = NULL;
    sn_model_file_info info;
    CHECK_OK(sn_model_load(path, 9, &r, &info));
    if (r) {
        CHECK_OK(sn_model_predict(r, x, &y1));
        if (y0 && y1)
            expect("predictions after the .keras round trip", sn_tensor_cdata(y1),
                   sn_tensor_cdata(y0), sn_tensor_numel(y0), 0);
        sn_model_free(r);
    }
    /* refusals: the layer's config edited one field at a time */
    json_t *cfg = sn_model_to_config(m);
    json_t *layers = cfg ? json_object_get(json_object_get(cfg, "config"), "layers") : NULL;
    json_t *ln = NULL, *mha = NULL;
    for (size_t i = 0; layers && i < json_array_size(layers); i++) {
        const char *cls = json_string_value(json_object_get(json_array_get(layers, i), "class_name"));
        json_t *c = json_object_get(json_array_get(layers, i), "config");
        if (cls && !strcmp(cls, "LayerNormalization")) ln = c;
        if (cls && !strcmp(cls, "MultiHeadAttention")) mha = c;
    }
    CHECK(ln && mha, "config has no LayerNormalization or MultiHeadAttention");
    if (ln && mha) {
        CHECK(json_integer_value(json_object_get(mha, "key_dim")) == 4 &&
                  json_integer_value(json_object_get(mha, "num_heads")) == 2 &&
                  json_real_value(json_object_get(ln, "epsilon")) == 1e-5,
              "written fields differ");
        struct { json_t *c; const char *k; json_t *v; const char *needle; } bad[] = {
            {mha, "dropout", json_real(1.0), "dropout"},
            {mha, "output_shape", json_pack("[i, i]", 2, 3), "output_shape"},
            {mha, "attention_axes", json_pack("[i]", 2), "attention_axes"},
            {mha, "use_gate", json_true(), "use_gate"},
            {mha, "sliding_window", json_integer(4), "sliding_window"},
            {ln, "rms_scaling", json_true(), "rms_scaling"},
            {ln, "axis", json_integer(1), "field 'axis'"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            json_t *old = json_deep_copy(json_object_get(bad[i].c, bad[i].k));
            json_object_set_new(bad[i].c, bad[i].k, bad[i].v);
            sn_model *z = NULL;
            sn_status s = sn_model_from_config(cfg, 1, false, &z, NULL);
            CHECK(s != SN_OK && strstr(sn_last_error(), bad[i].needle),
                  "%s: %s '%s'", bad[i].k, sn_status_name(s), sn_last_error());
            sn_model_free(z);
            json_object_set_new(bad[i].c, bad[i].k, old);
        }
        sn_model *z = NULL;
        CHECK_OK(sn_model_from_config(cfg, 1, false, &z, NULL));
        sn_model_free(z);
    }
    json_decref(cfg);
    sn_tensor_free(x);
    sn_tensor_free(y0);
    sn_tensor_free(y1);
    sn_model_free(m);
}

/* The configs Keras 3.15.1 writes (get_config of a built LayerNormalization and of a
 * MultiHeadAttention(2, 4) called on [B, 5, 8]) read into the same layers, and sinter's
 * writer gives back the same fields. */
static const char *const keras_ln =
    "{\"name\": \"layer_normalization\", \"trainable\": true, \"dtype\": {\"module\": \"keras\", "
    "\"class_name\": \"DTypePolicy\", \"config\": {\"name\": \"float32\"}, \"registered_name\": "
    "null}, \"axis\": [-1], \"epsilon\": 0.001, \"center\": true, \"scale\": true, \"rms_scaling\": "
    "false, \"beta_initializer\": {\"module\": \"keras.initializers\", \"class_name\": \"Zeros\", "
    "\"config\": {}, \"registered_name\": null}, \"gamma_initializer\": {\"module\": "
    "\"keras.initializers\", \"class_name\": \"Ones\", \"config\": {}, \"registered_name\": null}, "
    "\"beta_regularizer\": null, \"gamma_regularizer\": null, \"beta_constraint\": null, "
    "\"gamma_constraint\": null}";
static const char *const keras_mha =
    "{\"name\": \"multi_head_attention\", \"trainable\": true, \"dtype\": {\"module\": \"keras\", "
    "\"class_name\": \"DTypePolicy\", \"config\": {\"name\": \"float32\"}, \"registered_name\": "
    "null}, \"num_heads\": 2, \"key_dim\": 4, \"value_dim\": 4, \"dropout\": 0.0, \"use_bias\": true, "
    "\"use_gate\": false, \"output_shape\": null, \"attention_axes\": [1], \"sliding_window\": null, "
    "\"kernel_initializer\": {\"module\": \"keras.initializers\", \"class_name\": "
    "\"GlorotUniform\", \"config\": {\"seed\": null, \"input_axes\": null, \"output_axes\": null}, "
    "\"registered_name\": null}, \"bias_initializer\": {\"module\": \"keras.initializers\", "
    "\"class_name\": \"Zeros\", \"config\": {}, \"registered_name\": null}, \"kernel_regularizer\": "
    "null, \"bias_regularizer\": null, \"activity_regularizer\": null, \"kernel_constraint\": null, "
    "\"bias_constraint\": null, \"seed\": null}";

/* MultiHeadAttention(2, 4, value_dim=3, output_shape=7, dropout=0.1) as Keras 3.15.1 writes
 * it (output_shape=7 is written [7]). */
static const char *const keras_mha_vdim =
    "{\"name\": \"multi_head_attention\", \"trainable\": true, \"dtype\": {\"module\": \"keras\", "
    "\"class_name\": \"DTypePolicy\", \"config\": {\"name\": \"float32\"}, \"registered_name\": "
    "null}, \"num_heads\": 2, \"key_dim\": 4, \"value_dim\": 3, \"dropout\": 0.1, \"use_bias\": true, "
    "\"use_gate\": false, \"output_shape\": [7], \"attention_axes\": [1], \"sliding_window\": null, "
    "\"kernel_initializer\": {\"module\": \"keras.initializers\", \"class_name\": "
    "\"GlorotUniform\", \"config\": {\"seed\": null, \"input_axes\": null, \"output_axes\": null}, "
    "\"registered_name\": null}, \"bias_initializer\": {\"module\": \"keras.initializers\", "
    "\"class_name\": \"Zeros\", \"config\": {}, \"registered_name\": null}, \"kernel_regularizer\": "
    "null, \"bias_regularizer\": null, \"activity_regularizer\": null, \"kernel_constraint\": null, "
    "\"bias_constraint\": null, \"seed\": null}";

static void test_keras_configs(void) {
    const char *cls[3] = {"LayerNormalization", "MultiHeadAttention", "MultiHeadAttention"},
               *txt[3] = {keras_ln, keras_mha, keras_mha_vdim};
    for (int i = 0; i < 3; i++) {
        json_error_t e;
        json_t *c = json_loads(txt[i], 0, &e);
        CHECK(c != NULL, "fixture %s: %s", cls[i], e.text);
        if (!c) continue;
        sn_cfg_state st = {0};
        sn_layer *l = NULL;
        CHECK_OK(sn_cfg_read_layer(cls[i], c, &st, &l));
        if (l) {
            sn_model *m = sn_sequential_new("k");
            sn_model_add(m, l);
            CHECK_OK(sn_model_build(m, &(sn_shape)S2(5, 8), 1));
            json_t *w = sn_cfg_write_layer(l, false);
            const char *k;
            json_t *v;
            json_object_foreach(c, k, v) { /* every field Keras wrote, written back the same */
                json_t *mine = w ? json_object_get(w, k) : NULL;
                /* initializers: the same class (sinter's shared writer leaves out the
                 * input_axes/output_axes: null that Keras 3.15 adds to every VarianceScaling,
                 * Dense's too; Keras reads either) */
                bool init = strstr(k, "_initializer") != NULL;
                bool same = mine && (init ? json_equal(json_object_get(mine, "class_name"),
                                                       json_object_get(v, "class_name"))
                                          : json_equal(mine, v));
                char a[256], b[256];
                CHECK(same, "%s field '%s': Keras %s, sinter %s", cls[i], k,
                      sn_cfg_show(v, a, sizeof a), mine ? sn_cfg_show(mine, b, sizeof b) : "absent");
            }
            CHECK(w && json_object_size(w) == json_object_size(c), "%s: %zu fields written, Keras "
                  "%zu", cls[i], w ? json_object_size(w) : 0, json_object_size(c));
            json_decref(w);
            sn_model_free(m);
        }
        json_decref(c);
    }
}

static void test_presets(void) {
    static const struct { const char *name; int64_t ctx, width; } p[] = {
        {"char_transformer_small", 64, 128}, {"char_transformer", 256, 384}};
    for (int i = 0; i < 2; i++) {
        CHECK(sn_model_preset_text_context(p[i].name) == p[i].ctx, "%s context", p[i].name);
        sn_model *m = NULL;
        CHECK_OK(sn_model_preset_text(p[i].name, 65, &m));
        if (!m) continue;
        CHECK_OK(sn_model_build(m, &(sn_shape)S1(p[i].ctx), 1));
        sn_shape os = sn_model_output_shape(m);
        CHECK(os.ndim == 2 && os.dim[0] == p[i].ctx && os.dim[1] == 65, "%s output shape", p[i].name);
        sn_model_free(m);
        /* a longer input than the context has no position embedding */
        CHECK_OK(sn_model_preset_text(p[i].name, 65, &m));
        CHECK_ERR(sn_model_build(m, &(sn_shape)S1(p[i].ctx + 1), 1), SN_ERR_SHAPE,
                  "sequence_length");
        sn_model_free(m);
    }
    sn_model *m = NULL;
    CHECK_ERR(sn_model_preset_text("char_transformer_small", 1, &m), SN_ERR_INVALID, ">= 2");
}

/* Generation: a small char_transformer-shaped model (context 8) stepped with its cache of
 * keys and values, a prompt of 3 then one token per call for 17 tokens (sliding twice), must
 * give the logits of a fresh prefill of the window it holds (the same model run from position
 * 0 over those tokens at once), and a full-context prefill those of the training graph's
 * forward (sn_model_predict) at its last position. */
static void test_generation(void) {
    enum { V = 11, C = 8, W = 16, N = 20 };
    sn_model *m = sn_sequential_new("tiny_transformer");
    sn_model_add(m, sn_layer_token_pos_embedding(V, C, W));
    sn_model_add(m, sn_layer_transformer_block(2, W, 2 * W, true, 1e-5));
    sn_model_add(m, sn_layer_transformer_block(2, W, 2 * W, true, 1e-5));
    sn_model_add(m, sn_layer_layer_norm());
    sn_model_add(m, sn_layer_dense(V, SN_ACT_NONE));
    CHECK_OK(sn_model_build(m, &(sn_shape)S1(C), 5));
    float ids[N];
    for (int i = 0; i < N; i++) ids[i] = (float)((i * 7 + 3) % V);
    sn_stepper *st = NULL, *fresh = NULL;
    CHECK_OK(sn_stepper_new(m, 1, &st));
    CHECK_OK(sn_stepper_new(m, 1, &fresh));
    if (!st || !fresh) {
        sn_stepper_free(st);
        sn_stepper_free(fresh);
        sn_model_free(m);
        return;
    }
    const float *y = NULL, *z = NULL;
    int64_t classes = 0;
    int lo = 0, pos = 0, bad = 0; /* the window the stepper holds: ids[lo .. lo + pos) */
    for (int t = 3; t <= N; t++) {
        int steps = t == 3 ? 3 : 1;
        if (pos + steps > C) { /* the stepper's rule: keep the newest min(C/2, C - steps) */
            int keep = C / 2 < C - steps ? C / 2 : C - steps;
            lo = lo + pos - keep;
            pos = keep;
        }
        pos += steps;
        CHECK_OK(sn_stepper_run(st, ids + t - steps, steps, &y, &classes));
        float got[V];
        if (y) memcpy(got, y, sizeof got);
        sn_stepper_reset(fresh);
        CHECK_OK(sn_stepper_run(fresh, ids + lo, pos, &z, &classes));
        if (!y || !z) break;
        for (int c = 0; c < V; c++)
            if (!(fabsf(got[c] - z[c]) <= 1e-4f * (1.0f + fabsf(z[c]))) && bad++ < 4)
                fprintf(stderr, "  token %d class %d: stepped %.7g, prefill %.7g\n", t, c,
                        got[c], z[c]);
    }
    CHECK(bad == 0 && classes == V, "stepped logits differ from a prefill of the window (%d)", bad);
    /* a full-context prefill against the training graph's forward */
    sn_tensor *x = NULL, *yp = NULL;
    sn_tensor_new(&x, SN_F32, &(sn_shape)S2(1, C));
    memcpy(sn_tensor_data(x), ids, sizeof(float) * C);
    CHECK_OK(sn_model_predict(m, x, &yp));
    sn_stepper_reset(fresh);
    CHECK_OK(sn_stepper_run(fresh, ids, C, &z, &classes));
    if (yp && z)
        expect("prefill vs predict, last position", z, (const float *)sn_tensor_cdata(yp) + (C - 1) * V,
               V, 1e-5);
    /* longer than the context: the last C tokens */
    sn_stepper_reset(st);
    CHECK_OK(sn_stepper_run(st, ids, N, &y, &classes));
    float got[V];
    if (y) memcpy(got, y, sizeof got);
    sn_stepper_reset(fresh);
    CHECK_OK(sn_stepper_run(fresh, ids + N - C, C, &z, &classes));
    if (y && z) expect("a prompt longer than the context", got, z, V, 1e-6);
    sn_tensor_free(x);
    sn_tensor_free(yp);
    sn_stepper_free(st);
    sn_stepper_free(fresh);
    sn_model_free(m);
}

/* The Keras twin (nn/keras/keras_twin.c): a char_transformer-shaped model (context 8, run on
 * 6 positions) saved as .keras is written as the Functional model of Keras's own layers
 * (tokens and positions inputs, Embedding, Add, LayerNormalization, MultiHeadAttention,
 * Dense); read back, fed the same ids and positions 0..5, it gives the preset's logits. */
static void test_keras_twin(void) {
    enum { V = 11, C = 8, T = 6, W = 16, B = 2 };
    sn_model *m = sn_sequential_new("tiny_transformer");
    sn_model_add(m, sn_layer_token_pos_embedding(V, C, W));
    sn_model_add(m, sn_layer_transformer_block(2, W, 2 * W, true, 1e-5));
    sn_model_add(m, sn_layer_transformer_block(2, W, 2 * W, true, 1e-5));
    sn_layer_norm_opts lo = sn_layer_norm_defaults();
    lo.epsilon = 1e-5;
    sn_model_add(m, sn_layer_layer_norm_ex(&lo));
    sn_model_add(m, sn_layer_dense(V, SN_ACT_NONE));
    CHECK_OK(sn_model_build(m, &(sn_shape)S1(T), 7));
    sn_tensor *ids = NULL, *y0 = NULL;
    sn_tensor_new(&ids, SN_F32, &(sn_shape)S2(B, T));
    float pos[B * T];
    for (int i = 0; i < B * T; i++) {
        ((float *)sn_tensor_data(ids))[i] = (float)((i * 7 + 3) % V);
        pos[i] = (float)(i % T);
    }
    CHECK_OK(sn_model_predict(m, ids, &y0));
    char path[300];
    snprintf(path, sizeof path, "%s/twin.keras", dir);
    CHECK_OK(sn_model_save(m, path));
    json_t *cfg = sn_model_to_config(m); /* the preset's own config is still refused */
    CHECK(cfg == NULL, "the composite preset wrote a config of its own");
    json_decref(cfg);
    /* The twin's config: MultiHeadAttention's calls as Keras writes them, and what the reader
     * refuses: a value tensor other than the query (cross-attention), an attention_mask
     * tensor, use_causal_mask differing between calls. */
    sn_model *tw = NULL;
    CHECK_OK(sn_model_keras_twin(m, &tw));
    json_t *tc = tw ? sn_model_to_config(tw) : NULL;
    json_t *mha = NULL;
    json_t *tl = json_object_get(json_object_get(tc, "config"), "layers");
    for (size_t i = 0; i < json_array_size(tl); i++) {
        json_t *e = json_array_get(tl, i);
        const char *cls = json_string_value(json_object_get(e, "class_name"));
        if (!mha && cls && !strcmp(cls, "MultiHeadAttention")) mha = e;
    }
    json_t *node = json_array_get(json_object_get(mha, "inbound_nodes"), 0);
    json_t *args = json_object_get(node, "args"), *kw = json_object_get(node, "kwargs");
    CHECK(json_array_size(args) == 2 && json_is_true(json_object_get(kw, "use_causal_mask")) &&
          json_object_get(json_object_get(mha, "build_config"), "shapes_dict"),
          "MultiHeadAttention's call is not written as Keras writes mha(h, h, causal)");
    /* cross-attention (a value other than the query) reads; a mask of the wrong shape (a
     * [6, 16] activation) and a second call of another causal setting are refused */
    static const struct { const char *what, *needle; sn_status st; } bad[] = {
        {"cross", NULL, SN_OK},
        {"mask", "attention_mask is [6, 16], expected (None, 6, 6)", SN_ERR_SHAPE},
        {"causal", "call 1", SN_ERR_UNSUPPORTED}};
    for (int i = 0; tc && args && kw && i < 3; i++) {
        json_t *c = json_deep_copy(tc), *e = NULL;
        json_t *cl = json_object_get(json_object_get(c, "config"), "layers");
        for (size_t j = 0; j < json_array_size(cl); j++)
            if (json_equal(json_object_get(json_array_get(cl, j), "name"),
                           json_object_get(mha, "name")))
                e = json_array_get(cl, j);
        json_t *nd = json_array_get(json_object_get(e, "inbound_nodes"), 0);
        json_t *t0 = json_deep_copy(json_array_get(json_object_get(nd, "args"), 0));
        /* another tensor: the tokens' Add, which comes before */
        json_t *other = json_deep_copy(t0);
        json_array_set_new(json_object_get(json_object_get(other, "config"), "keras_history"), 0,
                           json_string("add"));
        if (i == 0) json_array_set(json_object_get(nd, "args"), 1, other);
        if (i == 1) json_object_set(json_object_get(nd, "kwargs"), "attention_mask", other);
        if (i == 2) { /* a second call of the same layer, not causal */
            json_t *n2 = json_deep_copy(nd);
            json_object_set_new(json_object_get(n2, "kwargs"), "use_causal_mask", json_false());
            json_array_append_new(json_object_get(e, "inbound_nodes"), n2);
        }
        json_decref(other);
        json_decref(t0);
        char *js = json_dumps(c, 0);
        sn_model *bad_m = NULL;
        if (bad[i].st == SN_OK)
            CHECK_OK(sn_model_from_json(js, strlen(js), 1, &bad_m, NULL));
        else
            CHECK_ERR(sn_model_from_json(js, strlen(js), 1, &bad_m, NULL), bad[i].st,
                      bad[i].needle);
        sn_model_free(bad_m);
        free(js);
        json_decref(c);
    }
    json_decref(tc);
    sn_model_free(tw);
    sn_model *r = NULL;
    CHECK_OK(sn_model_load(path, 9, &r, NULL));
    if (r && y0) {
        CHECK(sn_model_input_count(r) == 2 && r->n_layers == 3 + 2 * 7 + 2,
              "twin: %d inputs, %d layers (expected 2, 19)", sn_model_input_count(r),
              r->n_layers);
        sn_graph *g = sn_model_graph(r);
        sn_node xs[2], y;
        xs[0] = sn_input(g, "tokens", SN_F32, &(sn_shape)S2(B, T));
        xs[1] = sn_input(g, "positions", SN_F32, &(sn_shape)S2(B, T));
        sn_plan *p = NULL;
        CHECK_OK(sn_model_forward_n(r, xs, false, NULL, &y));
        CHECK_OK(sn_plan_new(&p, g, 1, &y, NULL));
        if (p) {
            CHECK_OK(sn_plan_set_input(p, xs[0], sn_tensor_data(ids), sizeof pos));
            CHECK_OK(sn_plan_set_input(p, xs[1], pos, sizeof pos));
            CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
            /* predict gives probabilities only for a from_logits compiled model: logits here */
            expect("the Keras twin's logits", sn_plan_buffer(p, y), sn_tensor_cdata(y0),
                   sn_tensor_numel(y0), 1e-5);
            sn_plan_free(p);
        }
    }
    sn_model_free(r);
    sn_tensor_free(ids);
    sn_tensor_free(y0);
    sn_model_free(m);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/sn_test_attn_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_grads();
    test_mha_values();
    test_mha_value_dim();
    test_mha_dropout();
    test_fused_dropout();
    test_refusals();
    test_config_round_trip();
    test_keras_configs();
    test_presets();
    test_generation();
    test_keras_twin();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return sn_test_finish("test_attention_layers");
}
