/* SN_FUSED_POOL_RELU_GRAD (kernel.h): max_pool2d_grad -> relu_grad [-> the bias gradient,
 * reduce_sum over N, H, W], f32 NHWC, in one pass; and the registration of the CPU's fused
 * kernels (the forward one is in cpu_conv_fused.c).
 *
 * Why: unfused, small_cnn's first layer reads and writes its 11 MB activation gradient three
 * times after the pool gradient (pool gradient writes dx, relu_grad reads x and dx and writes
 * dx again, reduce_sum reads it), at 32 channels per window, loop-overhead bound (issue 15:
 * these three were ~17 % of the step). Here each window finds its maximum once, and the
 * gradient lands on that cell only if the maximum (the relu output there) is positive: the
 * relu_grad's mask y > 0 at the one cell the pool gradient writes. The bias gradient is the
 * sum of those same values, taken per window instead of per cell.
 *
 * Exactness: the activation gradient is bit for bit the unfused one (the same first-maximum
 * rule as cpu_pool.c, the same dy + 0.0f store). The bias gradient sums in another order
 * (per thread in double, threads added in thread order: depends on the thread count only),
 * so it differs from reduce_sum's float sum by rounding; tests/test_fused.c bounds it. The
 * generic loop and the AVX2 2x2 items add each window's term to the double partial, so they
 * give the same bits (checked); the AVX-512 2x2 items sum a row in f32 first.
 *
 * Only windows that do not overlap (pool <= stride, every 2x2/2 pool): each dx cell then has
 * at most one window, so dx is written once and never read. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_fused.h"
#include "backend/cpu/cpu_vec.h"

#define PF_CB 256 /* channels per work item, as cpu_pool.c */

typedef struct pf_geom {
    int64_t n, h, w, c, oh, ow;
    int64_t ph, pw, sh, sw, pt, pl;
} pf_geom;

static bool pf_geom_of(const sn_kcall *c, pf_geom *g) {
    if (c->op != SN_OP_MAX_POOL2D_GRAD || c->fused != SN_FUSED_POOL_RELU_GRAD || c->n_in != 2)
        return false;
    if (c->y.dtype != SN_F32 || c->x[0].dtype != SN_F32 || c->x[1].dtype != SN_F32) return false;
    const sn_shape *xs = &c->x[0].shape, *ys = &c->x[1].shape;
    if (xs->ndim != 4 || ys->ndim != 4 || !sn_shape_equal(xs, &c->y.shape) ||
        xs->dim[0] != ys->dim[0] || xs->dim[3] != ys->dim[3])
        return false;
    g->n = xs->dim[0], g->h = xs->dim[1], g->w = xs->dim[2], g->c = xs->dim[3];
    g->oh = ys->dim[1], g->ow = ys->dim[2];
    g->ph = c->attr->pool.pool_h, g->pw = c->attr->pool.pool_w;
    g->sh = c->attr->pool.stride_h, g->sw = c->attr->pool.stride_w;
    g->pt = c->attr->pool.pad_top, g->pl = c->attr->pool.pad_left;
    if (g->ph < 1 || g->pw < 1 || g->ph > g->sh || g->pw > g->sw || g->pt < 0 || g->pl < 0)
        return false;
    if (c->n_out2 > 1) return false;
    if (c->n_out2 == 1 && (c->y2[0].dtype != SN_F32 || sn_shape_numel(&c->y2[0].shape) != g->c))
        return false;
    return true;
}

static bool pf_supports(const sn_kcall *c) {
    pf_geom g;
    return pf_geom_of(c, &g);
}

typedef struct pf_state {
    int nth; /* threads the scratch was sized for */
} pf_state;

static sn_status pf_prepare(sn_kcall *c, size_t *scratch_bytes) {
    pf_geom g;
    SN_ASSERT(pf_geom_of(c, &g));
    pf_state *st = sn_calloc(1, sizeof *st);
    if (!st) return SN_ERR_NOMEM;
    st->nth = sn_num_threads();
    c->state = st;
    /* per thread: its partial bias gradient, in double */
    *scratch_bytes = c->n_out2 ? (size_t)st->nth * (size_t)g.c * sizeof(double) : 0;
    return SN_OK;
}

static void pf_release(sn_kcall *c) {
    free(c->state);
    c->state = NULL;
}

/* The items of a full-window 2x2/2 pool, one ISA variant (pf_item_2x2 and its AVX2 twin). */
typedef void (*pf_item_fn)(const pf_geom *g, const float *x, const float *dy, float *dx,
                           double *part, int64_t cn);

typedef struct pf_ctx {
    const sn_kcall *c;
    pf_geom g;
    int64_t ncb;
    pf_item_fn item; /* the full-window 2x2/2 pool's items (an ISA variant), or NULL */
    int used;
} pf_ctx;

#ifdef SN_CPU_X86
/* The 2x2/2 pool whose windows all lie in the image (no padding, small_cnn's), 16 channels a
 * vector: the four cells' compares give the first maximum and its one-hot winner masks
 * directly, so a window costs four loads, three compares and four masked stores. Each row's
 * bias sums go to the thread's double partials at the row's end. Same values as pf_task's
 * loop: the same rule (pool_wins: strictly greater, or the first NaN), dy + 0.0f stored. */
/* One 2x2 window of 16 channels whose cells start at p, p + C, p + WC and p + WC + C: the
 * max-pool gradient after relu. q[0..3] (the cells in that order) get dy on the cell holding
 * the window's first maximum times (maximum > 0) (relu's gradient), 0 on the other cells. Returns the relu-masked dy, the bias gradient's term. */
TGT_AVX512 static inline __m512 pf_window_grad(const float *p, int64_t C, int64_t WC, __m512 dyv,
                                               __m512 q[4]) {
    const __m512 a = _mm512_loadu_ps(p), b = _mm512_loadu_ps(p + C);
    const __m512 c = _mm512_loadu_ps(p + WC), d = _mm512_loadu_ps(p + WC + C);
    /* pool_wins: not (cell <= best), where best is not yet NaN */
    __m512 best = a;
    const __mmask16 m1 =
        _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(best, best, _CMP_ORD_Q), b, best, _CMP_NLE_UQ);
    best = _mm512_mask_mov_ps(best, m1, b);
    const __mmask16 m2 =
        _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(best, best, _CMP_ORD_Q), c, best, _CMP_NLE_UQ);
    best = _mm512_mask_mov_ps(best, m2, c);
    const __mmask16 m3 =
        _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(best, best, _CMP_ORD_Q), d, best, _CMP_NLE_UQ);
    best = _mm512_mask_mov_ps(best, m3, d);
    /* relu_grad1: dy * (best > 0), so a NaN dy stays NaN */
    const __m512 pos = _mm512_mul_ps(
        dyv, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ),
                                 _mm512_set1_ps(1.0f)));
    q[0] = _mm512_maskz_mov_ps((__mmask16)~(m1 | m2 | m3), pos);
    q[1] = _mm512_maskz_mov_ps((__mmask16)(m1 & ~(m2 | m3)), pos);
    q[2] = _mm512_maskz_mov_ps((__mmask16)(m2 & ~m3), pos);
    q[3] = _mm512_maskz_mov_ps(m3, pos);
    return pos;
}

TGT_AVX512 static void pf_item_2x2(const pf_geom *g, const float *x, const float *dy, float *dx,
                                   double *part, int64_t cn) {
    const int64_t C = g->c, W = g->w;
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t oh = 0; oh < g->oh; oh++) {
        for (int64_t k = 0; k < cn; k += 16) {
            __m512 rowsum = zero;
            for (int64_t ow = 0; ow < g->ow; ow++) {
                const int64_t c00 = (2 * oh * W + 2 * ow) * C + k;
                const __m512 dyv =
                    _mm512_add_ps(_mm512_loadu_ps(dy + (oh * g->ow + ow) * C + k), zero);
                __m512 q[4];
                rowsum = _mm512_add_ps(rowsum, pf_window_grad(x + c00, C, W * C, dyv, q));
                _mm512_storeu_ps(dx + c00, q[0]);
                _mm512_storeu_ps(dx + c00 + C, q[1]);
                _mm512_storeu_ps(dx + c00 + W * C, q[2]);
                _mm512_storeu_ps(dx + c00 + W * C + C, q[3]);
            }
            if (part) {
                double *pp = part + k;
                _mm512_storeu_pd(pp, _mm512_add_pd(_mm512_loadu_pd(pp),
                                                   _mm512_cvtps_pd(_mm512_castps512_ps256(rowsum))));
                _mm512_storeu_pd(pp + 8, _mm512_add_pd(_mm512_loadu_pd(pp + 8),
                                                       _mm512_cvtps_pd(_mm256_castpd_ps(
                                                           _mm512_extractf64x4_pd(_mm512_castps_pd(rowsum), 1)))));
            }
        }
    }
}

/* pf_window_grad on 8 channels (AVX2): the same compares and selects, masks as vectors. */
TGT_AVX2 static inline __m256 pf_window_grad_avx2(const float *p, int64_t C, int64_t WC,
                                                  __m256 dyv, __m256 q[4]) {
    const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + C);
    const __m256 c = _mm256_loadu_ps(p + WC), d = _mm256_loadu_ps(p + WC + C);
    /* pool_wins: not (cell <= best), where best is not yet NaN */
    __m256 best = a;
    const __m256 m1 = _mm256_and_ps(_mm256_cmp_ps(best, best, _CMP_ORD_Q),
                                    _mm256_cmp_ps(b, best, _CMP_NLE_UQ));
    best = _mm256_blendv_ps(best, b, m1);
    const __m256 m2 = _mm256_and_ps(_mm256_cmp_ps(best, best, _CMP_ORD_Q),
                                    _mm256_cmp_ps(c, best, _CMP_NLE_UQ));
    best = _mm256_blendv_ps(best, c, m2);
    const __m256 m3 = _mm256_and_ps(_mm256_cmp_ps(best, best, _CMP_ORD_Q),
                                    _mm256_cmp_ps(d, best, _CMP_NLE_UQ));
    best = _mm256_blendv_ps(best, d, m3);
    /* relu_grad1: dy * (best > 0), so a NaN dy stays NaN */
    const __m256 pos = _mm256_mul_ps(
        dyv, _mm256_and_ps(_mm256_cmp_ps(best, _mm256_setzero_ps(), _CMP_GT_OQ),
                           _mm256_set1_ps(1.0f)));
    const __m256 m23 = _mm256_or_ps(m2, m3);
    q[0] = _mm256_andnot_ps(_mm256_or_ps(m1, m23), pos);
    q[1] = _mm256_andnot_ps(m23, _mm256_and_ps(m1, pos));
    q[2] = _mm256_andnot_ps(m3, _mm256_and_ps(m2, pos));
    q[3] = _mm256_and_ps(m3, pos);
    return pos;
}

/* pf_item_2x2 on 8 channels a vector (AVX2). The bias partial takes each window's term in
 * double, window after window, as pf_task's loop does (not a row's f32 sum first, as the
 * AVX-512 variant): the bias gradient is the generic loop's bits, and so is dx. */
TGT_AVX2 static void pf_item_2x2_avx2(const pf_geom *g, const float *x, const float *dy,
                                      float *dx, double *part, int64_t cn) {
    const int64_t C = g->c, W = g->w;
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t oh = 0; oh < g->oh; oh++) {
        for (int64_t k = 0; k < cn; k += 8) {
            __m256d lo = _mm256_setzero_pd(), hi = lo;
            if (part) lo = _mm256_loadu_pd(part + k), hi = _mm256_loadu_pd(part + k + 4);
            for (int64_t ow = 0; ow < g->ow; ow++) {
                const int64_t c00 = (2 * oh * W + 2 * ow) * C + k;
                const __m256 dyv =
                    _mm256_add_ps(_mm256_loadu_ps(dy + (oh * g->ow + ow) * C + k), zero);
                __m256 q[4];
                const __m256 pos = pf_window_grad_avx2(x + c00, C, W * C, dyv, q);
                lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(pos)));
                hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(pos, 1)));
                _mm256_storeu_ps(dx + c00, q[0]);
                _mm256_storeu_ps(dx + c00 + C, q[1]);
                _mm256_storeu_ps(dx + c00 + W * C, q[2]);
                _mm256_storeu_ps(dx + c00 + W * C + C, q[3]);
            }
            if (part) _mm256_storeu_pd(part + k, lo), _mm256_storeu_pd(part + k + 4, hi);
        }
    }
}
#endif

/* Whether input row (or column) i lies in a window (windows do not overlap). */
static inline bool covered(int64_t i, int64_t pad, int64_t stride, int64_t pool, int64_t n_out) {
    int64_t o = (i + pad) / stride;
    return o < n_out && i + pad - o * stride < pool;
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void
pf_task(void *vctx, int ith, int nth) {
    pf_ctx *t = vctx;
    if (ith == 0) t->used = nth;
    const pf_geom *g = &t->g;
    const sn_kcall *c = t->c;
    const int64_t C = g->c, xsz = g->h * g->w * C;
    double *part = c->n_out2 ? (double *)c->scratch + (size_t)ith * (size_t)C : NULL;
    if (part) memset(part, 0, (size_t)C * sizeof(double));
    int64_t lo, hi;
    sn_split_range(g->n * t->ncb, ith, nth, &lo, &hi);
    float best[PF_CB], pos[PF_CB];
    int32_t arg[PF_CB];
    for (int64_t item = lo; item < hi; item++) {
        const int64_t n = item / t->ncb, c0 = (item % t->ncb) * PF_CB;
        const int64_t cn = C - c0 < PF_CB ? C - c0 : PF_CB;
        const float *x = (const float *)c->in[0] + n * xsz + c0;
        float *dx = (float *)c->out + n * xsz + c0;
#ifdef SN_CPU_X86
        if (t->item) {
            /* rows and columns past the last window (an odd size) get no gradient */
            for (int64_t ih = 0; ih < g->h; ih++)
                for (int64_t iw = 0; iw < g->w; iw++)
                    if (ih >= 2 * g->oh || iw >= 2 * g->ow)
                        memset(dx + (ih * g->w + iw) * C, 0, (size_t)cn * sizeof(float));
            t->item(g, x, (const float *)c->in[1] + n * g->oh * g->ow * C + c0, dx,
                        part ? part + c0 : NULL, cn);
            continue;
        }
#endif
        /* the cells no window covers (stride > pool, or the rows an odd size leaves) */
        for (int64_t ih = 0; ih < g->h; ih++) {
            bool row = covered(ih, g->pt, g->sh, g->ph, g->oh);
            for (int64_t iw = 0; iw < g->w; iw++)
                if (!row || !covered(iw, g->pl, g->sw, g->pw, g->ow))
                    memset(dx + (ih * g->w + iw) * C, 0, (size_t)cn * sizeof(float));
        }
        for (int64_t oh = 0; oh < g->oh; oh++) {
            int64_t h0, h1;
            sn_pool_span(oh, g->sh, g->pt, g->ph, g->h, &h0, &h1);
            for (int64_t ow = 0; ow < g->ow; ow++) {
                int64_t w0, w1;
                sn_pool_span(ow, g->sw, g->pl, g->pw, g->w, &w0, &w1);
                if (h1 <= h0 || w1 <= w0) continue; /* wholly in the padding: no cell */
                const float *dy = (const float *)c->in[1] +
                                  ((n * g->oh + oh) * g->ow + ow) * C + c0;
                /* first maximum in row-major window order (later cells win only when
                 * strictly greater, or the first NaN), as cpu_pool.c */
                const float *p = x + (h0 * g->w + w0) * C;
                for (int64_t k = 0; k < cn; k++) best[k] = p[k], arg[k] = (int32_t)(h0 * g->w + w0);
                for (int64_t r = h0; r < h1; r++)
                    for (int64_t q = (r == h0 ? w0 + 1 : w0); q < w1; q++) {
                        const int32_t cell = (int32_t)(r * g->w + q);
                        p = x + cell * C;
                        for (int64_t k = 0; k < cn; k++) {
                            bool win = pool_wins(p[k], best[k]);
                            best[k] = win ? p[k] : best[k];
                            arg[k] = win ? cell : arg[k];
                        }
                    }
                /* relu_grad's mask at the one cell the gradient reaches: y there is best */
                for (int64_t k = 0; k < cn; k++) pos[k] = relu_grad1(best[k], dy[k] + 0.0f);
                if (part)
                    for (int64_t k = 0; k < cn; k++) part[c0 + k] += (double)pos[k];
                for (int64_t r = h0; r < h1; r++)
                    for (int64_t q = w0; q < w1; q++) {
                        const int32_t cell = (int32_t)(r * g->w + q);
                        float *o = dx + cell * C;
                        for (int64_t k = 0; k < cn; k++) o[k] = arg[k] == cell ? pos[k] : 0.0f;
                    }
            }
        }
    }
}

/* x [N, H, W, C] (the relu's output), dy [N, OH, OW, C] -> dx [N, H, W, C]; out2: db [C] */
static sn_status pf_run(sn_kcall *c) {
    pf_ctx t = {.c = c};
    SN_ASSERT(pf_geom_of(c, &t.g));
    t.ncb = (t.g.c + PF_CB - 1) / PF_CB;
#ifdef SN_CPU_X86
    static const pf_item_fn generic = NULL, avx2 = pf_item_2x2_avx2, avx512 = pf_item_2x2;
    if (t.g.c % 16 == 0 && t.g.ph == 2 && t.g.pw == 2 && t.g.sh == 2 && t.g.sw == 2 &&
        t.g.pt == 0 && t.g.pl == 0 && 2 * t.g.oh <= t.g.h && 2 * t.g.ow <= t.g.w)
        t.item = *(const pf_item_fn *)pick_variant(&generic, &avx2, &avx512);
#endif
    int64_t items = t.g.n * t.ncb;
    int nth = ((const pf_state *)c->state)->nth;
    if (nth > sn_num_threads()) nth = sn_num_threads();
    if (items < nth) nth = (int)(items > 0 ? items : 1);
    sn_parallel(pf_task, &t, nth);
    if (c->n_out2) {
        const double *part = c->scratch;
        float *db = c->out2[0];
        for (int64_t k = 0; k < t.g.c; k++) {
            double s = 0;
            for (int p = 0; p < t.used; p++) s += part[(size_t)p * (size_t)t.g.c + (size_t)k];
            db[k] = (float)s;
        }
    }
    return SN_OK;
}

static const sn_kernel k_pool_relu_grad = {
    .impl = "fused:pool+relu+bias",
    .supports = pf_supports,
    .prepare = pf_prepare,
    .run = pf_run,
    .release = pf_release,
};

/* ---- SN_FUSED_POOL_RELU_GRAD_FILTER: with a first layer's filter gradient ---------------- */
/*
 * The relu_grad's value of small_cnn's first layer feeds only the bias gradient and the
 * filter gradient (one input channel: the image gets no gradient). So instead of storing it
 * (11 MB) for cpu_conv_c1.c to read back, each window's gradient, already one-hot over the
 * window's four cells, is multiplied into the filter gradient at once: for each cell, its KH*KW
 * input taps broadcast against its 16-channel gradient vector (zero where another cell won),
 * into accumulators that stay in registers for a whole image, as cpu_conv_c1.c does per
 * pixel. AVX-512 or AVX2 + FMA (the same bits: the same sums in the same order), and the
 * full-window 2x2/2 pool only; elsewhere the pattern without the filter runs. Sums: per image in f32 (windows in row-major order), then image after image
 * into the thread's partial, threads added in thread order: differs from cpu_conv_c1.c's
 * pixel order by rounding (tests/test_fused.c bounds it); the same run to run.
 *
 * With the layer's weights and bias as inputs too (n_in 5), the relu output is not read but
 * recomputed, one image at a time into the thread's scratch (cache), by the forward's own
 * function (cpu_fused.h): the same bits, so the same maxima. Its 11 MB (small_cnn) are then
 * neither written by the forward nor read here; the recomputation is 18 FMAs a pixel. */

#define PF_MAX_TAPS 25
#define PF_MAX_F 32
#define PFF_RUN 16 /* windows per run of pff_image_kk */

typedef struct pff_geom {
    pf_geom p;
    sn_conv_geom cv;
} pff_geom;

/* One image's part of the filter and bias gradients (an ISA variant). */
typedef void (*pff_image_fn)(const pff_geom *G, const float *y, const float *dy, const float *x,
                             float *dw, double *db);

#ifdef SN_CPU_X86
static pff_image_fn pff_variant(void);
#endif

static bool pff_geom_of(const sn_kcall *c, pff_geom *g) {
    if (c->fused != SN_FUSED_POOL_RELU_GRAD_FILTER || (c->n_in != 3 && c->n_in != 5) ||
        c->n_out2 != 2)
        return false;
    sn_kcall pc = *c; /* the pool part, as pf_geom_of reads it */
    pc.fused = SN_FUSED_POOL_RELU_GRAD, pc.n_in = 2, pc.n_out2 = 1;
    if (!pf_geom_of(&pc, &g->p)) return false;
    sn_kcall fc = {.op = SN_OP_CONV2D_BWD_FILTER, .attr = c->attr2[1], .y = c->y2[1], .n_in = 2,
                   .x = {c->x[2], c->x[0]}};
    if (!sn_conv_geom_of(&fc, &g->cv)) return false;
    const pf_geom *p = &g->p;
    if (c->n_in == 5) { /* w [KH, KW, 1, F] and b [F], as the forward call reads them */
        const sn_shape *ws = &c->x[3].shape;
        if (c->x[3].dtype != SN_F32 || c->x[4].dtype != SN_F32 || ws->ndim != 4 ||
            ws->dim[0] != g->cv.kh || ws->dim[1] != g->cv.kw || ws->dim[2] != 1 ||
            ws->dim[3] != g->cv.f || sn_shape_numel(&c->x[4].shape) != g->cv.f)
            return false;
    }
#ifdef SN_CPU_X86
    bool simd = pff_variant() != NULL;
#else
    bool simd = false;
#endif
    return simd && g->cv.c == 1 && g->cv.f == p->c && p->c % 16 == 0 && p->c <= PF_MAX_F &&
           g->cv.kh * g->cv.kw <= PF_MAX_TAPS && p->ph == 2 && p->pw == 2 && p->sh == 2 &&
           p->sw == 2 && p->pt == 0 && p->pl == 0 && 2 * p->oh <= p->h && 2 * p->ow <= p->w;
}

static bool pff_supports(const sn_kcall *c) {
    pff_geom g;
    return pff_geom_of(c, &g);
}

typedef struct pff_state {
    int nth;
} pff_state;

static sn_status pff_prepare(sn_kcall *c, size_t *scratch_bytes) {
    pff_geom g;
    SN_ASSERT(pff_geom_of(c, &g));
    pff_state *st = sn_calloc(1, sizeof *st);
    if (!st) return SN_ERR_NOMEM;
    st->nth = sn_num_threads() > g.p.n ? (int)g.p.n : sn_num_threads();
    c->state = st;
    /* per thread: the bias partial (double) and the filter partial (float) */
    const size_t kf = (size_t)(g.cv.kh * g.cv.kw * g.cv.f);
    const size_t remat = c->n_in == 5 ? (size_t)(g.p.h * g.p.w * g.p.c) : 0; /* one image */
    *scratch_bytes =
        (size_t)st->nth * ((size_t)g.p.c * sizeof(double) + (kf + remat) * sizeof(float));
    return SN_OK;
}

typedef struct pff_ctx {
    const sn_kcall *c;
    pff_geom g;
    int used;
} pff_ctx;

#ifdef SN_CPU_X86
/* The taps of conv output pixel (oh, ow): x under the window, 0 in the padding. */
static inline void pff_taps(const sn_conv_geom *g, const float *x, int64_t oh, int64_t ow,
                            float *t) {
    const int64_t ih0 = oh * g->sh - g->pt, iw0 = ow * g->sw - g->pl;
    for (int64_t kh = 0; kh < g->kh; kh++)
        for (int64_t kw = 0; kw < g->kw; kw++) {
            int64_t ih = ih0 + kh, iw = iw0 + kw;
            t[kh * g->kw + kw] =
                ih >= 0 && ih < g->h && iw >= 0 && iw < g->w ? x[ih * g->w + iw] : 0.0f;
        }
}

/* One image: dw[k][f] += sum over cells of tap_k * grad[cell][f], db[f] += sum of grad. */
TGT_AVX512 INL void pff_image_kk(const pff_geom *G, const float *y, const float *dy,
                                           const float *x, float *dw, double *db, const int KK,
                                           const int FB) {
    const pf_geom *g = &G->p;
    const sn_conv_geom *cv = &G->cv;
    const int64_t C = g->c, W = g->w;
    const __m512 zero = _mm512_setzero_ps();
    __m512 acc[PF_MAX_TAPS][PF_MAX_F / 16], bsum[PF_MAX_F / 16];
    for (int j = 0; j < FB; j++) {
        bsum[j] = zero;
        for (int k = 0; k < KK; k++) acc[k][j] = zero;
    }
    float t[PF_MAX_TAPS];
    int64_t off[PF_MAX_TAPS]; /* tap k of an interior cell is x[ih0 * W + iw0 + off[k]] */
    for (int64_t kh = 0; kh < cv->kh; kh++)
        for (int64_t kw = 0; kw < cv->kw; kw++) off[kh * cv->kw + kw] = kh * cv->w + kw;
    /* A run of up to PFF_RUN windows of one row: first their gradients (gq, in the order the
     * bias sums them), then the filter gradient's FMAs over their cells in (window, cell)
     * order, each acc[k][j] in the same order as one window at a time: the same bits. Two
     * phases so that the 9 x 2 accumulators stay in registers (interleaved with the window
     * gradients, GCC kept them on the stack, and each cell's FMAs waited on a store). */
    __m512 gq[PFF_RUN][4][PF_MAX_F / 16];
    for (int64_t oh = 0; oh < g->oh; oh++)
        for (int64_t ow0 = 0; ow0 < g->ow; ow0 += PFF_RUN) {
            const int64_t nw = g->ow - ow0 < PFF_RUN ? g->ow - ow0 : PFF_RUN;
            for (int64_t r = 0; r < nw; r++) {
                const int64_t ow = ow0 + r;
                for (int j = 0; j < FB; j++) {
                    const int64_t c00 = (2 * oh * W + 2 * ow) * C + 16 * j;
                    const __m512 dyv =
                        _mm512_add_ps(_mm512_loadu_ps(dy + (oh * g->ow + ow) * C + 16 * j), zero);
                    __m512 q[4];
                    bsum[j] = _mm512_add_ps(bsum[j], pf_window_grad(y + c00, C, W * C, dyv, q));
                    for (int i = 0; i < 4; i++) gq[r][i][j] = q[i];
                }
            }
            for (int64_t r = 0; r < nw; r++) {
                const int64_t ow = ow0 + r;
                for (int q = 0; q < 4; q++) {
                    const int64_t ch = 2 * oh + (q >> 1), cw = 2 * ow + (q & 1);
                    const int64_t ih0 = ch * cv->sh - cv->pt, iw0 = cw * cv->sw - cv->pl;
                    const float *p;
                    if (ih0 >= 0 && iw0 >= 0 && ih0 + cv->kh <= cv->h && iw0 + cv->kw <= cv->w) {
                        p = x + ih0 * cv->w + iw0;
                    } else {
                        pff_taps(cv, x, ch, cw, t);
                        p = NULL;
                    }
                    for (int k = 0; k < KK; k++) {
                        const __m512 tk = _mm512_set1_ps(p ? p[off[k]] : t[k]);
                        for (int j = 0; j < FB; j++)
                            acc[k][j] = _mm512_fmadd_ps(tk, gq[r][q][j], acc[k][j]);
                    }
                }
            }
        }
    for (int j = 0; j < FB; j++) {
        for (int k = 0; k < KK; k++) {
            float *o = dw + k * C + 16 * j;
            _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), acc[k][j]));
        }
        double *pb = db + 16 * j;
        _mm512_storeu_pd(pb, _mm512_add_pd(_mm512_loadu_pd(pb),
                                           _mm512_cvtps_pd(_mm512_castps512_ps256(bsum[j]))));
        _mm512_storeu_pd(pb + 8, _mm512_add_pd(_mm512_loadu_pd(pb + 8),
                                               _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(
                                                   _mm512_castps_pd(bsum[j]), 1)))));
    }
}

TGT_AVX512 static void pff_image_avx512(const pff_geom *G, const float *y, const float *dy,
                                        const float *x, float *dw, double *db) {
    const int KK = (int)(G->cv.kh * G->cv.kw), FB = (int)(G->p.c / 16);
    if (KK == 9 && FB == 2) pff_image_kk(G, y, dy, x, dw, db, 9, 2);
    else if (KK == 9 && FB == 1) pff_image_kk(G, y, dy, x, dw, db, 9, 1);
    else pff_image_kk(G, y, dy, x, dw, db, KK, FB);
}

/* pff_image_kk on AVX2 + FMA: 16 ymm registers hold one 8-channel group's KK accumulators
 * (3x3: nine), not all groups' (36 for 32 channels), so the image is done one 8-channel group
 * at a time: a pass over the windows per group, the two phases of the AVX-512 kernel within
 * it (a run's window gradients to gq, then their cells' FMAs). Per lane, every acc[k] and
 * bsum takes the same terms in the same order as the AVX-512 kernel (windows in row-major
 * order, then cells), and the window gradients are pf_window_grad's: the same bits as the
 * AVX-512 variant. */
TGT_AVX2 INL void pff_image_avx2_kk(const pff_geom *G, const float *y, const float *dy,
                                    const float *x, float *dw, double *db, const int KK,
                                    const int KW) {
    const pf_geom *g = &G->p;
    const sn_conv_geom *cv = &G->cv;
    const int64_t C = g->c, W = g->w;
    const __m256 zero = _mm256_setzero_ps();
    float t[PF_MAX_TAPS];
    int64_t off[PF_MAX_TAPS]; /* tap k of an interior cell is x[ih0 * W + iw0 + off[k]] */
    for (int64_t kh = 0; kh < cv->kh; kh++)
        for (int64_t kw = 0; kw < cv->kw; kw++) off[kh * cv->kw + kw] = kh * cv->w + kw;
    __m256 gq[PFF_RUN][4];
    for (int64_t j = 0; j < C; j += 8) {
        __m256 acc[PF_MAX_TAPS], bsum = zero;
        for (int k = 0; k < KK; k++) acc[k] = zero;
        for (int64_t oh = 0; oh < g->oh; oh++)
            for (int64_t ow0 = 0; ow0 < g->ow; ow0 += PFF_RUN) {
                const int64_t nw = g->ow - ow0 < PFF_RUN ? g->ow - ow0 : PFF_RUN;
                for (int64_t r = 0; r < nw; r++) {
                    const int64_t ow = ow0 + r;
                    const int64_t c00 = (2 * oh * W + 2 * ow) * C + j;
                    const __m256 dyv =
                        _mm256_add_ps(_mm256_loadu_ps(dy + (oh * g->ow + ow) * C + j), zero);
                    bsum = _mm256_add_ps(bsum, pf_window_grad_avx2(y + c00, C, W * C, dyv, gq[r]));
                }
                for (int64_t r = 0; r < nw; r++) {
                    const int64_t ow = ow0 + r;
                    for (int q = 0; q < 4; q++) {
                        const int64_t ch = 2 * oh + (q >> 1), cw = 2 * ow + (q & 1);
                        const int64_t ih0 = ch * cv->sh - cv->pt, iw0 = cw * cv->sw - cv->pl;
                        const __m256 gv = gq[r][q];
                        if (ih0 >= 0 && iw0 >= 0 && ih0 + cv->kh <= cv->h &&
                            iw0 + cv->kw <= cv->w) {
                            const float *p = x + ih0 * cv->w + iw0;
#pragma GCC unroll 25
                            for (int k = 0; k < KK; k++) {
                                /* KW constant (3x3): constant offsets past the row's, no
                                 * table to load */
                                const int64_t ok = KW ? (k / KW) * cv->w + k % KW : off[k];
                                acc[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + ok), gv, acc[k]);
                            }
                        } else {
                            pff_taps(cv, x, ch, cw, t);
                            for (int k = 0; k < KK; k++)
                                acc[k] = _mm256_fmadd_ps(_mm256_broadcast_ss(t + k), gv, acc[k]);
                        }
                    }
                }
            }
        for (int k = 0; k < KK; k++) {
            float *o = dw + k * C + j;
            _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), acc[k]));
        }
        double *pb = db + j;
        _mm256_storeu_pd(pb, _mm256_add_pd(_mm256_loadu_pd(pb),
                                           _mm256_cvtps_pd(_mm256_castps256_ps128(bsum))));
        _mm256_storeu_pd(pb + 4, _mm256_add_pd(_mm256_loadu_pd(pb + 4),
                                               _mm256_cvtps_pd(_mm256_extractf128_ps(bsum, 1))));
    }
}

TGT_AVX2 static void pff_image_avx2(const pff_geom *G, const float *y, const float *dy,
                                    const float *x, float *dw, double *db) {
    const int KK = (int)(G->cv.kh * G->cv.kw);
    if (G->cv.kh == 3 && G->cv.kw == 3) pff_image_avx2_kk(G, y, dy, x, dw, db, 9, 3);
    else pff_image_avx2_kk(G, y, dy, x, dw, db, KK, 0);
}

/* The variant this CPU runs, NULL where there is none (then supports() is false). */
static pff_image_fn pff_variant(void) {
    static const pff_image_fn generic = NULL, avx2 = pff_image_avx2, avx512 = pff_image_avx512;
    return *(const pff_image_fn *)pick_variant(&generic, &avx2, &avx512);
}
#endif

static void pff_task(void *vctx, int ith, int nth) {
    pff_ctx *t = vctx;
    if (ith == 0) t->used = nth;
    const pff_geom *G = &t->g;
    const sn_kcall *c = t->c;
    const int64_t C = G->p.c, KF = G->cv.kh * G->cv.kw * C;
    double *db = (double *)c->scratch + (size_t)ith * (size_t)C;
    /* scratch: nth bias partials (double), then nth filter partials (float) */
    float *dw = (float *)((double *)c->scratch + (size_t)nth * (size_t)C) + (size_t)ith * (size_t)KF;
    memset(db, 0, (size_t)C * sizeof(double));
    memset(dw, 0, (size_t)KF * sizeof(float));
    int64_t lo, hi;
    sn_split_range(G->p.n, ith, nth, &lo, &hi);
#ifdef SN_CPU_X86
    const int64_t ysz = G->p.h * G->p.w * C, dysz = G->p.oh * G->p.ow * C, xsz = G->cv.h * G->cv.w;
    /* after every thread's filter partial: this thread's recomputed image */
    float *ybuf = (float *)((double *)c->scratch + (size_t)nth * (size_t)C) +
                  (size_t)nth * (size_t)KF + (size_t)ith * (size_t)ysz;
    sn_conv1_image_fn conv = c->n_in == 5 ? sn_cpu_conv1_image() : NULL;
    const pff_image_fn image = pff_variant();
    for (int64_t n = lo; n < hi; n++) {
        const float *x = (const float *)c->in[2] + n * xsz, *y;
        if (conv) {
            conv(&G->cv, x, c->in[3], c->in[4], ybuf);
            y = ybuf;
        } else {
            y = (const float *)c->in[0] + n * ysz;
        }
        image(G, y, (const float *)c->in[1] + n * dysz, x, dw, db);
    }
#else
    (void)lo, (void)hi; /* supports() is false off x86 */
#endif
}

/* y [N, H, W, F] (the relu's output), dy [N, OH, OW, F], x [N, XH, XW, 1] -> out2: db [F],
 * dw [KH, KW, 1, F] */
static sn_status pff_run(sn_kcall *c) {
    pff_ctx t = {.c = c};
    SN_ASSERT(pff_geom_of(c, &t.g));
    int nth = ((const pff_state *)c->state)->nth;
    if (nth > sn_num_threads()) nth = sn_num_threads();
    sn_parallel(pff_task, &t, nth);
    const int64_t C = t.g.p.c, KF = t.g.cv.kh * t.g.cv.kw * C;
    const double *db = c->scratch;
    const float *dw = (const float *)(db + (size_t)t.used * (size_t)C);
    float *odb = c->out2[0], *odw = c->out2[1];
    for (int64_t k = 0; k < C; k++) {
        double s = 0;
        for (int p = 0; p < t.used; p++) s += db[(size_t)p * (size_t)C + (size_t)k];
        odb[k] = (float)s;
    }
    for (int64_t i = 0; i < KF; i++) {
        float s = 0;
        for (int p = 0; p < t.used; p++) s += dw[(size_t)p * (size_t)KF + (size_t)i];
        odw[i] = s;
    }
    return SN_OK;
}

static const sn_kernel k_pool_relu_grad_filter = {
    .impl = "fused:pool+relu+bias+filter",
    .supports = pff_supports,
    .prepare = pff_prepare,
    .run = pff_run,
    .release = pf_release,
};

void sn_cpu_register_fused(sn_kernel_table *t) {
    t->fused[SN_FUSED_POOL_RELU_GRAD] = &k_pool_relu_grad;
    t->fused[SN_FUSED_POOL_RELU_GRAD_FILTER] = &k_pool_relu_grad_filter;
    t->fused[SN_FUSED_CONV_BIAS_RELU] = sn_cpu_conv_fused_kernel();
}
