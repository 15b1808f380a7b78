/* Internal to the vectorised CPU kernels (cpu_elementwise.c, cpu_reduce.c, cpu_softmax.c,
 * cpu_state.c): the ISA target attributes, the scalar building blocks their loops are written
 * in, the one polynomial e^x, choosing an ISA variant, and running a task on the calling
 * thread or the team.
 *
 * Each of those files compiles its inner loops three times (AVX-512, AVX2, baseline x86-64)
 * with function-level target attributes and picks one at registration; the library itself
 * keeps baseline flags, so it runs anywhere. The helpers here carry no target attribute and
 * are always inlined: a function of the baseline target may be inlined into an AVX-512 or
 * AVX2 caller, and is then compiled (and vectorised) for that caller's ISA, exactly as when
 * each file kept its own copy. Everything is static inline, so nothing here is exported, but
 * sn_cpu_to_bf16 (cpu_elementwise.c's rounding, for the kernels that write bfloat16).
 *
 * No -ffast-math and no FMA contraction (ISO C mode): the same bits whichever ISA variant
 * runs, which tests/test_cpu_kernels_vec.c checks. */
#ifndef SN_CPU_VEC_H
#define SN_CPU_VEC_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernel.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SN_CPU_X86 1
#define TGT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,prefer-vector-width=512")))
#define TGT_AVX2 __attribute__((target("avx2,fma")))
#endif
#define INL static inline __attribute__((always_inline))

/* ---- scalar building blocks (inlined into every vector loop) ----------------------------- */

INL uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
INL float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* Selects are written as bit masks: GCC 12 refuses to if-convert `c ? a : b` inside the
 * longer loop bodies on AVX2/SSE (measured), and then vectorises nothing. */
INL uint32_t mask(int c) { return 0u - (uint32_t)(c != 0); }
INL float sel(uint32_t m, float a, float b) { return u2f((f2u(a) & m) | (f2u(b) & ~m)); }
/* max that lets NaN through (as the reference and TensorFlow do): b wins when it is larger or
 * NaN, and a NaN already in a is never replaced by a number. */
INL float maxnan(float a, float b) { return sel(mask(b > a || b != b), b, a); }
/* float32 -> bfloat16 as sn_f32_to_bf16 rounds: to nearest even, NaN kept quiet */
INL uint16_t bf16_rne1(float x) {
    uint32_t u = f2u(x);
    uint32_t nan = mask((u & 0x7fffffffu) > 0x7f800000u);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t q = (u >> 16) | 0x40u;
    return (uint16_t)((q & nan) | (r & ~nan));
}

/* bfloat16 -> float32: exact (the bfloat16 bits are the float's top half) */
INL float bf16_f32(uint16_t b) { return u2f((uint32_t)b << 16); }

/* Element i of an activation stored as float32, or as bfloat16 where the plan stores it so
 * (graph/plan_bf16.c, Keras's mixed_bfloat16: a layer's output is bfloat16, the next layer
 * computes in float32). xb is a constant where it is inlined. */
INL float ld_act(bool xb, const void *restrict x, int64_t i) {
    return xb ? bf16_f32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

/* NaN and Inf go through as in TensorFlow and PyTorch (docs/reliability.md, "NaN and Inf"):
 * relu(x) = x < 0 ? 0 : x lets a NaN through (the compare is false), the rule of
 * _mm512_max_ps(zero, x), which returns its second operand when either is NaN (and -0 for
 * -0). The gradients are TensorFlow's, dy * (x > 0): a NaN or Inf dy stays NaN where x <= 0
 * too, so a NaN loss reaches every weight. */
INL float relu1(float x) { return sel(mask(x < 0.0f), 0.0f, x); }
INL float relu_grad1(float x, float dy) { return dy * sel(mask(x > 0.0f), 1.0f, 0.0f); }
/* NaN stays NaN (both compares are false), as TensorFlow's and PyTorch's relu6 */
INL float relu6_1(float x) { return sel(mask(x < 0.0f), 0.0f, sel(mask(x > 6.0f), 6.0f, x)); }
/* TensorFlow's dy * (0 < x < 6), x the input: a NaN dy stays NaN outside (0, 6) too. The two
 * masks are ANDed bitwise: a short-circuit && made GCC emit a scalar loop with a branch on
 * x > 0 (mispredicted half the time on real activations), 4-5x slower than an add of the same
 * size in MobileNetV2's profile. */
INL float relu6_grad1(float x, float dy) {
    return dy * sel(mask(x > 0.0f) & mask(x < 6.0f), 1.0f, 0.0f);
}
/* Max-pool's rule: cell value p replaces the window's best so far when strictly greater, or
 * when p is the window's first NaN (the NaN is then the maximum and stays). Ties keep the
 * first maximum in row-major window order, as TensorFlow. */
INL bool pool_wins(float p, float best) { return !(p <= best) && best == best; }

/* e^x (Cephes coefficients, about 2 ulp in f32), branch-free so that the compiler vectorises
 * it; libm's expf would keep the loops scalar. Clamped so that 2^n stays representable as two
 * factors; a NaN fails both compares and flows through the polynomial, so NaN in gives NaN
 * out. */
/* Max of x[0..n) (NaN wins) over 32 lanes (two AVX-512 registers) folded pairwise: the same
 * order, so the same bits, in every caller (reductions, softmax's row shift). */
#define VEC_LANES 32
INL float vec_lanes_max(const float *x, int64_t n) {
    float l[VEC_LANES];
    for (int j = 0; j < VEC_LANES; j++) l[j] = -INFINITY;
    int64_t i = 0;
    for (; i + VEC_LANES <= n; i += VEC_LANES)
        for (int j = 0; j < VEC_LANES; j++) l[j] = maxnan(l[j], x[i + j]);
    for (int j = 0; i + j < n; j++) l[j] = maxnan(l[j], x[i + j]);
    for (int w = VEC_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) l[j] = maxnan(l[j], l[j + w]);
    return l[0];
}

/* Sum of x[0..n) over `lanes` lanes (16 or 32, at most VEC_LANES), folded pairwise: the same
 * order, so the same bits, in every variant of a caller. Every caller passes a constant, so
 * once this is inlined the loops are the fixed-width ones that vectorise. */
INL float vec_lanes_sum(const float *x, int64_t n, int lanes) {
    float l[VEC_LANES] = {0};
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes)
        for (int j = 0; j < lanes; j++) l[j] += x[i + j];
    for (int j = 0; i + j < n; j++) l[j] += x[i + j];
    for (int w = lanes / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) l[j] += l[j + w];
    return l[0];
}

INL float vexp(float x) {
    x = sel(mask(x > 88.8f), 88.8f, x);
    x = sel(mask(x < -104.0f), -104.0f, x);
    /* Adding 1.5 * 2^23 rounds x * log2(e) to an integer held in the low mantissa bits. */
    const float magic = 12582912.0f;
    float t = x * 1.44269504088896341f + magic;
    float n = t - magic;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    int32_t k = (int32_t)(f2u(t) - f2u(magic));
    /* n in [-150, 128]: 2^n as 2^(n/2) * 2^(n - n/2) keeps both factors normal. */
    uint32_t k1 = (uint32_t)(k >> 1), k2 = (uint32_t)k - k1;
    float s1 = u2f((k1 + 127u) << 23), s2 = u2f((k2 + 127u) << 23);
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * r * r + r + 1.0f;
    return p * s1 * s2;
}

/* ---- square root of a vector ------------------------------------------------------------- */

/* sqrtf does not vectorise without -fno-math-errno (which the build does not set), so the x86
 * variants call the instruction directly. o may be x. */
#ifdef SN_CPU_X86
TGT_AVX512 static inline void vsqrt_avx512(float *o, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, _mm512_sqrt_ps(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        _mm512_mask_storeu_ps(o + i, m, _mm512_sqrt_ps(_mm512_maskz_loadu_ps(m, x + i)));
    }
}
TGT_AVX2 static inline void vsqrt_avx2(float *o, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) o[i] = sqrtf(x[i]);
}
#endif

/* tanh: an odd polynomial below |x| = 0.625 (no cancellation near 0), 1 - 2/(e^2|x| + 1)
 * above, sign restored by bits. */
INL float vtanh(float x) {
    float ax = u2f(f2u(x) & 0x7fffffffu);
    float big = 1.0f - 2.0f / (vexp(ax + ax) + 1.0f);
    big = u2f(f2u(big) | (f2u(x) & 0x80000000u));
    float z = x * x;
    float p = -5.70498872745E-3f;
    p = p * z + 2.06390887954E-2f;
    p = p * z - 5.37397155531E-2f;
    p = p * z + 1.33314422036E-1f;
    p = p * z - 3.33332819422E-1f;
    float small = x + x * z * p;
    return sel(mask(ax < 0.625f), small, big);
}

/* 1 / (1 + e^-x): e^-x overflows to inf for x < -88.8, giving the correct 0. */
INL float vsigmoid(float x) { return 1.0f / (1.0f + vexp(-x)); }

/* ---- choosing a variant ------------------------------------------------------------------ */

#ifdef SN_CPU_X86
/* One of a file's three variant tables: the widest this CPU runs, or a narrower one that
 * SN_CPU_ISA=avx512|avx2|generic asks for (benchmarks, debugging). Off x86 a file keeps its
 * generic table. */
static inline const void *pick_variant(const void *generic, const void *avx2,
                                       const void *avx512) {
    const sn_cpu_features *f = sn_cpu();
    const char *env = sn_env(SN_ENV_CPU_ISA);
    bool want512 = !env || strcmp(env, "avx512") == 0;
    bool want2 = want512 || strcmp(env, "avx2") == 0;
    if (want512 && f->avx512f && f->avx512bw && f->avx512vl) return avx512;
    if (want2 && f->avx2 && f->fma) return avx2;
    return generic;
}
#endif

/* ---- subnormals ------------------------------------------------------------------------- */

/* Until fp_flush_leave, this thread's SSE/AVX arithmetic flushes subnormal results to zero
 * (FTZ) and reads subnormal operands as zero (DAZ), as TensorFlow's compute threads always do.
 * On Intel every operation that takes or makes a subnormal costs a microcode assist of ~150
 * cycles. Returns the mode to restore. MXCSR is per thread, so a task sets it on the thread
 * it runs on and puts it back before returning: the caller's mode is never changed. Off x86
 * this does nothing (subnormals stay, at whatever the hardware charges for them). */
INL unsigned fp_flush_enter(void) {
#ifdef SN_CPU_X86
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u); /* FTZ is bit 15, DAZ bit 6 */
    return csr;
#else
    return 0;
#endif
}
INL void fp_flush_leave(unsigned csr) {
#ifdef SN_CPU_X86
    _mm_setcsr(csr);
#else
    (void)csr;
#endif
}

/* ---- threads ----------------------------------------------------------------------------- */

/* o[i] = x[i] rounded to bfloat16 as bf16_rne1 (the cast's rounding), on the team; the ISA
 * variant the elementwise kernels picked (cpu_elementwise.c). */
void sn_cpu_to_bf16(uint16_t *o, const float *x, int64_t n);

/* Runs fn over `work` elements split into `items` independent pieces: on the calling thread
 * below 2 * grain elements or with fewer than two pieces (waking an OpenMP team costs several
 * microseconds, more than a small op), else on at most one thread per grain elements and per
 * piece. */
static inline void run_tasks(sn_task_fn fn, void *ctx, int64_t work, int64_t grain,
                             int64_t items) {
    int nth = 1;
    if (work >= 2 * grain && items >= 2) {
        int64_t t = sn_num_threads(), most = work / grain;
        if (t > most) t = most;
        if (t > items) t = items;
        nth = t < 1 ? 1 : (int)t;
    }
    if (nth <= 1)
        fn(ctx, 0, 1);
    else
        sn_parallel(fn, ctx, nth);
}

#endif
