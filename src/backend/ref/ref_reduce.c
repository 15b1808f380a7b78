/* Reference reductions (sum, mean, max over any set of axes), the gradient of max, and
 * broadcast_to. Any float dtype; sums accumulate in double. */
#include "backend/ref/ref_common.h"

/* The input's axes split into kept ones (they index the output, in order) and reduced ones
 * (walked inside each output element), each with the input's element strides. */
typedef struct reduce_split {
    sn_shape kept, red;
    int64_t kept_st[SN_MAX_DIMS], red_st[SN_MAX_DIMS];
} reduce_split;

static void reduce_split_make(const sn_shape *xs, uint32_t mask, reduce_split *r) {
    int64_t st[SN_MAX_DIMS];
    ref_strides(xs, st);
    r->kept.ndim = r->red.ndim = 0;
    for (int d = 0; d < xs->ndim; d++) {
        if (mask & (1u << d)) {
            r->red_st[r->red.ndim] = st[d];
            r->red.dim[r->red.ndim++] = xs->dim[d];
        } else {
            r->kept_st[r->kept.ndim] = st[d];
            r->kept.dim[r->kept.ndim++] = xs->dim[d];
        }
    }
}

typedef enum { RED_SUM, RED_MEAN, RED_MAX } red_kind;

/* x [any] -> x's shape with the masked axes reduced (kept as 1 or dropped: the element order
 * is the same either way) */
static sn_status reduce_run(sn_kcall *c, red_kind k) {
    reduce_split r;
    reduce_split_make(&c->x[0].shape, c->attr->reduce.mask, &r);
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    int64_t nout = sn_shape_numel(&r.kept), nred = sn_shape_numel(&r.red);
    ref_iter ok;
    ref_iter_init(&ok, &r.kept);
    int kx = ref_iter_track(&ok, r.kept_st, 0);
    for (int64_t o = 0; o < nout; o++, ref_iter_next(&ok)) {
        ref_iter ri;
        ref_iter_init(&ri, &r.red);
        int kr = ref_iter_track(&ri, r.red_st, ok.off[kx]);
        double acc = k == RED_MAX ? -INFINITY : 0.0;
        for (int64_t j = 0; j < nred; j++, ref_iter_next(&ri)) {
            double v = sn_load(tx, c->in[0], ri.off[kr]);
            if (k != RED_MAX) acc += v;
            else if (v > acc || isnan(v)) acc = v; /* NaN propagates, as in TensorFlow */
            if (isnan(acc) && k == RED_MAX) break;
        }
        if (k == RED_MEAN) acc /= (double)nred;
        sn_store(to, c->out, o, acc);
    }
    return SN_OK;
}

static sn_status reduce_sum_run(sn_kcall *c) { return reduce_run(c, RED_SUM); }
static sn_status reduce_mean_run(sn_kcall *c) { return reduce_run(c, RED_MEAN); }
static sn_status reduce_max_run(sn_kcall *c) { return reduce_run(c, RED_MAX); }

/* x [any], y = reduce_max(x) and dy (any keepdims) -> dx [x shape]: dy at the first position
 * of each reduced group where x == y, 0 elsewhere (attr.reduce as the forward node) */
static sn_status reduce_max_grad_run(sn_kcall *c) {
    reduce_split r;
    reduce_split_make(&c->x[0].shape, c->attr->reduce.mask, &r);
    sn_dtype tx = c->x[0].dtype, ty = c->x[1].dtype, tdy = c->x[2].dtype;
    sn_dtype to = c->y.dtype;
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int64_t i = 0; i < n; i++) sn_store(to, c->out, i, 0.0);
    int64_t nout = sn_shape_numel(&r.kept), nred = sn_shape_numel(&r.red);
    ref_iter ok;
    ref_iter_init(&ok, &r.kept);
    int kx = ref_iter_track(&ok, r.kept_st, 0);
    for (int64_t o = 0; o < nout; o++, ref_iter_next(&ok)) {
        /* y went through the output dtype; compare in it so that x == y holds exactly. */
        double y = sn_load(ty, c->in[1], o);
        ref_iter ri;
        ref_iter_init(&ri, &r.red);
        int kr = ref_iter_track(&ri, r.red_st, ok.off[kx]);
        for (int64_t j = 0; j < nred; j++, ref_iter_next(&ri)) {
            double x = sn_load(tx, c->in[0], ri.off[kr]);
            if (x == y || (isnan(x) && isnan(y))) {
                sn_store(to, c->out, ri.off[kr], sn_load(tdy, c->in[2], o));
                break;
            }
        }
    }
    return SN_OK;
}

/* x [shape broadcastable to out, NumPy rules] -> out [node shape] */
static sn_status broadcast_to_run(sn_kcall *c) {
    const sn_shape *os = &c->y.shape;
    int64_t st[SN_MAX_DIMS];
    ref_bcast_strides(&c->x[0].shape, os, st);
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    ref_iter it;
    ref_iter_init(&it, os);
    int kx = ref_iter_track(&it, st, 0);
    int64_t n = sn_shape_numel(os);
    for (int64_t i = 0; i < n; i++, ref_iter_next(&it))
        sn_store(to, c->out, i, sn_load(tx, c->in[0], it.off[kx]));
    return SN_OK;
}

static const sn_kernel k_sum = REF_KERNEL(reduce_sum_run), k_mean = REF_KERNEL(reduce_mean_run),
                       k_max = REF_KERNEL(reduce_max_run),
                       k_max_grad = REF_KERNEL(reduce_max_grad_run),
                       k_bcast = REF_KERNEL(broadcast_to_run);

void sn_ref_register_reduce(sn_kernel_table *t) {
    t->k[SN_OP_REDUCE_SUM] = &k_sum;
    t->k[SN_OP_REDUCE_MEAN] = &k_mean;
    t->k[SN_OP_REDUCE_MAX] = &k_max;
    t->k[SN_OP_REDUCE_MAX_GRAD] = &k_max_grad;
    t->k[SN_OP_BROADCAST_TO] = &k_bcast;
}
