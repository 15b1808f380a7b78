/* Reductions, softmax family, losses and metrics: shape inference and gradient rules. */
#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

static sn_status infer_reduce(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    sn_shape r = {0};
    for (int i = 0; i < x->shape.ndim; i++) {
        if (node->attr.reduce.mask & (1u << i)) {
            if (node->attr.reduce.keepdims) r.dim[r.ndim++] = 1;
        } else {
            r.dim[r.ndim++] = x->shape.dim[i];
        }
    }
    node->shape = r;
    node->dtype = x->dtype;
    if (node->op == SN_OP_REDUCE_MEAN && !sn_dtype_is_float(x->dtype))
        return sn_errorf(SN_ERR_SHAPE, "reduce_mean: needs a float input, got %s",
                         sn_dtype_name(x->dtype));
    return SN_OK;
}

static sn_node reduce(sn_graph *g, sn_op op, sn_node x, int naxes, const int *axes,
                      bool keepdims) {
    if (!g || g->status != SN_OK) return SN_NONE;
    if (x < 0 || x >= g->n_nodes)
        return sn_graph_fail(g, SN_ERR_INVALID, "%s: input is not a node of this graph (got %d)",
                             sn_ops[op]->name, (int)x);
    int nd = g->nodes[x].shape.ndim;
    uint32_t mask = 0;
    if (naxes == 0 || !axes) mask = (nd >= 32) ? 0xffffffffu : ((1u << nd) - 1);
    for (int i = 0; i < naxes && axes; i++) {
        int a;
        if (!sn_norm_axis(axes[i], nd, &a))
            return sn_graph_fail(g, SN_ERR_INVALID, "%s: axis %d is out of range for rank %d "
                                 "(expected [%d, %d])", sn_ops[op]->name, axes[i], nd, -nd, nd - 1);
        mask |= 1u << a;
    }
    sn_attrs at = {.reduce = {.mask = mask, .keepdims = keepdims}};
    return sn_graph_add(g, op, 1, &x, &at);
}

sn_node sn_reduce_sum(sn_graph *g, sn_node x, int naxes, const int *axes, bool keepdims) {
    return reduce(g, SN_OP_REDUCE_SUM, x, naxes, axes, keepdims);
}
sn_node sn_reduce_mean(sn_graph *g, sn_node x, int naxes, const int *axes, bool keepdims) {
    return reduce(g, SN_OP_REDUCE_MEAN, x, naxes, axes, keepdims);
}
sn_node sn_reduce_max(sn_graph *g, sn_node x, int naxes, const int *axes, bool keepdims) {
    return reduce(g, SN_OP_REDUCE_MAX, x, naxes, axes, keepdims);
}

/* The keepdims form of a reduction's output shape. */
static sn_shape kept_shape(const sn_shape *x, uint32_t mask) {
    sn_shape r = *x;
    for (int i = 0; i < x->ndim; i++)
        if (mask & (1u << i)) r.dim[i] = 1;
    return r;
}

static void grad_reduce_sum(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_shape xs = g->nodes[node.in[0]].shape, ks = kept_shape(&xs, node.attr.reduce.mask);
    dx[0] = sn_broadcast_to(g, sn_reshape(g, dy, &ks), &xs);
}

static void grad_reduce_mean(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_shape xs = g->nodes[node.in[0]].shape;
    double count = (double)sn_shape_numel(&xs) / (double)sn_shape_numel(&node.shape);
    sn_node scaled = sn_mul(g, dy, sn_scalar(g, node.dtype, 1.0 / count));
    grad_reduce_sum(g, n, scaled, dx);
}

static void grad_reduce_max(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node in[3] = {node.in[0], n, dy};
    dx[0] = sn_graph_add(g, SN_OP_REDUCE_MAX_GRAD, 3, in, &node.attr);
}

static sn_status infer_like_first(const sn_graph *g, sn_node_t *node) {
    node->dtype = IN(g, node, 0)->dtype;
    node->shape = IN(g, node, 0)->shape;
    return SN_OK;
}

/* ---- softmax family -------------------------------------------------------------------- */
static sn_status infer_softmax(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    if (!sn_dtype_is_float(x->dtype))
        return sn_errorf(SN_ERR_SHAPE, "%s: needs a float input, got %s",
                         sn_ops[node->op]->name, sn_dtype_name(x->dtype));
    int a;
    if (!sn_norm_axis(node->attr.axis.axis, x->shape.ndim, &a))
        return sn_errorf(SN_ERR_INVALID, "%s: axis %d is out of range for rank %d",
                         sn_ops[node->op]->name, node->attr.axis.axis, x->shape.ndim);
    node->attr.axis.axis = a;
    node->dtype = x->dtype;
    node->shape = x->shape;
    return SN_OK;
}

sn_node sn_softmax(sn_graph *g, sn_node x, int axis) {
    sn_attrs a = {.axis = {.axis = axis}};
    return sn_graph_add(g, SN_OP_SOFTMAX, 1, &x, &a);
}

sn_node sn_log_softmax(sn_graph *g, sn_node x, int axis) {
    sn_attrs a = {.axis = {.axis = axis}};
    return sn_graph_add(g, SN_OP_LOG_SOFTMAX, 1, &x, &a);
}

static void grad_softmax(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_attrs a = g->nodes[n].attr;
    sn_node in[2] = {n, dy};
    dx[0] = sn_graph_add(g, g->nodes[n].op == SN_OP_SOFTMAX ? SN_OP_SOFTMAX_GRAD
                                                            : SN_OP_LOG_SOFTMAX_GRAD, 2, in, &a);
}

/* logits [N, C] and labels [N] int32 */
static sn_status check_logits_labels(const char *op, const sn_node_t *lg, const sn_node_t *lb) {
    char s1[128], s2[128];
    if (!sn_dtype_is_float(lg->dtype) || lg->shape.ndim != 2)
        return sn_errorf(SN_ERR_SHAPE, "%s: logits must be a float [N, C] matrix, got %s %s", op,
                         sn_dtype_name(lg->dtype), sn_shape_str(&lg->shape, s1, sizeof s1));
    if (lb->dtype != SN_I32 || lb->shape.ndim != 1 || lb->shape.dim[0] != lg->shape.dim[0])
        return sn_errorf(SN_ERR_SHAPE, "%s: labels must be int32 [%lld] to match logits %s, "
                         "got %s %s", op, (long long)lg->shape.dim[0],
                         sn_shape_str(&lg->shape, s1, sizeof s1), sn_dtype_name(lb->dtype),
                         sn_shape_str(&lb->shape, s2, sizeof s2));
    return SN_OK;
}

static sn_status infer_per_example(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *lg = IN(g, node, 0), *lb = IN(g, node, 1);
    SN_TRY(check_logits_labels(sn_ops[node->op]->name, lg, lb));
    node->dtype = node->op == SN_OP_SPARSE_XENT ? lg->dtype : SN_F32;
    node->shape = (sn_shape){.ndim = 1, .dim = {lg->shape.dim[0]}};
    return SN_OK;
}

static sn_status infer_xent_grad(const sn_graph *g, sn_node_t *node) {
    SN_TRY(check_logits_labels("sparse_xent_grad", IN(g, node, 0), IN(g, node, 1)));
    node->dtype = IN(g, node, 0)->dtype;
    node->shape = IN(g, node, 0)->shape;
    return SN_OK;
}

sn_node sn_sparse_softmax_xent(sn_graph *g, sn_node logits, sn_node labels) {
    sn_node in[2] = {logits, labels};
    return sn_graph_add(g, SN_OP_SPARSE_XENT, 2, in, NULL);
}

sn_node sn_sparse_accuracy(sn_graph *g, sn_node logits, sn_node labels) {
    sn_node in[2] = {logits, labels};
    return sn_graph_add(g, SN_OP_SPARSE_ACCURACY, 2, in, NULL);
}

static void grad_xent(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node in[3] = {node.in[0], node.in[1], dy};
    dx[0] = sn_graph_add(g, SN_OP_SPARSE_XENT_GRAD, 3, in, NULL);
    dx[1] = SN_NONE;
}

static sn_status infer_argmax(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    if (x->shape.ndim < 1)
        return sn_errorf(SN_ERR_SHAPE, "argmax: needs at least one dimension, got a scalar");
    node->shape = x->shape;
    node->shape.ndim--;
    node->dtype = SN_I32;
    return SN_OK;
}

sn_node sn_argmax(sn_graph *g, sn_node x) { return sn_graph_add(g, SN_OP_ARGMAX, 1, &x, NULL); }

const sn_op_def sn_def_reduce_sum = {"reduce_sum", 1, infer_reduce, grad_reduce_sum, false};
const sn_op_def sn_def_reduce_mean = {"reduce_mean", 1, infer_reduce, grad_reduce_mean, false};
const sn_op_def sn_def_reduce_max = {"reduce_max", 1, infer_reduce, grad_reduce_max, false};
const sn_op_def sn_def_reduce_max_grad = {"reduce_max_grad", 3, infer_like_first, NULL, false};
const sn_op_def sn_def_softmax = {"softmax", 1, infer_softmax, grad_softmax, false};
const sn_op_def sn_def_log_softmax = {"log_softmax", 1, infer_softmax, grad_softmax, false};
const sn_op_def sn_def_softmax_grad = {"softmax_grad", 2, infer_like_first, NULL, false};
const sn_op_def sn_def_log_softmax_grad = {"log_softmax_grad", 2, infer_like_first, NULL, false};
const sn_op_def sn_def_sparse_xent = {"sparse_softmax_xent", 2, infer_per_example, grad_xent, false};
const sn_op_def sn_def_sparse_xent_grad = {"sparse_xent_grad", 3, infer_xent_grad, NULL, false};
const sn_op_def sn_def_sparse_accuracy = {"sparse_accuracy", 2, infer_per_example, NULL, false};
const sn_op_def sn_def_argmax = {"argmax", 1, infer_argmax, NULL, false};
