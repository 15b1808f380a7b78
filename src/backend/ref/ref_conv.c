/* Reference 2-D convolution (forward, data gradient, filter gradient) and max/average pooling
 * with their gradients. NHWC activations, [KH, KW, C, F] filters (Keras layout). Padding is
 * given as the top/left amounts already resolved by shape inference; the bottom/right padding
 * is whatever the output size implies. Any float dtype; sums in double.
 *
 * Each convolution kernel is written as a gather (every output element reads what it needs),
 * so rows of the output are independent and threads can split them without atomics. */
#include "backend/ref/ref_common.h"
#include "backend/ref/ref_conv_taps.h"

typedef struct geom {
    int64_t n, h, w, c;      /* input (x) */
    int64_t oh, ow;          /* output */
    int64_t kh, kw, f;       /* window and filters (f = channels for pooling) */
    int64_t sh, sw, pt, pl;  /* strides, top and left padding */
} geom;

static void conv_geom(const sn_shape *x, const sn_shape *w, const sn_shape *y, const sn_attrs *a,
                      geom *g) {
    g->n = x->dim[0], g->h = x->dim[1], g->w = x->dim[2], g->c = x->dim[3];
    g->oh = y->dim[1], g->ow = y->dim[2];
    g->kh = w->dim[0], g->kw = w->dim[1], g->f = w->dim[3];
    g->sh = a->conv.stride_h, g->sw = a->conv.stride_w;
    g->pt = a->conv.pad_top, g->pl = a->conv.pad_left;
}

typedef struct conv_ctx {
    const sn_kcall *c;
    geom g;
    const void *x, *w, *dy; /* whichever the kernel reads */
    sn_dtype tx, tw, tdy;
} conv_ctx;

static void conv_fwd_rows(void *arg, int ith, int nth) {
    const conv_ctx *k = arg;
    const geom *g = &k->g;
    sn_dtype to = k->c->y.dtype;
    double acc[REF_BLOCK];
    int64_t lo, hi;
    sn_split_range(g->n * g->oh, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t ni = r / g->oh, oy = r % g->oh;
        for (int64_t ox = 0; ox < g->ow; ox++)
            for (int64_t f0 = 0; f0 < g->f; f0 += REF_BLOCK) {
                int64_t fb = g->f - f0 < REF_BLOCK ? g->f - f0 : REF_BLOCK;
                for (int64_t j = 0; j < fb; j++) acc[j] = 0;
                REF_FOR_TAPS_OF_OUTPUT(g, oy, ox, ky, kx, iy, ix) {
                    int64_t xb = ((ni * g->h + iy) * g->w + ix) * g->c;
                    int64_t wb = (ky * g->kw + kx) * g->c * g->f + f0;
                    for (int64_t ci = 0; ci < g->c; ci++)
                        ref_axpy(acc, sn_load(k->tx, k->x, xb + ci), k->tw, k->w,
                                 wb + ci * g->f, 1, fb);
                }
                for (int64_t j = 0; j < fb; j++)
                    sn_store(to, k->c->out, (r * g->ow + ox) * g->f + f0 + j, acc[j]);
            }
    }
}

static void run_rows(sn_task_fn fn, conv_ctx *k, int64_t rows, int64_t work) {
    int nth = ref_threads(rows, work);
    if (nth == 1)
        fn(k, 0, 1);
    else
        sn_parallel(fn, k, nth);
}

/* x [N, H, W, C], w [KH, KW, C, F] -> y [N, OH, OW, F] */
static sn_status conv2d_run(sn_kcall *c) {
    conv_ctx k = {.c = c, .x = c->in[0], .w = c->in[1], .tx = c->x[0].dtype,
                  .tw = c->x[1].dtype};
    conv_geom(&c->x[0].shape, &c->x[1].shape, &c->y.shape, c->attr, &k.g);
    const geom *g = &k.g;
    run_rows(conv_fwd_rows, &k, g->n * g->oh, g->n * g->oh * g->ow * g->f * g->kh * g->kw * g->c);
    return SN_OK;
}

static void conv_bwd_data_rows(void *arg, int ith, int nth) {
    const conv_ctx *k = arg;
    const geom *g = &k->g;
    sn_dtype to = k->c->y.dtype;
    int64_t lo, hi;
    sn_split_range(g->n * g->h, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t ni = r / g->h, iy = r % g->h;
        for (int64_t ix = 0; ix < g->w; ix++)
            for (int64_t ci = 0; ci < g->c; ci++) {
                double acc = 0;
                REF_FOR_TAPS_OF_INPUT(g, iy, ix, ky, kx, oy, ox) {
                    int64_t db = ((ni * g->oh + oy) * g->ow + ox) * g->f;
                    int64_t wb = ((ky * g->kw + kx) * g->c + ci) * g->f;
                    acc += ref_dot(k->tdy, k->dy, db, k->tw, k->w, wb, g->f);
                }
                sn_store(to, k->c->out, (r * g->w + ix) * g->c + ci, acc);
            }
    }
}

/* dy [N, OH, OW, F], w [KH, KW, C, F] -> dx [N, H, W, C] (attr.conv.x_shape) */
static sn_status conv2d_bwd_data_run(sn_kcall *c) {
    conv_ctx k = {.c = c, .dy = c->in[0], .w = c->in[1], .tdy = c->x[0].dtype,
                  .tw = c->x[1].dtype};
    conv_geom(&c->y.shape, &c->x[1].shape, &c->x[0].shape, c->attr, &k.g);
    const geom *g = &k.g;
    run_rows(conv_bwd_data_rows, &k, g->n * g->h, g->n * g->oh * g->ow * g->f * g->kh * g->kw * g->c);
    return SN_OK;
}

static void conv_bwd_filter_rows(void *arg, int ith, int nth) {
    const conv_ctx *k = arg;
    const geom *g = &k->g;
    sn_dtype to = k->c->y.dtype;
    double acc[REF_BLOCK];
    int64_t lo, hi;
    sn_split_range(g->kh * g->kw * g->c, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) { /* r = (ky * KW + kx) * C + ci */
        int64_t ci = r % g->c, ky = r / (g->kw * g->c), kx = (r / g->c) % g->kw;
        for (int64_t f0 = 0; f0 < g->f; f0 += REF_BLOCK) {
            int64_t fb = g->f - f0 < REF_BLOCK ? g->f - f0 : REF_BLOCK;
            for (int64_t j = 0; j < fb; j++) acc[j] = 0;
            for (int64_t ni = 0; ni < g->n; ni++)
                REF_FOR_OUTPUTS_OF_TAP(g, ky, kx, oy, ox, iy, ix) {
                    double xv = sn_load(k->tx, k->x, ((ni * g->h + iy) * g->w + ix) * g->c + ci);
                    ref_axpy(acc, xv, k->tdy, k->dy, ((ni * g->oh + oy) * g->ow + ox) * g->f + f0,
                             1, fb);
                }
            for (int64_t j = 0; j < fb; j++) sn_store(to, k->c->out, r * g->f + f0 + j, acc[j]);
        }
    }
}

/* x [N, H, W, C], dy [N, OH, OW, F] -> dw [KH, KW, C, F] (attr.conv.w_shape) */
static sn_status conv2d_bwd_filter_run(sn_kcall *c) {
    conv_ctx k = {.c = c, .x = c->in[0], .dy = c->in[1], .tx = c->x[0].dtype,
                  .tdy = c->x[1].dtype};
    conv_geom(&c->x[0].shape, &c->y.shape, &c->x[1].shape, c->attr, &k.g);
    const geom *g = &k.g;
    run_rows(conv_bwd_filter_rows, &k, g->kh * g->kw * g->c,
             g->n * g->oh * g->ow * g->f * g->kh * g->kw * g->c);
    return SN_OK;
}

/* ---- pooling ---------------------------------------------------------------------------- */

static void pool_geom(const sn_shape *x, const sn_shape *y, const sn_attrs *a, geom *g) {
    g->n = x->dim[0], g->h = x->dim[1], g->w = x->dim[2], g->c = x->dim[3];
    g->oh = y->dim[1], g->ow = y->dim[2];
    g->kh = a->pool.pool_h, g->kw = a->pool.pool_w, g->f = g->c;
    g->sh = a->pool.stride_h, g->sw = a->pool.stride_w;
    g->pt = a->pool.pad_top, g->pl = a->pool.pad_left;
}

/* The window of output (oy, ox) clipped to the input: rows [*y0, *y1), columns [*x0, *x1). */
static void pool_window(const geom *g, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                        int64_t *x0, int64_t *x1) {
    int64_t ty = oy * g->sh - g->pt, tx = ox * g->sw - g->pl;
    *y0 = ty < 0 ? 0 : ty;
    *y1 = ty + g->kh < g->h ? ty + g->kh : g->h;
    *x0 = tx < 0 ? 0 : tx;
    *x1 = tx + g->kw < g->w ? tx + g->kw : g->w;
}

/* Index (into x) of the first maximum of a window over channel ci; -1 for an empty window.
 * Padded cells are -inf, so they never win: only valid cells are visited. A NaN is the
 * maximum: the first NaN wins and stays (TensorFlow and PyTorch propagate it). */
static int64_t window_argmax(const geom *g, sn_dtype tx, const void *x, int64_t ni, int64_t oy,
                             int64_t ox, int64_t ci) {
    int64_t y0, y1, x0, x1, best = -1;
    pool_window(g, oy, ox, &y0, &y1, &x0, &x1);
    double m = -INFINITY;
    for (int64_t iy = y0; iy < y1; iy++)
        for (int64_t ix = x0; ix < x1; ix++) {
            int64_t at = ((ni * g->h + iy) * g->w + ix) * g->c + ci;
            double v = sn_load(tx, x, at);
            if (best < 0 || v > m || (isnan(v) && !isnan(m))) {
                m = v;
                best = at;
            }
        }
    return best;
}

/* Walks every output cell (ni, oy, ox, ci) in row-major order; `o` is its linear index. */
#define FOR_POOL_OUT(g, ni, oy, ox, ci, o)                                                      \
    for (int64_t ni = 0, o = 0; ni < (g)->n; ni++)                                              \
        for (int64_t oy = 0; oy < (g)->oh; oy++)                                                \
            for (int64_t ox = 0; ox < (g)->ow; ox++)                                            \
                for (int64_t ci = 0; ci < (g)->c; ci++, o++)

/* x [N, H, W, C] -> [N, OH, OW, C]: max over each window's valid cells */
static sn_status max_pool2d_run(sn_kcall *c) {
    geom g;
    pool_geom(&c->x[0].shape, &c->y.shape, c->attr, &g);
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    FOR_POOL_OUT(&g, ni, oy, ox, ci, o) {
        int64_t at = window_argmax(&g, tx, c->in[0], ni, oy, ox, ci);
        sn_store(to, c->out, o, at < 0 ? -INFINITY : sn_load(tx, c->in[0], at));
    }
    return SN_OK;
}

/* x [N, H, W, C] -> [N, OH, OW, C]: mean over each window's valid (unpadded) cells, as
 * TensorFlow's SAME padding */
static sn_status avg_pool2d_run(sn_kcall *c) {
    geom g;
    pool_geom(&c->x[0].shape, &c->y.shape, c->attr, &g);
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    FOR_POOL_OUT(&g, ni, oy, ox, ci, o) {
        int64_t y0, y1, x0, x1;
        pool_window(&g, oy, ox, &y0, &y1, &x0, &x1);
        double s = 0;
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++)
                s += sn_load(tx, c->in[0], ((ni * g.h + iy) * g.w + ix) * g.c + ci);
        int64_t cnt = (y1 - y0) * (x1 - x0);
        sn_store(to, c->out, o, cnt > 0 ? s / (double)cnt : 0.0);
    }
    return SN_OK;
}

/* x [N, H, W, C], dy [N, OH, OW, C] -> dx [N, H, W, C]: each dy added at its window's first
 * maximum (windows may overlap, so the adds accumulate) */
static sn_status max_pool2d_grad_run(sn_kcall *c) {
    geom g;
    pool_geom(&c->x[0].shape, &c->x[1].shape, c->attr, &g);
    sn_dtype tx = c->x[0].dtype, tdy = c->x[1].dtype, to = c->y.dtype;
    memset(c->out, 0, (size_t)sn_shape_numel(&c->y.shape) * sn_dtype_size(to));
    FOR_POOL_OUT(&g, ni, oy, ox, ci, o) {
        int64_t at = window_argmax(&g, tx, c->in[0], ni, oy, ox, ci);
        if (at >= 0)
            sn_store(to, c->out, at, sn_load(to, c->out, at) + sn_load(tdy, c->in[1], o));
    }
    return SN_OK;
}

/* dy [N, OH, OW, C] -> dx [attr.pool.x_shape]: each dy spread evenly over its window's valid
 * cells */
static sn_status avg_pool2d_grad_run(sn_kcall *c) {
    geom g;
    pool_geom(&c->y.shape, &c->x[0].shape, c->attr, &g);
    sn_dtype tdy = c->x[0].dtype, to = c->y.dtype;
    memset(c->out, 0, (size_t)sn_shape_numel(&c->y.shape) * sn_dtype_size(to));
    FOR_POOL_OUT(&g, ni, oy, ox, ci, o) {
        int64_t y0, y1, x0, x1;
        pool_window(&g, oy, ox, &y0, &y1, &x0, &x1);
        int64_t cnt = (y1 - y0) * (x1 - x0);
        if (cnt <= 0) continue;
        double share = sn_load(tdy, c->in[0], o) / (double)cnt;
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++) {
                int64_t at = ((ni * g.h + iy) * g.w + ix) * g.c + ci;
                sn_store(to, c->out, at, sn_load(to, c->out, at) + share);
            }
    }
    return SN_OK;
}

static const sn_kernel k_conv = REF_KERNEL(conv2d_run),
                       k_conv_bwd_data = REF_KERNEL(conv2d_bwd_data_run),
                       k_conv_bwd_filter = REF_KERNEL(conv2d_bwd_filter_run),
                       k_max_pool = REF_KERNEL(max_pool2d_run),
                       k_avg_pool = REF_KERNEL(avg_pool2d_run),
                       k_max_pool_grad = REF_KERNEL(max_pool2d_grad_run),
                       k_avg_pool_grad = REF_KERNEL(avg_pool2d_grad_run);

void sn_ref_register_conv(sn_kernel_table *t) {
    t->k[SN_OP_CONV2D] = &k_conv;
    t->k[SN_OP_CONV2D_BWD_DATA] = &k_conv_bwd_data;
    t->k[SN_OP_CONV2D_BWD_FILTER] = &k_conv_bwd_filter;
    t->k[SN_OP_MAX_POOL2D] = &k_max_pool;
    t->k[SN_OP_AVG_POOL2D] = &k_avg_pool;
    t->k[SN_OP_MAX_POOL2D_GRAD] = &k_max_pool_grad;
    t->k[SN_OP_AVG_POOL2D_GRAD] = &k_avg_pool_grad;
    sn_ref_register_depthwise(t); /* ref_depthwise.c */
}
