/* Reference depthwise 2-D convolution (forward, data gradient, filter gradient): NHWC
 * activations, [KH, KW, C, M] filters, output channel c*M + m (TensorFlow's order). Padding as
 * ref_conv.c: the resolved top/left amounts, the rest implied by the output size. Any float
 * dtype, sums in double; each kernel is a gather over independent rows of its output, split
 * across threads. */
#include "backend/ref/ref_common.h"
#include "backend/ref/ref_conv_taps.h"

typedef struct dw_geom {
    int64_t n, h, w, c, m; /* input, multiplier */
    int64_t oh, ow, kh, kw, sh, sw, pt, pl;
} dw_geom;

typedef struct dw_ctx {
    const sn_kcall *c;
    dw_geom g;
} dw_ctx;

/* x/w shapes from the attributes (set at inference), output size from dy or y. */
static void dw_geom_of(const sn_kcall *c, const sn_shape *y, dw_geom *g) {
    const sn_shape *x = &c->attr->conv.x_shape, *w = &c->attr->conv.w_shape;
    g->n = x->dim[0], g->h = x->dim[1], g->w = x->dim[2], g->c = x->dim[3];
    g->kh = w->dim[0], g->kw = w->dim[1], g->m = w->dim[3];
    g->oh = y->dim[1], g->ow = y->dim[2];
    g->sh = c->attr->conv.stride_h, g->sw = c->attr->conv.stride_w;
    g->pt = c->attr->conv.pad_top, g->pl = c->attr->conv.pad_left;
}

static void dw_fwd_rows(void *arg, int ith, int nth) {
    const dw_ctx *k = arg;
    const dw_geom *g = &k->g;
    const sn_kcall *c = k->c;
    sn_dtype tx = c->x[0].dtype, tw = c->x[1].dtype, to = c->y.dtype;
    int64_t lo, hi, cm = g->c * g->m;
    sn_split_range(g->n * g->oh, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t ni = r / g->oh, oy = r % g->oh;
        for (int64_t ox = 0; ox < g->ow; ox++)
            for (int64_t j = 0; j < cm; j++) {
                int64_t ci = j / g->m;
                double acc = 0;
                REF_FOR_TAPS_OF_OUTPUT(g, oy, ox, ky, kx, iy, ix)
                    acc += sn_load(tx, c->in[0], ((ni * g->h + iy) * g->w + ix) * g->c + ci) *
                           sn_load(tw, c->in[1], (ky * g->kw + kx) * cm + j);
                sn_store(to, c->out, (r * g->ow + ox) * cm + j, acc);
            }
    }
}

static void dw_bwd_data_rows(void *arg, int ith, int nth) {
    const dw_ctx *k = arg;
    const dw_geom *g = &k->g;
    const sn_kcall *c = k->c;
    sn_dtype tdy = c->x[0].dtype, tw = c->x[1].dtype, to = c->y.dtype;
    int64_t lo, hi, cm = g->c * g->m;
    sn_split_range(g->n * g->h, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t ni = r / g->h, iy = r % g->h;
        for (int64_t ix = 0; ix < g->w; ix++)
            for (int64_t ci = 0; ci < g->c; ci++) {
                double acc = 0;
                REF_FOR_TAPS_OF_INPUT(g, iy, ix, ky, kx, oy, ox)
                    acc += ref_dot(tdy, c->in[0], ((ni * g->oh + oy) * g->ow + ox) * cm + ci * g->m,
                                   tw, c->in[1], (ky * g->kw + kx) * cm + ci * g->m, g->m);
                sn_store(to, c->out, (r * g->w + ix) * g->c + ci, acc);
            }
    }
}

static void dw_bwd_filter_rows(void *arg, int ith, int nth) {
    const dw_ctx *k = arg;
    const dw_geom *g = &k->g;
    const sn_kcall *c = k->c;
    sn_dtype tx = c->x[0].dtype, tdy = c->x[1].dtype, to = c->y.dtype;
    int64_t lo, hi, cm = g->c * g->m;
    sn_split_range(g->kh * g->kw * cm, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) { /* r = (ky * KW + kx) * C*M + j */
        int64_t j = r % cm, ci = j / g->m, kx = (r / cm) % g->kw, ky = r / (cm * g->kw);
        double acc = 0;
        for (int64_t ni = 0; ni < g->n; ni++)
            REF_FOR_OUTPUTS_OF_TAP(g, ky, kx, oy, ox, iy, ix)
                acc += sn_load(tx, c->in[0], ((ni * g->h + iy) * g->w + ix) * g->c + ci) *
                       sn_load(tdy, c->in[1], ((ni * g->oh + oy) * g->ow + ox) * cm + j);
        sn_store(to, c->out, r, acc);
    }
}

static sn_status dw_run(sn_kcall *c, sn_task_fn fn, const sn_shape *y) {
    dw_ctx k = {.c = c};
    dw_geom_of(c, y, &k.g);
    const dw_geom *g = &k.g;
    int64_t n_rows = fn == dw_fwd_rows ? g->n * g->oh
                     : fn == dw_bwd_data_rows ? g->n * g->h
                                              : g->kh * g->kw * g->c * g->m;
    int nth = ref_threads(n_rows, g->n * g->oh * g->ow * g->c * g->m * g->kh * g->kw);
    if (nth == 1) fn(&k, 0, 1);
    else sn_parallel(fn, &k, nth);
    return SN_OK;
}

/* x [N, H, W, C], w [KH, KW, C, M] -> y [N, OH, OW, C*M] */
static sn_status dw_fwd_run(sn_kcall *c) { return dw_run(c, dw_fwd_rows, &c->y.shape); }
/* dy [N, OH, OW, C*M], w -> dx [N, H, W, C] */
static sn_status dw_bwd_data_run(sn_kcall *c) { return dw_run(c, dw_bwd_data_rows, &c->x[0].shape); }
/* x, dy -> dw [KH, KW, C, M] */
static sn_status dw_bwd_filter_run(sn_kcall *c) { return dw_run(c, dw_bwd_filter_rows, &c->x[1].shape); }

static const sn_kernel k_dw = REF_KERNEL(dw_fwd_run), k_dw_bwd_data = REF_KERNEL(dw_bwd_data_run),
                       k_dw_bwd_filter = REF_KERNEL(dw_bwd_filter_run);

void sn_ref_register_depthwise(sn_kernel_table *t) {
    t->k[SN_OP_DEPTHWISE_CONV2D] = &k_dw;
    t->k[SN_OP_DEPTHWISE_BWD_DATA] = &k_dw_bwd_data;
    t->k[SN_OP_DEPTHWISE_BWD_FILTER] = &k_dw_bwd_filter;
}
