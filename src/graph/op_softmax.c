/* The softmax family, the sparse cross-entropy loss and the metrics on logits (accuracy,
 * argmax): shape inference, builders and gradient rules. */
#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

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

const sn_op_def sn_def_softmax = {.name = "softmax", .n_in = 1, .infer = infer_softmax,
    .grad = grad_softmax};
const sn_op_def sn_def_log_softmax = {.name = "log_softmax", .n_in = 1, .infer = infer_softmax,
    .grad = grad_softmax};
const sn_op_def sn_def_softmax_grad = {.name = "softmax_grad", .n_in = 2,
    .infer = infer_like_first};
const sn_op_def sn_def_log_softmax_grad = {.name = "log_softmax_grad", .n_in = 2,
    .infer = infer_like_first};
const sn_op_def sn_def_sparse_xent = {.name = "sparse_softmax_xent", .n_in = 2,
    .infer = infer_per_example, .grad = grad_xent};
const sn_op_def sn_def_sparse_xent_grad = {.name = "sparse_xent_grad", .n_in = 3,
    .infer = infer_xent_grad};
const sn_op_def sn_def_sparse_accuracy = {.name = "sparse_accuracy", .n_in = 2,
    .infer = infer_per_example};
const sn_op_def sn_def_argmax = {.name = "argmax", .n_in = 1, .infer = infer_argmax};
