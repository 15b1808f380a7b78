/* Reference softmax family: softmax and log-softmax over any axis, their gradients, sparse
 * softmax cross-entropy (loss and gradient), sparse accuracy and argmax. Any float dtype for
 * values, integer labels (i32); computed in double, max subtracted for stability. */
#include "backend/ref/ref_common.h"

/* Max and log(sum(exp(x - max))) of `len` values at stride `inner` from p + base. */
static void row_stats(sn_dtype t, const void *p, int64_t base, int64_t len, int64_t inner,
                      double *max, double *lse) {
    double m = -INFINITY;
    for (int64_t l = 0; l < len; l++) {
        double v = sn_load(t, p, base + l * inner);
        if (v > m || isnan(v)) m = v;
    }
    /* A non-finite max (all -inf, +inf, NaN) is not subtracted: the row then comes out NaN,
     * as in TensorFlow, instead of a silent 0. */
    double mm = isfinite(m) ? m : 0.0;
    double s = 0;
    for (int64_t l = 0; l < len; l++) s += exp(sn_load(t, p, base + l * inner) - mm);
    *max = mm;
    *lse = log(s);
}

/* x [..., L (axis), ...] -> same shape, normalised over attr.axis.axis */
static sn_status softmax_common(sn_kcall *c, bool log_out) {
    int64_t outer, len, inner;
    ref_axis_split(&c->y.shape, c->attr->axis.axis, &outer, &len, &inner);
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double m, lse;
            row_stats(tx, c->in[0], base, len, inner, &m, &lse);
            for (int64_t l = 0; l < len; l++) {
                int64_t at = base + l * inner;
                double z = sn_load(tx, c->in[0], at) - m - lse;
                sn_store(to, c->out, at, log_out ? z : exp(z));
            }
        }
    return SN_OK;
}

static sn_status softmax_run(sn_kcall *c) { return softmax_common(c, false); }
static sn_status log_softmax_run(sn_kcall *c) { return softmax_common(c, true); }

/* y = softmax(x) or log_softmax(x), dy: same shape -> dx.
 * softmax: y * (dy - sum(dy * y)); log_softmax: dy - exp(y) * sum(dy). */
static sn_status softmax_grad_common(sn_kcall *c, bool log_in) {
    int64_t outer, len, inner;
    ref_axis_split(&c->y.shape, c->attr->axis.axis, &outer, &len, &inner);
    sn_dtype ty = c->x[0].dtype, tdy = c->x[1].dtype, to = c->y.dtype;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double s = 0;
            for (int64_t l = 0; l < len; l++) {
                int64_t at = base + l * inner;
                double dy = sn_load(tdy, c->in[1], at);
                s += log_in ? dy : dy * sn_load(ty, c->in[0], at);
            }
            for (int64_t l = 0; l < len; l++) {
                int64_t at = base + l * inner;
                double y = sn_load(ty, c->in[0], at), dy = sn_load(tdy, c->in[1], at);
                sn_store(to, c->out, at, log_in ? dy - exp(y) * s : y * (dy - s));
            }
        }
    return SN_OK;
}

static sn_status softmax_grad_run(sn_kcall *c) { return softmax_grad_common(c, false); }
static sn_status log_softmax_grad_run(sn_kcall *c) { return softmax_grad_common(c, true); }

/* The label of example n, checked against [0, C). */
static sn_status load_label(const sn_kcall *c, const char *op, int64_t n, int64_t classes,
                            int64_t *label) {
    double v = sn_load(c->x[1].dtype, c->in[1], n);
    if (!(v >= 0 && v < (double)classes))
        return sn_errorf(SN_ERR_INVALID, "%s: label %.0f at example %lld is outside [0, %lld)",
                         op, v, (long long)n, (long long)classes);
    *label = (int64_t)v;
    return SN_OK;
}

/* logits [N, C], labels [N] i32 -> loss [N] = logsumexp(logits[n]) - logits[n, label] */
static sn_status sparse_xent_run(sn_kcall *c) {
    const sn_shape *ls = &c->x[0].shape;
    int64_t classes = ls->dim[ls->ndim - 1], rows = sn_shape_numel(ls) / (classes ? classes : 1);
    sn_dtype tl = c->x[0].dtype, to = c->y.dtype;
    for (int64_t n = 0; n < rows; n++) {
        int64_t label = 0;
        SN_TRY(load_label(c, "sparse_softmax_xent", n, classes, &label));
        double m, lse;
        row_stats(tl, c->in[0], n * classes, classes, 1, &m, &lse);
        sn_store(to, c->out, n, m + lse - sn_load(tl, c->in[0], n * classes + label));
    }
    return SN_OK;
}

/* logits [N, C], labels [N] i32, dloss [N] -> dlogits [N, C] = (softmax - onehot) * dloss */
static sn_status sparse_xent_grad_run(sn_kcall *c) {
    const sn_shape *ls = &c->x[0].shape;
    int64_t classes = ls->dim[ls->ndim - 1], rows = sn_shape_numel(ls) / (classes ? classes : 1);
    sn_dtype tl = c->x[0].dtype, td = c->x[2].dtype, to = c->y.dtype;
    for (int64_t n = 0; n < rows; n++) {
        int64_t label = 0;
        SN_TRY(load_label(c, "sparse_softmax_xent_grad", n, classes, &label));
        double m, lse, d = sn_load(td, c->in[2], n);
        row_stats(tl, c->in[0], n * classes, classes, 1, &m, &lse);
        for (int64_t j = 0; j < classes; j++) {
            int64_t at = n * classes + j;
            double p = exp(sn_load(tl, c->in[0], at) - m - lse);
            sn_store(to, c->out, at, (p - (j == label ? 1.0 : 0.0)) * d);
        }
    }
    return SN_OK;
}

/* First index of the maximum of `len` values (NaN never wins; an all-NaN row gives 0). */
static int64_t row_argmax(sn_dtype t, const void *p, int64_t base, int64_t len) {
    int64_t best = 0;
    double m = -INFINITY;
    for (int64_t l = 0; l < len; l++) {
        double v = sn_load(t, p, base + l);
        if (v > m) {
            m = v;
            best = l;
        }
    }
    return best;
}

/* logits [N, C], labels [N] i32 -> [N] (node dtype): 1 where argmax == label, else 0.
 * A label outside [0, C) is an error, as in the loss, so a bad data set is not hidden. */
static sn_status sparse_accuracy_run(sn_kcall *c) {
    const sn_shape *ls = &c->x[0].shape;
    int64_t classes = ls->dim[ls->ndim - 1], rows = sn_shape_numel(ls) / (classes ? classes : 1);
    for (int64_t n = 0; n < rows; n++) {
        int64_t label = 0;
        SN_TRY(load_label(c, "sparse_accuracy", n, classes, &label));
        int64_t a = row_argmax(c->x[0].dtype, c->in[0], n * classes, classes);
        sn_store(c->y.dtype, c->out, n, a == label ? 1.0 : 0.0);
    }
    return SN_OK;
}

/* x [..., C] -> i32 [...]: first index of the max over the last axis */
static sn_status argmax_run(sn_kcall *c) {
    const sn_shape *xs = &c->x[0].shape;
    int64_t classes = xs->ndim > 0 ? xs->dim[xs->ndim - 1] : 1;
    int64_t rows = classes ? sn_shape_numel(xs) / classes : 0;
    for (int64_t n = 0; n < rows; n++)
        sn_store(c->y.dtype, c->out, n,
                 (double)row_argmax(c->x[0].dtype, c->in[0], n * classes, classes));
    return SN_OK;
}

static const sn_kernel k_softmax = REF_KERNEL(softmax_run),
                       k_log_softmax = REF_KERNEL(log_softmax_run),
                       k_softmax_grad = REF_KERNEL(softmax_grad_run),
                       k_log_softmax_grad = REF_KERNEL(log_softmax_grad_run),
                       k_xent = REF_KERNEL(sparse_xent_run),
                       k_xent_grad = REF_KERNEL(sparse_xent_grad_run),
                       k_accuracy = REF_KERNEL(sparse_accuracy_run),
                       k_argmax = REF_KERNEL(argmax_run);

void sn_ref_register_softmax(sn_kernel_table *t) {
    t->k[SN_OP_SOFTMAX] = &k_softmax;
    t->k[SN_OP_LOG_SOFTMAX] = &k_log_softmax;
    t->k[SN_OP_SOFTMAX_GRAD] = &k_softmax_grad;
    t->k[SN_OP_LOG_SOFTMAX_GRAD] = &k_log_softmax_grad;
    t->k[SN_OP_SPARSE_XENT] = &k_xent;
    t->k[SN_OP_SPARSE_XENT_GRAD] = &k_xent_grad;
    t->k[SN_OP_SPARSE_ACCURACY] = &k_accuracy;
    t->k[SN_OP_ARGMAX] = &k_argmax;
}
