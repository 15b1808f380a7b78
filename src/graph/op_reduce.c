/* Reductions and broadcasts — adjoint pairs, so one file: the gradient of a reduction is a
 * broadcast, and the gradient of a broadcast (sn_sum_to_shape, shared by every broadcasting
 * op's gradient) is a reduction. Shape inference, builders and gradient rules. */
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
    /* sn_graph_add rather than sn_mul: op_elementwise.c calls this file (sn_sum_to_shape), so
     * this file does not call back into it. */
    sn_node in[2] = {dy, sn_scalar(g, node.dtype, 1.0 / count)};
    sn_node scaled = sn_graph_add(g, SN_OP_MUL, 2, in, NULL);
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

/* ---- broadcasts ------------------------------------------------------------------------ */
static sn_status infer_broadcast_to(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    node->shape = node->attr.target.shape;
    sn_shape r;
    char s1[128], s2[128];
    if (!sn_broadcast_shape(&x->shape, &node->shape, &r) || !sn_shape_equal(&r, &node->shape))
        return sn_errorf(SN_ERR_SHAPE, "broadcast_to: %s does not broadcast to %s",
                         sn_shape_str(&x->shape, s1, sizeof s1),
                         sn_shape_str(&node->shape, s2, sizeof s2));
    node->dtype = x->dtype;
    return SN_OK;
}

sn_node sn_broadcast_to(sn_graph *g, sn_node x, const sn_shape *shape) {
    if (!g || g->status != SN_OK) return SN_NONE;
    if (x < 0 || x >= g->n_nodes)
        return sn_graph_fail(g, SN_ERR_INVALID, "broadcast_to: input is not a node of this graph");
    if (sn_shape_equal(&g->nodes[x].shape, shape)) return x;
    sn_attrs a = {.target = {.shape = *shape}};
    return sn_graph_add(g, SN_OP_BROADCAST_TO, 1, &x, &a);
}

sn_node sn_sum_to_shape(sn_graph *g, sn_node dy, const sn_shape *shape_in) {
    if (!g || g->status != SN_OK || dy == SN_NONE) return SN_NONE;
    /* Copies: `shape_in` may point into g->nodes, which the nodes added below can move. */
    const sn_shape target = *shape_in, ds = g->nodes[dy].shape, *shape = &target;
    if (sn_shape_equal(&ds, shape)) return dy;
    int axes[SN_MAX_DIMS], n = 0;
    for (int i = 0; i < ds.ndim; i++) {
        int j = shape->ndim - ds.ndim + i;
        int64_t t = j >= 0 ? shape->dim[j] : 1;
        if (t == 1 && ds.dim[i] != 1) axes[n++] = i;
    }
    sn_node r = n ? sn_reduce_sum(g, dy, n, axes, true) : dy;
    return sn_reshape(g, r, shape);
}

static void grad_broadcast_to(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_shape xs = g->nodes[g->nodes[n].in[0]].shape;
    dx[0] = sn_sum_to_shape(g, dy, &xs);
}

const sn_op_def sn_def_reduce_sum = {.name = "reduce_sum", .n_in = 1, .infer = infer_reduce,
    .grad = grad_reduce_sum};
const sn_op_def sn_def_reduce_mean = {.name = "reduce_mean", .n_in = 1, .infer = infer_reduce,
    .grad = grad_reduce_mean};
const sn_op_def sn_def_reduce_max = {.name = "reduce_max", .n_in = 1, .infer = infer_reduce,
    .grad = grad_reduce_max};
const sn_op_def sn_def_reduce_max_grad = {.name = "reduce_max_grad", .n_in = 3,
    .infer = infer_like_first};
const sn_op_def sn_def_broadcast_to = {.name = "broadcast_to", .n_in = 1,
    .infer = infer_broadcast_to, .grad = grad_broadcast_to};
