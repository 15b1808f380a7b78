/* Fast f32 kernels of the activation family (graph/op_activation.c): gelu, silu, elu,
 * leaky_relu, relu6 and their gradients, written as cpu_elementwise.c's unary loops are:
 * branch-free scalar maths (bit-mask selects, vexp of cpu_vec.h) that the compiler vectorises,
 * compiled three times (AVX-512, AVX2, baseline) and picked once at registration, on the
 * calling thread below a grain of elements.
 *
 * The normal CDF of gelu is 0.5 erfc(-x / sqrt 2) with erfc from Numerical Recipes' erfcc
 * (a Chebyshev fit, fractional error < 1.2e-7 for z >= 0; erfc(z) = 2 - erfc(-z) below): one
 * exp, no libm call (but fmaf in the baseline variant: fma1), and a small relative error in the tail x << 0 where 1 + erf(x / sqrt 2)
 * would cancel. elu uses expm1 by a Taylor polynomial on (-0.5, 0] for the same reason.
 * Other dtypes fall back to the reference kernels. */
#include "backend/cpu/cpu_vec.h"

enum { GRAIN_CHEAP = 32768, GRAIN_MATH = 8192 };

/* gelu's arithmetic is written with fused multiply-adds (fmaf, rounded once): the AVX2 and
 * AVX-512 variants compile them to vfmadd, and the baseline one calls libm's fmaf, slower but
 * as exactly rounded, so the variants still agree bit for bit (tests/test_activations.c). The
 * Horner chains are what gelu costs: with separate multiplies and adds one Zen 3 thread took
 * 1.02 ms forward and 1.50 ms backward over 768 x 512 values (the char Transformer's), with
 * fmaf 0.67 and 0.98 (a standalone copy of these loops, thread CPU clock). */
INL float fma1(float a, float b, float c) { return fmaf(a, b, c); }

/* e^x as cpu_vec.h's vexp (same range reduction, clamps and polynomial), with fused steps. */
INL float vexp_f(float x) {
    x = sel(mask(x > 88.8f), 88.8f, x);
    x = sel(mask(x < -104.0f), -104.0f, x);
    const float magic = 12582912.0f;
    float t = fma1(x, 1.44269504088896341f, magic);
    float n = t - magic;
    float r = fma1(n, -0.693359375f, x);
    r = fma1(n, 2.12194440e-4f, r);
    int32_t k = (int32_t)(f2u(t) - f2u(magic));
    uint32_t k1 = (uint32_t)(k >> 1), k2 = (uint32_t)k - k1;
    float s1 = u2f((k1 + 127u) << 23), s2 = u2f((k2 + 127u) << 23);
    float p = 1.9875691500E-4f;
    p = fma1(p, r, 1.3981999507E-3f);
    p = fma1(p, r, 8.3334519073E-3f);
    p = fma1(p, r, 4.1665795894E-2f);
    p = fma1(p, r, 1.6666665459E-1f);
    p = fma1(p, r, 5.0000001201E-1f);
    p = fma1(p * r, r, r) + 1.0f;
    return p * s1 * s2;
}

/* erfc(z) for any z (NaN propagates; +-inf give 0 and 2). */
INL float verfc(float z) {
    float az = u2f(f2u(z) & 0x7fffffffu);
    float t = 1.0f / fma1(0.5f, az, 1.0f);
    float p = 0.17087277f;
    p = fma1(p, t, -0.82215223f);
    p = fma1(p, t, 1.48851587f);
    p = fma1(p, t, -1.13520398f);
    p = fma1(p, t, 0.27886807f);
    p = fma1(p, t, -0.18628806f);
    p = fma1(p, t, 0.09678418f);
    p = fma1(p, t, 0.37409196f);
    p = fma1(p, t, 1.00002368f);
    p = fma1(p, t, -1.26551223f);
    float r = t * vexp_f(fma1(-az, az, p));
    return sel(mask(z < 0.0f), 2.0f - r, r);
}

/* Phi(x) = 0.5 erfc(-x / sqrt 2) */
INL float vncdf(float x) { return 0.5f * verfc(x * -0.70710678118654752f); }

INL float vsigm(float x) { return 1.0f / (1.0f + vexp(-x)); }

/* e^x - 1 for x <= 0 (elu's negative side): Taylor to x^8 on (-0.5, 0] (truncation < 2e-8
 * relative), e^x - 1 below, where there is no cancellation. */
INL float vexpm1_neg(float x) {
    float p = 1.0f / 40320.0f;
    p = p * x + 1.0f / 5040.0f;
    p = p * x + 1.0f / 720.0f;
    p = p * x + 1.0f / 120.0f;
    p = p * x + 1.0f / 24.0f;
    p = p * x + 1.0f / 6.0f;
    p = p * x + 0.5f;
    p = p * x + 1.0f;
    p = p * x;
    return sel(mask(x > -0.5f), p, vexp(x) - 1.0f);
}

typedef enum { A_GELU, A_SILU, A_ELU, A_LEAKY, A_RELU6 } act_kind;

INL float fwd1(act_kind k, float x, float alpha) {
    switch (k) {
    /* a NaN x is returned as it is: libm's fmaf turns it into the default NaN (sign bit set)
     * where vfmadd passes it on */
    case A_GELU: return sel(mask(x != x), x, x * vncdf(x));
    case A_SILU: return x * vsigm(x);
    case A_ELU: return sel(mask(x > 0.0f), x, alpha * vexpm1_neg(x));
    case A_LEAKY: return sel(mask(x > 0.0f), x, alpha * x);
    case A_RELU6: return relu6_1(x);
    }
    return 0;
}

INL float bwd1(act_kind k, float x, float dy, float alpha) {
    switch (k) {
    case A_GELU:
        return sel(mask(x != x), x,
                   dy * fma1(x * vexp_f(-0.5f * x * x), 0.39894228040143268f, vncdf(x)));
    case A_SILU: {
        float s = vsigm(x);
        return dy * s * (1.0f + x * (1.0f - s));
    }
    case A_ELU: return sel(mask(x < 0.0f), dy * alpha * vexp(x), dy);
    case A_LEAKY: return sel(mask(x > 0.0f), dy, dy * alpha);
    case A_RELU6: return relu6_grad1(x, dy);
    }
    return 0;
}

INL void fwd_loop(act_kind k, float *o, const float *x, int64_t n, float alpha) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] = fwd1(k, x[i], alpha);
}

INL void bwd_loop(act_kind k, float *o, const float *x, const float *dy, int64_t n,
                  float alpha) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) o[i] = bwd1(k, x[i], dy[i], alpha);
}

/* One loop per kind: the switch on a constant folds away inside each. */
INL void fwd_body(int k, float *o, const float *x, int64_t n, float alpha) {
    switch ((act_kind)k) {
    case A_GELU: fwd_loop(A_GELU, o, x, n, alpha); break;
    case A_SILU: fwd_loop(A_SILU, o, x, n, alpha); break;
    case A_ELU: fwd_loop(A_ELU, o, x, n, alpha); break;
    case A_LEAKY: fwd_loop(A_LEAKY, o, x, n, alpha); break;
    case A_RELU6: fwd_loop(A_RELU6, o, x, n, alpha); break;
    }
}

INL void bwd_body(int k, float *o, const float *x, const float *dy, int64_t n, float alpha) {
    switch ((act_kind)k) {
    case A_GELU: bwd_loop(A_GELU, o, x, dy, n, alpha); break;
    case A_SILU: bwd_loop(A_SILU, o, x, dy, n, alpha); break;
    case A_ELU: bwd_loop(A_ELU, o, x, dy, n, alpha); break;
    case A_LEAKY: bwd_loop(A_LEAKY, o, x, dy, n, alpha); break;
    case A_RELU6: bwd_loop(A_RELU6, o, x, dy, n, alpha); break;
    }
}

typedef struct act_isa {
    const char *name;
    void (*fwd)(int k, float *o, const float *x, int64_t n, float alpha);
    void (*bwd)(int k, float *o, const float *x, const float *dy, int64_t n, float alpha);
} act_isa;

static void fwd_generic(int k, float *o, const float *x, int64_t n, float alpha) {
    fwd_body(k, o, x, n, alpha);
}
static void bwd_generic(int k, float *o, const float *x, const float *dy, int64_t n,
                        float alpha) {
    bwd_body(k, o, x, dy, n, alpha);
}
static const act_isa isa_generic = {"cpu", fwd_generic, bwd_generic};

#ifdef SN_CPU_X86
TGT_AVX512 static void fwd_avx512(int k, float *o, const float *x, int64_t n, float alpha) {
    fwd_body(k, o, x, n, alpha);
}
TGT_AVX512 static void bwd_avx512(int k, float *o, const float *x, const float *dy, int64_t n,
                                  float alpha) {
    bwd_body(k, o, x, dy, n, alpha);
}
static const act_isa isa_avx512 = {"avx512", fwd_avx512, bwd_avx512};
TGT_AVX2 static void fwd_avx2(int k, float *o, const float *x, int64_t n, float alpha) {
    fwd_body(k, o, x, n, alpha);
}
TGT_AVX2 static void bwd_avx2(int k, float *o, const float *x, const float *dy, int64_t n,
                              float alpha) {
    bwd_body(k, o, x, dy, n, alpha);
}
static const act_isa isa_avx2 = {"avx2", fwd_avx2, bwd_avx2};
#endif

static const act_isa *isa = &isa_generic;

static act_kind kind_of(sn_op op) {
    switch (op) {
    case SN_OP_GELU: case SN_OP_GELU_GRAD: return A_GELU;
    case SN_OP_SILU: case SN_OP_SILU_GRAD: return A_SILU;
    case SN_OP_ELU: case SN_OP_ELU_GRAD: return A_ELU;
    case SN_OP_LEAKY_RELU: case SN_OP_LEAKY_RELU_GRAD: return A_LEAKY;
    default: return A_RELU6;
    }
}

typedef struct act_ctx {
    int kind;
    bool grad;
    int64_t n;
    float alpha;
    float *o;
    const float *x, *dy;
} act_ctx;

static void act_task(void *vctx, int ith, int nth) {
    const act_ctx *a = vctx;
    int64_t lo, hi;
    sn_split_range(a->n, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    if (a->grad)
        isa->bwd(a->kind, a->o + lo, a->x + lo, a->dy + lo, hi - lo, a->alpha);
    else
        isa->fwd(a->kind, a->o + lo, a->x + lo, hi - lo, a->alpha);
}

/* f32 everywhere and every input of the output's size (x, and dy for the gradients). */
static bool act_supports(const sn_kcall *c) {
    int64_t n = sn_shape_numel(&c->y.shape);
    if (c->y.dtype != SN_F32) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32 || sn_shape_numel(&c->x[i].shape) != n)
            return false;
    return true;
}

/* x [any] f32 (and dy, same shape, for the gradients) -> same shape */
static sn_status act_run(sn_kcall *c) {
    act_kind k = kind_of(c->op);
    act_ctx a = {.kind = k, .grad = c->n_in == 2, .n = sn_shape_numel(&c->y.shape),
                 .alpha = (float)c->attr->act.alpha, .o = c->out, .x = c->in[0],
                 .dy = c->n_in == 2 ? c->in[1] : NULL};
    bool cheap = k == A_LEAKY || k == A_RELU6;
    run_tasks(act_task, &a, a.n, cheap ? GRAIN_CHEAP : GRAIN_MATH, a.n);
    return SN_OK;
}

static sn_kernel k_act = {.impl = "cpu", .supports = act_supports, .run = act_run};

void sn_cpu_register_activation(sn_kernel_table *t) {
#ifdef SN_CPU_X86
    isa = pick_variant(&isa_generic, &isa_avx2, &isa_avx512);
#endif
    k_act.impl = isa->name;
    const sn_op ops[] = {SN_OP_GELU, SN_OP_SILU, SN_OP_ELU, SN_OP_LEAKY_RELU, SN_OP_RELU6,
                         SN_OP_GELU_GRAD, SN_OP_SILU_GRAD, SN_OP_ELU_GRAD,
                         SN_OP_LEAKY_RELU_GRAD, SN_OP_RELU6_GRAD};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) t->k[ops[i]] = &k_act;
}
