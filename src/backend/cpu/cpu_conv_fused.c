/* SN_FUSED_CONV_BIAS_RELU (kernel.h) for a first layer: conv2d with one input channel (grey
 * images), 16 or 32 filters, then + bias, relu, and optionally the max-pool that reads the
 * relu, f32 NHWC, in one pass over the output.
 *
 * Why: unfused, small_cnn's first layer runs oneDNN's convolution at ~19 % of peak (with
 * C = 1 it is a GEMM with a 9-long inner dimension: memory-bound on its 11 MB output), then
 * bias_add+relu reads and writes those 11 MB again and the pool reads them a third time
 * (issue 15: the three were ~15 % of the step). Here each output pixel's KH*KW taps are
 * broadcast against the weights, a block of 16 filters at a time, with the weights in
 * registers (AVX-512; the AVX2 variant, 16 ymm registers, keeps 4 pixels x 16 filters of
 * sums there and reads the weights from L1); the bias is added and the relu applied before
 * the one store; then the pool reads the image's output back from cache (86 KB for
 * 26x26x32), not from memory. Without AVX2 + FMA the scalar loops run (50x slower).
 *
 * Exactness: the convolution sums the taps in row-major window order with FMAs, so it
 * differs from oneDNN's by rounding (tests/test_fused.c bounds it against the unfused plan),
 * and every ISA variant (generic with fmaf, AVX2, AVX-512) gives the same bits (checked);
 * bias, relu and the pool are those of the unfused kernels exactly: (sum + b), then
 * relu1 (NaN goes through), then the first maximum of each window (pool_wins: strictly
 * greater, or the first NaN).
 *
 * Where the backward pattern recomputes the relu output (cpu_pool_fused.c), the planner does
 * not store it (out is NULL): each image's output then goes to the thread's scratch, is
 * pooled from there, and only the pool's output reaches memory. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_fused.h"
#include "backend/cpu/cpu_vec.h"

#define CF_FB 16       /* filters per block: one AVX-512 vector, two AVX2 ones */
#define CF_MAX_TAPS 25 /* 5x5 windows at most: the weights stay in registers */
#define CF_MAX_F 32    /* as cpu_conv_c1.c: with many filters oneDNN's kernels are better */
#define CF_PX 4        /* interior pixels computed together (independent FMA chains) */

typedef struct cf_pool {
    int64_t oh, ow, ph, pw, sh, sw, pt, pl;
} cf_pool;

/* The convolution's geometry (the call without its extra bias input, as cpu_conv_geom.c
 * reads it) and, when the call writes a pool too, the pool's. */
static bool cf_geom(const sn_kcall *c, sn_conv_geom *g, cf_pool *pl) {
    if (c->op != SN_OP_CONV2D || c->fused != SN_FUSED_CONV_BIAS_RELU || c->n_in != 3 ||
        c->n_out2 > 1)
        return false;
    sn_kcall base = *c;
    base.n_in = 2;
    if (!sn_conv_geom_of(&base, g) || g->c != 1 || g->f % CF_FB || g->f > CF_MAX_F ||
        g->kh * g->kw > CF_MAX_TAPS)
        return false;
    if (c->x[2].dtype != SN_F32 || sn_shape_numel(&c->x[2].shape) != g->f) return false;
    *pl = (cf_pool){0};
    if (c->n_out2 == 1) {
        const sn_shape *ps = &c->y2[0].shape;
        const sn_attrs *a = c->attr2[0];
        if (c->y2[0].dtype != SN_F32 || ps->ndim != 4 || ps->dim[0] != g->n || ps->dim[3] != g->f)
            return false;
        *pl = (cf_pool){.oh = ps->dim[1], .ow = ps->dim[2], .ph = a->pool.pool_h,
                        .pw = a->pool.pool_w, .sh = a->pool.stride_h, .sw = a->pool.stride_w,
                        .pt = a->pool.pad_top, .pl = a->pool.pad_left};
        if (pl->ph < 1 || pl->pw < 1 || pl->sh < 1 || pl->sw < 1 || pl->pt < 0 || pl->pl < 0)
            return false;
    }
    return true;
}

static bool cf_supports(const sn_kcall *c) {
    sn_conv_geom g;
    cf_pool p;
    return cf_geom(c, &g, &p);
}

/* The taps of output pixel (oh, ow) of one image: x under the window, 0 in the padding. */
static inline void taps_of(const sn_conv_geom *g, const float *x, int64_t oh, int64_t ow,
                           float *t) {
    const int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
    for (int64_t kh = 0; kh < g->kh; kh++)
        for (int64_t kw = 0; kw < g->kw; kw++) {
            int64_t ih = ih0 + kh, iw = iw0 + kw;
            t[kh * g->kw + kw] =
                ih >= 0 && ih < g->h && iw >= 0 && iw < g->w ? x[ih * g->w + iw] : 0.0f;
        }
}

typedef void (*cf_image_fn)(const sn_conv_geom *g, const float *x, const float *w,
                            const float *b, float *y);

/* One image: y[pixel][f] = relu(sum_k tap_k * w[k][f] + b[f]). */
static void image_generic(const sn_conv_geom *g, const float *x, const float *w, const float *b,
                          float *y) {
    const int KK = (int)(g->kh * g->kw);
    float t[CF_MAX_TAPS];
    for (int64_t oh = 0; oh < g->oh; oh++)
        for (int64_t ow = 0; ow < g->ow; ow++) {
            taps_of(g, x, oh, ow, t);
            float *o = y + (oh * g->ow + ow) * g->f;
            for (int64_t f = 0; f < g->f; f++) {
                float s = 0.0f;
                for (int k = 0; k < KK; k++) s = fmaf(t[k], w[k * g->f + f], s);
                float v = s + b[f];
                o[f] = relu1(v); /* NaN stays NaN, as relu */
            }
        }
}

#ifdef SN_CPU_X86
/* FB filter blocks of 16 (1 or 2), KK taps: constants where the common cases inline it, so
 * the KK*FB weight vectors stay in registers. Interior pixels read their taps straight from
 * x; the border ones (with padding) go through taps_of. */
TGT_AVX512 INL void image_avx512_kk(const sn_conv_geom *g, const float *x,
                                              const float *w, const float *b, float *y,
                                              const int KK, const int FB) {
    __m512 wv[CF_MAX_TAPS][CF_MAX_F / CF_FB], bv[CF_MAX_F / CF_FB];
    for (int j = 0; j < FB; j++) {
        bv[j] = _mm512_loadu_ps(b + j * CF_FB);
        for (int k = 0; k < KK; k++) wv[k][j] = _mm512_loadu_ps(w + k * g->f + j * CF_FB);
    }
    const __m512 zero = _mm512_setzero_ps();
    float t[CF_MAX_TAPS];
    /* tap k of an interior pixel is p[off[k]] */
    int64_t off[CF_MAX_TAPS];
    for (int64_t kh = 0; kh < g->kh; kh++)
        for (int64_t kw = 0; kw < g->kw; kw++) off[kh * g->kw + kw] = kh * g->w + kw;
    const int64_t sw = g->sw;
    for (int64_t oh = 0; oh < g->oh; oh++) {
        const int64_t ih0 = oh * g->sh - g->pt;
        const bool rows_in = ih0 >= 0 && ih0 + g->kh <= g->h;
        for (int64_t ow = 0; ow < g->ow; ow++) {
            const int64_t iw0 = ow * g->sw - g->pl;
            /* CF_PX interior pixels at once: one pixel's KK FMAs are a dependent chain
             * (4 cycles each), so one pixel at a time ran at ~1/4 of the FMA rate. Each
             * pixel's sum is the same FMAs in the same order as below: the same bits. */
            if (rows_in && iw0 >= 0 && ow + CF_PX <= g->ow &&
                iw0 + (CF_PX - 1) * sw + g->kw <= g->w) {
                const float *p = x + ih0 * g->w + iw0;
                float *o = y + (oh * g->ow + ow) * g->f;
                __m512 s[CF_PX][CF_MAX_F / CF_FB];
                for (int i = 0; i < CF_PX; i++)
                    for (int j = 0; j < FB; j++) s[i][j] = _mm512_setzero_ps();
                for (int k = 0; k < KK; k++)
                    for (int i = 0; i < CF_PX; i++) {
                        const __m512 tk = _mm512_set1_ps(p[off[k] + i * sw]);
                        for (int j = 0; j < FB; j++) s[i][j] = _mm512_fmadd_ps(tk, wv[k][j], s[i][j]);
                    }
                for (int i = 0; i < CF_PX; i++)
                    for (int j = 0; j < FB; j++)
                        _mm512_storeu_ps(o + i * g->f + j * CF_FB,
                                         _mm512_max_ps(zero, _mm512_add_ps(s[i][j], bv[j])));
                ow += CF_PX - 1;
                continue;
            }
            if (rows_in && iw0 >= 0 && iw0 + g->kw <= g->w) {
                const float *p = x + ih0 * g->w + iw0;
                for (int64_t kh = 0; kh < g->kh; kh++)
                    for (int64_t kw = 0; kw < g->kw; kw++) t[kh * g->kw + kw] = p[kh * g->w + kw];
            } else {
                taps_of(g, x, oh, ow, t);
            }
            float *o = y + (oh * g->ow + ow) * g->f;
            for (int j = 0; j < FB; j++) {
                __m512 s = _mm512_setzero_ps();
                for (int k = 0; k < KK; k++) s = _mm512_fmadd_ps(_mm512_set1_ps(t[k]), wv[k][j], s);
                s = _mm512_add_ps(s, bv[j]);
                /* max_ps returns its second operand when either is NaN or both are zeros:
                 * relu1's s < 0 ? 0 : s exactly (a NaN goes through) */
                _mm512_storeu_ps(o + j * CF_FB, _mm512_max_ps(zero, s));
            }
        }
    }
}

TGT_AVX512 static void image_avx512(const sn_conv_geom *g, const float *x, const float *w,
                                    const float *b, float *y) {
    const int KK = (int)(g->kh * g->kw), FB = (int)(g->f / CF_FB);
    if (KK == 9 && FB == 2) image_avx512_kk(g, x, w, b, y, 9, 2);
    else if (KK == 9 && FB == 1) image_avx512_kk(g, x, w, b, y, 9, 1);
    else image_avx512_kk(g, x, w, b, y, KK, FB);
}

/* AVX2 + FMA (Zen 3): 8 filters a vector, and 16 ymm registers only, so the AVX-512 layout
 * (all KK*FB weight vectors held in registers: 18 for 3x3 x 32 filters) does not fit. Instead
 * CF_PX interior pixels x 16 filters = 8 accumulators (independent FMA chains: enough to cover
 * the FMA latency at two per cycle), one 16-filter half at a time; each tap's two weight
 * vectors are loaded from L1 once and serve the CF_PX pixels. Border and tail pixels take one
 * pixel's F/8 vectors at once. Every lane's sum is the same FMAs in the same order as
 * image_generic's (taps in row-major window order from 0.0f, then + b, then max(0, s), which
 * is relu1's rule with NaN), so the bits are those of the generic and AVX-512 variants
 * (tests/test_fused.c checks all ISAs against the documented sum). */
TGT_AVX2 INL void image_avx2_kk(const sn_conv_geom *g, const float *x, const float *w,
                                const float *b, float *y, const int KK, const int KW,
                                const int NV) {
    const int64_t F = g->f, sw = g->sw; /* F = 8 * NV: 16 or 32 */
    const __m256 zero = _mm256_setzero_ps();
    float t[CF_MAX_TAPS];
    int64_t off[CF_MAX_TAPS]; /* tap k of an interior pixel is p[off[k]] */
    for (int64_t kh = 0; kh < g->kh; kh++)
        for (int64_t kw = 0; kw < g->kw; kw++) off[kh * g->kw + kw] = kh * g->w + kw;
    for (int64_t oh = 0; oh < g->oh; oh++) {
        const int64_t ih0 = oh * g->sh - g->pt;
        const bool rows_in = ih0 >= 0 && ih0 + g->kh <= g->h;
        for (int64_t ow = 0; ow < g->ow; ow++) {
            const int64_t iw0 = ow * sw - g->pl;
            float *o = y + (oh * g->ow + ow) * F;
            if (rows_in && iw0 >= 0 && ow + CF_PX <= g->ow &&
                iw0 + (CF_PX - 1) * sw + g->kw <= g->w) {
                const float *p = x + ih0 * g->w + iw0;
                for (int64_t h = 0; h < F; h += 16) {
                    __m256 s[CF_PX][2];
                    for (int i = 0; i < CF_PX; i++) s[i][0] = s[i][1] = zero;
#pragma GCC unroll 25
                    for (int k = 0; k < KK; k++) {
                        const __m256 w0 = _mm256_loadu_ps(w + k * F + h);
                        const __m256 w1 = _mm256_loadu_ps(w + k * F + h + 8);
                        for (int i = 0; i < CF_PX; i++) {
                            /* with KW a constant (3x3), tap k's offset is one too, but
                             * for the row's: no offset table to load */
                            const int64_t ok = KW ? (k / KW) * g->w + k % KW : off[k];
                            const __m256 tk = _mm256_broadcast_ss(p + ok + i * sw);
                            s[i][0] = _mm256_fmadd_ps(tk, w0, s[i][0]);
                            s[i][1] = _mm256_fmadd_ps(tk, w1, s[i][1]);
                        }
                    }
                    const __m256 b0 = _mm256_loadu_ps(b + h), b1 = _mm256_loadu_ps(b + h + 8);
                    for (int i = 0; i < CF_PX; i++) {
                        /* max_ps returns its second operand when either is NaN or both are
                         * zeros: relu1's s < 0 ? 0 : s exactly (a NaN goes through) */
                        _mm256_storeu_ps(o + i * F + h,
                                         _mm256_max_ps(zero, _mm256_add_ps(s[i][0], b0)));
                        _mm256_storeu_ps(o + i * F + h + 8,
                                         _mm256_max_ps(zero, _mm256_add_ps(s[i][1], b1)));
                    }
                }
                ow += CF_PX - 1;
                continue;
            }
            if (rows_in && iw0 >= 0 && iw0 + g->kw <= g->w) {
                const float *p = x + ih0 * g->w + iw0;
                for (int k = 0; k < KK; k++) t[k] = p[off[k]];
            } else {
                taps_of(g, x, oh, ow, t);
            }
            __m256 s[CF_MAX_F / 8];
            for (int j = 0; j < NV; j++) s[j] = zero;
#pragma GCC unroll 25
            for (int k = 0; k < KK; k++) {
                const __m256 tk = _mm256_broadcast_ss(t + k);
                for (int j = 0; j < NV; j++)
                    s[j] = _mm256_fmadd_ps(tk, _mm256_loadu_ps(w + k * F + 8 * j), s[j]);
            }
            for (int j = 0; j < NV; j++)
                _mm256_storeu_ps(o + 8 * j,
                                 _mm256_max_ps(zero, _mm256_add_ps(s[j], _mm256_loadu_ps(b + 8 * j))));
        }
    }
}

TGT_AVX2 static void image_avx2(const sn_conv_geom *g, const float *x, const float *w,
                                const float *b, float *y) {
    const int KK = (int)(g->kh * g->kw);
    /* constants where the common cases inline them: the tail pixels' F/8 sums in registers */
    const bool k33 = g->kh == 3 && g->kw == 3;
    if (k33 && g->f == 32) image_avx2_kk(g, x, w, b, y, 9, 3, 4);
    else if (k33) image_avx2_kk(g, x, w, b, y, 9, 3, 2);
    else if (g->f == 32) image_avx2_kk(g, x, w, b, y, KK, 0, 4);
    else image_avx2_kk(g, x, w, b, y, KK, 0, 2);
}
#endif

/* The max-pool of one image's output y [OH, OW, F] into p [POH, POW, F], as cpu_pool.c:
 * windows clipped to the image, the first maximum in row-major order, -inf for a window
 * wholly in the padding. */
static void pool_image(const sn_conv_geom *g, const cf_pool *pl, const float *y, float *p) {
    const int64_t F = g->f;
    for (int64_t oh = 0; oh < pl->oh; oh++) {
        int64_t h0, h1;
        sn_pool_span(oh, pl->sh, pl->pt, pl->ph, g->oh, &h0, &h1);
        for (int64_t ow = 0; ow < pl->ow; ow++) {
            int64_t w0, w1;
            sn_pool_span(ow, pl->sw, pl->pl, pl->pw, g->ow, &w0, &w1);
            float *o = p + (oh * pl->ow + ow) * F;
            if (h1 <= h0 || w1 <= w0) {
                for (int64_t f = 0; f < F; f++) o[f] = -INFINITY;
                continue;
            }
            memcpy(o, y + (h0 * g->ow + w0) * F, (size_t)F * sizeof(float));
            for (int64_t r = h0; r < h1; r++)
                for (int64_t q = (r == h0 ? w0 + 1 : w0); q < w1; q++) {
                    const float *v = y + (r * g->ow + q) * F;
                    for (int64_t f = 0; f < F; f++) o[f] = pool_wins(v[f], o[f]) ? v[f] : o[f];
                }
        }
    }
}

#ifdef SN_CPU_X86
/* pool_image with F a multiple of 16: pool_wins(v, o) = !(v <= o) && o == o, one vector of
 * filters at a time (the scalar loop above ran unvectorised in the baseline build). */
TGT_AVX512 static void pool_image_avx512(const sn_conv_geom *g, const cf_pool *pl, const float *y,
                                         float *p) {
    const int64_t F = g->f;
    for (int64_t oh = 0; oh < pl->oh; oh++) {
        int64_t h0, h1;
        sn_pool_span(oh, pl->sh, pl->pt, pl->ph, g->oh, &h0, &h1);
        for (int64_t ow = 0; ow < pl->ow; ow++) {
            int64_t w0, w1;
            sn_pool_span(ow, pl->sw, pl->pl, pl->pw, g->ow, &w0, &w1);
            float *o = p + (oh * pl->ow + ow) * F;
            for (int64_t f = 0; f < F; f += 16) {
                if (h1 <= h0 || w1 <= w0) {
                    _mm512_storeu_ps(o + f, _mm512_set1_ps(-INFINITY));
                    continue;
                }
                __m512 best = _mm512_loadu_ps(y + (h0 * g->ow + w0) * F + f);
                for (int64_t r = h0; r < h1; r++)
                    for (int64_t q = (r == h0 ? w0 + 1 : w0); q < w1; q++) {
                        const __m512 v = _mm512_loadu_ps(y + (r * g->ow + q) * F + f);
                        const __mmask16 win = _mm512_cmp_ps_mask(v, best, _CMP_NLE_UQ) &
                                              _mm512_cmp_ps_mask(best, best, _CMP_EQ_OQ);
                        best = _mm512_mask_mov_ps(best, win, v);
                    }
                _mm512_storeu_ps(o + f, best);
            }
        }
    }
}

/* pool_image_avx512 on 8 channels a vector (F a multiple of 16, so of 8): the same rule,
 * pool_wins as !(v <= best) && best == best, a blend where it holds: the same bits. */
TGT_AVX2 static void pool_image_avx2(const sn_conv_geom *g, const cf_pool *pl, const float *y,
                                     float *p) {
    const int64_t F = g->f;
    for (int64_t oh = 0; oh < pl->oh; oh++) {
        int64_t h0, h1;
        sn_pool_span(oh, pl->sh, pl->pt, pl->ph, g->oh, &h0, &h1);
        for (int64_t ow = 0; ow < pl->ow; ow++) {
            int64_t w0, w1;
            sn_pool_span(ow, pl->sw, pl->pl, pl->pw, g->ow, &w0, &w1);
            float *o = p + (oh * pl->ow + ow) * F;
            for (int64_t f = 0; f < F; f += 8) {
                if (h1 <= h0 || w1 <= w0) {
                    _mm256_storeu_ps(o + f, _mm256_set1_ps(-INFINITY));
                    continue;
                }
                __m256 best = _mm256_loadu_ps(y + (h0 * g->ow + w0) * F + f);
                for (int64_t r = h0; r < h1; r++)
                    for (int64_t q = (r == h0 ? w0 + 1 : w0); q < w1; q++) {
                        const __m256 v = _mm256_loadu_ps(y + (r * g->ow + q) * F + f);
                        const __m256 win = _mm256_and_ps(_mm256_cmp_ps(v, best, _CMP_NLE_UQ),
                                                         _mm256_cmp_ps(best, best, _CMP_EQ_OQ));
                        best = _mm256_blendv_ps(best, v, win);
                    }
                _mm256_storeu_ps(o + f, best);
            }
        }
    }
}
#endif

typedef void (*cf_pool_fn)(const sn_conv_geom *g, const cf_pool *pl, const float *y, float *p);

static cf_pool_fn cf_pool_variant(void) {
#ifdef SN_CPU_X86
    static const cf_pool_fn generic = pool_image, avx2 = pool_image_avx2,
                            avx512 = pool_image_avx512;
    return *(const cf_pool_fn *)pick_variant(&generic, &avx2, &avx512);
#else
    return pool_image;
#endif
}

typedef struct cf_ctx {
    const sn_kcall *c;
    sn_conv_geom g;
    cf_pool pl;
    cf_image_fn image;
    cf_pool_fn pool;
} cf_ctx;

typedef struct cf_state {
    int nth; /* threads the scratch was sized for */
} cf_state;

static sn_status cf_prepare(sn_kcall *c, size_t *scratch_bytes) {
    sn_conv_geom g;
    cf_pool pl;
    SN_ASSERT(cf_geom(c, &g, &pl));
    cf_state *st = sn_calloc(1, sizeof *st);
    if (!st) return SN_ERR_NOMEM;
    st->nth = sn_num_threads();
    c->state = st;
    /* one image's output per thread, for a run whose out is NULL */
    *scratch_bytes = (size_t)st->nth * (size_t)(g.oh * g.ow * g.f) * sizeof(float);
    return SN_OK;
}

static void cf_release(sn_kcall *c) {
    free(c->state);
    c->state = NULL;
}

sn_conv1_image_fn sn_cpu_conv1_image(void) {
#ifdef SN_CPU_X86
    static const cf_image_fn generic = image_generic, avx2 = image_avx2, avx512 = image_avx512;
    return *(const cf_image_fn *)pick_variant(&generic, &avx2, &avx512);
#else
    return image_generic;
#endif
}

static void cf_task(void *vctx, int ith, int nth) {
    const cf_ctx *t = vctx;
    const sn_conv_geom *g = &t->g;
    const sn_kcall *c = t->c;
    const int64_t xsz = g->h * g->w, ysz = g->oh * g->ow * g->f;
    const int64_t psz = t->pl.oh * t->pl.ow * g->f;
    int64_t lo, hi;
    sn_split_range(g->n, ith, nth, &lo, &hi);
    for (int64_t n = lo; n < hi; n++) {
        float *y = c->out ? (float *)c->out + n * ysz : (float *)c->scratch + ith * ysz;
        t->image(g, (const float *)c->in[0] + n * xsz, c->in[1], c->in[2], y);
        if (c->n_out2) t->pool(g, &t->pl, y, (float *)c->out2[0] + n * psz);
    }
}

/* x [N, H, W, 1], w [KH, KW, 1, F], b [F] -> y [N, OH, OW, F] (relu'd); out2: the pool of y */
static sn_status cf_run(sn_kcall *c) {
    cf_ctx t = {.c = c, .image = sn_cpu_conv1_image(), .pool = cf_pool_variant()};
    SN_ASSERT(cf_geom(c, &t.g, &t.pl));
    int nth = ((const cf_state *)c->state)->nth;
    if (nth > sn_num_threads()) nth = sn_num_threads();
    if (t.g.n < nth) nth = (int)t.g.n;
    sn_parallel(cf_task, &t, nth);
    return SN_OK;
}

static const sn_kernel k_conv_fused = {
    .impl = "fused:conv1+bias+relu+pool",
    .supports = cf_supports,
    .prepare = cf_prepare,
    .run = cf_run,
    .release = cf_release,
};

const sn_kernel *sn_cpu_conv_fused_kernel(void) { return &k_conv_fused; }
