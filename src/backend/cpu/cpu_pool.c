/* MAX_POOL2D, AVG_POOL2D and their gradients, NHWC f32, by hand.
 *
 * Why not oneDNN: its max-pool backward routes the gradient through a workspace whose tie
 * rule is its own, and the reference routes each dy to the first maximum of its window
 * (row-major window order) — the rule TF uses. NHWC pooling is also an easy loop: channels
 * are contiguous, so every window step is a vector max/add over a block of channels, and
 * the work is memory-bound. The loops are compiled for AVX-512, AVX2 and baseline x86-64,
 * picked at load time (target_clones), as the style's run-time dispatch asks.
 *
 * Semantics (as the reference): windows pool_h x pool_w at stride (stride_h, stride_w), the
 * first window starting pad_top / pad_left cells before the image; padded cells never win a
 * max and are not counted by an average (TF SAME semantics); a NaN in a window is its
 * maximum (the first NaN in window order takes the gradient). Threads take (image, block of
 * channels) items, which never write to the same dx cells. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_vec.h"

#define POOL_CB 256 /* channels per work item: 16 AVX-512 vectors, whole rows of the seed CNN */

typedef struct pool_geom {
    int64_t n, h, w, c, oh, ow;
    int64_t ph, pw, sh, sw, pt, pl;
} pool_geom;

static bool pool_geom_of(const sn_kcall *c, pool_geom *g) {
    if (c->y.dtype != SN_F32) return false;
    /* a max pool's x may be bfloat16: the plan stores the BatchNormalization output before
     * one so (graph/plan_bf16.c); the maximum of bfloat16 numbers is one of them, written in
     * float32 */
    bool max = (c->op == SN_OP_MAX_POOL2D || c->op == SN_OP_MAX_POOL2D_GRAD) &&
               sn_cpu_bf16_pays(); /* where mixed bf16 computes in bf16 (cpu_batch_norm.c) */
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32 && !(max && i == 0 && c->x[i].dtype == SN_BF16)) return false;
    const sn_shape *xs, *ys;
    switch (c->op) {
    case SN_OP_MAX_POOL2D:
    case SN_OP_AVG_POOL2D:
        if (c->n_in != 1) return false;
        xs = &c->x[0].shape, ys = &c->y.shape;
        break;
    case SN_OP_MAX_POOL2D_GRAD:
        if (c->n_in != 2) return false;
        xs = &c->x[0].shape, ys = &c->x[1].shape;
        if (!sn_shape_equal(xs, &c->y.shape)) return false;
        break;
    case SN_OP_AVG_POOL2D_GRAD:
        if (c->n_in != 1) return false;
        xs = &c->y.shape, ys = &c->x[0].shape;
        break;
    default: return false;
    }
    if (xs->ndim != 4 || ys->ndim != 4 || xs->dim[0] != ys->dim[0] || xs->dim[3] != ys->dim[3])
        return false;
    g->n = xs->dim[0], g->h = xs->dim[1], g->w = xs->dim[2], g->c = xs->dim[3];
    g->oh = ys->dim[1], g->ow = ys->dim[2];
    g->ph = c->attr->pool.pool_h, g->pw = c->attr->pool.pool_w;
    g->sh = c->attr->pool.stride_h, g->sw = c->attr->pool.stride_w;
    g->pt = c->attr->pool.pad_top, g->pl = c->attr->pool.pad_left;
    /* Max-pool positions are kept as int32 cell indices within one image. */
    return g->ph >= 1 && g->pw >= 1 && g->sh >= 1 && g->sw >= 1 && g->pt >= 0 && g->pl >= 0 &&
           g->h * g->w <= INT32_MAX;
}

static bool pool_supports(const sn_kcall *c) {
    pool_geom g;
    return pool_geom_of(c, &g);
}

typedef struct pool_ctx {
    const sn_kcall *c;
    pool_geom g;
    int64_t ncb; /* channel blocks per image */
    bool xb;     /* x is bfloat16 (max pools) */
} pool_ctx;

/* The window of output cell (oh, ow), clipped to the image: rows [*h0, *h1), cols [*w0, *w1). */
static inline void window(const pool_geom *g, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1,
                          int64_t *w0, int64_t *w1) {
    int64_t ih = oh * g->sh - g->pt, iw = ow * g->sw - g->pl;
    *h0 = ih < 0 ? 0 : ih;
    *h1 = ih + g->ph < g->h ? ih + g->ph : g->h;
    *w0 = iw < 0 ? 0 : iw;
    *w1 = iw + g->pw < g->w ? iw + g->pw : g->w;
}

/* Zeroes channels [c0, c0+cn) of image n of dx. */
static inline void zero_slice(const pool_geom *g, float *dx, int64_t n, int64_t c0, int64_t cn) {
    float *p = dx + n * g->h * g->w * g->c + c0;
    for (int64_t i = 0; i < g->h * g->w; i++) memset(p + i * g->c, 0, (size_t)cn * sizeof(float));
}

/* Whether input row (or column) i lies in a window, for windows that do not overlap: the
 * window o = (i + pad) / stride is the only one that can hold it. */
static inline bool covered(int64_t i, int64_t pad, int64_t stride, int64_t pool, int64_t n_out) {
    int64_t o = (i + pad) / stride;
    return o < n_out && i + pad - o * stride < pool;
}

/* Zeroes channels [c0, c0+cn) of the cells of image n of dx that no window covers (the rows
 * and columns a pool with stride > pool skips, or the last ones an odd size leaves out). */
static void zero_uncovered(const pool_geom *g, float *dx, int64_t n, int64_t c0, int64_t cn) {
    float *p = dx + n * g->h * g->w * g->c + c0;
    for (int64_t ih = 0; ih < g->h; ih++) {
        bool row = covered(ih, g->pt, g->sh, g->ph, g->oh);
        for (int64_t iw = 0; iw < g->w; iw++)
            if (!row || !covered(iw, g->pl, g->sw, g->pw, g->ow))
                memset(p + (ih * g->w + iw) * g->c, 0, (size_t)cn * sizeof(float));
    }
}

/* The maximum of each of channels [c0, c0 + cn) over window rows [h0, h1), cols [w0, w1) of
 * image x (its first element at x), and the cell that holds it: the first valid cell starts
 * the scan; later cells win only when strictly greater (or the first NaN: pool_wins), so ties
 * go to the first maximum in row-major window order and a NaN in the window is the maximum. */
INL void max_scan(bool xb, const pool_geom *g, const void *x, int64_t c0, int64_t cn, int64_t h0,
                  int64_t h1, int64_t w0, int64_t w1, float *best, int32_t *arg) {
    const int64_t C = g->c;
    int64_t base = (h0 * g->w + w0) * C + c0;
    for (int64_t k = 0; k < cn; k++)
        best[k] = ld_act(xb, x, base + k), arg[k] = (int32_t)(h0 * g->w + w0);
    for (int64_t ih = h0; ih < h1; ih++) {
        for (int64_t iw = (ih == h0 ? w0 + 1 : w0); iw < w1; iw++) {
            const int32_t cell = (int32_t)(ih * g->w + iw);
            const int64_t o = cell * C + c0;
            for (int64_t k = 0; k < cn; k++) {
                float v = ld_act(xb, x, o + k);
                bool win = pool_wins(v, best[k]);
                best[k] = win ? v : best[k];
                arg[k] = win ? cell : arg[k];
            }
        }
    }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void
pool_task(void *vctx, int ith, int nth) {
    const pool_ctx *t = vctx;
    const pool_geom *g = &t->g;
    const sn_kcall *c = t->c;
    const sn_op op = c->op;
    const int64_t C = g->c, xsz = g->h * g->w * C;
    int64_t lo, hi;
    sn_split_range(g->n * t->ncb, ith, nth, &lo, &hi);
    float best[POOL_CB];
    int32_t arg[POOL_CB];
    /* Windows that do not overlap (pool <= stride, as in every 2x2/2 pool): each dx cell gets
     * at most one window's value, so max-pool's gradient stores it (dy + 0, which turns -0
     * into +0 as the sum from zero did) instead of zeroing dx and adding into it: dx is
     * written once, never read. */
    const bool tiles = g->ph <= g->sh && g->pw <= g->sw;
    for (int64_t item = lo; item < hi; item++) {
        const int64_t n = item / t->ncb, c0 = (item % t->ncb) * POOL_CB;
        const int64_t cn = C - c0 < POOL_CB ? C - c0 : POOL_CB;
        if (op == SN_OP_AVG_POOL2D_GRAD || (op == SN_OP_MAX_POOL2D_GRAD && !tiles))
            zero_slice(g, c->out, n, c0, cn);
        else if (op == SN_OP_MAX_POOL2D_GRAD)
            zero_uncovered(g, c->out, n, c0, cn);
        for (int64_t oh = 0; oh < g->oh; oh++) {
            for (int64_t ow = 0; ow < g->ow; ow++) {
                int64_t h0, h1, w0, w1;
                window(g, oh, ow, &h0, &h1, &w0, &w1);
                const int64_t yoff = ((n * g->oh + oh) * g->ow + ow) * C + c0;
                const int64_t cnt = (h1 > h0 && w1 > w0) ? (h1 - h0) * (w1 - w0) : 0;
                if (op == SN_OP_MAX_POOL2D || op == SN_OP_MAX_POOL2D_GRAD) {
                    if (cnt == 0) { /* a window wholly in the padding */
                        if (op == SN_OP_MAX_POOL2D)
                            for (int64_t k = 0; k < cn; k++) ((float *)c->out)[yoff + k] = -INFINITY;
                        continue;
                    }
                    const char *x = (const char *)c->in[0] + (size_t)(n * xsz) * (t->xb ? 2 : 4);
                    if (t->xb) max_scan(true, g, x, c0, cn, h0, h1, w0, w1, best, arg);
                    else max_scan(false, g, x, c0, cn, h0, h1, w0, w1, best, arg);
                    if (op == SN_OP_MAX_POOL2D) {
                        memcpy((float *)c->out + yoff, best, (size_t)cn * sizeof(float));
                    } else {
                        /* A masked add over the window's cells instead of a scatter through
                         * arg: it vectorises (compare + blend), and adds keep overlapping
                         * windows right. */
                        const float *dy = (const float *)c->in[1] + yoff;
                        float *dx = (float *)c->out + n * xsz + c0;
                        for (int64_t ih = h0; ih < h1; ih++)
                            for (int64_t iw = w0; iw < w1; iw++) {
                                const int32_t cell = (int32_t)(ih * g->w + iw);
                                float *q = dx + cell * C;
                                if (tiles)
                                    for (int64_t k = 0; k < cn; k++)
                                        q[k] = arg[k] == cell ? dy[k] + 0.0f : 0.0f;
                                else
                                    for (int64_t k = 0; k < cn; k++)
                                        q[k] += arg[k] == cell ? dy[k] : 0.0f;
                            }
                    }
                } else if (op == SN_OP_AVG_POOL2D) {
                    const float *x = (const float *)c->in[0] + n * xsz + c0;
                    for (int64_t k = 0; k < cn; k++) best[k] = 0.0f;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) {
                            const float *p = x + (ih * g->w + iw) * C;
                            for (int64_t k = 0; k < cn; k++) best[k] += p[k];
                        }
                    float *y = (float *)c->out + yoff;
                    const float div = cnt ? (float)cnt : 1.0f;
                    for (int64_t k = 0; k < cn; k++) y[k] = best[k] / div;
                } else { /* AVG_POOL2D_GRAD */
                    if (cnt == 0) continue;
                    const float *dy = (const float *)c->in[0] + yoff;
                    float *dx = (float *)c->out + n * xsz + c0;
                    for (int64_t k = 0; k < cn; k++) best[k] = dy[k] / (float)cnt;
                    for (int64_t ih = h0; ih < h1; ih++)
                        for (int64_t iw = w0; iw < w1; iw++) {
                            float *p = dx + (ih * g->w + iw) * C;
                            for (int64_t k = 0; k < cn; k++) p[k] += best[k];
                        }
                }
            }
        }
    }
}

/* MAX_POOL2D, AVG_POOL2D:  x [N, H, W, C] -> y [N, OH, OW, C]
 * MAX_POOL2D_GRAD:         x [N, H, W, C], dy [N, OH, OW, C] -> dx [N, H, W, C]
 * AVG_POOL2D_GRAD:         dy [N, OH, OW, C] -> dx [attr.pool.x_shape] */
static sn_status pool_run(sn_kcall *c) {
    pool_ctx t = {.c = c, .xb = c->x[0].dtype == SN_BF16};
    SN_ASSERT(pool_geom_of(c, &t.g));
    t.ncb = (t.g.c + POOL_CB - 1) / POOL_CB;
    int64_t items = t.g.n * t.ncb;
    int nth = sn_num_threads();
    if (items < nth) nth = (int)(items > 0 ? items : 1);
    sn_parallel(pool_task, &t, nth);
    return SN_OK;
}

/* "cpu": target_clones picks AVX-512, AVX2 or baseline code by the CPU at load time (a plan
 * profile on an AVX2 machine once called it "avx512") */
static const sn_kernel k_pool = {
    .impl = "cpu",
    .supports = pool_supports,
    .run = pool_run,
    .bf16_io = true,
};

const sn_kernel *sn_cpu_pool_impl(sn_op op) {
    switch (op) {
    case SN_OP_MAX_POOL2D:
    case SN_OP_MAX_POOL2D_GRAD:
    case SN_OP_AVG_POOL2D:
    case SN_OP_AVG_POOL2D_GRAD: return &k_pool;
    default: return NULL;
    }
}
