/* The fused BatchNormalization training ops (graph/op_batch_norm.c): the CPU kernels
 * (backend/cpu/cpu_batch_norm.c) against the double reference on NHWC shapes with odd channel
 * counts, counts that are not multiples of 16, one row, MobileNetV2-like shapes and more rows
 * than the fixed chunk grid holds at its smallest chunk; inputs with a mean far from 0 (the
 * one-pass statistics' hard case); outputs filled with NaN first (every element written); the
 * same bits on 1 thread and on 2. The gradient rule itself is checked by finite differences in
 * test_gradcheck ("batch_norm_train"); the layer's agreement with Keras by the interop tests
 * (tests/python: bn_cnn, finetune_base, MobileNetV2 in test_keras_stock_models). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/kernel.h"
#include "kernel_test_util.h"

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
    free(x), free(dy), free(ga), free(be), free(st), free(dp);
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
    printf("%d comparisons, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
