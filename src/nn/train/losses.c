/* Losses and metrics as graph pieces, with Keras's formulas and names.
 *
 * Each loss gives a per-example value [B]; compile/fit takes the mean over the batch (Keras's
 * "sum_over_batch_size" reduction). Outputs with more than one non-batch dimension (a
 * sequence model's [B, T, C]) are reduced to one value per example by a mean over the extra
 * positions, which gives the same batch mean as Keras's mean over all positions.
 *
 * The graph has no clip/max/abs op; they are built from relu:
 *   clip(x, lo, hi) = lo + relu(x - lo) - relu(x - hi),  max(x, 0) = relu(x),
 *   |x| = relu(x) + relu(-x). */
#include <string.h>

#include "nn/train/train_impl.h"

/* Keras's backend.epsilon(), the clip of probability-based losses. */
#define SN_LOSS_EPSILON 1e-7

const char *sn_loss_name(sn_loss_type t) {
    switch (t) {
    case SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY: return "sparse_categorical_crossentropy";
    case SN_LOSS_CATEGORICAL_CROSSENTROPY: return "categorical_crossentropy";
    case SN_LOSS_BINARY_CROSSENTROPY: return "binary_crossentropy";
    case SN_LOSS_MEAN_SQUARED_ERROR: return "mean_squared_error";
    case SN_LOSS_MEAN_ABSOLUTE_ERROR: return "mean_absolute_error";
    case SN_LOSS_HUBER: return "huber";
    }
    return "?";
}

const char *sn_metric_name(sn_metric_type m) {
    switch (m) {
    case SN_METRIC_SPARSE_CATEGORICAL_ACCURACY: return "sparse_categorical_accuracy";
    case SN_METRIC_ACCURACY: return "accuracy";
    case SN_METRIC_BINARY_ACCURACY: return "binary_accuracy";
    case SN_METRIC_CATEGORICAL_ACCURACY: return "categorical_accuracy";
    }
    return "?";
}

bool sn_loss_dense_labels(sn_loss_type t) { return t != SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY; }

static bool regression(sn_loss_type t) {
    return t == SN_LOSS_MEAN_SQUARED_ERROR || t == SN_LOSS_MEAN_ABSOLUTE_ERROR || t == SN_LOSS_HUBER;
}

sn_status sn_metric_check(sn_metric_type m, sn_loss_type t) {
    switch (m) {
    case SN_METRIC_SPARSE_CATEGORICAL_ACCURACY:
        if (t != SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
            return sn_errorf(SN_ERR_INVALID, "compile: metric sparse_categorical_accuracy needs "
                             "integer labels, so the loss sparse_categorical_crossentropy (got "
                             "%s; use SN_METRIC_ACCURACY)", sn_loss_name(t));
        return SN_OK;
    case SN_METRIC_ACCURACY:
        if (regression(t))
            return sn_errorf(SN_ERR_INVALID, "compile: metric accuracy is not defined for the "
                             "loss %s (a regression loss; name binary_accuracy or "
                             "categorical_accuracy)", sn_loss_name(t));
        return SN_OK;
    case SN_METRIC_BINARY_ACCURACY:
    case SN_METRIC_CATEGORICAL_ACCURACY:
        if (t == SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY)
            return sn_errorf(SN_ERR_INVALID, "compile: metric %s needs labels of the output's "
                             "shape, but the loss sparse_categorical_crossentropy takes class "
                             "indices (use sparse_categorical_accuracy)", sn_metric_name(m));
        return SN_OK;
    }
    return sn_errorf(SN_ERR_INVALID, "compile: unknown metric %d (expected one of the "
                     "sn_metric_type values)", (int)m);
}

/* A constant of x's dtype (f64 in the gradient checks, f32 in training). */
static sn_node scalar_like(sn_graph *g, sn_node x, double v) {
    return sn_scalar(g, sn_node_dtype(g, x), v);
}

static sn_node clip(sn_graph *g, sn_node x, double lo, double hi) {
    sn_node a = sn_relu(g, sn_sub(g, x, scalar_like(g, x, lo)));
    sn_node b = sn_relu(g, sn_sub(g, x, scalar_like(g, x, hi)));
    return sn_add(g, scalar_like(g, x, lo), sn_sub(g, a, b));
}

/* x [B, ...] -> [B]: mean over every non-batch axis (identity for [B]). */
static sn_node per_example(sn_graph *g, sn_node x) {
    sn_shape s = sn_node_shape(g, x);
    if (s.ndim <= 1) return x;
    int axes[SN_MAX_DIMS];
    for (int i = 1; i < s.ndim; i++) axes[i - 1] = i;
    return sn_reduce_mean(g, x, s.ndim - 1, axes, false);
}

/* out [B, ..., C] -> [N, C] with N = B * ...; y -> [N] int32. */
static void flatten_sparse(sn_graph *g, sn_node *out, sn_node *y, int64_t *per_ex) {
    sn_shape s = sn_node_shape(g, *out);
    int64_t c = s.dim[s.ndim - 1], n = sn_shape_numel(&s) / (c ? c : 1);
    *per_ex = s.dim[0] ? n / s.dim[0] : 1;
    if (s.ndim != 2) *out = sn_reshape(g, *out, &(sn_shape){.ndim = 2, .dim = {n, c}});
    sn_shape ys = sn_node_shape(g, *y);
    if (ys.ndim != 1) *y = sn_reshape(g, *y, &(sn_shape){.ndim = 1, .dim = {n}});
}

static sn_node absolute(sn_graph *g, sn_node x) {
    return sn_add(g, sn_relu(g, x), sn_relu(g, sn_neg(g, x)));
}

sn_node sn_loss_per_example(sn_graph *g, const sn_loss_spec *spec, sn_node out, sn_node y) {
    sn_shape os = sn_node_shape(g, out);
    sn_loss_type t = spec->type;
    bool from_logits = spec->from_logits;
    switch (t) {
    case SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY: {
        int64_t b = os.dim[0], per_ex;
        sn_node z = out, lab = y;
        flatten_sparse(g, &z, &lab, &per_ex);
        /* From probabilities, Keras (TF backend) clips to [eps, 1 - eps] and takes the softmax
         * cross-entropy of log(p): -log(clip(p)[y]) + log(sum(clip(p))), the second term ~0
         * for a softmax output. */
        if (!from_logits) z = sn_log(g, clip(g, z, SN_LOSS_EPSILON, 1 - SN_LOSS_EPSILON));
        sn_node l = sn_sparse_softmax_xent(g, z, lab);
        if (per_ex != 1) l = sn_reshape(g, l, &(sn_shape){.ndim = 2, .dim = {b, per_ex}});
        return per_example(g, l);
    }
    case SN_LOSS_CATEGORICAL_CROSSENTROPY: {
        sn_node logp;
        if (from_logits) {
            logp = sn_log_softmax(g, out, -1);
        } else {
            /* Keras: renormalise, clip, log. */
            sn_node p = sn_div(g, out, sn_reduce_sum(g, out, 1, (int[]){-1}, true));
            logp = sn_log(g, clip(g, p, SN_LOSS_EPSILON, 1 - SN_LOSS_EPSILON));
        }
        sn_node l = sn_neg(g, sn_reduce_sum(g, sn_mul(g, y, logp), 1, (int[]){-1}, false));
        return per_example(g, l);
    }
    case SN_LOSS_BINARY_CROSSENTROPY: {
        sn_node l;
        if (from_logits) {
            /* The stable form of TF's sigmoid_cross_entropy_with_logits:
             * max(z, 0) - z * y + log(1 + exp(-|z|)). */
            sn_node absz = sn_add(g, sn_relu(g, out), sn_relu(g, sn_neg(g, out)));
            sn_node sp = sn_log(g, sn_add(g, scalar_like(g, out, 1), sn_exp(g, sn_neg(g, absz))));
            l = sn_add(g, sn_sub(g, sn_relu(g, out), sn_mul(g, out, y)), sp);
        } else {
            /* Keras (TF backend): clip, then -(y log(p + eps) + (1 - y) log(1 - p + eps)). */
            sn_node p = clip(g, out, SN_LOSS_EPSILON, 1 - SN_LOSS_EPSILON);
            sn_node a = sn_mul(g, y, sn_log(g, sn_add(g, p, scalar_like(g, out, SN_LOSS_EPSILON))));
            sn_node one_y = sn_sub(g, scalar_like(g, out, 1), y);
            sn_node one_p = sn_add(g, sn_sub(g, scalar_like(g, out, 1), p), scalar_like(g, out, SN_LOSS_EPSILON));
            l = sn_neg(g, sn_add(g, a, sn_mul(g, one_y, sn_log(g, one_p))));
        }
        if (os.ndim >= 2) l = sn_reduce_mean(g, l, 1, (int[]){-1}, false);
        return per_example(g, l);
    }
    case SN_LOSS_MEAN_SQUARED_ERROR: {
        sn_node d = sn_sub(g, y, out);
        sn_node l = sn_mul(g, d, d);
        if (os.ndim >= 2) l = sn_reduce_mean(g, l, 1, (int[]){-1}, false);
        return per_example(g, l);
    }
    case SN_LOSS_MEAN_ABSOLUTE_ERROR: {
        sn_node l = absolute(g, sn_sub(g, out, y));
        if (os.ndim >= 2) l = sn_reduce_mean(g, l, 1, (int[]){-1}, false);
        return per_example(g, l);
    }
    case SN_LOSS_HUBER: {
        /* Keras: a = |p - y|, q = min(a, delta), mean(0.5 q^2 + delta (a - q)) over the last
         * axis; min(a, delta) = a - relu(a - delta). */
        sn_node a = absolute(g, sn_sub(g, out, y));
        sn_node q = sn_sub(g, a, sn_relu(g, sn_sub(g, a, scalar_like(g, out, spec->delta))));
        sn_node l = sn_add(g, sn_mul(g, scalar_like(g, out, 0.5), sn_mul(g, q, q)),
                           sn_mul(g, scalar_like(g, out, spec->delta), sn_sub(g, a, q)));
        if (os.ndim >= 2) l = sn_reduce_mean(g, l, 1, (int[]){-1}, false);
        return per_example(g, l);
    }
    }
    return sn_graph_fail(g, SN_ERR_INVALID, "loss: unknown type %d", (int)t);
}

/* hits [N] of out [N, ...] against a threshold: label == (out > thr) per element, each
 * example's mean; *per_ex receives the elements per example. */
static sn_node threshold_hits(sn_graph *g, sn_node out, sn_node y, double thr, int64_t *per_ex) {
    /* As a two-class argmax against the threshold (argmax takes the first of equal values,
     * so out == thr predicts 0, as Keras's strict ">"). */
    sn_shape s = sn_node_shape(g, out);
    int64_t n = sn_shape_numel(&s);
    *per_ex = s.dim[0] ? n / s.dim[0] : 1;
    sn_shape col = {.ndim = 2, .dim = {n, 1}};
    sn_node z = sn_reshape(g, out, &col);
    sn_node th = sn_broadcast_to(g, sn_reshape(g, scalar_like(g, out, thr),
                                               &(sn_shape){.ndim = 2, .dim = {1, 1}}), &col);
    z = sn_concat(g, 2, (sn_node[]){th, z}, 1);
    sn_node lab = sn_cast(g, sn_reshape(g, y, &(sn_shape){.ndim = 1, .dim = {n}}), SN_I32);
    return sn_sparse_accuracy(g, z, lab);
}

sn_node sn_metric_batch_sum(sn_graph *g, const sn_metric_spec *m, const sn_loss_spec *l,
                            sn_node out, sn_node y) {
    sn_node z = out, lab = y, hit;
    int64_t per_ex;
    sn_loss_type t = l->type;
    /* "accuracy" is resolved by the loss, as Keras resolves it by the labels' shape */
    sn_metric_type mt = m->type;
    if (mt == SN_METRIC_ACCURACY || mt == SN_METRIC_SPARSE_CATEGORICAL_ACCURACY)
        mt = t == SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY ? SN_METRIC_SPARSE_CATEGORICAL_ACCURACY
             : t == SN_LOSS_CATEGORICAL_CROSSENTROPY ? SN_METRIC_CATEGORICAL_ACCURACY
             : t == SN_LOSS_BINARY_CROSSENTROPY ? SN_METRIC_ACCURACY : mt;
    switch (mt) {
    case SN_METRIC_SPARSE_CATEGORICAL_ACCURACY:
        flatten_sparse(g, &z, &lab, &per_ex);
        hit = sn_sparse_accuracy(g, z, lab);
        break;
    case SN_METRIC_CATEGORICAL_ACCURACY:
        lab = sn_argmax(g, y);
        flatten_sparse(g, &z, &lab, &per_ex);
        hit = sn_sparse_accuracy(g, z, lab);
        break;
    case SN_METRIC_ACCURACY: /* binary cross-entropy's: y == (p > 0.5), i.e. logit > 0 */
        hit = threshold_hits(g, out, y, l->from_logits ? 0.0 : 0.5, &per_ex);
        break;
    case SN_METRIC_BINARY_ACCURACY: /* Keras's: the threshold on the output as it is */
        hit = threshold_hits(g, out, y, m->threshold, &per_ex);
        break;
    default:
        return sn_graph_fail(g, SN_ERR_INVALID, "metric %s: not defined for %s",
                             sn_metric_name(m->type), sn_loss_name(t));
    }
    sn_node sum = sn_reduce_sum(g, hit, 0, NULL, false);
    /* Count examples, not positions: each example contributes its mean. */
    if (per_ex != 1) sum = sn_mul(g, sum, scalar_like(g, sum, 1.0 / (double)per_ex));
    return sum;
}
