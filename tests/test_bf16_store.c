/* Values stored in bfloat16 under mixed bf16 (graph/plan_bf16.c): the plan against the one
 * with SN_BF16_STORE=0, on the pattern of MobileNetV2's and Xception's pointwise layers:
 *
 *   x -> conv 1x1 + bias -> BatchNormalization -> relu6 -> conv KxK -> BatchNormalization
 *     -> loss = sum(y * R) [+ sum(a1 * R2): a second reader of the relu6 output]
 *
 * with the gradients of x and every variable. Where the second convolution is 1x1, three
 * values qualify: the relu6 output (read by that convolution's forward and filter gradient)
 * and the two bn_grad_x outputs (read by the data and filter gradients of the convolution
 * before each). A second reader of the relu6 output keeps it float32; a 3x3 second
 * convolution keeps its operands float32 (the relu6 output and its dy). The stored values are
 * the bfloat16 copies the convolutions made themselves, rounded alike, so every target must
 * be the same bits as without the storage (a filter gradient that the storage spares its
 * batch slices sums in another order: equal to rounding); each bf16 value's producer and
 * readers must see the bfloat16 dtype, and the arena must hold no overlap (plan_check.h).
 * The large case runs the first layer's filter gradient over batch slices
 * (cpu_conv_slices.c), one operand bf16. And Xception's SeparableConv2D before
 * BatchNormalization, whose depthwise output is stored in bfloat16 for the pointwise half
 * (cpu_depthwise.c writes it a slice of images at a time).
 *
 * Needs a CPU where mixed bf16 computes in bf16 (AVX512-BF16; ctest sets SN_BF16_COMPUTE=on)
 * and oneDNN: elsewhere it checks that no value is stored in bfloat16 and exits 77 (SKIPPED). */
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

/* Plans g's targets t[0..nt) under mixed bf16 with and without the storage, runs each once
 * and compares: expect values stored in bfloat16 (0 where mixed bf16 computes in f32), every
 * target the same bits, but target `reordered` (-1: none), which may sum in another order
 * (equal to a relative 1e-5). what[i] names t[i]. */
static void compare_plans(const char *name, sn_graph *g, const sn_node *t, int nt,
                          const char *const *what, int expect, int reordered) {
    float *val[2][16] = {{NULL}};
    int count[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        if (k) setenv("SN_BF16_STORE", "0", 1);
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
    int want = bf16_runs() ? expect : 0;
    CHECK(count[0] == want && count[1] == 0,
          "%s: %d values stored in bfloat16 (%d with SN_BF16_STORE=0), expected %d and 0", name,
          count[0], count[1], want);
    for (int i = 0; i < nt && val[0][i] && val[1][i]; i++) {
        sn_shape s = sn_node_shape(g, t[i]);
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
        if (i == reordered)
            CHECK(d <= 1e-5 * mag, "%s: %s differs from the plan without bf16 storage by %.3g "
                  "relative", name, what[i], d / mag);
        else
            CHECK(bad == 0, "%s: %s differs from the plan without bf16 storage in %lld of %lld "
                  "values (max relative difference %.3g)", name, what[i], (long long)bad,
                  (long long)m, d / mag);
    }
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < nt; i++) free(val[k][i]);
}

/* loss = sum(y * R) with R random of y's shape */
static sn_node weighted_sum(sn_graph *g, sn_node y) {
    sn_shape ys = sn_node_shape(g, y);
    float *R = malloc(sizeof(float) * (size_t)sn_shape_numel(&ys));
    fill(R, sn_shape_numel(&ys), 1.0f, 0.0f);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F32, &ys, R)), 0, NULL, false);
    free(R);
    return loss;
}

/* The pointwise pair. sliced_dw2: without the storage the second filter gradient runs over
 * batch slices (its f32 operands' bf16 copies pass 4 MB), with it in one piece (its operands
 * are bf16 already, it copies nothing): the slices' partial sums make another summation
 * order. */
static void check_case(const char *name, int64_t N, int64_t H, int64_t C, int64_t F, int K2,
                       bool second_reader, int expect, bool sliced_dw2) {
    sn_graph *g = sn_graph_new();
    sn_node x = var(g, "x", sn_shape_make(4, N, H, H, C), 1.0f, 0.0f);
    sn_node w1 = var(g, "w1", sn_shape_make(4, (int64_t)1, (int64_t)1, C, F), 0.3f, 0.0f);
    sn_node b1 = var(g, "b1", sn_shape_make(1, F), 0.5f, 0.0f);
    sn_node w2 = var(g, "w2", sn_shape_make(4, (int64_t)K2, (int64_t)K2, F, C), 0.3f, 0.0f);
    sn_conv2d_opts o = sn_conv2d_opts_defaults();
    o.padding = SN_PAD_SAME;
    sn_node g1, be1, g2, be2;
    sn_node h1 = sn_bias_add(g, sn_conv2d(g, x, w1, &o), b1);
    sn_node a1 = sn_relu6(g, bn(g, h1, F, "g1", "be1", &g1, &be1));
    sn_node y = bn(g, sn_conv2d(g, a1, w2, &o), C, "g2", "be2", &g2, &be2);
    sn_node loss = weighted_sum(g, y);
    if (second_reader) loss = sn_add(g, loss, weighted_sum(g, a1));
    enum { NW = 8 };
    sn_node wrt[NW] = {x, w1, b1, g1, be1, w2, g2, be2}, t[NW + 1] = {loss};
    CHECK_OK(sn_gradients(g, loss, NW, wrt, t + 1));
    static const char *const what[NW + 1] = {"loss", "dx", "dw1", "db1", "dgamma1", "dbeta1",
                                             "dw2", "dgamma2", "dbeta2"};
    compare_plans(name, g, t, NW + 1, what, expect, sliced_dw2 ? 6 : -1);
    sn_graph_free(g);
}

/* Xception's SeparableConv2D before BatchNormalization: x -> relu -> depthwise 3x3 ->
 * pointwise 1x1 + bias -> BatchNormalization -> loss. Two values qualify: the depthwise
 * output (the pointwise forward and filter gradient read it; the depthwise forward writes it
 * a slice of images at a time) and the bn_grad_x output. */
static void check_separable(const char *name, int64_t N, int64_t H, int64_t C, int64_t F) {
    sn_graph *g = sn_graph_new();
    sn_node x = var(g, "x", sn_shape_make(4, N, H, H, C), 1.0f, 0.0f);
    sn_node wd = var(g, "wd", sn_shape_make(4, (int64_t)3, (int64_t)3, C, (int64_t)1), 0.5f, 0.0f);
    sn_node wp = var(g, "wp", sn_shape_make(4, (int64_t)1, (int64_t)1, C, F), 0.3f, 0.0f);
    sn_node bp = var(g, "bp", sn_shape_make(1, F), 0.5f, 0.0f);
    sn_conv2d_opts o = sn_conv2d_opts_defaults();
    o.padding = SN_PAD_SAME;
    sn_node d = sn_depthwise_conv2d(g, sn_relu(g, x), wd, &o);
    sn_node gm, bt;
    sn_node y = bn(g, sn_bias_add(g, sn_conv2d(g, d, wp, &o), bp), F, "g", "b", &gm, &bt);
    sn_node loss = weighted_sum(g, y);
    enum { NW = 6 };
    sn_node wrt[NW] = {x, wd, wp, bp, gm, bt}, t[NW + 1] = {loss};
    CHECK_OK(sn_gradients(g, loss, NW, wrt, t + 1));
    static const char *const what[NW + 1] = {"loss", "dx", "d depthwise", "d pointwise",
                                             "d bias", "dgamma", "dbeta"};
    compare_plans(name, g, t, NW + 1, what, 2, -1);
    sn_graph_free(g);
}

int main(void) {
    check_case("pointwise pair", 4, 6, 32, 48, 1, false, 3, false);
    check_case("relu6 output read twice", 4, 6, 32, 48, 1, true, 2, false);
    check_case("3x3 second convolution", 4, 6, 32, 48, 3, false, 1, false);
    /* x 40x24x24x128: the first filter gradient's bf16 copy of x passes 4 MB, so it runs in
     * two slices of 20 images with or without the storage, its dy bf16 with it (the same
     * bits); the second one is sliced only without it */
    check_case("sliced filter gradient", 40, 24, 128, 32, 1, false, 3, true);
    /* the depthwise output in f32 slices of at most 1 MB: 4 images of 6x6x64 (one slice), 19
     * of 24x24x64 (147 KB each: two slices of 7, then one of 5) */
    check_separable("separable 6x6", 4, 6, 64, 96);
    check_separable("separable 24x24 in slices", 19, 24, 64, 32);
    if (!bf16_runs())
        sn_test_skip("mixed bf16 computes in f32 on this CPU, or the build has no oneDNN: "
                     "nothing is stored in bf16 (checked), the bf16 cases did not run");
    return sn_test_finish("test_bf16_store");
}
