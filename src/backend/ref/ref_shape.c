/* Reference shape kernels: reshape (a copy; plans make it a view), transpose, slice and its
 * gradient, concat, gather (embedding lookup) and its scatter-add gradient. Values move as
 * whole elements (memcpy of the dtype's size), so every dtype is copied exactly. */
#include "backend/ref/ref_common.h"

/* Copies element `si` of src to element `di` of dst; converts when the dtypes differ. */
static inline void move_elem(sn_dtype td, void *dst, int64_t di, sn_dtype ts, const void *src,
                             int64_t si, size_t esz) {
    if (td == ts)
        memcpy((char *)dst + (size_t)di * esz, (const char *)src + (size_t)si * esz, esz);
    else
        sn_store(td, dst, di, sn_load(ts, src, si));
}

/* x [any] -> out [same element count] */
static sn_status reshape_run(sn_kcall *c) {
    int64_t n = sn_shape_numel(&c->y.shape);
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    if (c->out == c->in[0]) return SN_OK;
    if (tx == to) {
        memmove(c->out, c->in[0], (size_t)n * sn_dtype_size(to));
        return SN_OK;
    }
    for (int64_t i = 0; i < n; i++) sn_store(to, c->out, i, sn_load(tx, c->in[0], i));
    return SN_OK;
}

/* x [d0, ..., dk] -> out [d_perm[0], ..., d_perm[k]] */
static sn_status transpose_run(sn_kcall *c) {
    const sn_shape *os = &c->y.shape;
    int64_t ist[SN_MAX_DIMS], st[SN_MAX_DIMS];
    ref_strides(&c->x[0].shape, ist);
    for (int d = 0; d < os->ndim; d++) st[d] = ist[c->attr->transpose.perm[d]];
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    size_t esz = sn_dtype_size(to);
    ref_iter it;
    ref_iter_init(&it, os);
    int kx = ref_iter_track(&it, st, 0);
    int64_t n = sn_shape_numel(os);
    for (int64_t i = 0; i < n; i++, ref_iter_next(&it))
        move_elem(to, c->out, i, tx, c->in[0], it.off[kx], esz);
    return SN_OK;
}

/* Element offset of `begin` in a contiguous array of shape s. */
static int64_t begin_offset(const sn_shape *s, const int64_t *begin) {
    int64_t st[SN_MAX_DIMS], off = 0;
    ref_strides(s, st);
    for (int d = 0; d < s->ndim; d++) off += begin[d] * st[d];
    return off;
}

/* x [in shape] -> out [size]: out[i...] = x[begin + i...] */
static sn_status slice_run(sn_kcall *c) {
    const sn_shape *os = &c->y.shape, *xs = &c->x[0].shape;
    int64_t ist[SN_MAX_DIMS];
    ref_strides(xs, ist);
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    size_t esz = sn_dtype_size(to);
    ref_iter it;
    ref_iter_init(&it, os);
    int kx = ref_iter_track(&it, ist, begin_offset(xs, c->attr->slice.begin));
    int64_t n = sn_shape_numel(os);
    for (int64_t i = 0; i < n; i++, ref_iter_next(&it))
        move_elem(to, c->out, i, tx, c->in[0], it.off[kx], esz);
    return SN_OK;
}

/* dy [size] -> dx [attr.slice.in_shape]: zeros with dy placed at begin */
static sn_status slice_grad_run(sn_kcall *c) {
    const sn_shape *os = &c->y.shape, *ds = &c->x[0].shape;
    sn_dtype td = c->x[0].dtype, to = c->y.dtype;
    size_t esz = sn_dtype_size(to);
    memset(c->out, 0, (size_t)sn_shape_numel(os) * esz); /* 0.0 is all-zero bits in every dtype */
    int64_t ost[SN_MAX_DIMS];
    ref_strides(os, ost);
    ref_iter it;
    ref_iter_init(&it, ds);
    int ko = ref_iter_track(&it, ost, begin_offset(os, c->attr->slice.begin));
    int64_t n = sn_shape_numel(ds);
    for (int64_t i = 0; i < n; i++, ref_iter_next(&it))
        move_elem(to, c->out, it.off[ko], td, c->in[0], i, esz);
    return SN_OK;
}

/* x0 .. x{n-1} [..., a_i (axis), ...] -> out [..., sum a_i, ...] */
static sn_status concat_run(sn_kcall *c) {
    int64_t outer, len, inner;
    ref_axis_split(&c->y.shape, c->attr->axis.axis, &outer, &len, &inner);
    sn_dtype to = c->y.dtype;
    size_t esz = sn_dtype_size(to);
    int64_t row = len * inner; /* elements of out per outer index */
    int64_t at = 0;            /* start of input j's block within an output row */
    for (int j = 0; j < c->n_in; j++) {
        int64_t blk = c->x[j].shape.dim[c->attr->axis.axis] * inner;
        sn_dtype tj = c->x[j].dtype;
        for (int64_t o = 0; o < outer; o++) {
            if (tj == to) {
                memcpy((char *)c->out + (size_t)(o * row + at) * esz,
                       (const char *)c->in[j] + (size_t)(o * blk) * esz, (size_t)blk * esz);
            } else {
                for (int64_t e = 0; e < blk; e++)
                    sn_store(to, c->out, o * row + at + e, sn_load(tj, c->in[j], o * blk + e));
            }
        }
        at += blk;
    }
    return SN_OK;
}

/* The index at position i, checked against [0, vocab). */
static sn_status load_index(const char *op, sn_dtype t, const void *p, int64_t i, int64_t vocab,
                            int64_t *out) {
    double v = sn_load(t, p, i);
    if (!(v >= 0 && v < (double)vocab))
        return sn_errorf(SN_ERR_INVALID, "%s: index %.0f at position %lld is outside [0, %lld)",
                         op, v, (long long)i, (long long)vocab);
    *out = (int64_t)v;
    return SN_OK;
}

/* table [V, D], indices i32 [any] -> [indices shape..., D] */
static sn_status gather_run(sn_kcall *c) {
    const sn_shape *ts = &c->x[0].shape;
    int64_t vocab = ts->dim[0], dim = ts->dim[1];
    int64_t n = sn_shape_numel(&c->x[1].shape);
    sn_dtype tt = c->x[0].dtype, to = c->y.dtype;
    size_t esz = sn_dtype_size(to);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = 0;
        SN_TRY(load_index("gather", c->x[1].dtype, c->in[1], i, vocab, &v));
        if (tt == to) {
            memcpy((char *)c->out + (size_t)(i * dim) * esz,
                   (const char *)c->in[0] + (size_t)(v * dim) * esz, (size_t)dim * esz);
        } else {
            for (int64_t d = 0; d < dim; d++)
                sn_store(to, c->out, i * dim + d, sn_load(tt, c->in[0], v * dim + d));
        }
    }
    return SN_OK;
}

/* indices i32 [any], dy [indices shape..., D] -> dtable [V, D] (V = attr.gather.vocab):
 * zeros, then each dy row added to the row its index names */
static sn_status gather_grad_run(sn_kcall *c) {
    const sn_shape *os = &c->y.shape;
    int64_t vocab = c->attr->gather.vocab, dim = os->dim[os->ndim - 1];
    int64_t n = sn_shape_numel(&c->x[0].shape);
    sn_dtype td = c->x[1].dtype, to = c->y.dtype;
    memset(c->out, 0, (size_t)sn_shape_numel(os) * sn_dtype_size(to));
    for (int64_t i = 0; i < n; i++) {
        int64_t v = 0;
        SN_TRY(load_index("gather_grad", c->x[0].dtype, c->in[0], i, vocab, &v));
        for (int64_t d = 0; d < dim; d++) {
            int64_t at = v * dim + d;
            sn_store(to, c->out, at, sn_load(to, c->out, at) + sn_load(td, c->in[1], i * dim + d));
        }
    }
    return SN_OK;
}

static const sn_kernel k_reshape = REF_KERNEL(reshape_run), k_transpose = REF_KERNEL(transpose_run),
                       k_slice = REF_KERNEL(slice_run), k_slice_grad = REF_KERNEL(slice_grad_run),
                       k_concat = REF_KERNEL(concat_run), k_gather = REF_KERNEL(gather_run),
                       k_gather_grad = REF_KERNEL(gather_grad_run);

void sn_ref_register_shape(sn_kernel_table *t) {
    t->k[SN_OP_RESHAPE] = &k_reshape;
    t->k[SN_OP_TRANSPOSE] = &k_transpose;
    t->k[SN_OP_SLICE] = &k_slice;
    t->k[SN_OP_SLICE_GRAD] = &k_slice_grad;
    t->k[SN_OP_CONCAT] = &k_concat;
    t->k[SN_OP_GATHER] = &k_gather;
    t->k[SN_OP_GATHER_GRAD] = &k_gather_grad;
}
