/* The attention forward in bf16 (backend/cpu/cpu_attention.c, tiles_bf16: chosen when the
 * call asks for mixed precision, c->bf16 as --precision bf16 sets it, on a CPU with
 * AVX512-BF16 and a head size that is a multiple of 16) against the double reference, and
 * the backward after such a forward (P recomputed from the same bf16 scores and the
 * forward's log-sum-exp, the rest f32) against the reference's.
 *
 * Bounds. The forward rounds q (scaled), k, v and the probabilities to bf16 (8 bits, a
 * relative error of at most 2^-9 each) and sums in f32: a score of a few units moves by about
 * 1e-2, a probability by as much relative, so the output (a weighted mean of values of size
 * 1) is held to 3e-2 of 1 + |ref|; it must also differ from the f32 kernel's by more than f32
 * rounding (1e-5), which shows the bf16 products ran. The backward is held to the same 3e-2,
 * and its probabilities must sum to 1 as the forward's did (a bf16 lse with f32 scores would
 * miss by ~1e-2): every row of P sums to 1, so sum_j dv_j = sum_i dy_i per (b, h, d), held
 * to 1e-4 of sum_i |dy_i|. Exits 77 (SKIPPED) on a CPU without AVX512-BF16 or where the AVX-512
 * variant is not the one picked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/kernel.h"
#include "core/core.h"
#include "kernel_test_util.h"

static sn_rng rng;
static int cases;

static float *rnd(int64_t n) {
    float *x = malloc(sizeof *x * (size_t)(n ? n : 1));
    if (!x) abort();
    for (int64_t i = 0; i < n; i++) x[i] = (float)sn_rng_normal(&rng);
    return x;
}

static void *run_call(const sn_kernel *k, sn_kcall *c) {
    size_t sb = 0;
    c->state = NULL;
    if (k->prepare && k->prepare(c, &sb) != SN_OK) FAIL("prepare: %s", sn_last_error());
    void *scratch = malloc(sb ? sb : 1);
    c->scratch = scratch;
    c->scratch_bytes = sb;
    if (k->run(c) != SN_OK) FAIL("run: %s", sn_last_error());
    return scratch;
}

/* max over i of |got - want| / (1 + |want|) */
static double err(const float *got, const float *want, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (1.0 + fabs((double)want[i]));
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

/* dropout on the probabilities for the cases below (0: none), at step 9 */
static double drop_rate;

static void bf16_case(int64_t B, int64_t T, int64_t Tk, int64_t H, int64_t D, bool causal,
                      bool masked) {
    char name[140];
    snprintf(name, sizeof name, "bf16 attention B%lld Tq%lld Tk%lld H%lld D%lld%s%s%s",
             (long long)B, (long long)T, (long long)Tk, (long long)H, (long long)D,
             causal ? " causal" : "", masked ? " masked" : "", drop_rate > 0 ? " dropout" : "");
    sn_shape sq = {.ndim = 4, .dim = {B, T, H, D}}, sk = {.ndim = 4, .dim = {B, Tk, H, D}},
             sm = {.ndim = 3, .dim = {B, T, Tk}};
    int64_t nq = sn_shape_numel(&sq), nk = sn_shape_numel(&sk), ng = nq + 2 * nk;
    float *q = rnd(nq), *k = rnd(nk), *v = rnd(nk), *dy = rnd(nq), *m = NULL;
    if (masked) {
        m = malloc(sizeof *m * (size_t)(B * T * Tk));
        for (int64_t i = 0; i < B * T * Tk; i++) m[i] = sn_rng_below(&rng, 4) != 0;
        for (int64_t j = 0; j < Tk; j++) m[j] = 0; /* row 0's query 0 sees no key */
    }
    float *o[3], *g[2];
    for (int i = 0; i < 3; i++) o[i] = malloc(sizeof(float) * (size_t)nq);
    for (int i = 0; i < 2; i++) g[i] = malloc(sizeof(float) * (size_t)ng);
    /* f[0]: cpu bf16, f[1]: cpu f32, f[2]: reference */
    tcall f[3], b[2];
    const sn_kernel *fk[3], *bk[2];
    void *fs[3], *bs[2];
    for (int i = 0; i < 3; i++) {
        tc_init(&f[i], SN_OP_ATTENTION, SN_F32, sq);
        f[i].attr.attn.scale = 1.0 / sqrt((double)D);
        f[i].attr.attn.causal = causal;
        f[i].attr.attn.drop_rate = drop_rate;
        f[i].attr.attn.drop_seed = 5;
        f[i].c.step = 9;
        tc_input(&f[i], SN_F32, sq, q);
        tc_input(&f[i], SN_F32, sk, k);
        tc_input(&f[i], SN_F32, sk, v);
        if (m) tc_input(&f[i], SN_F32, sm, m);
        f[i].c.out = o[i];
        f[i].c.bf16 = i == 0;
        fk[i] = sn_kernel_select(i < 2 ? sn_cpu_kernels() : sn_ref_kernels(), &f[i].c);
        fs[i] = run_call(fk[i], &f[i].c);
    }
    double e16 = err(o[0], o[2], nq), e32 = err(o[1], o[2], nq), d = err(o[0], o[1], nq);
    cases++;
    if (!(e16 <= 3e-2) || !(d > 1e-5))
        FAIL("%s: error %.3g against the reference (bound 3e-2), %.3g from f32 (must be over "
             "1e-5, f32's own %.3g)", name, e16, d, e32);
    else
        printf("ok  %s: %.3g from the reference (f32 kernel %.3g)\n", name, e16, e32);
    /* b[0]: cpu bf16, linked to the bf16 forward; b[1]: reference */
    for (int i = 0; i < 2; i++) {
        tc_init(&b[i], SN_OP_ATTENTION_GRAD, SN_F32, (sn_shape){.ndim = 1, .dim = {ng}});
        b[i].attr = f[0].attr;
        b[i].c.step = 9;
        tc_input(&b[i], SN_F32, sq, q);
        tc_input(&b[i], SN_F32, sk, k);
        tc_input(&b[i], SN_F32, sk, v);
        tc_input(&b[i], SN_F32, sq, o[2]);
        tc_input(&b[i], SN_F32, sq, dy);
        if (m) tc_input(&b[i], SN_F32, sm, m);
        b[i].c.out = g[i];
        b[i].c.bf16 = i == 0;
        if (i == 0) {
            b[i].c.fwd = &f[0].c;
            b[i].c.fwd_kernel = fk[0];
        }
        bk[i] = sn_kernel_select(i == 0 ? sn_cpu_kernels() : sn_ref_kernels(), &b[i].c);
        bs[i] = run_call(bk[i], &b[i].c);
    }
    double eg = err(g[0], g[1], ng), worst = 0;
    for (int64_t bb = 0; bb < B; bb++)
        for (int64_t hd = 0; hd < H * D; hd++) {
            double sv = 0, sy = 0, ay = 0;
            for (int64_t j = 0; j < Tk; j++) sv += g[0][nq + nk + (bb * Tk + j) * H * D + hd];
            for (int64_t i = 0; i < T; i++) {
                sy += dy[(bb * T + i) * H * D + hd];
                ay += fabs(dy[(bb * T + i) * H * D + hd]);
            }
            if (!(fabs(sv - sy) / ay <= worst)) worst = fabs(sv - sy) / ay;
        }
    cases += 2;
    if (!(eg <= 3e-2)) FAIL("%s grad after a bf16 forward: error %.3g (bound 3e-2)", name, eg);
    if (drop_rate > 0) worst = 0; /* dropped probabilities do not sum to 1: no such check */
    if (!(worst <= 1e-4))
        FAIL("%s grad: sum of dv over keys misses sum of dy by %.3g of sum |dy| (bound 1e-4): "
             "the backward's probabilities do not sum to 1", name, worst);
    else
        printf("ok  %s grad: %.3g from the reference, %s %.3g\n", name, eg,
               drop_rate > 0 ? "(no sum check with dropout)" : "sum dv = sum dy within", worst);
    for (int i = 0; i < 3; i++) {
        if (fk[i]->release) fk[i]->release(&f[i].c);
        free(fs[i]);
        free(o[i]);
    }
    for (int i = 0; i < 2; i++) {
        if (bk[i]->release) bk[i]->release(&b[i].c);
        free(bs[i]);
        free(g[i]);
    }
    free(q), free(k), free(v), free(dy), free(m);
}

int main(void) {
    tcall probe;
    tc_init(&probe, SN_OP_ATTENTION, SN_F32, (sn_shape){.ndim = 4, .dim = {1, 1, 1, 16}});
    /* The bf16 arithmetic itself, on every CPU with AVX512-BF16, also where the default
     * computes mixed bf16 in f32 as faster (sn_cpu_bf16_pays: Intel without AMX) */
    setenv("SN_BF16_COMPUTE", "on", 1);
    const sn_kernel *kk = sn_kernel_select(sn_cpu_kernels(), &probe.c);
    if (!sn_cpu()->avx512_bf16 || !kk || strcmp(kk->impl, "avx512") != 0) {
        printf("SKIPPED: no AVX512-BF16 here (or the AVX-512 variant is not picked: %s)\n",
               kk ? kk->impl : "none");
        return 77;
    }
    sn_rng_init(&rng, 2626, 0);
    bf16_case(2, 64, 64, 2, 32, false, false);
    bf16_case(2, 130, 130, 2, 64, true, false);
    bf16_case(1, 5, 77, 3, 16, false, false); /* Tq != Tk, a tail block */
    bf16_case(2, 70, 70, 2, 32, true, true);
    drop_rate = 0.3;
    bf16_case(2, 130, 130, 2, 64, true, false);
    bf16_case(2, 70, 70, 2, 32, true, true);
    printf("%d comparisons, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
