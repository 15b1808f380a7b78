/* CONV2D_BWD_FILTER of a first layer: one input channel (grey images), 16 or 32 filters, f32
 * NHWC.
 *
 * Why not oneDNN: with C = 1 the filter gradient is a GEMM of [KH*KW, N*OH*OW] by
 * [N*OH*OW, F] — nine rows against a 86,528-long inner dimension for small_cnn — and oneDNN 2.6
 * runs it as gemm:jit on plain weights at 10-16 % of peak (issue 15: 18 % of small_cnn's step
 * under `sinter bench --profile`). Here each output pixel's KH*KW input taps are broadcast
 * against its row of dy, a block of 16 filters at a time, into KH*KW vector accumulators that
 * stay in registers (3x3: nine); dy is read once per 16-filter block, from cache for the
 * second block of an image. Work is memory-bound: about one pass over dy.
 *
 * Sums: per image into the accumulators (the image's OH*OW pixels, in row-major order), then
 * image after image into the thread's partial; the partials of the threads (images split in
 * fixed contiguous ranges) are added in thread order. The result depends on the thread count
 * only, like every threaded reduction here, and is the same run to run. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_vec.h"

#define C1_FB 16       /* filters per block: one AVX-512 vector, two AVX2 ones */
#define C1_MAX_TAPS 49 /* 7x7 windows at most */
/* At most two blocks of filters: each block re-reads the taps and strides through dy, and with
 * many filters oneDNN's GEMM is the better tool (guide CNN, 256 filters: oneDNN 27-53 ms, this
 * kernel 82-134 ms per step, side by side on a busy machine; small_cnn, 32 filters: oneDNN
 * 36-44 ms, this kernel 13-14 ms). */
#define C1_MAX_F 32

static bool c1_geom(const sn_kcall *c, sn_conv_geom *g) {
    return c->op == SN_OP_CONV2D_BWD_FILTER && sn_conv_geom_of(c, g) && g->c == 1 &&
           g->f % C1_FB == 0 && g->f <= C1_MAX_F &&
           g->kh * g->kw <= C1_MAX_TAPS;
}

static bool c1_supports(const sn_kcall *c) {
    sn_conv_geom g;
    return c1_geom(c, &g);
}

typedef struct c1_state {
    int nth; /* threads the scratch was sized for: a run never asks for more */
} c1_state;

static sn_status c1_prepare(sn_kcall *c, size_t *scratch_bytes) {
    sn_conv_geom g;
    SN_ASSERT(c1_geom(c, &g));
    c1_state *st = sn_calloc(1, sizeof *st);
    if (!st) return SN_ERR_NOMEM;
    st->nth = sn_num_threads() > g.n ? (int)g.n : sn_num_threads();
    c->state = st;
    /* partial dW of threads 1..nth-1 (thread 0 sums into the output) */
    *scratch_bytes = (size_t)(st->nth - 1) * (size_t)(g.kh * g.kw * g.f) * sizeof(float);
    return SN_OK;
}

static void c1_release(sn_kcall *c) {
    free(c->state);
    c->state = NULL;
}

typedef void (*c1_image_fn)(const sn_conv_geom *g, const float *x, const float *dy, int64_t f0,
                            int KK, float *acc);

typedef struct c1_ctx {
    const sn_kcall *c;
    sn_conv_geom g;
    c1_image_fn image;
    int used;
} c1_ctx;

/* The taps of output pixel (oh, ow) of one image: x under the window, 0 in the padding. */
static inline void taps_of(const sn_conv_geom *g, const float *x, int64_t oh, int64_t ow,
                           float *t) {
    const int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
    if (ih0 >= 0 && iw0 >= 0 && ih0 + g->kh <= g->h && iw0 + g->kw <= g->w) {
        for (int64_t kh = 0; kh < g->kh; kh++)
            for (int64_t kw = 0; kw < g->kw; kw++) t[kh * g->kw + kw] = x[(ih0 + kh) * g->w + iw0 + kw];
        return;
    }
    for (int64_t kh = 0; kh < g->kh; kh++)
        for (int64_t kw = 0; kw < g->kw; kw++) {
            int64_t ih = ih0 + kh, iw = iw0 + kw;
            t[kh * g->kw + kw] =
                ih >= 0 && ih < g->h && iw >= 0 && iw < g->w ? x[ih * g->w + iw] : 0.0f;
        }
}

/* acc[k][0..15] = sum over one image's pixels of tap k times dy[pixel][f0 .. f0+15], for KK
 * taps. Baseline C, AVX2 and AVX-512 with the accumulators in registers (KK is a constant
 * where the 3x3 case inlines it). Every variant accumulates each acc[k][j] with one FMA per
 * pixel, pixels in row-major order from 0.0f: the same bits on every ISA (tests/test_fused.c
 * compares SN_CPU_ISA=generic with avx2). The baseline loop calls fmaf for that (slow where
 * the CPU has no FMA, but only such CPUs run it). */
static void image_generic(const sn_conv_geom *g, const float *x, const float *dy, int64_t f0,
                          int KK, float *acc) {
    float t[C1_MAX_TAPS];
    memset(acc, 0, (size_t)KK * C1_FB * sizeof(float));
    for (int64_t oh = 0; oh < g->oh; oh++)
        for (int64_t ow = 0; ow < g->ow; ow++) {
            taps_of(g, x, oh, ow, t);
            const float *d = dy + (oh * g->ow + ow) * g->f + f0;
            for (int k = 0; k < KK; k++)
                for (int j = 0; j < C1_FB; j++)
                    acc[k * C1_FB + j] = fmaf(t[k], d[j], acc[k * C1_FB + j]);
        }
}

#ifdef SN_CPU_X86
TGT_AVX512 static inline void image_avx512_kk(const sn_conv_geom *g, const float *x,
                                              const float *dy, int64_t f0, const int KK,
                                              float *acc) {
    float t[C1_MAX_TAPS];
    __m512 a[C1_MAX_TAPS];
    for (int k = 0; k < KK; k++) a[k] = _mm512_setzero_ps();
    for (int64_t oh = 0; oh < g->oh; oh++)
        for (int64_t ow = 0; ow < g->ow; ow++) {
            taps_of(g, x, oh, ow, t);
            const __m512 d = _mm512_loadu_ps(dy + (oh * g->ow + ow) * g->f + f0);
            for (int k = 0; k < KK; k++) a[k] = _mm512_fmadd_ps(_mm512_set1_ps(t[k]), d, a[k]);
        }
    for (int k = 0; k < KK; k++) _mm512_storeu_ps(acc + k * C1_FB, a[k]);
}

TGT_AVX512 static void image_avx512(const sn_conv_geom *g, const float *x, const float *dy,
                                    int64_t f0, int KK, float *acc) {
    if (KK == 9) image_avx512_kk(g, x, dy, f0, 9, acc);
    else image_avx512_kk(g, x, dy, f0, KK, acc);
}

/* AVX2 + FMA (Zen 3): 16 ymm registers cannot hold the 3x3 case's 9 taps x 2 vectors of
 * accumulators, so the 16-filter block is done as two 8-filter halves, each a pass over the
 * image's pixels with KK accumulators in registers (dy's block is read twice, the second time
 * from cache). Interior pixels broadcast their taps straight from x. Per lane the same FMAs in
 * the same order as the other variants: the same bits. */
TGT_AVX2 INL void image_avx2_kk(const sn_conv_geom *g, const float *x, const float *dy,
                                int64_t f0, const int KK, float *acc) {
    float t[C1_MAX_TAPS];
    int64_t off[C1_MAX_TAPS]; /* tap k of an interior pixel is p[off[k]] */
    for (int64_t kh = 0; kh < g->kh; kh++)
        for (int64_t kw = 0; kw < g->kw; kw++) off[kh * g->kw + kw] = kh * g->w + kw;
    for (int64_t h = 0; h < C1_FB; h += 8) {
        __m256 a[C1_MAX_TAPS];
        for (int k = 0; k < KK; k++) a[k] = _mm256_setzero_ps();
        for (int64_t oh = 0; oh < g->oh; oh++) {
            const int64_t ih0 = oh * g->sh - g->pt;
            const bool rows_in = ih0 >= 0 && ih0 + g->kh <= g->h;
            const float *d = dy + oh * g->ow * g->f + f0 + h;
            for (int64_t ow = 0; ow < g->ow; ow++, d += g->f) {
                const int64_t iw0 = ow * g->sw - g->pl;
                const __m256 dv = _mm256_loadu_ps(d);
                if (rows_in && iw0 >= 0 && iw0 + g->kw <= g->w) {
                    const float *p = x + ih0 * g->w + iw0;
                    for (int k = 0; k < KK; k++)
                        a[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + off[k]), dv, a[k]);
                } else {
                    taps_of(g, x, oh, ow, t);
                    for (int k = 0; k < KK; k++)
                        a[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(t + k), dv, a[k]);
                }
            }
        }
        for (int k = 0; k < KK; k++) _mm256_storeu_ps(acc + k * C1_FB + h, a[k]);
    }
}

TGT_AVX2 static void image_avx2(const sn_conv_geom *g, const float *x, const float *dy,
                                int64_t f0, int KK, float *acc) {
    if (KK == 9) image_avx2_kk(g, x, dy, f0, 9, acc);
    else image_avx2_kk(g, x, dy, f0, KK, acc);
}
#endif

static void c1_task(void *vctx, int ith, int nth) {
    c1_ctx *t = vctx;
    if (ith == 0) t->used = nth;
    const sn_conv_geom *g = &t->g;
    const sn_kcall *c = t->c;
    const int KK = (int)(g->kh * g->kw);
    const int64_t F = g->f, xsz = g->h * g->w, ysz = g->oh * g->ow * F;
    float *dw = ith == 0 ? (float *)c->out
                         : (float *)c->scratch + (size_t)(ith - 1) * (size_t)(KK * F);
    memset(dw, 0, (size_t)(KK * F) * sizeof(float));
    int64_t lo, hi;
    sn_split_range(g->n, ith, nth, &lo, &hi);
    float acc[C1_MAX_TAPS * C1_FB];
    for (int64_t n = lo; n < hi; n++) {
        const float *x = (const float *)c->in[0] + n * xsz;
        const float *dy = (const float *)c->in[1] + n * ysz;
        for (int64_t f0 = 0; f0 < F; f0 += C1_FB) {
            t->image(g, x, dy, f0, KK, acc);
            for (int k = 0; k < KK; k++)
                for (int j = 0; j < C1_FB; j++) dw[k * F + f0 + j] += acc[k * C1_FB + j];
        }
    }
}

/* x [N, H, W, 1], dy [N, OH, OW, F] -> dW [KH, KW, 1, F] */
static sn_status c1_run(sn_kcall *c) {
    c1_ctx t = {.c = c, .image = image_generic};
#ifdef SN_CPU_X86
    static const c1_image_fn generic = image_generic, avx2 = image_avx2, avx512 = image_avx512;
    t.image = *(const c1_image_fn *)pick_variant(&generic, &avx2, &avx512);
#endif
    SN_ASSERT(c1_geom(c, &t.g));
    sn_parallel(c1_task, &t, ((const c1_state *)c->state)->nth);
    const int64_t len = t.g.kh * t.g.kw * t.g.f;
    float *out = c->out;
    for (int p = 1; p < t.used; p++) {
        const float *src = (const float *)c->scratch + (size_t)(p - 1) * (size_t)len;
        for (int64_t i = 0; i < len; i++) out[i] += src[i];
    }
    return SN_OK;
}

static const sn_kernel k_conv_c1 = {
    .impl = "c1",
    .supports = c1_supports,
    .prepare = c1_prepare,
    .run = c1_run,
    .release = c1_release,
};

const sn_kernel *sn_cpu_conv_c1_kernel(void) { return &k_conv_c1; }
