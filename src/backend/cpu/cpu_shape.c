/* Fast f32 data movement of the shape ops the sequence models use on every step: slice and
 * its gradient (the recurrent layers slice h and c out of their workspaces, op_rnn.h) and the
 * embedding's scatter-add (gather_grad). Whole contiguous runs of the last axis are copied at
 * once, where the reference kernels move one element at a time through double. */
#include <string.h>

#include "backend/kernel.h"

static bool f32_in_out(const sn_kcall *c, int in) {
    return c->y.dtype == SN_F32 && c->x[in].dtype == SN_F32;
}

static bool slice_supports(const sn_kcall *c) { return f32_in_out(c, 0); }

/* Row-major element strides of s. */
static void strides_of(const sn_shape *s, int64_t st[SN_MAX_DIMS]) {
    int64_t acc = 1;
    for (int d = s->ndim - 1; d >= 0; d--) {
        st[d] = acc;
        acc *= s->dim[d];
    }
}

/* The contiguous runs of the window `small` placed inside `big`: a run spans the innermost
 * axes the window covers whole, and the next one (*inner): an NHWC window padded or cropped in
 * H and W is rows of W x C, not C at a time. */
static int64_t run_of(const sn_shape *big, const sn_shape *small, int *inner) {
    int a = small->ndim - 1;
    int64_t run = small->dim[a];
    while (a > 0 && small->dim[a] == big->dim[a]) run *= small->dim[--a];
    *inner = a;
    return run;
}

/* Steps idx (row-major over dims [0, n) of s) to the next index. */
static void next_index(int64_t *idx, const sn_shape *s, int n) {
    for (int d = n - 1; d >= 0; d--) {
        if (++idx[d] < s->dim[d]) break;
        idx[d] = 0;
    }
}

/* small = the window of big at begin, one run at a time. */
static void copy_window(const sn_shape *big, const sn_shape *small, const int64_t *begin,
                        float *dst, const float *src) {
    int nd = small->ndim, inner;
    if (nd == 0) {
        *dst = *src;
        return;
    }
    int64_t bst[SN_MAX_DIMS], idx[SN_MAX_DIMS] = {0};
    strides_of(big, bst);
    int64_t run = run_of(big, small, &inner), rows = sn_shape_numel(small) / (run ? run : 1);
    int64_t base = 0;
    for (int d = 0; d < nd; d++) base += begin[d] * bst[d];
    for (int64_t r = 0; r < rows; r++, next_index(idx, small, inner)) {
        int64_t off = base;
        for (int d = 0; d < inner; d++) off += idx[d] * bst[d];
        memcpy(dst + r * run, src + off, sizeof(float) * (size_t)run);
    }
}

/* big = zeros with small at begin (zero padding), each byte of big written once: row by row of
 * big, zeros around the run inside the window and whole rows of zeros outside it. */
static void pad_window(const sn_shape *big, const sn_shape *small, const int64_t *begin,
                       float *dst, const float *src) {
    int nd = big->ndim, inner;
    if (nd == 0) {
        *dst = *src;
        return;
    }
    int64_t bst[SN_MAX_DIMS], idx[SN_MAX_DIMS] = {0};
    strides_of(big, bst);
    int64_t run = run_of(big, small, &inner);
    int64_t brow = bst[inner] * big->dim[inner], head = begin[inner] * bst[inner];
    int64_t tail = brow - head - run, rows = sn_shape_numel(big) / (brow ? brow : 1);
    for (int64_t r = 0; r < rows; r++, next_index(idx, big, inner)) {
        float *row = dst + r * brow;
        bool in = true;
        for (int d = 0; d < inner && in; d++)
            in = idx[d] >= begin[d] && idx[d] < begin[d] + small->dim[d];
        if (!in) {
            memset(row, 0, sizeof(float) * (size_t)brow);
            continue;
        }
        memset(row, 0, sizeof(float) * (size_t)head);
        memcpy(row + head, src, sizeof(float) * (size_t)run);
        memset(row + head + run, 0, sizeof(float) * (size_t)tail);
        src += run;
    }
}

/* x [in] -> y [size]: the window at attr.slice.begin */
static sn_status slice_run(sn_kcall *c) {
    copy_window(&c->x[0].shape, &c->y.shape, c->attr->slice.begin, c->out, c->in[0]);
    return SN_OK;
}

/* dy [size] -> dx [attr.slice.in_shape]: zeros with dy at begin (also zero padding,
 * sn_zero_pad) */
static sn_status slice_grad_run(sn_kcall *c) {
    pad_window(&c->y.shape, &c->x[0].shape, c->attr->slice.begin, c->out, c->in[0]);
    return SN_OK;
}

static bool gather_grad_supports(const sn_kcall *c) {
    return f32_in_out(c, 1) && c->x[0].dtype == SN_I32;
}

/* indices i32 [any], dy [indices shape..., D] -> dtable [V, D]: zeros, then each dy row added
 * to the row its index names (in index order, as the reference). Only the table's size is
 * dense; the work is over the rows used. */
static sn_status gather_grad_run(sn_kcall *c) {
    const sn_shape *os = &c->y.shape;
    int64_t vocab = c->attr->gather.vocab, dim = os->dim[os->ndim - 1];
    int64_t n = sn_shape_numel(&c->x[0].shape);
    const int32_t *ix = c->in[0];
    const float *dy = c->in[1];
    float *out = c->out;
    memset(out, 0, sizeof(float) * (size_t)sn_shape_numel(os));
    for (int64_t i = 0; i < n; i++) {
        int64_t v = ix[i];
        if (v < 0 || v >= vocab)
            return sn_errorf(SN_ERR_INVALID, "gather_grad: index %lld at position %lld is "
                             "outside [0, %lld)", (long long)v, (long long)i, (long long)vocab);
        float *o = out + v * dim;
        const float *d = dy + i * dim;
        for (int64_t k = 0; k < dim; k++) o[k] += d[k];
    }
    return SN_OK;
}

static const sn_kernel k_slice = {.impl = "memcpy", .supports = slice_supports, .run = slice_run},
                       k_slice_grad = {.impl = "memcpy", .supports = slice_supports,
                                       .run = slice_grad_run},
                       k_gather_grad = {.impl = "vec", .supports = gather_grad_supports,
                                        .run = gather_grad_run};

void sn_cpu_register_shape(sn_kernel_table *t) {
    t->k[SN_OP_SLICE] = &k_slice;
    t->k[SN_OP_SLICE_GRAD] = &k_slice_grad;
    t->k[SN_OP_GATHER_GRAD] = &k_gather_grad;
}
