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
    }
    return "?";
}

const char *sn_metric_name(sn_metric_type m) {
    switch (m) {
    case SN_METRIC_SPARSE_CATEGORICAL_ACCURACY: return "sparse_categorical_accuracy";
    case SN_METRIC_ACCURACY: return "accuracy";
    }
    return "?";
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
        if (t == SN_LOSS_MEAN_SQUARED_ERROR)
            return sn_errorf(SN_ERR_INVALID, "compile: metric accuracy is not defined for the "
                             "loss mean_squared_error (a regression loss)");
        return SN_OK;
    }
    return sn_errorf(SN_ERR_INVALID, "compile: unknown metric %d (expected "
                     "SN_METRIC_SPARSE_CATEGORICAL_ACCURACY or SN_METRIC_ACCURACY)", (int)m);
}

static sn_node scalar(sn_graph *g, double v) { return sn_scalar(g, SN_F32, v); }

static sn_node clip(sn_graph *g, sn_node x, double lo, double hi) {
    sn_node a = sn_relu(g, sn_sub(g, x, scalar(g, lo)));
    sn_node b = sn_relu(g, sn_sub(g, x, scalar(g, hi)));
    return sn_add(g, scalar(g, lo), sn_sub(g, a, b));
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

sn_node sn_loss_per_example(sn_graph *g, sn_loss_type t, bool from_logits, sn_node out,
                            sn_node y) {
    sn_shape os = sn_node_shape(g, out);
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
            sn_node sp = sn_log(g, sn_add(g, scalar(g, 1), sn_exp(g, sn_neg(g, absz))));
            l = sn_add(g, sn_sub(g, sn_relu(g, out), sn_mul(g, out, y)), sp);
        } else {
            /* Keras (TF backend): clip, then -(y log(p + eps) + (1 - y) log(1 - p + eps)). */
            sn_node p = clip(g, out, SN_LOSS_EPSILON, 1 - SN_LOSS_EPSILON);
            sn_node a = sn_mul(g, y, sn_log(g, sn_add(g, p, scalar(g, SN_LOSS_EPSILON))));
            sn_node one_y = sn_sub(g, scalar(g, 1), y);
            sn_node one_p = sn_add(g, sn_sub(g, scalar(g, 1), p), scalar(g, SN_LOSS_EPSILON));
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
    }
    return sn_graph_fail(g, SN_ERR_INVALID, "loss: unknown type %d", (int)t);
}

sn_node sn_metric_batch_sum(sn_graph *g, sn_metric_type m, sn_loss_type t, bool from_logits,
                            sn_node out, sn_node y) {
    (void)m; /* both metrics are "accuracy" resolved by the loss, as Keras resolves it */
    sn_node z = out, lab = y, hit;
    int64_t per_ex;
    switch (t) {
    case SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY:
        flatten_sparse(g, &z, &lab, &per_ex);
        hit = sn_sparse_accuracy(g, z, lab);
        break;
    case SN_LOSS_CATEGORICAL_CROSSENTROPY:
        lab = sn_argmax(g, y);
        flatten_sparse(g, &z, &lab, &per_ex);
        hit = sn_sparse_accuracy(g, z, lab);
        break;
    case SN_LOSS_BINARY_CROSSENTROPY: {
        /* binary_accuracy: y == (p > 0.5), i.e. logit > 0. As a two-class argmax against the
         * threshold (argmax takes the first of equal values, so p == 0.5 predicts 0, as
         * Keras's strict ">"). */
        sn_shape s = sn_node_shape(g, out);
        int64_t n = sn_shape_numel(&s);
        per_ex = s.dim[0] ? n / s.dim[0] : 1;
        sn_shape col = {.ndim = 2, .dim = {n, 1}};
        z = sn_reshape(g, out, &col);
        sn_node thr = sn_broadcast_to(g, sn_reshape(g, scalar(g, from_logits ? 0.0 : 0.5),
                                                    &(sn_shape){.ndim = 2, .dim = {1, 1}}),
                                      &col);
        z = sn_concat(g, 2, (sn_node[]){thr, z}, 1);
        lab = sn_cast(g, sn_reshape(g, y, &(sn_shape){.ndim = 1, .dim = {n}}), SN_I32);
        hit = sn_sparse_accuracy(g, z, lab);
        break;
    }
    case SN_LOSS_MEAN_SQUARED_ERROR:
    default:
        return sn_graph_fail(g, SN_ERR_INVALID, "metric accuracy: not defined for %s",
                             sn_loss_name(t));
    }
    sn_node sum = sn_reduce_sum(g, hit, 0, NULL, false);
    /* Count examples, not positions: each example contributes its mean. */
    if (per_ex != 1) sum = sn_mul(g, sum, scalar(g, 1.0 / (double)per_ex));
    return sum;
}
