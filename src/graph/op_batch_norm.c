/* BatchNormalization in training as four fused ops instead of a dozen graph ops and their
 * autodiff (issue 23: about 1,500 small ops a MobileNetV2 step, most of them BatchNorm's).
 * Kernels in backend/ref/ref_batch_norm.c (double) and backend/cpu/cpu_batch_norm.c.
 *
 * Over every axis but the last (Keras's axis=-1), M = numel(x) / C values per channel:
 *   bn_stats (x)                    -> [2, C]: mean, biased variance (divided by M)
 *   bn_train (x, stats, gamma, beta) -> y = (x - mean) * gamma / sqrt(var + eps) + beta
 * The statistics are an op of their own so that the layer can feed them to its moving
 * averages; bn_train's gradient rule is the whole derivative through them (the standard
 * formula below), so the stats input gets none. That is only right when stats is bn_stats of
 * the same x: sn_batch_norm_train builds both together and is the only way to make the pair.
 * With xh = (x - mean) * rstd, rstd = 1 / sqrt(var + eps):
 *   bn_grad_params (x, stats, dy)  -> [2, C]: dgamma = sum dy * xh, dbeta = sum dy
 *   bn_grad_x (x, stats, gamma, dy, dparams) -> dx = gamma rstd (dy - (dbeta + xh dgamma) / M)
 * Two passes over the data for the backward (one per op), none to slice a flat result. */
#include <math.h>

#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

static int64_t channels(const sn_node_t *x) {
    return x->shape.ndim ? x->shape.dim[x->shape.ndim - 1] : 0;
}

static sn_status bad(const sn_node_t *node, const sn_node_t *x, const char *what,
                     const sn_node_t *got) {
    char s1[128], s2[128];
    return sn_errorf(SN_ERR_SHAPE, "%s: x %s %s needs %s of its dtype, got %s %s",
                     sn_ops[node->op]->name, sn_dtype_name(x->dtype),
                     sn_shape_str(&x->shape, s1, sizeof s1), what, sn_dtype_name(got->dtype),
                     sn_shape_str(&got->shape, s2, sizeof s2));
}

/* in[i] must be [C] (rows 0) or [2, C] (rows 2) of x's dtype */
static sn_status need_vec(const sn_node_t *node, const sn_node_t *x, const sn_node_t *v, int rows,
                          const char *what) {
    int64_t C = channels(x);
    bool ok = v->dtype == x->dtype &&
              (rows ? v->shape.ndim == 2 && v->shape.dim[0] == rows && v->shape.dim[1] == C
                    : v->shape.ndim == 1 && v->shape.dim[0] == C);
    return ok ? SN_OK : bad(node, x, what, v);
}

static sn_status need_x(const sn_node_t *node, const sn_node_t *x) {
    if (!sn_dtype_is_float(x->dtype) || x->shape.ndim < 1)
        return sn_errorf(SN_ERR_SHAPE, "%s: x must be float with at least one axis, got %s",
                         sn_ops[node->op]->name, sn_dtype_name(x->dtype));
    return SN_OK;
}

static sn_status infer_bn_stats(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    SN_TRY(need_x(node, x));
    node->dtype = x->dtype;
    node->shape = (sn_shape){.ndim = 2, .dim = {2, channels(x)}};
    return SN_OK;
}

static sn_status infer_bn_train(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    SN_TRY(need_x(node, x));
    SN_TRY(need_vec(node, x, IN(g, node, 1), 2, "stats [2, C]"));
    SN_TRY(need_vec(node, x, IN(g, node, 2), 0, "gamma [C]"));
    SN_TRY(need_vec(node, x, IN(g, node, 3), 0, "beta [C]"));
    node->dtype = x->dtype;
    node->shape = x->shape;
    return SN_OK;
}

static sn_status need_dy(const sn_node_t *node, const sn_node_t *x, const sn_node_t *dy) {
    if (!sn_shape_equal(&x->shape, &dy->shape) || dy->dtype != x->dtype)
        return bad(node, x, "dy of its shape", dy);
    return SN_OK;
}

static sn_status infer_bn_grad_params(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    SN_TRY(need_x(node, x));
    SN_TRY(need_vec(node, x, IN(g, node, 1), 2, "stats [2, C]"));
    SN_TRY(need_dy(node, x, IN(g, node, 2)));
    node->dtype = x->dtype;
    node->shape = (sn_shape){.ndim = 2, .dim = {2, channels(x)}};
    return SN_OK;
}

static sn_status infer_bn_grad_x(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    SN_TRY(need_x(node, x));
    SN_TRY(need_vec(node, x, IN(g, node, 1), 2, "stats [2, C]"));
    SN_TRY(need_vec(node, x, IN(g, node, 2), 0, "gamma [C]"));
    SN_TRY(need_dy(node, x, IN(g, node, 3)));
    SN_TRY(need_vec(node, x, IN(g, node, 4), 2, "dparams [2, C]"));
    node->dtype = x->dtype;
    node->shape = x->shape;
    return SN_OK;
}

sn_node sn_batch_norm_train(sn_graph *g, sn_node x, sn_node gamma, sn_node beta, double epsilon,
                            sn_node *stats) {
    if (stats) *stats = SN_NONE;
    if (!(epsilon > 0) || !isfinite(epsilon))
        return sn_graph_fail(g, SN_ERR_INVALID, "batch_norm_train: epsilon %g must be finite "
                             "and > 0", epsilon);
    sn_attrs a = {.norm = {.epsilon = epsilon}};
    sn_node st = sn_graph_add(g, SN_OP_BN_STATS, 1, &x, &a);
    sn_node y = sn_graph_add(g, SN_OP_BN_TRAIN, 4, (sn_node[]){x, st, gamma, beta}, &a);
    if (stats && y != SN_NONE) *stats = st;
    return y;
}

/* Row r of a [2, C] node as a [C] node */
static sn_node row(sn_graph *g, sn_node v, int r) {
    int64_t C = g->nodes[v].shape.dim[1];
    sn_node s = sn_slice(g, v, (int64_t[]){r, 0}, (int64_t[]){1, C});
    return sn_reshape(g, s, &(sn_shape){.ndim = 1, .dim = {C}});
}

static void grad_bn_train(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node x = node.in[0], st = node.in[1], gamma = node.in[2];
    sn_node dp = sn_graph_add(g, SN_OP_BN_GRAD_PARAMS, 3, (sn_node[]){x, st, dy}, &node.attr);
    if (dp == SN_NONE) return;
    dx[0] = sn_graph_add(g, SN_OP_BN_GRAD_X, 5, (sn_node[]){x, st, gamma, dy, dp}, &node.attr);
    dx[2] = row(g, dp, 0);
    dx[3] = row(g, dp, 1);
    /* dx[1] (stats) stays SN_NONE: dx[0] already holds the derivative through them */
}

const sn_op_def sn_def_bn_stats = {.name = "bn_stats", .n_in = 1, .infer = infer_bn_stats};
const sn_op_def sn_def_bn_train = {.name = "bn_train", .n_in = 4, .infer = infer_bn_train,
                                   .grad = grad_bn_train};
const sn_op_def sn_def_bn_grad_params = {.name = "bn_grad_params", .n_in = 3,
                                         .infer = infer_bn_grad_params};
const sn_op_def sn_def_bn_grad_x = {.name = "bn_grad_x", .n_in = 5, .infer = infer_bn_grad_x};
