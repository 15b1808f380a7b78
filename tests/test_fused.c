/* The planner's fused patterns (graph/plan_fuse.c) against the unfused plan of the same graph
 * (SN_FUSE=relu keeps only the old bias_add + relu fusion): forward values and every
 * gradient, and that the patterns fused exactly where they should (the call count).
 *
 *   conv2d + bias + relu + max-pool with one input channel (cpu_conv_fused.c): the convolution
 *     sums in another order than oneDNN, so values agree to a relative 1e-5;
 *   max_pool2d_grad + relu_grad + bias gradient (cpu_pool_fused.c): the activation gradient is
 *     bit for bit the unfused one, so with an unfused convolution the filter gradients must be
 *     identical bits; the bias gradient sums in another order (1e-5 relative);
 *   the same with a first layer's filter gradient (AVX-512 or AVX2, 2x2/2 pools): 1e-5 relative;
 *     there the relu output is recomputed, not stored (checked on the plan's calls);
 *   conv2d + bias without a relu (cpu_conv.c, "dnnl_bias": the bias in oneDNN's epilogue), f32
 *     and mixed bf16: the same bits as the unfused plan, where it fuses (one call fewer);
 *   BatchNormalization + relu | relu6 and their gradients (cpu_batch_norm.c): the same bits;
 *   the AVX2 variants of these kernels against the generic loops (SN_CPU_ISA): the same bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_fused.h"
#include "core/core.h"
#include "graph/plan_impl.h"
#include "plan_check.h"
#include "sn_test.h"

typedef struct net {
    sn_graph *g;
    sn_node x, w, b, pool, loss;
    sn_node grads[2]; /* d loss / d w, d loss / d b */
    sn_shape xs;
} net;

static uint64_t rng_state = 12345;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / (1 << 23))) - 1.0f;
}
static void fill(float *p, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) p[i] = frand() * scale;
}

/* x [N, H, W, C] -> conv2d (3x3, F filters) + bias -> relu -> max-pool -> loss = sum(pool * R) */
static net build(sn_shape xs, int F, sn_padding conv_pad, sn_pool2d_opts po) {
    net m = {.g = sn_graph_new(), .xs = xs};
    sn_graph *g = m.g;
    sn_shape ws = sn_shape_make(4, (int64_t)3, (int64_t)3, xs.dim[3], (int64_t)F);
    sn_shape bs = sn_shape_make(1, (int64_t)F);
    m.x = sn_input(g, "x", SN_F32, &xs);
    m.w = sn_variable(g, "w", SN_F32, &ws, true);
    m.b = sn_variable(g, "b", SN_F32, &bs, true);
    fill(sn_variable_data(g, m.w), sn_shape_numel(&ws), 0.5f);
    fill(sn_variable_data(g, m.b), F, 0.2f);
    sn_conv2d_opts co = sn_conv2d_opts_defaults();
    co.padding = conv_pad;
    sn_node r = sn_relu(g, sn_bias_add(g, sn_conv2d(g, m.x, m.w, &co), m.b));
    m.pool = sn_max_pool2d(g, r, &po);
    sn_shape ps = sn_node_shape(g, m.pool);
    float *R = malloc(sizeof(float) * (size_t)sn_shape_numel(&ps));
    fill(R, sn_shape_numel(&ps), 1.0f);
    m.loss = sn_reduce_sum(g, sn_mul(g, m.pool, sn_const(g, SN_F32, &ps, R)), 0, NULL, false);
    free(R);
    sn_node wrt[2] = {m.w, m.b};
    CHECK_OK(sn_gradients(g, m.loss, 2, wrt, m.grads));
    return m;
}

typedef struct result {
    int calls;
    bool remat; /* a call recomputes the relu output instead of reading it */
    bool pool_bias; /* a call is the pool + relu + bias gradient without the filter's */
    float *v[4]; /* pool, d w, d b, loss */
    int64_t n[4];
} result;

static result run(net *m, const char *fuse, const float *xdata) {
    result r = {0};
    setenv("SN_FUSE", fuse, 1);
    sn_node t[4] = {m->pool, m->grads[0], m->grads[1], m->loss};
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, m->g, 4, t, NULL));
    unsetenv("SN_FUSE");
    if (!p) return r;
    r.calls = sn_plan_node_count(p);
    plan_check_arena(p, fuse);
    for (int c = 0; c < p->n_calls; c++)
        if (p->calls[c].fused == SN_FUSED_POOL_RELU_GRAD_FILTER && p->calls[c].n_in == 5)
            r.remat = true;
    for (int c = 0; c < p->n_calls; c++) r.pool_bias |= p->calls[c].fused == SN_FUSED_POOL_RELU_GRAD;
    CHECK_OK(sn_plan_set_input(p, m->x, xdata, sizeof(float) * (size_t)sn_shape_numel(&m->xs)));
    CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
    for (int i = 0; i < 4; i++) {
        sn_shape s = sn_node_shape(m->g, t[i]);
        r.n[i] = sn_shape_numel(&s);
        r.v[i] = malloc(sizeof(float) * (size_t)(r.n[i] ? r.n[i] : 1));
        memcpy(r.v[i], sn_plan_buffer(p, t[i]), sizeof(float) * (size_t)r.n[i]);
    }
    sn_plan_free(p);
    return r;
}

/* Copies the plan's values of the nt targets t into fresh buffers out[i] (freed by the caller). */
static void copy_targets(sn_plan *p, sn_graph *g, const sn_node *t, int nt, float **out) {
    for (int i = 0; i < nt; i++) {
        sn_shape s = sn_node_shape(g, t[i]);
        size_t bytes = sizeof(float) * (size_t)sn_shape_numel(&s);
        out[i] = malloc(bytes);
        memcpy(out[i], sn_plan_buffer(p, t[i]), bytes);
    }
}

static double rel_diff(const float *a, const float *b, int64_t n) {
    double d = 0, m = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (e > d || e != e) d = e;
        if (fabs(b[i]) > m) m = fabs(b[i]);
    }
    return d / m;
}

/* Builds the net, runs it unfused and fused, compares. fewer: calls the fusion must save;
 * exact_dw: the filter gradient must be the same bits (the convolution itself not fused). */
static void check_case(const char *name, sn_shape xs, int F, sn_padding conv_pad,
                       sn_pool2d_opts po, int fewer, bool exact_dw, bool remat) {
    net m = build(xs, F, conv_pad, po);
    float *x = malloc(sizeof(float) * (size_t)sn_shape_numel(&xs));
    fill(x, sn_shape_numel(&xs), 1.0f);
    result a = run(&m, "relu", x), b = run(&m, "1", x);
    CHECK(a.calls - b.calls == fewer, "%s: %d calls unfused, %d fused, expected %d fewer", name,
          a.calls, b.calls, fewer);
    CHECK(!a.remat && b.remat == remat, "%s: the relu output is %srecomputed, expected %s", name,
          b.remat ? "" : "not ", remat ? "recomputed" : "stored");
    static const char *what[4] = {"pool output", "filter gradient", "bias gradient", "loss"};
    for (int i = 0; i < 4 && a.v[i] && b.v[i]; i++) {
        double d = rel_diff(b.v[i], a.v[i], a.n[i]);
        CHECK(d <= 1e-5, "%s: %s differs by %.3g relative (at most 1e-5)", name, what[i], d);
    }
    if (exact_dw && a.v[1] && b.v[1])
        CHECK(memcmp(a.v[1], b.v[1], sizeof(float) * (size_t)a.n[1]) == 0,
              "%s: the filter gradient is not bit for bit the unfused one", name);
    /* every bias gradient entry is a real sum: the fused one must not have dropped a window */
    double bsum = 0;
    for (int64_t i = 0; a.v[2] && i < a.n[2]; i++) bsum += fabs(a.v[2][i]);
    CHECK(bsum > 0, "%s: the bias gradient is all zero: the case tests nothing", name);
    for (int i = 0; i < 4; i++) {
        free(a.v[i]);
        free(b.v[i]);
    }
    /* Inference: a plan for the pool alone. Fused, the conv call stores only the pool where
     * the conv fuses (one input channel); its values are the training plan's. */
    float *pv[2] = {NULL, NULL};
    bool no_relu_out = false;
    for (int k = 0; k < 2; k++) {
        setenv("SN_FUSE", k ? "1" : "relu", 1);
        sn_plan *p = NULL;
        CHECK_OK(sn_plan_new(&p, m.g, 1, &m.pool, NULL));
        unsetenv("SN_FUSE");
        if (!p) continue;
        for (int c = 0; k && c < p->n_calls; c++)
            if (p->calls[c].fused == SN_FUSED_CONV_BIAS_RELU) no_relu_out = p->calls[c].out == NULL;
        sn_shape ps = sn_node_shape(m.g, m.pool);
        size_t bytes = sizeof(float) * (size_t)sn_shape_numel(&ps);
        CHECK_OK(sn_plan_set_input(p, m.x, x, sizeof(float) * (size_t)sn_shape_numel(&xs)));
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        pv[k] = malloc(bytes);
        memcpy(pv[k], sn_plan_buffer(p, m.pool), bytes);
        sn_plan_free(p);
    }
    if (pv[0] && pv[1]) {
        sn_shape ps = sn_node_shape(m.g, m.pool);
        double d = rel_diff(pv[1], pv[0], sn_shape_numel(&ps));
        CHECK(d <= 1e-5, "%s: inference pool output differs by %.3g relative", name, d);
    }
    CHECK(no_relu_out == (xs.dim[3] == 1), "%s: inference plan %s the relu output", name,
          no_relu_out ? "does not store" : "stores");
    free(pv[0]);
    free(pv[1]);
    free(x);
    sn_graph_free(m.g);
}

/* The first-layer image kernel the fused calls share (cpu_conv_fused.c) against the sum it
 * documents, bit for bit: relu(fma chain over the taps in row-major window order from 0, + b).
 * The AVX-512 kernel computes 4 interior pixels at once; each pixel's FMAs stay the same, so
 * its bits must too, at widths where the groups of 4 leave tails, with padding and strides. */
static void check_conv1_image(const char *name, int64_t h, int64_t w, int64_t kh, int64_t kw,
                              int64_t f, int64_t s, int64_t pad) {
    sn_conv_geom g = {.n = 1, .h = h, .w = w, .c = 1, .kh = kh, .kw = kw, .f = f, .sh = s,
                      .sw = s, .pt = pad, .pl = pad, .pb = pad, .pr = pad};
    g.oh = (h + 2 * pad - kh) / s + 1, g.ow = (w + 2 * pad - kw) / s + 1;
    float *x = malloc((size_t)(h * w) * sizeof *x), *wt = malloc((size_t)(kh * kw * f) * sizeof *wt);
    float *b = malloc((size_t)f * sizeof *b);
    size_t ny = (size_t)(g.oh * g.ow * f);
    float *y = malloc(ny * sizeof *y), *r = malloc(ny * sizeof *r);
    if (!(x && wt && b && y && r)) {
        CHECK(0, "%s: out of memory", name);
        return;
    }
    fill(x, h * w, 1.0f), fill(wt, kh * kw * f, 0.5f), fill(b, f, 0.2f);
    x[w + 1] = NAN; /* a NaN tap goes through the relu */
    memset(y, 0x7f, ny * sizeof *y);
    sn_cpu_conv1_image()(&g, x, wt, b, y);
    for (int64_t oh = 0; oh < g.oh; oh++)
        for (int64_t ow = 0; ow < g.ow; ow++)
            for (int64_t j = 0; j < f; j++) {
                float acc = 0.0f;
                for (int64_t a = 0; a < kh; a++)
                    for (int64_t c = 0; c < kw; c++) {
                        int64_t ih = oh * s - pad + a, iw = ow * s - pad + c;
                        float t = ih >= 0 && ih < h && iw >= 0 && iw < w ? x[ih * w + iw] : 0.0f;
                        acc = fmaf(t, wt[(a * kw + c) * f + j], acc);
                    }
                float v = acc + b[j];
                r[(oh * g.ow + ow) * f + j] = v < 0 ? 0.0f : v;
            }
    size_t bad = 0;
    while (bad < ny && memcmp(&y[bad], &r[bad], sizeof *y) == 0) bad++;
    CHECK(bad == ny, "%s: the image kernel is not bit for bit the documented fma sum: element %zu "
          "is %.9g, expected %.9g", name, bad, bad < ny ? y[bad] : 0.0, bad < ny ? r[bad] : 0.0);
    free(x), free(wt), free(b), free(y), free(r);
}

/* The AVX2 variants (cpu_conv_fused.c, cpu_conv_c1.c, cpu_pool_fused.c) against the scalar
 * loops, bit for bit: the same net planned and run under SN_CPU_ISA=avx2 and =generic, unfused
 * (SN_FUSE=relu: the first layer's filter gradient is cpu_conv_c1.c's where C = 1) and fused.
 * Every value must be the same bits, except where the AVX2 plan fuses the filter gradient into
 * the pool gradient (one call fewer; the generic plan cannot): that kernel sums in another order
 * (bounded by check_case), so there only the forward values (pool output, loss) must match.
 * Where the CPU has AVX-512, its variants too against AVX2's. */
static void check_isas(const char *name, sn_shape xs, int F, sn_padding conv_pad,
                       sn_pool2d_opts po) {
    const sn_cpu_features *cpu = sn_cpu();
    if (!(cpu->avx2 && cpu->fma)) return; /* no AVX2 variant to compare (main says so) */
    const bool avx512 = cpu->avx512f && cpu->avx512bw && cpu->avx512vl;
    net m = build(xs, F, conv_pad, po);
    float *x = malloc(sizeof(float) * (size_t)sn_shape_numel(&xs));
    fill(x, sn_shape_numel(&xs), 1.0f);
    static const char *fuses[2] = {"relu", "1"};
    static const char *what[4] = {"pool output", "filter gradient", "bias gradient", "loss"};
    for (int f = 0; f < 2; f++) {
        setenv("SN_CPU_ISA", "generic", 1);
        result a = run(&m, fuses[f], x);
        setenv("SN_CPU_ISA", "avx2", 1);
        result b = run(&m, fuses[f], x);
        unsetenv("SN_CPU_ISA");
        const bool same_plan = a.calls == b.calls;
        for (int i = 0; i < 4 && a.v[i] && b.v[i]; i++) {
            if (!same_plan && (i == 1 || i == 2)) continue;
            CHECK(memcmp(a.v[i], b.v[i], sizeof(float) * (size_t)a.n[i]) == 0,
                  "%s, SN_FUSE=%s: the %s on AVX2 is not bit for bit the generic one (max "
                  "relative difference %.3g)", name, fuses[f], what[i],
                  rel_diff(b.v[i], a.v[i], a.n[i]));
        }
        /* On an AVX-512 CPU, AVX-512 against AVX2: the same plans, and the same bits but for
         * the bias gradient of the pool gradient without the filter's (the AVX-512 2x2 items
         * sum a row in f32 first); the fused filter gradient's two variants sum alike. */
        if (avx512) {
            result c = run(&m, fuses[f], x);
            CHECK(c.calls == b.calls, "%s, SN_FUSE=%s: %d calls on AVX-512, %d on AVX2", name,
                  fuses[f], c.calls, b.calls);
            for (int i = 0; i < 4 && c.v[i] && b.v[i] && c.calls == b.calls; i++) {
                if (i == 2 && c.pool_bias) continue;
                CHECK(memcmp(c.v[i], b.v[i], sizeof(float) * (size_t)c.n[i]) == 0,
                      "%s, SN_FUSE=%s: the %s on AVX2 is not bit for bit the AVX-512 one (max "
                      "relative difference %.3g)", name, fuses[f], what[i],
                      rel_diff(b.v[i], c.v[i], c.n[i]));
            }
            for (int i = 0; i < 4; i++) free(c.v[i]);
        }
        for (int i = 0; i < 4; i++) free(a.v[i]), free(b.v[i]);
    }
    free(x);
    sn_graph_free(m.g);
}

/* x -> conv2d + bias (no relu) -> loss = sum((y + bias) * R), as a convolution followed by
 * BatchNormalization: fused (SN_FUSED_CONV_BIAS) against SN_FUSE=relu, in f32 or mixed bf16.
 * fewer: 1 where the pattern must fuse, 0 where it must not (a Winograd convolution). The
 * output, both gradients and the loss must be the unfused bits: oneDNN adds the bias once to
 * the finished f32 sum, as bias_add does. */
static void check_conv_bias(const char *name, sn_shape xs, int K, int F, int stride,
                            sn_padding pad, bool bf16, int fewer) {
    sn_graph *g = sn_graph_new();
    sn_shape ws = sn_shape_make(4, (int64_t)K, (int64_t)K, xs.dim[3], (int64_t)F);
    sn_shape bs = sn_shape_make(1, (int64_t)F);
    sn_node x = sn_input(g, "x", SN_F32, &xs);
    sn_node w = sn_variable(g, "w", SN_F32, &ws, true);
    sn_node b = sn_variable(g, "b", SN_F32, &bs, true);
    fill(sn_variable_data(g, w), sn_shape_numel(&ws), 0.5f);
    fill(sn_variable_data(g, b), F, 0.2f);
    sn_conv2d_opts co = sn_conv2d_opts_defaults();
    co.stride_h = co.stride_w = stride;
    co.padding = pad;
    sn_node y = sn_bias_add(g, sn_conv2d(g, x, w, &co), b);
    sn_shape ys = sn_node_shape(g, y);
    float *R = malloc(sizeof(float) * (size_t)sn_shape_numel(&ys));
    fill(R, sn_shape_numel(&ys), 1.0f);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F32, &ys, R)), 0, NULL, false);
    free(R);
    sn_node wrt[2] = {w, b}, grads[2];
    CHECK_OK(sn_gradients(g, loss, 2, wrt, grads));
    float *xd = malloc(sizeof(float) * (size_t)sn_shape_numel(&xs));
    fill(xd, sn_shape_numel(&xs), 1.0f);
    sn_node t[4] = {y, grads[0], grads[1], loss};
    float *v[2][4] = {{NULL}};
    int calls[2] = {0, 0}, fused = 0;
    sn_plan_opts po = sn_plan_opts_defaults();
    po.bf16_compute = bf16;
    for (int k = 0; k < 2; k++) {
        setenv("SN_FUSE", k ? "1" : "relu", 1);
        sn_plan *p = NULL;
        CHECK_OK(sn_plan_new(&p, g, 4, t, &po));
        unsetenv("SN_FUSE");
        if (!p) continue;
        calls[k] = sn_plan_node_count(p);
        plan_check_arena(p, k ? "conv+bias fused" : "conv+bias unfused");
        for (int c = 0; k && c < p->n_calls; c++) fused += p->calls[c].fused == SN_FUSED_CONV_BIAS;
        CHECK_OK(sn_plan_set_input(p, x, xd, sizeof(float) * (size_t)sn_shape_numel(&xs)));
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        copy_targets(p, g, t, 4, v[k]);
        sn_plan_free(p);
    }
    CHECK(calls[0] - calls[1] == fewer && fused == fewer,
          "%s: %d calls unfused, %d fused (%d conv+bias calls), expected %d fewer", name,
          calls[0], calls[1], fused, fewer);
    static const char *what[4] = {"output", "filter gradient", "bias gradient", "loss"};
    for (int i = 0; i < 4 && v[0][i] && v[1][i]; i++) {
        sn_shape s = sn_node_shape(g, t[i]);
        int64_t n = sn_shape_numel(&s);
        CHECK(memcmp(v[0][i], v[1][i], sizeof(float) * (size_t)n) == 0,
              "%s: the %s is not bit for bit the unfused one (max relative difference %.3g)",
              name, what[i], rel_diff(v[1][i], v[0][i], n));
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++) free(v[k][i]);
    free(xd);
    sn_graph_free(g);
}

/* A BatchNormalization case's variables: v [xs] in (-2, 2), gamma around 3 and beta around 1
 * ([C]), which spread the normalised values over (-5, 7). */
static void bn_inputs(sn_graph *g, sn_shape xs, sn_node *v, sn_node *gamma, sn_node *beta) {
    int64_t C = xs.dim[xs.ndim - 1], n = sn_shape_numel(&xs);
    sn_shape cs = sn_shape_make(1, C);
    *v = sn_variable(g, "v", SN_F32, &xs, true);
    *gamma = sn_variable(g, "gamma", SN_F32, &cs, true);
    *beta = sn_variable(g, "beta", SN_F32, &cs, true);
    fill(sn_variable_data(g, *v), n, 2.0f);
    float *gd = sn_variable_data(g, *gamma), *bd = sn_variable_data(g, *beta);
    for (int64_t j = 0; j < C; j++) gd[j] = 3.0f + 0.5f * frand(), bd[j] = 1.0f + 0.5f * frand();
}

/* v -> BatchNormalization (bn_train) -> relu | relu6 -> loss = sum(y * R) [+ sum(bn * R2)]:
 * fused (SN_FUSED_BN_RELU/RELU6) against SN_FUSE=relu. With the gradients (of v, gamma and
 * beta), the activation's call and its gradient's go (2 calls fewer); inference alone, the
 * activation's (1 fewer); where something else reads the normalised value (pre), nothing
 * fuses. Every value must be the unfused bits: the fused gradients recompute the mask with
 * the forward's own arithmetic. gamma 3 and beta 1 spread the normalised values over
 * (-5, 7), so relu6's both edges are taken. */
static void check_bn_act(const char *name, sn_shape xs, bool relu6, bool train, bool pre,
                         int fewer) {
    sn_graph *g = sn_graph_new();
    int64_t n = sn_shape_numel(&xs);
    sn_node v, gamma, beta;
    bn_inputs(g, xs, &v, &gamma, &beta);
    sn_node bn = sn_batch_norm_train(g, v, gamma, beta, 1e-3, NULL);
    sn_node y = relu6 ? sn_relu6(g, bn) : sn_relu(g, bn);
    float *R = malloc(sizeof(float) * (size_t)n);
    fill(R, n, 1.0f);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F32, &xs, R)), 0, NULL, false);
    if (pre) {
        fill(R, n, 1.0f);
        sn_node l2 = sn_reduce_sum(g, sn_mul(g, bn, sn_const(g, SN_F32, &xs, R)), 0, NULL, false);
        loss = sn_add(g, loss, l2);
    }
    free(R);
    sn_node wrt[3] = {v, gamma, beta}, t[5] = {y, loss};
    int nt = 2;
    if (train) {
        CHECK_OK(sn_gradients(g, loss, 3, wrt, t + 2));
        nt = 5;
    }
    float *val[2][5] = {{NULL}};
    int calls[2] = {0, 0}, fused = 0;
    for (int k = 0; k < 2; k++) {
        setenv("SN_FUSE", k ? "1" : "relu", 1);
        sn_plan *p = NULL;
        CHECK_OK(sn_plan_new(&p, g, nt, t, NULL));
        unsetenv("SN_FUSE");
        if (!p) continue;
        calls[k] = sn_plan_node_count(p);
        plan_check_arena(p, k ? "bn+act fused" : "bn+act unfused");
        for (int c = 0; k && c < p->n_calls; c++)
            fused += p->calls[c].fused == (relu6 ? SN_FUSED_BN_RELU6 : SN_FUSED_BN_RELU);
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        copy_targets(p, g, t, nt, val[k]);
        sn_plan_free(p);
    }
    /* the fused calls: bn_train, and with the backward bn_grad_params and bn_grad_x */
    int want_fused = fewer ? (train ? 3 : 1) : 0;
    CHECK(calls[0] - calls[1] == fewer && fused == want_fused,
          "%s: %d calls unfused, %d fused (%d calls carry the activation), expected %d fewer "
          "and %d", name, calls[0], calls[1], fused, fewer, want_fused);
    static const char *what[5] = {"output", "loss", "input gradient", "gamma gradient",
                                  "beta gradient"};
    for (int i = 0; i < nt && val[0][i] && val[1][i]; i++) {
        sn_shape s = sn_node_shape(g, t[i]);
        int64_t m = sn_shape_numel(&s);
        CHECK(memcmp(val[0][i], val[1][i], sizeof(float) * (size_t)m) == 0,
              "%s: the %s is not bit for bit the unfused one (max relative difference %.3g)",
              name, what[i], rel_diff(val[1][i], val[0][i], m));
    }
    /* the activation really cut: some outputs at 0 (and at 6), some gradients masked */
    if (val[1][0]) {
        int64_t lo = 0, hi = 0;
        for (int64_t i = 0; i < n; i++) lo += val[1][0][i] == 0.0f, hi += val[1][0][i] == 6.0f;
        CHECK(lo > 0 && lo < n && (!relu6 || hi > 0), "%s: %lld outputs at 0 and %lld at 6 of "
              "%lld: the case does not take the activation's edges", name, (long long)lo,
              (long long)hi, (long long)n);
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 5; i++) free(val[k][i]);
    sn_graph_free(g);
}

/* v -> bias_add(b) -> BatchNormalization [-> relu] -> loss = sum(y * R), with the gradients
 * of v, b, gamma and beta: the bias gradient (a reduce_sum of bn_grad_x's output) fused into
 * bn_grad_x (SN_FUSED_BN_GRAD_SUM, or the second output of the relu-fused call) against
 * SN_FUSE=relu: one call fewer (three with the relu), one bn_grad_x call with the sum, every
 * other value the unfused bits. The bias gradient is dx's sum, which BatchNormalization's
 * training gradient makes 0 up to rounding: it must be within 1e-5 of the sum of |dx| of the
 * unfused one (test_batch_norm checks the fused kernel's sums where they are not 0). */
static void check_bn_bias_sum(const char *name, sn_shape xs, bool relu) {
    sn_graph *g = sn_graph_new();
    int64_t C = xs.dim[xs.ndim - 1], n = sn_shape_numel(&xs);
    sn_shape cs = sn_shape_make(1, C);
    sn_node v, gamma, beta;
    bn_inputs(g, xs, &v, &gamma, &beta);
    sn_node b = sn_variable(g, "b", SN_F32, &cs, true);
    fill(sn_variable_data(g, b), C, 1.0f);
    sn_node h = sn_bias_add(g, v, b);
    sn_node bn = sn_batch_norm_train(g, h, gamma, beta, 1e-3, NULL);
    sn_node y = relu ? sn_relu(g, bn) : bn;
    float *R = malloc(sizeof(float) * (size_t)n);
    fill(R, n, 1.0f);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F32, &xs, R)), 0, NULL, false);
    free(R);
    sn_node wrt[4] = {v, b, gamma, beta}, t[5] = {loss};
    CHECK_OK(sn_gradients(g, loss, 4, wrt, t + 1));
    float *val[2][5] = {{NULL}};
    int calls[2] = {0, 0}, with_sum = 0;
    for (int k = 0; k < 2; k++) {
        setenv("SN_FUSE", k ? "1" : "relu", 1);
        sn_plan *p = NULL;
        CHECK_OK(sn_plan_new(&p, g, 5, t, NULL));
        unsetenv("SN_FUSE");
        if (!p) continue;
        calls[k] = sn_plan_node_count(p);
        plan_check_arena(p, k ? "bn bias sum fused" : "bn bias sum unfused");
        for (int c = 0; k && c < p->n_calls; c++)
            with_sum += p->calls[c].op == SN_OP_BN_GRAD_X && p->calls[c].n_out2 == 1 &&
                        p->calls[c].fused == (relu ? SN_FUSED_BN_RELU : SN_FUSED_BN_GRAD_SUM);
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        copy_targets(p, g, t, 5, val[k]);
        sn_plan_free(p);
    }
    int fewer = relu ? 3 : 1;
    CHECK(calls[0] - calls[1] == fewer && with_sum == 1,
          "%s: %d calls unfused, %d fused (%d bn_grad_x calls with the sum), expected %d fewer "
          "and 1", name, calls[0], calls[1], with_sum, fewer);
    static const char *what[5] = {"loss", "input gradient", "bias gradient", "gamma gradient",
                                  "beta gradient"};
    for (int i = 0; i < 5 && val[0][i] && val[1][i]; i++) {
        sn_shape s = sn_node_shape(g, t[i]);
        int64_t m = sn_shape_numel(&s);
        if (i != 2) {
            CHECK(memcmp(val[0][i], val[1][i], sizeof(float) * (size_t)m) == 0,
                  "%s: the %s is not bit for bit the unfused one (max relative difference %.3g)",
                  name, what[i], rel_diff(val[1][i], val[0][i], m));
            continue;
        }
        const float *dx = val[0][1];
        for (int64_t j = 0; j < C; j++) {
            double mag = 0;
            for (int64_t r = 0; r < n / C; r++) mag += fabs(dx[r * C + j]);
            CHECK(mag > 0 && fabs((double)val[1][2][j] - val[0][2][j]) <= 1e-5 * mag,
                  "%s: bias gradient %lld is %.9g fused, %.9g unfused (|dx| sums to %.3g)", name,
                  (long long)j, val[1][2][j], val[0][2][j], mag);
        }
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 5; i++) free(val[k][i]);
    sn_graph_free(g);
}

int main(void) {
    /* small_cnn's first layer (26 = 6 groups of 4 + 2), then padding, strides, other taps */
    check_conv1_image("conv1 28x28 valid 3x3 f32", 28, 28, 3, 3, 32, 1, 0);
    check_conv1_image("conv1 9x13 same 3x3 f16", 9, 13, 3, 3, 16, 1, 1);
    check_conv1_image("conv1 17x19 stride 2 3x3 f32", 17, 19, 3, 3, 32, 2, 1);
    check_conv1_image("conv1 12x15 5x5 f16", 12, 15, 5, 5, 16, 1, 2);
    check_conv1_image("conv1 8x11 2x2 f32", 8, 11, 2, 2, 32, 1, 0);
    setenv("SN_CPU_ISA", "avx2", 1);
    check_conv1_image("conv1 28x28 valid 3x3 f32, avx2", 28, 28, 3, 3, 32, 1, 0);
    unsetenv("SN_CPU_ISA");
    sn_pool2d_opts p2 = sn_pool2d_opts_defaults(); /* 2x2, stride 2, valid */
    /* First layer, small_cnn's pattern: conv fused with bias, relu and pool (2 calls fewer),
     * pool gradient with relu gradient and bias gradient (2 fewer). 11x11 -> 9x9 -> 4x4: the
     * last row and column of the conv output lie in no window. */
    /* With AVX-512 or AVX2 + FMA the filter gradient joins the backward call too (one more
     * call fewer); the generic loops have no such kernel. */
    const sn_cpu_features *cpu = sn_cpu();
    const int avx512 = cpu->avx512f && cpu->avx512bw && cpu->avx512vl;
    const int avx2 = cpu->avx2 && cpu->fma;
    const int filt = avx512 || avx2;
    const sn_shape c1s = sn_shape_make(4, (int64_t)3, (int64_t)11, (int64_t)11, (int64_t)1);
    check_case("c1 conv+pool", c1s, 32, SN_PAD_VALID, p2, 4 + filt, false, filt);
    /* the same on AVX2's kernels (and on the generic loops, at the end) */
    setenv("SN_CPU_ISA", "avx2", 1);
    check_case("c1 conv+pool, avx2", c1s, 32, SN_PAD_VALID, p2, 4 + avx2, false, avx2);
    unsetenv("SN_CPU_ISA");
    /* 16 filters, SAME convolution (padded taps), SAME pool of an odd size */
    sn_pool2d_opts psame = p2;
    psame.padding = SN_PAD_SAME;
    check_case("c1 same", sn_shape_make(4, (int64_t)2, (int64_t)7, (int64_t)9, (int64_t)1), 16,
               SN_PAD_SAME, psame, 4, false, false);
    /* Three input channels: the convolution stays oneDNN's, only the backward pattern fuses,
     * so the filter gradient (computed from the fused activation gradient) is exact. A pool
     * 2x2 at stride 3 leaves every third row and column out of every window. */
    sn_pool2d_opts pgap = {.pool_h = 2, .pool_w = 2, .stride_h = 3, .stride_w = 3};
    check_case("c3 gaps", sn_shape_make(4, (int64_t)2, (int64_t)11, (int64_t)10, (int64_t)3), 16,
               SN_PAD_SAME, pgap, 2, true, false);
    /* Overlapping windows (3x3 at stride 2): the pool gradient does not fuse (a cell can get
     * two windows' gradients), the forward does (the pool reads the conv output from cache). */
    sn_pool2d_opts pover = {.pool_h = 3, .pool_w = 3, .stride_h = 2, .stride_w = 2};
    check_case("c1 overlap", sn_shape_make(4, (int64_t)2, (int64_t)12, (int64_t)12, (int64_t)1),
               32, SN_PAD_VALID, pover, 2, false, false);
    /* conv2d + bias without a relu: Xception's pointwise half (1x1, 128 -> 256), its residual
     * 1x1 stride 2 and its first layer (3 channels, 3x3 stride 2 SAME: plain weights); a wide
     * 3x3 stride 1 layer runs Winograd and stays unfused. bf16 where the CPU has AVX512-BF16
     * (elsewhere the convolution stays f32 and the case repeats the f32 one). */
#ifdef SN_HAVE_DNNL
    /* the fused kernel is oneDNN's convolution with the bias in its epilogue, taken only on
     * AVX-512 CPUs (where that epilogue gives the unfused bits; cpu_conv.c) */
    const int cb = avx512;
#else
    const int cb = 0; /* without oneDNN the pattern stays unfused (and must compute the same) */
#endif
    for (int bf = 0; bf < 2; bf++) {
        const char *sfx = bf ? " bf16" : "";
        char nm[64];
        snprintf(nm, sizeof nm, "pointwise%s", sfx);
        check_conv_bias(nm, sn_shape_make(4, (int64_t)2, (int64_t)9, (int64_t)7, (int64_t)128),
                        1, 256, 1, SN_PAD_SAME, bf, cb);
        snprintf(nm, sizeof nm, "residual 1x1/2%s", sfx);
        check_conv_bias(nm, sn_shape_make(4, (int64_t)2, (int64_t)10, (int64_t)9, (int64_t)32),
                        1, 48, 2, SN_PAD_SAME, bf, cb);
        snprintf(nm, sizeof nm, "first layer 3x3/2%s", sfx);
        check_conv_bias(nm, sn_shape_make(4, (int64_t)2, (int64_t)12, (int64_t)12, (int64_t)3),
                        3, 32, 2, SN_PAD_SAME, bf, cb);
        snprintf(nm, sizeof nm, "wide 3x3 winograd%s", sfx);
        check_conv_bias(nm, sn_shape_make(4, (int64_t)2, (int64_t)12, (int64_t)12, (int64_t)64),
                        3, 64, 1, SN_PAD_VALID, bf, 0);
    }
    /* BatchNormalization + activation: an Xception layer (NHWC, 48 channels: a vector and a
     * tail), a Dense one ([N, C]), inference alone, and the normalised value read elsewhere */
    const sn_shape bn4 = sn_shape_make(4, (int64_t)2, (int64_t)5, (int64_t)7, (int64_t)48);
    const sn_shape bn2 = sn_shape_make(2, (int64_t)64, (int64_t)19);
    check_bn_act("bn+relu", bn4, false, true, false, 2);
    check_bn_act("bn+relu6", bn4, true, true, false, 2);
    check_bn_act("bn+relu dense", bn2, false, true, false, 2);
    check_bn_act("bn+relu6 dense", bn2, true, true, false, 2);
    check_bn_act("bn+relu inference", bn4, false, false, false, 1);
    check_bn_act("bn+relu6 inference", bn4, true, false, false, 1);
    check_bn_act("bn+relu, pre read", bn4, false, true, true, 0);
    check_bn_act("bn+relu6, pre read", bn4, true, true, true, 0);
    check_bn_bias_sum("bias+bn, bias gradient in bn_grad_x", bn4, false);
    check_bn_bias_sum("bias+bn+relu, bias gradient in bn_grad_x", bn4, true);
    check_bn_bias_sum("bias+bn dense, bias gradient in bn_grad_x", bn2, false);
    /* Last, so that the cases above keep the random data their 1e-5 bounds were set on (the
     * loss is a sum with cancellation). The image kernel on every ISA variant the CPU has
     * (the widest, then avx2 and generic by SN_CPU_ISA) against the documented sum. */
    static const char *isas[3] = {NULL, "avx2", "generic"};
    for (int i = 0; i < 3; i++) {
        char nm[5][64];
        const char *sfx = isas[i] ? isas[i] : "widest";
        if (isas[i]) setenv("SN_CPU_ISA", isas[i], 1);
        snprintf(nm[0], 64, "conv1 28x28 valid 3x3 f32, %s", sfx);
        snprintf(nm[1], 64, "conv1 9x13 same 3x3 f16, %s", sfx);
        snprintf(nm[2], 64, "conv1 17x19 stride 2 3x3 f32, %s", sfx);
        snprintf(nm[3], 64, "conv1 12x15 5x5 f16, %s", sfx);
        snprintf(nm[4], 64, "conv1 8x11 2x2 f32, %s", sfx);
        check_conv1_image(nm[0], 28, 28, 3, 3, 32, 1, 0);
        check_conv1_image(nm[1], 9, 13, 3, 3, 16, 1, 1);
        check_conv1_image(nm[2], 17, 19, 3, 3, 32, 2, 1);
        check_conv1_image(nm[3], 12, 15, 5, 5, 16, 1, 2);
        check_conv1_image(nm[4], 8, 11, 2, 2, 32, 1, 0);
        unsetenv("SN_CPU_ISA");
    }
    setenv("SN_CPU_ISA", "generic", 1);
    check_case("c1 conv+pool, generic", c1s, 32, SN_PAD_VALID, p2, 4, false, false);
    unsetenv("SN_CPU_ISA");
    /* AVX2 against generic, bit for bit: small_cnn's first layer (the fused conv + pool, the
     * 2x2 pool gradient, cpu_conv_c1.c unfused); 16 filters with padded taps and a SAME pool
     * (the border pixels, the pool's clipped windows); 3 input channels on a 2x2/2 pool
     * (pf_item_2x2 without the filter gradient); overlapping windows (the fused pool's
     * general loop). */
    check_isas("isa c1 conv+pool", c1s, 32, SN_PAD_VALID, p2);
    sn_pool2d_opts psame_isa = p2;
    psame_isa.padding = SN_PAD_SAME;
    check_isas("isa c1 same", sn_shape_make(4, (int64_t)2, (int64_t)7, (int64_t)9, (int64_t)1), 16,
               SN_PAD_SAME, psame_isa);
    check_isas("isa c3 2x2", sn_shape_make(4, (int64_t)2, (int64_t)10, (int64_t)10, (int64_t)3), 16,
               SN_PAD_VALID, p2);
    check_isas("isa c1 overlap", sn_shape_make(4, (int64_t)2, (int64_t)12, (int64_t)12, (int64_t)1),
               32, SN_PAD_VALID, (sn_pool2d_opts){.pool_h = 3, .pool_w = 3, .stride_h = 2, .stride_w = 2});
    if (!avx2) printf("test_fused: no AVX2 + FMA: the AVX2-against-generic cases did not run\n");
    return sn_test_finish("test_fused");
}
