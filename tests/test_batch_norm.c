/* The fused BatchNormalization training ops (graph/op_batch_norm.c): the CPU kernels
 * (backend/cpu/cpu_batch_norm.c) against the double reference on NHWC shapes with odd channel
 * counts, counts that are not multiples of 16, one row, MobileNetV2-like shapes and more rows
 * than the fixed chunk grid holds at its smallest chunk; inputs with a mean far from 0 (the
 * one-pass statistics' hard case); outputs filled with NaN first (every element written); the
 * same bits on 1 thread and on 2. Through a graph and a plan: y, dx, dgamma and dbeta against
 * the layer's former graph-op formula (measured 1e-7..4e-7 of each output's largest element,
 * bound 5e-6), and the same bits under bf16_compute as without. bn_grad_x with the sum of dx
 * (the bias gradient fused into it) against dx's own sum. The gradient rule itself is
 * checked by finite differences in test_gradcheck ("batch_norm_train"); the layer's agreement
 * with Keras by the interop tests (bn_cnn and finetune_base in test_keras_interop, MobileNetV2
 * in test_keras_stock_models). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/kernel.h"
#include "kernel_test_util.h"
#include "sinter/graph.h"

static sn_rng rng;
static int cases;

static float *rnd(int64_t n, double scale, double shift) {
    float *x = malloc(sizeof *x * (size_t)(n ? n : 1));
    if (!x) abort();
    for (int64_t i = 0; i < n; i++) x[i] = (float)(shift + scale * sn_rng_normal(&rng));
    return x;
}

static float *nans(int64_t n) {
    float *y = malloc(sizeof *y * (size_t)(n ? n : 1));
    if (!y) abort();
    for (int64_t i = 0; i < n; i++) y[i] = NAN;
    return y;
}

static void run_once(const sn_kernel *k, sn_kcall *c) {
    size_t sb = 0;
    c->scratch = NULL;
    c->scratch_bytes = 0;
    c->state = NULL;
    if (k->prepare && k->prepare(c, &sb) != SN_OK) FAIL("prepare %s: %s", k->impl, sn_last_error());
    void *s = malloc(sb ? sb : 1);
    c->scratch = s;
    c->scratch_bytes = sb;
    if (k->run(c) != SN_OK) FAIL("run %s: %s", k->impl, sn_last_error());
    if (k->release) k->release(c);
    free(s);
}

/* Runs op on the reference, on the CPU table with 1 thread and with 2; compares. */
static void op_case(const char *name, sn_op op, sn_shape ys, int n_in, const sn_shape *xs,
                    float **x, double tol) {
    int64_t n = sn_shape_numel(&ys);
    float *y[3] = {nans(n), nans(n), nans(n)};
    for (int i = 0; i < 3; i++) {
        tcall t;
        tc_init(&t, op, SN_F32, ys);
        t.attr.norm.epsilon = 1e-3;
        for (int j = 0; j < n_in; j++) tc_input(&t, SN_F32, xs[j], x[j]);
        t.c.out = y[i];
        const sn_kernel *k = sn_kernel_select(i == 0 ? sn_ref_kernels() : sn_cpu_kernels(), &t.c);
        if (!k || (i == 0) != (strcmp(k->impl, "ref") == 0)) {
            FAIL("%s: kernel %s on the %s table", name, k ? k->impl : "none",
                 i == 0 ? "reference" : "CPU");
            goto out;
        }
        int prev = sn_threads_enter(i == 1 ? 1 : 2);
        run_once(k, &t.c);
        sn_threads_leave(prev);
    }
    cases++;
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)y[1][i] - y[0][i]) / (1.0 + fabs((double)y[0][i]));
        if (!(e <= worst)) worst = e, at = i;
    }
    if (!(worst <= tol))
        FAIL("%s: element %lld is %.9g, reference %.9g (error %.3g > %.3g)", name, (long long)at,
             y[1][at], y[0][at], worst, tol);
    if (memcmp(y[1], y[2], sizeof(float) * (size_t)n) != 0)
        FAIL("%s: 1 thread and 2 threads differ", name);
out:
    free(y[0]), free(y[1]), free(y[2]);
}

/* bn_grad_x with the sum of dx over rows (SN_FUSED_BN_GRAD_SUM: a bias gradient), on the
 * CPU table's fused kernel at 1 and 2 threads. dp is arbitrary here (not dy's own parameter
 * gradients, for which the sums would vanish to rounding), so the sums are real: each must
 * match the double sum of the call's own dx within 1e-6 of the sum of |dx|; dx must be the
 * unfused kernel's bits; and 1 thread and 2 the same bits. */
static void grad_sum_case(const char *name, sn_shape xs, sn_shape ss, sn_shape cs, float *x,
                          float *st, float *ga, float *dy, float *dp) {
    const int64_t n = sn_shape_numel(&xs), C = xs.dim[xs.ndim - 1];
    float *y[3] = {nans(n), nans(n), nans(n)}, *sum[2] = {nans(C), nans(C)};
    sn_shape ks = xs;
    for (int i = 0; i < ks.ndim - 1; i++) ks.dim[i] = 1;
    for (int i = 0; i < 3; i++) {
        tcall t;
        tc_init(&t, SN_OP_BN_GRAD_X, SN_F32, xs);
        t.attr.norm.epsilon = 1e-3;
        tc_input(&t, SN_F32, xs, x);
        tc_input(&t, SN_F32, ss, st);
        tc_input(&t, SN_F32, cs, ga);
        tc_input(&t, SN_F32, xs, dy);
        tc_input(&t, SN_F32, ss, dp);
        t.c.out = y[i];
        if (i < 2) {
            t.c.fused = SN_FUSED_BN_GRAD_SUM;
            t.c.n_out2 = 1;
            t.c.y2[0] = (sn_tdesc){SN_F32, ks};
            t.c.out2[0] = sum[i];
            t.c.attr2[0] = &t.attr;
        }
        const sn_kernel *k = sn_kernel_select(sn_cpu_kernels(), &t.c);
        if (!k) {
            FAIL("%s: no CPU kernel for bn_grad_x %s", name, i < 2 ? "with its sum" : "alone");
            goto out;
        }
        int prev = sn_threads_enter(i == 1 ? 2 : 1);
        run_once(k, &t.c);
        sn_threads_leave(prev);
    }
    cases++;
    if (memcmp(y[0], y[2], sizeof(float) * (size_t)n) != 0)
        FAIL("%s: dx with the sum is not the unfused kernel's dx bit for bit", name);
    if (memcmp(y[0], y[1], sizeof(float) * (size_t)n) != 0 ||
        memcmp(sum[0], sum[1], sizeof(float) * (size_t)C) != 0)
        FAIL("%s: 1 thread and 2 threads differ", name);
    int64_t M = C ? n / C : 0;
    for (int64_t j = 0; j < C; j++) {
        double ref = 0, mag = 0;
        for (int64_t r = 0; r < M; r++) ref += y[0][r * C + j], mag += fabs(y[0][r * C + j]);
        if (!(fabs(sum[0][j] - ref) <= 1e-6 * mag) || (mag > 0 && ref == 0)) {
            FAIL("%s: channel %lld sums to %.9g, dx's double sum is %.9g (|dx| sums to %.3g)",
                 name, (long long)j, sum[0][j], ref, mag);
            break;
        }
    }
out:
    free(y[0]), free(y[1]), free(y[2]), free(sum[0]), free(sum[1]);
}

/* x [N, H, W, C] around `shift`; the four ops, each fed the reference's results upstream */
static void bn_case(int64_t N, int64_t H, int64_t W, int64_t C, double shift) {
    sn_shape xs = {.ndim = 4, .dim = {N, H, W, C}}, cs = {.ndim = 1, .dim = {C}},
             ss = {.ndim = 2, .dim = {2, C}};
    int64_t n = N * H * W * C;
    float *x = rnd(n, 2.0, shift), *dy = rnd(n, 1.0, 0.3), *ga = rnd(C, 1.0, 1.0),
          *be = rnd(C, 1.0, 0.0), *st = nans(2 * C), *dp = nans(2 * C);
    char nm[96];
    snprintf(nm, sizeof nm, "%lldx%lldx%lldx%lld around %g", (long long)N, (long long)H,
             (long long)W, (long long)C, shift);
    char what[128];
    snprintf(what, sizeof what, "bn_stats %s", nm);
    op_case(what, SN_OP_BN_STATS, ss, 1, &xs, &x, 2e-6);
    /* the reference's statistics and parameter gradients feed the later ops */
    tcall t;
    tc_init(&t, SN_OP_BN_STATS, SN_F32, ss);
    t.attr.norm.epsilon = 1e-3;
    tc_input(&t, SN_F32, xs, x);
    t.c.out = st;
    run_once(sn_ref_kernels()->k[SN_OP_BN_STATS], &t.c);
    snprintf(what, sizeof what, "bn_train %s", nm);
    op_case(what, SN_OP_BN_TRAIN, xs, 4, (sn_shape[]){xs, ss, cs, cs}, (float *[]){x, st, ga, be},
            2e-6);
    snprintf(what, sizeof what, "bn_grad_params %s", nm);
    op_case(what, SN_OP_BN_GRAD_PARAMS, ss, 3, (sn_shape[]){xs, ss, xs}, (float *[]){x, st, dy},
            2e-5);
    tc_init(&t, SN_OP_BN_GRAD_PARAMS, SN_F32, ss);
    t.attr.norm.epsilon = 1e-3;
    tc_input(&t, SN_F32, xs, x);
    tc_input(&t, SN_F32, ss, st);
    tc_input(&t, SN_F32, xs, dy);
    t.c.out = dp;
    run_once(sn_ref_kernels()->k[SN_OP_BN_GRAD_PARAMS], &t.c);
    snprintf(what, sizeof what, "bn_grad_x %s", nm);
    op_case(what, SN_OP_BN_GRAD_X, xs, 5, (sn_shape[]){xs, ss, cs, xs, ss},
            (float *[]){x, st, ga, dy, dp}, 2e-6);
    float *dp_any = rnd(2 * C, 50.0, 10.0);
    snprintf(what, sizeof what, "bn_grad_x + sum %s", nm);
    grad_sum_case(what, xs, ss, cs, x, st, ga, dy, dp_any);
    free(dp_any);
    free(x), free(dy), free(ga), free(be), free(st), free(dp);
}

/* The layer's old graph-op formula (before issue 23): mean, biased variance, normalise */
static sn_node old_formula(sn_graph *g, sn_node x, sn_node ga, sn_node be) {
    int axes[3] = {0, 1, 2};
    sn_node mean = sn_reduce_mean(g, x, 3, axes, false), xc = sn_sub(g, x, mean);
    sn_node var = sn_reduce_mean(g, sn_mul(g, xc, xc), 3, axes, false);
    sn_node inv = sn_sqrt(g, sn_add(g, var, sn_scalar(g, SN_F32, 1e-3)));
    return sn_add(g, sn_mul(g, xc, sn_div(g, ga, inv)), be);
}

/* y and the gradients of sum(y * r) w.r.t. x, gamma, beta: the fused op against the old
 * formula (same function, other roundings), and under bf16_compute against plain f32 (the
 * bn kernels ignore the flag: BatchNorm stays f32 under mixed bf16, as in Keras) bit for bit. */
static void graph_case(int64_t N, int64_t H, int64_t W, int64_t C) {
    sn_shape xs = {.ndim = 4, .dim = {N, H, W, C}}, cs = {.ndim = 1, .dim = {C}};
    int64_t n = N * H * W * C;
    float *out[3][4];
    for (int v = 0; v < 3; v++) {
        sn_graph *g = sn_graph_new();
        sn_node x = sn_input(g, "x", SN_F32, &xs), ga = sn_input(g, "gamma", SN_F32, &cs),
                be = sn_input(g, "beta", SN_F32, &cs), r = sn_input(g, "r", SN_F32, &xs);
        sn_node y = v == 0 ? old_formula(g, x, ga, be)
                           : sn_batch_norm_train(g, x, ga, be, 1e-3, NULL);
        sn_node loss = sn_reduce_sum(g, sn_mul(g, y, r), 0, NULL, false), gr[3];
        sn_status s = sn_gradients(g, loss, 3, (sn_node[]){x, ga, be}, gr);
        sn_plan_opts o = sn_plan_opts_defaults();
        o.bf16_compute = v == 2;
        sn_plan *p = NULL;
        if (s == SN_OK) s = sn_plan_new(&p, g, 4, (sn_node[]){y, gr[0], gr[1], gr[2]}, &o);
        if (s != SN_OK) {
            FAIL("graph %lldx%lld, variant %d: %s", (long long)n / C, (long long)C, v,
                 sn_last_error());
            sn_graph_free(g);
            return;
        }
        sn_rng_init(&rng, 99, 0); /* the same inputs in every variant */
        float *src[4] = {rnd(n, 2.0, 3.0), rnd(C, 1.0, 1.0), rnd(C, 1.0, 0.0), rnd(n, 1.0, 0.0)};
        sn_node ins[4] = {x, ga, be, r};
        for (int i = 0; i < 4; i++) {
            size_t bytes = sizeof(float) * (size_t)(i == 1 || i == 2 ? C : n);
            memcpy(sn_plan_buffer(p, ins[i]), src[i], bytes);
            free(src[i]);
        }
        if (sn_plan_run(p, 1, NULL, NULL) != SN_OK) FAIL("run: %s", sn_last_error());
        sn_node t[4] = {y, gr[0], gr[1], gr[2]};
        for (int i = 0; i < 4; i++) {
            size_t bytes = sizeof(float) * (size_t)(i == 1 || i == 0 ? n : C);
            out[v][i] = malloc(bytes);
            memcpy(out[v][i], sn_plan_buffer(p, t[i]), bytes);
        }
        sn_plan_free(p);
        sn_graph_free(g);
    }
    static const char *names[4] = {"y", "dx", "dgamma", "dbeta"};
    for (int i = 0; i < 4; i++) {
        int64_t k = i < 2 ? n : C;
        double worst = 0, scale = 0;
        for (int64_t j = 0; j < k; j++) scale = fmax(scale, fabs((double)out[0][i][j]));
        for (int64_t j = 0; j < k; j++)
            worst = fmax(worst, fabs((double)out[1][i][j] - out[0][i][j]) / (scale + 1e-30));
        cases += 2;
        /* dx sums M terms that nearly cancel: relative to its largest element */
        if (!(worst <= 5e-6))
            FAIL("%s, %lld rows x %lld: fused vs graph ops differ by %.3g of max |%s|", names[i],
                 (long long)(n / C), (long long)C, worst, names[i]);
        printf("ok  %-6s %5lld rows x %3lld: fused vs graph ops %.2e of max\n", names[i],
               (long long)(n / C), (long long)C, worst);
        if (memcmp(out[1][i], out[2][i], sizeof(float) * (size_t)k) != 0)
            FAIL("%s, %lld rows x %lld: the bf16_compute plan differs from f32", names[i],
                 (long long)(n / C), (long long)C);
    }
    for (int v = 0; v < 3; v++)
        for (int i = 0; i < 4; i++) free(out[v][i]);
}

int main(void) {
    sn_rng_init(&rng, 23, 0);
    bn_case(2, 5, 5, 3, 0.0);
    bn_case(3, 7, 7, 17, 5.0);     /* odd */
    bn_case(4, 4, 4, 40, -3.0);    /* not a multiple of 16 */
    bn_case(1, 1, 1, 5, 1.0);      /* one row: variance 0 */
    bn_case(2, 3, 3, 1024, 0.5);   /* Xception's widest, few rows */
    bn_case(4, 12, 12, 96, 10.0);  /* MobileNetV2-like */
    bn_case(2, 48, 48, 16, 2.0);   /* 4608 rows */
    bn_case(20, 32, 32, 7, -20.0); /* 20480 rows: chunks of more than the minimum */
    bn_case(3, 5, 5, 0, 0.0);      /* no channels */
    graph_case(4, 6, 6, 17);
    graph_case(8, 12, 12, 96);
    printf("%d comparisons, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
