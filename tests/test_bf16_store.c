/* Values stored in bfloat16 under mixed bf16 (graph/plan_bf16.c), on the pattern of
 * MobileNetV2's and Xception's pointwise layers:
 *
 *   x -> conv 1x1 + bias -> BatchNormalization -> relu6 -> conv KxK -> BatchNormalization
 *     -> loss = sum(y * R) [+ sum(a1 * R2): a second reader of the relu6 output]
 *
 * with the gradients of x and every variable. Where the second convolution is 1x1, three
 * values qualify: the relu6 output (read by that convolution's forward and filter gradient)
 * and the two bn_grad_x outputs (read by the data and filter gradients of the convolution
 * before each). A second reader of the relu6 output keeps it float32; a 3x3 second
 * convolution keeps its operands float32 (the relu6 output and its dy). With
 * SN_BF16_STORE=exact the stored values are the bfloat16 copies the convolutions made
 * themselves, rounded alike, so every target must be the same bits as with =0 (a filter
 * gradient that the storage spares its batch slices sums in another order: equal to
 * rounding). By default the 1x1 convolutions' outputs are stored in bfloat16 for the
 * BatchNormalization after them too (Keras's mixed_bfloat16): that plan must be the same
 * bits as the graph with explicit casts to bfloat16 and back there (but for the bias
 * gradient, check_case). Each bf16 value's producer and readers must see the bfloat16 dtype,
 * and the arena must hold no overlap (plan_check.h).
 * The large case runs the first layer's filter gradient over batch slices
 * (cpu_conv_slices.c), one operand bf16. And Xception's SeparableConv2D before
 * BatchNormalization, whose depthwise output is stored in bfloat16 for the pointwise half
 * (cpu_depthwise.c writes it a slice of images at a time).
 *
 * Needs a CPU where mixed bf16 computes in bf16 (AVX512-BF16; ctest sets SN_BF16_COMPUTE=on)
 * and oneDNN: elsewhere it checks the counts stored in bfloat16 (none where mixed bf16 computes
 * in f32; without oneDNN only a BatchNormalization output for a max pool) and exits 77
 * (SKIPPED). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "graph/plan_impl.h"
#include "plan_check.h"
#include "sn_test.h"

static uint64_t rng_state = 424242;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) * (1.0 / (1ull << 23)) * 2.0 - 1.0);
}
static void fill(float *p, int64_t n, float scale, float offset) {
    for (int64_t i = 0; i < n; i++) p[i] = offset + scale * frand();
}

static sn_node var(sn_graph *g, const char *name, sn_shape s, float scale, float offset) {
    sn_node v = sn_variable(g, name, SN_F32, &s, true);
    fill(sn_variable_data(g, v), sn_shape_numel(&s), scale, offset);
    return v;
}

static sn_node bn(sn_graph *g, sn_node x, int64_t C, const char *gname, const char *bname,
                  sn_node *gamma, sn_node *beta) {
    *gamma = var(g, gname, sn_shape_make(1, C), 0.5f, 2.0f);
    *beta = var(g, bname, sn_shape_make(1, C), 0.5f, 1.0f);
    return sn_batch_norm_train(g, x, *gamma, *beta, 1e-3, NULL);
}

/* Whether mixed bf16 computes in bf16 here with oneDNN's convolutions (the kernels that take
 * bf16 operands); elsewhere nothing is stored in bf16. */
static bool bf16_runs(void) {
#ifdef SN_HAVE_DNNL
    return sn_cpu_bf16_pays();
#else
    return false;
#endif
}

/* Values this plan stores in bfloat16, and whether every call sees them so. */
static int stored(const sn_plan *p, const char *name) {
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) n += p->bf16_store && p->bf16_store[i];
    for (int c = 0; c < p->n_calls; c++) {
        const sn_kcall *k = &p->calls[c];
        const sn_node_t *nd = &p->g->nodes[k->id];
        CHECK(k->y.dtype == sn_plan_value_dtype(p, k->id),
              "%s: call %d (%s) writes %s, its value is stored as %s", name, c, sn_ops[k->op]->name,
              sn_dtype_name(k->y.dtype), sn_dtype_name(sn_plan_value_dtype(p, k->id)));
        for (int j = 0; j < nd->n_in; j++)
            CHECK(k->x[j].dtype == sn_plan_value_dtype(p, nd->in[j]),
                  "%s: call %d (%s) reads input %d as %s", name, c, sn_ops[k->op]->name, j,
                  sn_dtype_name(k->x[j].dtype));
    }
    return n;
}

static double max_abs(const float *v, sn_graph *g, sn_node t) {
    sn_shape s = sn_node_shape(g, t);
    double m = 1e-30;
    for (int64_t j = 0; j < sn_shape_numel(&s); j++) m = fmax(m, fabs((double)v[j]));
    return m;
}

/* One side of a comparison: a graph, its targets, and SN_BF16_STORE for its plan (NULL:
 * unset, the default) */
typedef struct side {
    sn_graph *g;
    const sn_node *t;
    const char *store;
} side;

/* A target that may differ from the reference: by at most tol times the largest magnitude of
 * target `scale` (its own where scale < 0) */
typedef struct loose {
    int target;
    double tol;
    int scale;
} loose;

/* Plans each side's targets t[0..nt) under mixed bf16 and runs each once: expect values
 * stored in bfloat16 on side 0, ref_stored on side 1; where values, every target the same
 * bits, but the nl in lo[]. what[i] names t[i]. */
static void compare_sides(const char *name, const side sd[2], int nt, const char *const *what,
                          int expect, int ref_stored, bool values, const loose *lo, int nl) {
    float *val[2][16] = {{NULL}};
    int count[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        sn_graph *g = sd[k].g;
        const sn_node *t = sd[k].t;
        if (sd[k].store) setenv("SN_BF16_STORE", sd[k].store, 1);
        sn_plan_opts po = sn_plan_opts_defaults();
        po.bf16_compute = true;
        sn_plan *p = NULL;
        CHECK_OK(sn_plan_new(&p, g, nt, t, &po));
        unsetenv("SN_BF16_STORE");
        if (!p) continue;
        count[k] = stored(p, name);
        plan_check_arena(p, name);
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        for (int i = 0; i < nt; i++) {
            sn_shape s = sn_node_shape(g, t[i]);
            size_t bytes = sizeof(float) * (size_t)sn_shape_numel(&s);
            val[k][i] = malloc(bytes);
            memcpy(val[k][i], sn_plan_buffer(p, t[i]), bytes);
        }
        sn_plan_free(p);
    }
    CHECK(count[0] == expect && count[1] == ref_stored,
          "%s: %d values stored in bfloat16 (%d in the reference plan), expected %d and %d",
          name, count[0], count[1], expect, ref_stored);
    for (int i = 0; values && i < nt && val[0][i] && val[1][i]; i++) {
        sn_shape s = sn_node_shape(sd[0].g, sd[0].t[i]);
        int64_t m = sn_shape_numel(&s), bad = 0, inf = 0;
        double d = 0, mag = 1e-30;
        for (int64_t j = 0; j < m; j++) {
            bad += memcmp(&val[0][i][j], &val[1][i][j], 4) != 0;
            inf += !isfinite(val[0][i][j]);
            d = fmax(d, fabs((double)val[0][i][j] - val[1][i][j]));
            mag = fmax(mag, fabs((double)val[1][i][j]));
        }
        CHECK(inf == 0, "%s: %s has %lld values that are not finite", name, what[i],
              (long long)inf);
        const loose *l = NULL;
        for (int k = 0; k < nl; k++)
            if (lo[k].target == i) l = &lo[k];
        if (l) {
            double big = l->scale < 0 ? mag : max_abs(val[1][l->scale], sd[1].g, sd[1].t[l->scale]);
            CHECK(d <= l->tol * big, "%s: %s differs from the reference plan by %.3g of the "
                  "largest %s (at most %g)", name, what[i], d / big,
                  what[l->scale < 0 ? i : l->scale], l->tol);
        } else
            CHECK(bad == 0, "%s: %s differs from the reference plan in %lld of %lld values "
                  "(max relative difference %.3g)", name, what[i], (long long)bad,
                  (long long)m, d / mag);
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < nt; i++) free(val[k][i]);
}

/* loss = sum(y * R) with R random of y's shape; coarse: R in multiples of 1/2 */
static sn_node weighted_sum_r(sn_graph *g, sn_node y, bool coarse) {
    sn_shape ys = sn_node_shape(g, y);
    float *R = malloc(sizeof(float) * (size_t)sn_shape_numel(&ys));
    fill(R, sn_shape_numel(&ys), 1.0f, 0.0f);
    for (int64_t i = 0; coarse && i < sn_shape_numel(&ys); i++) R[i] = roundf(2 * R[i]) / 2;
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F32, &ys, R)), 0, NULL, false);
    free(R);
    return loss;
}
static sn_node weighted_sum(sn_graph *g, sn_node y) { return weighted_sum_r(g, y, false); }

/* The reference for a convolution output that the plan stores in bfloat16 for
 * BatchNormalization: the same value through explicit casts to bfloat16 and back (the
 * rounding the convolution does as it writes; the gradient comes back through the casts
 * rounded as bn_grad_x's stored output is) */
static sn_node rounded(sn_graph *g, sn_node v, bool casts) {
    return casts ? sn_cast(g, sn_cast(g, v, SN_BF16), SN_F32) : v;
}

/* The graph's targets: t[0] the loss, t[1..nw] its gradients for wrt[0..nw) */
static sn_graph *with_gradients(sn_graph *g, sn_node loss, int nw, const sn_node *wrt,
                                sn_node *t) {
    t[0] = loss;
    CHECK_OK(sn_gradients(g, loss, nw, wrt, t + 1));
    return g;
}

/* The pointwise pair's graph, with the casts of the reference where casts. */
enum { PAIR_NW = 8 };
static sn_graph *pair_graph(int64_t N, int64_t H, int64_t C, int64_t F, int K2,
                            bool second_reader, bool casts, sn_node *t) {
    rng_state = 424242; /* the same variables on both sides */
    sn_graph *g = sn_graph_new();
    sn_node x = var(g, "x", sn_shape_make(4, N, H, H, C), 1.0f, 0.0f);
    sn_node w1 = var(g, "w1", sn_shape_make(4, (int64_t)1, (int64_t)1, C, F), 0.3f, 0.0f);
    sn_node b1 = var(g, "b1", sn_shape_make(1, F), 0.5f, 0.0f);
    sn_node w2 = var(g, "w2", sn_shape_make(4, (int64_t)K2, (int64_t)K2, F, C), 0.3f, 0.0f);
    sn_conv2d_opts o = sn_conv2d_opts_defaults();
    o.padding = SN_PAD_SAME;
    sn_node g1, be1, g2, be2;
    sn_node h1 = rounded(g, sn_bias_add(g, sn_conv2d(g, x, w1, &o), b1), casts);
    sn_node a1 = sn_relu6(g, bn(g, h1, F, "g1", "be1", &g1, &be1));
    /* a 3x3 convolution's output stays float32 (oneDNN's kernels that write bfloat16 here
     * are the 1x1 ones) */
    sn_node y = bn(g, rounded(g, sn_conv2d(g, a1, w2, &o), casts && K2 == 1), C, "g2", "be2",
                   &g2, &be2);
    sn_node loss = weighted_sum(g, y);
    if (second_reader) loss = sn_add(g, loss, weighted_sum(g, a1));
    return with_gradients(g, loss, PAIR_NW,
                          (sn_node[PAIR_NW]){x, w1, b1, g1, be1, w2, g2, be2}, t);
}

/* The pointwise pair, twice:
 * - SN_BF16_STORE=exact against =0: `exact` values stored, every target the same bits
 *   (sliced_dw2: without the storage the second filter gradient runs over batch slices, its
 *   f32 operands' bf16 copies passing 4 MB, with it in one piece: the slices' partial sums
 *   make another summation order);
 * - the default against the graph with explicit casts under `exact`: `rounding` values
 *   stored (the 1x1 convolutions' outputs too), the same bits but the bias gradient, which
 *   the default sums from bn_grad_x's float32 dx and the reference from its rounded copy: M
 *   terms, each off by at most 2^-9 of itself, where the exact sum is zero (a bias before
 *   BatchNormalization changes nothing), so both are noise of that size. Checked against the
 *   largest dgamma1, a sum of M terms of a like scale (0.16 % - 0.36 % here, within 2 %);
 *   the exact comparison checks the bias gradient bit for bit. */
static void check_case(const char *name, int64_t N, int64_t H, int64_t C, int64_t F, int K2,
                       bool second_reader, int exact, int rounding, bool sliced_dw2) {
    static const char *const what[PAIR_NW + 1] = {"loss", "dx", "dw1", "db1", "dgamma1",
                                                  "dbeta1", "dw2", "dgamma2", "dbeta2"};
    sn_node t[PAIR_NW + 1], tc[PAIR_NW + 1];
    sn_graph *g = pair_graph(N, H, C, F, K2, second_reader, false, t);
    sn_graph *gc = pair_graph(N, H, C, F, K2, second_reader, true, tc);
    const loose dw2 = {6, 1e-5, -1}, db1 = {3, 2e-2, 4};
    char nm[160];
    snprintf(nm, sizeof nm, "%s (exact)", name);
    const bool on = bf16_runs();
    compare_sides(nm, (side[2]){{g, t, "exact"}, {g, t, "0"}}, PAIR_NW + 1, what,
                  on ? exact : 0, 0, true, &dw2, sliced_dw2);
    /* the reference stores in bfloat16 only the relu6 output where it is the 1x1 second
     * convolution's alone (the casts read every bn_grad_x output) */
    int ref = K2 == 1 && !second_reader;
    snprintf(nm, sizeof nm, "%s (rounded for BatchNormalization)", name);
    compare_sides(nm, (side[2]){{g, t, NULL}, {gc, tc, "exact"}}, PAIR_NW + 1, what,
                  on ? rounding : 0, on ? ref : 0, on, (loose[2]){db1, dw2}, sliced_dw2 ? 2 : 1);
    sn_graph_free(g);
    sn_graph_free(gc);
}

/* Xception's SeparableConv2D before BatchNormalization: x -> relu -> depthwise 3x3 ->
 * pointwise 1x1 + bias -> BatchNormalization -> loss. */
enum { SEP_NW = 6 };
static sn_graph *separable_graph(int64_t N, int64_t H, int64_t C, int64_t F, bool casts,
                                 sn_node *t) {
    rng_state = 424242;
    sn_graph *g = sn_graph_new();
    sn_node x = var(g, "x", sn_shape_make(4, N, H, H, C), 1.0f, 0.0f);
    sn_node wd = var(g, "wd", sn_shape_make(4, (int64_t)3, (int64_t)3, C, (int64_t)1), 0.5f, 0.0f);
    sn_node wp = var(g, "wp", sn_shape_make(4, (int64_t)1, (int64_t)1, C, F), 0.3f, 0.0f);
    sn_node bp = var(g, "bp", sn_shape_make(1, F), 0.5f, 0.0f);
    sn_conv2d_opts o = sn_conv2d_opts_defaults();
    o.padding = SN_PAD_SAME;
    sn_node d = sn_depthwise_conv2d(g, sn_relu(g, x), wd, &o);
    sn_node gm, bt;
    sn_node y = bn(g, rounded(g, sn_bias_add(g, sn_conv2d(g, d, wp, &o), bp), casts), F, "g",
                   "b", &gm, &bt);
    sn_node loss = weighted_sum(g, y);
    return with_gradients(g, loss, SEP_NW, (sn_node[SEP_NW]){x, wd, wp, bp, gm, bt}, t);
}

/* Exact: two values stored, the depthwise output (the pointwise forward and filter gradient
 * read it; the depthwise forward writes it a slice of images at a time) and the bn_grad_x
 * output; rounded: the pointwise output too (the reference's casts keep the bn_grad_x output
 * float32). */
static void check_separable(const char *name, int64_t N, int64_t H, int64_t C, int64_t F) {
    static const char *const what[SEP_NW + 1] = {"loss", "dx", "d depthwise", "d pointwise",
                                                 "d bias", "dgamma", "dbeta"};
    sn_node t[SEP_NW + 1], tc[SEP_NW + 1];
    sn_graph *g = separable_graph(N, H, C, F, false, t);
    sn_graph *gc = separable_graph(N, H, C, F, true, tc);
    char nm[160];
    snprintf(nm, sizeof nm, "%s (exact)", name);
    const bool on = bf16_runs();
    compare_sides(nm, (side[2]){{g, t, "exact"}, {g, t, "0"}}, SEP_NW + 1, what, on ? 2 : 0, 0,
                  true, NULL, 0);
    snprintf(nm, sizeof nm, "%s (rounded for BatchNormalization)", name);
    const loose db = {4, 2e-2, 5};
    compare_sides(nm, (side[2]){{g, t, NULL}, {gc, tc, "exact"}}, SEP_NW + 1, what, on ? 3 : 0,
                  on ? 1 : 0, on, &db, 1);
    sn_graph_free(g);
    sn_graph_free(gc);
}

/* The tail of an Xception block: x -> conv 1x1 + bias -> BatchNormalization -> max pool 3x3
 * stride 2 "same", plus a residual 1x1 stride-2 convolution of x -> loss. By default three
 * values are stored: the pointwise output for BatchNormalization, the BatchNormalization
 * output for the max pool and its gradient (both rounded), and bn_grad_x's output for the
 * pointwise gradients; the reference has the casts at the first two and stores nothing (its
 * casts read bn_grad_x's output). The same bits but the bias gradient (check_case). The
 * reference's casts round the gradient coming back from the pool too, which the plan does
 * not; with the loss's weights in multiples of 1/2 that gradient (sums of up to four of them:
 * the 3x3 windows overlap) is a bfloat16 number already, so the rounding changes nothing. */
enum { TAIL_NW = 6 };
static sn_graph *tail_graph(int64_t N, int64_t H, int64_t C, int64_t F, bool casts, sn_node *t) {
    rng_state = 424242;
    sn_graph *g = sn_graph_new();
    sn_node x = var(g, "x", sn_shape_make(4, N, H, H, C), 1.0f, 0.0f);
    sn_node wp = var(g, "wp", sn_shape_make(4, (int64_t)1, (int64_t)1, C, F), 0.3f, 0.0f);
    sn_node bp = var(g, "bp", sn_shape_make(1, F), 0.5f, 0.0f);
    sn_node wr = var(g, "wr", sn_shape_make(4, (int64_t)1, (int64_t)1, C, F), 0.3f, 0.0f);
    sn_conv2d_opts o = sn_conv2d_opts_defaults();
    o.padding = SN_PAD_SAME;
    sn_node gm, bt;
    sn_node h = rounded(g, sn_bias_add(g, sn_conv2d(g, x, wp, &o), bp), casts);
    sn_node y = rounded(g, bn(g, h, F, "g", "b", &gm, &bt), casts);
    sn_pool2d_opts po = sn_pool2d_opts_defaults();
    po.pool_h = po.pool_w = 3;
    po.stride_h = po.stride_w = 2;
    po.padding = SN_PAD_SAME;
    sn_conv2d_opts o2 = o;
    o2.stride_h = o2.stride_w = 2;
    sn_node sum = sn_add(g, sn_max_pool2d(g, y, &po), sn_conv2d(g, x, wr, &o2));
    sn_node loss = weighted_sum_r(g, sum, true);
    return with_gradients(g, loss, TAIL_NW, (sn_node[TAIL_NW]){x, wp, bp, gm, bt, wr}, t);
}

static void check_tail(const char *name, int64_t N, int64_t H, int64_t C, int64_t F) {
    static const char *const what[TAIL_NW + 1] = {"loss", "dx", "d pointwise", "d bias",
                                                  "dgamma", "dbeta", "d residual"};
    sn_node t[TAIL_NW + 1], tc[TAIL_NW + 1];
    sn_graph *g = tail_graph(N, H, C, F, false, t);
    sn_graph *gc = tail_graph(N, H, C, F, true, tc);
    const loose db = {3, 2e-2, 4};
    /* without oneDNN the BatchNormalization output for the pool is stored all the same (its
     * kernels are sinter's), so the reference's other casts differ: counts only */
    const bool on = bf16_runs();
    compare_sides(name, (side[2]){{g, t, NULL}, {gc, tc, "exact"}}, TAIL_NW + 1, what,
                  on ? 3 : sn_cpu_bf16_pays() ? 1 : 0, 0, on, &db, 1);
    sn_graph_free(g);
    sn_graph_free(gc);
}

int main(void) {
    check_case("pointwise pair", 4, 6, 32, 48, 1, false, 3, 5, false);
    check_case("relu6 output read twice", 4, 6, 32, 48, 1, true, 2, 4, false);
    check_case("3x3 second convolution", 4, 6, 32, 48, 3, false, 1, 2, false);
    /* x 40x24x24x128: the first filter gradient's bf16 copy of x passes 4 MB, so it runs in
     * two slices of 20 images with or without the storage, its dy bf16 with it (the same
     * bits); the second one is sliced only without it */
    check_case("sliced filter gradient", 40, 24, 128, 32, 1, false, 3, 5, true);
    /* the depthwise output in f32 slices of at most 1 MB: 4 images of 6x6x64 (one slice), 19
     * of 24x24x64 (147 KB each: two slices of 7, then one of 5) */
    check_separable("separable 6x6", 4, 6, 64, 96);
    check_separable("separable 24x24 in slices", 19, 24, 64, 32);
    check_tail("block tail with a max pool", 4, 12, 32, 64);
    if (!bf16_runs())
        sn_test_skip("mixed bf16 computes in f32 on this CPU, or the build has no oneDNN: "
                     "the counts stored in bf16 checked, the bf16 cases did not run");
    return sn_test_finish("test_bf16_store");
}
