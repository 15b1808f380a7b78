/* The geometry of one NHWC convolution with HWIO weights (cpu_blas.h, sn_conv_geom), read
 * from a CONV2D / CONV2D_BWD_DATA / CONV2D_BWD_FILTER call. Its own file because both
 * convolution implementations use it — oneDNN's (cpu_conv.c) and im2col + sgemm
 * (cpu_conv_gemm.c) — and neither should call into the other for it. */
#include "backend/cpu/cpu_blas.h"

static bool geom_shapes(const sn_kcall *c, sn_conv_geom *g);

bool sn_conv_geom_of(const sn_kcall *c, sn_conv_geom *g) {
    if (c->n_in != 2 || c->y.dtype != SN_F32) return false;
    if (c->x[0].dtype != SN_F32 || c->x[1].dtype != SN_F32) return false;
    return geom_shapes(c, g);
}

bool sn_conv_geom_bf16_of(const sn_kcall *c, sn_conv_geom *g) {
    /* the forward's output may be bfloat16 too (the primitive rounds as it writes) */
    if (c->n_in != 2 || !(c->y.dtype == SN_F32 || (c->op == SN_OP_CONV2D && c->y.dtype == SN_BF16)))
        return false;
    /* input 1 is the weights but for the filter gradient, whose input 1 is dy */
    bool in1_act = c->op == SN_OP_CONV2D_BWD_FILTER;
    if (c->x[0].dtype != SN_F32 && c->x[0].dtype != SN_BF16) return false;
    if (c->x[1].dtype != SN_F32 && !(in1_act && c->x[1].dtype == SN_BF16)) return false;
    return geom_shapes(c, g);
}

static bool geom_shapes(const sn_kcall *c, sn_conv_geom *g) {
    const sn_shape *xs, *ws, *ys;
    switch (c->op) {
    case SN_OP_CONV2D:
        xs = &c->x[0].shape, ws = &c->x[1].shape, ys = &c->y.shape;
        break;
    case SN_OP_CONV2D_BWD_DATA:
        xs = &c->y.shape, ws = &c->x[1].shape, ys = &c->x[0].shape;
        break;
    case SN_OP_CONV2D_BWD_FILTER:
        xs = &c->x[0].shape, ws = &c->y.shape, ys = &c->x[1].shape;
        break;
    default: return false;
    }
    if (xs->ndim != 4 || ws->ndim != 4 || ys->ndim != 4) return false;
    g->n = xs->dim[0], g->h = xs->dim[1], g->w = xs->dim[2], g->c = xs->dim[3];
    g->kh = ws->dim[0], g->kw = ws->dim[1], g->f = ws->dim[3];
    g->oh = ys->dim[1], g->ow = ys->dim[2];
    if (ws->dim[2] != g->c || ys->dim[0] != g->n || ys->dim[3] != g->f) return false;
    g->sh = c->attr->conv.stride_h, g->sw = c->attr->conv.stride_w;
    g->pt = c->attr->conv.pad_top, g->pl = c->attr->conv.pad_left;
    if (g->sh < 1 || g->sw < 1 || g->pt < 0 || g->pl < 0) return false;
    if (g->n < 1 || g->h < 1 || g->w < 1 || g->c < 1 || g->kh < 1 || g->kw < 1 || g->f < 1 ||
        g->oh < 1 || g->ow < 1)
        return false;
    g->pb = (g->oh - 1) * g->sh + g->kh - g->h - g->pt;
    g->pr = (g->ow - 1) * g->sw + g->kw - g->w - g->pl;
    /* A negative implied padding of less than one stride means the last input rows are read
     * by no window (a 1x1 stride-2 "same" convolution on an even size: Xception's residual
     * branches). Padding 0 there gives the same output size under oneDNN's floor formula
     * ((h + pt + pb - kh) / sh + 1 = oh), and backward-data writes zeros to those rows, as
     * the reference does. More than a stride short would lose an output row: reference. */
    if (g->pb < 0 && -g->pb < g->sh) g->pb = 0;
    if (g->pr < 0 && -g->pr < g->sw) g->pr = 0;
    if (g->pb < 0 || g->pr < 0) return false;
    /* Windows that lie wholly in the padding: legal, but not worth a fast path. */
    if (g->pt >= g->kh || g->pl >= g->kw || g->pb >= g->kh || g->pr >= g->kw) return false;
    return true;
}
