/* Fast f32 softmax family over the last axis: softmax, log_softmax, their gradients, sparse
 * softmax cross-entropy (loss and gradient), sparse accuracy and argmax. Another axis (with
 * something after it that is not 1) falls back to the reference kernel.
 *
 * Every op is a loop over independent rows of C values; one function per ISA variant runs a
 * range of rows for any op, so a call costs one indirect call, not one per row. Row sums use
 * 32 fixed lanes folded in a fixed order (as cpu_reduce.c) so that results do not depend on
 * the thread count or the ISA. exp is the branch-free polynomial shared with
 * cpu_elementwise.c (vexp in cpu_vec.h, with the bit-mask selects and maxnan). Labels
 * are checked in one pass before anything is written, so a bad label leaves no half-written
 * output. Threads split rows, and only above GRAIN elements: a [32, 10] loss stays on the
 * calling thread. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_vec.h"
#include "backend/kernel.h"

enum { GRAIN = 8192, LANES = 32 };

/* ---- row building blocks ---------------------------------------------------------------- */

/* Rows shorter than LANES (the 10 classes of a classifier) are summed in index order: 32
 * lanes kept in memory cost store-forwarding stalls that dwarf a 10-element row (measured
 * 3x slower than the reference on [32, 10]). The choice depends on the shape only, so the
 * determinism argument above still holds. */

INL float lanes_fold(float *l) {
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) l[j] += l[j + w];
    return l[0];
}

/* The row max (NaN wins), replaced by 0 when not finite: then an inf or NaN row comes out
 * NaN instead of silently 0, as in the reference and TensorFlow. */
INL float row_shift(const float *x, int64_t n) {
    if (n < LANES) {
        float m = -INFINITY;
        for (int64_t i = 0; i < n; i++) m = maxnan(m, x[i]);
        return isfinite(m) ? m : 0.0f;
    }
    float m = vec_lanes_max(x, n);
    return isfinite(m) ? m : 0.0f;
}

/* sum of e^(x - m); stores the terms in o when o is not NULL */
INL float row_exp_sum(float *o, const float *x, float m, int64_t n) {
    if (n < LANES) { /* short rows (10 classes): exp as one short vector loop, sum in order */
        float tmp[LANES], s = 0;
        float *e = o ? o : tmp;
        for (int64_t i = 0; i < n; i++) e[i] = vexp(x[i] - m);
        for (int64_t i = 0; i < n; i++) s += e[i];
        return s;
    }
    float l[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float e = vexp(x[i + j] - m);
            if (o) o[i + j] = e;
            l[j] += e;
        }
    for (int j = 0; i + j < n; j++) {
        float e = vexp(x[i + j] - m);
        if (o) o[i + j] = e;
        l[j] += e;
    }
    return lanes_fold(l);
}

/* sum of a[i] * b[i] (b NULL: sum of a) */
INL float row_dot(const float *a, const float *b, int64_t n) {
    if (n < LANES) {
        float s = 0;
        for (int64_t i = 0; i < n; i++) s += b ? a[i] * b[i] : a[i];
        return s;
    }
    float l[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) l[j] += b ? a[i + j] * b[i + j] : a[i + j];
    for (int j = 0; i + j < n; j++) l[j] += b ? a[i + j] * b[i + j] : a[i + j];
    return lanes_fold(l);
}

/* ---- per-op rows ------------------------------------------------------------------------ */

typedef enum {
    S_SOFTMAX,
    S_LOG_SOFTMAX,
    S_SOFTMAX_GRAD,
    S_LOG_SOFTMAX_GRAD,
    S_XENT,
    S_XENT_GRAD,
} sm_kind;

typedef struct sm_ctx {
    sm_kind kind;
    int64_t rows, n;
    const float *x;       /* x, logits or y */
    const float *dy;      /* the gradients' dy, or dloss [rows] */
    const int32_t *label; /* [rows] */
    float *o;
} sm_ctx;

INL void sm_rows_body(const sm_ctx *c, int64_t lo, int64_t hi) {
    const int64_t n = c->n;
    for (int64_t r = lo; r < hi; r++) {
        const float *x = c->x + r * n;
        float *o = c->o + r * n;
        switch (c->kind) {
        case S_SOFTMAX: {
            float m = row_shift(x, n);
            float inv = 1.0f / row_exp_sum(o, x, m, n);
            for (int64_t i = 0; i < n; i++) o[i] *= inv;
            break;
        }
        case S_LOG_SOFTMAX: {
            float m = row_shift(x, n);
            float ls = logf(row_exp_sum(NULL, x, m, n));
            for (int64_t i = 0; i < n; i++) o[i] = (x[i] - m) - ls;
            break;
        }
        case S_SOFTMAX_GRAD: { /* x = y */
            const float *dy = c->dy + r * n;
            float s = row_dot(dy, x, n);
            for (int64_t i = 0; i < n; i++) o[i] = x[i] * (dy[i] - s);
            break;
        }
        case S_LOG_SOFTMAX_GRAD: { /* x = y = log_softmax */
            const float *dy = c->dy + r * n;
            float s = row_dot(dy, NULL, n);
            for (int64_t i = 0; i < n; i++) o[i] = dy[i] - vexp(x[i]) * s;
            break;
        }
        case S_XENT: {
            float m = row_shift(x, n);
            float s = row_exp_sum(NULL, x, m, n);
            c->o[r] = (m - x[c->label[r]]) + logf(s);
            break;
        }
        case S_XENT_GRAD: {
            float m = row_shift(x, n);
            float inv = 1.0f / row_exp_sum(o, x, m, n), d = c->dy[r];
            int32_t lab = c->label[r];
            float p_label = o[lab] * inv;
            float scale = inv * d;
            for (int64_t i = 0; i < n; i++) o[i] *= scale;
            o[lab] = (p_label - 1.0f) * d;
            break;
        }
        }
    }
}

typedef struct sm_isa {
    const char *name;
    void (*rows)(const sm_ctx *c, int64_t lo, int64_t hi);
} sm_isa;

static void rows_generic(const sm_ctx *c, int64_t lo, int64_t hi) { sm_rows_body(c, lo, hi); }
static const sm_isa isa_generic = {"cpu", rows_generic};
#ifdef SN_CPU_X86
TGT_AVX512 static void rows_avx512(const sm_ctx *c, int64_t lo, int64_t hi) {
    sm_rows_body(c, lo, hi);
}
TGT_AVX2 static void rows_avx2(const sm_ctx *c, int64_t lo, int64_t hi) { sm_rows_body(c, lo, hi); }
static const sm_isa isa_avx512 = {"avx512", rows_avx512}, isa_avx2 = {"avx2", rows_avx2};
#endif

static const sm_isa *isa = &isa_generic;

static void sm_task(void *vctx, int ith, int nth) {
    const sm_ctx *c = vctx;
    int64_t lo, hi;
    sn_split_range(c->rows, ith, nth, &lo, &hi);
    if (lo < hi) isa->rows(c, lo, hi);
}

static void sm_run_rows(sm_ctx *c) { run_tasks(sm_task, c, c->rows * c->n, GRAIN, c->rows); }

/* ---- supports and run ------------------------------------------------------------------- */

/* [rows, n] view of a shape around its last axis */
static void last_axis(const sn_shape *s, int64_t *rows, int64_t *n) {
    *n = s->ndim > 0 ? s->dim[s->ndim - 1] : 1;
    *rows = *n > 0 ? sn_shape_numel(s) / *n : 0;
}

/* Softmax-style ops over attr.axis.axis: handled when every axis after it has size 1. */
static bool axis_supports(const sn_kcall *c) {
    const sn_shape *s = &c->y.shape;
    int axis = c->attr->axis.axis;
    if (axis < 0 || axis >= s->ndim || c->y.dtype != SN_F32) return false;
    for (int d = axis + 1; d < s->ndim; d++)
        if (s->dim[d] != 1) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32 ||
            sn_shape_numel(&c->x[i].shape) != sn_shape_numel(s))
            return false;
    return sn_shape_numel(s) > 0;
}

static sn_status axis_run(sn_kcall *k, sm_kind kind) {
    const sn_shape *s = &k->y.shape;
    int axis = k->attr->axis.axis;
    sm_ctx c = {.kind = kind, .n = s->dim[axis], .x = k->in[0], .o = k->out};
    c.rows = sn_shape_numel(s) / c.n;
    if (kind == S_SOFTMAX_GRAD || kind == S_LOG_SOFTMAX_GRAD) c.dy = k->in[1];
    sm_run_rows(&c);
    return SN_OK;
}

/* x [..., C (axis), 1...] f32 -> same shape */
static sn_status softmax_run(sn_kcall *k) { return axis_run(k, S_SOFTMAX); }
static sn_status log_softmax_run(sn_kcall *k) { return axis_run(k, S_LOG_SOFTMAX); }
/* y, dy [..., C (axis), 1...] f32 -> dx */
static sn_status softmax_grad_run(sn_kcall *k) { return axis_run(k, S_SOFTMAX_GRAD); }
static sn_status log_softmax_grad_run(sn_kcall *k) { return axis_run(k, S_LOG_SOFTMAX_GRAD); }

/* logits [N, C] f32, labels [N] i32 (, dloss [N] f32): the loss family. */
static bool labels_supports(const sn_kcall *c) {
    if (c->n_in < 2 || c->x[0].dtype != SN_F32 || c->x[1].dtype != SN_I32)
        return false;
    int64_t rows, n;
    last_axis(&c->x[0].shape, &rows, &n);
    if (n <= 0 || rows <= 0 || sn_shape_numel(&c->x[1].shape) != rows) return false;
    if (c->n_in > 2 && (c->x[2].dtype != SN_F32 ||
                        sn_shape_numel(&c->x[2].shape) != rows))
        return false;
    return c->y.dtype == SN_F32;
}

static sn_status check_labels(const sn_kcall *k, const char *op, int64_t rows, int64_t n) {
    const int32_t *lab = k->in[1];
    for (int64_t r = 0; r < rows; r++)
        if (lab[r] < 0 || lab[r] >= n)
            return sn_errorf(SN_ERR_INVALID, "%s: label %d at example %lld is outside [0, %lld)",
                             op, (int)lab[r], (long long)r, (long long)n);
    return SN_OK;
}

static sn_status labels_run(sn_kcall *k, sm_kind kind, const char *op) {
    sm_ctx c = {.kind = kind, .x = k->in[0], .label = k->in[1], .o = k->out};
    last_axis(&k->x[0].shape, &c.rows, &c.n);
    SN_TRY(check_labels(k, op, c.rows, c.n));
    if (kind == S_XENT_GRAD) c.dy = k->in[2];
    sm_run_rows(&c);
    return SN_OK;
}

/* logits [N, C], labels [N] -> loss [N] = logsumexp(logits[n]) - logits[n, label] */
static sn_status xent_run(sn_kcall *k) { return labels_run(k, S_XENT, "sparse_softmax_xent"); }
/* logits [N, C], labels [N], dloss [N] -> dlogits [N, C] = (softmax - onehot) * dloss */
static sn_status xent_grad_run(sn_kcall *k) {
    return labels_run(k, S_XENT_GRAD, "sparse_softmax_xent_grad");
}

/* First index of the max (NaN never wins; an all-NaN row gives 0), as the reference. C is the
 * class count (10 here), so a scalar loop is all it needs. */
static int64_t row_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > m) {
            m = x[i];
            best = i;
        }
    return best;
}

/* logits [N, C], labels [N] -> f32 [N]: 1 where the first argmax is the label */
static sn_status accuracy_run(sn_kcall *k) {
    int64_t rows, n;
    last_axis(&k->x[0].shape, &rows, &n);
    SN_TRY(check_labels(k, "sparse_accuracy", rows, n));
    const float *x = k->in[0];
    const int32_t *lab = k->in[1];
    float *o = k->out;
    for (int64_t r = 0; r < rows; r++) o[r] = row_argmax(x + r * n, n) == lab[r] ? 1.0f : 0.0f;
    return SN_OK;
}

static bool argmax_supports(const sn_kcall *c) {
    return c->n_in == 1 && c->x[0].dtype == SN_F32 && c->y.dtype == SN_I32 &&
           sn_shape_numel(&c->x[0].shape) > 0;
}

/* x [..., C] f32 -> i32 [...]: first index of the max over the last axis */
static sn_status argmax_run(sn_kcall *k) {
    int64_t rows, n;
    last_axis(&k->x[0].shape, &rows, &n);
    const float *x = k->in[0];
    int32_t *o = k->out;
    for (int64_t r = 0; r < rows; r++) o[r] = (int32_t)row_argmax(x + r * n, n);
    return SN_OK;
}

#define SM_KERNEL(sup, fn) {.impl = "cpu", .supports = sup, .run = fn}
static sn_kernel k_softmax = SM_KERNEL(axis_supports, softmax_run),
                 k_log_softmax = SM_KERNEL(axis_supports, log_softmax_run),
                 k_softmax_grad = SM_KERNEL(axis_supports, softmax_grad_run),
                 k_log_softmax_grad = SM_KERNEL(axis_supports, log_softmax_grad_run),
                 k_xent = SM_KERNEL(labels_supports, xent_run),
                 k_xent_grad = SM_KERNEL(labels_supports, xent_grad_run),
                 k_accuracy = SM_KERNEL(labels_supports, accuracy_run),
                 k_argmax = SM_KERNEL(argmax_supports, argmax_run);

void sn_cpu_register_softmax(sn_kernel_table *t) {
#ifdef SN_CPU_X86
    isa = pick_variant(&isa_generic, &isa_avx2, &isa_avx512);
#endif
    sn_kernel *vec[] = {&k_softmax, &k_log_softmax, &k_softmax_grad, &k_log_softmax_grad,
                        &k_xent,    &k_xent_grad};
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) vec[i]->impl = isa->name;
    t->k[SN_OP_SOFTMAX] = &k_softmax;
    t->k[SN_OP_LOG_SOFTMAX] = &k_log_softmax;
    t->k[SN_OP_SOFTMAX_GRAD] = &k_softmax_grad;
    t->k[SN_OP_LOG_SOFTMAX_GRAD] = &k_log_softmax_grad;
    t->k[SN_OP_SPARSE_XENT] = &k_xent;
    t->k[SN_OP_SPARSE_XENT_GRAD] = &k_xent_grad;
    t->k[SN_OP_SPARSE_ACCURACY] = &k_accuracy;
    t->k[SN_OP_ARGMAX] = &k_argmax;
}
