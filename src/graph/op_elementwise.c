/* Elementwise ops: broadcasting arithmetic, bias-add, activations, cast, dropout. Shape
 * inference and gradient rules. The gradients of broadcasting ops reduce back to the input
 * shape with sn_sum_to_shape, which lives with the reductions (op_reduce.c). */
#include <string.h>

#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

static sn_status same_dtype(const char *op, const sn_node_t *a, const sn_node_t *b) {
    if (a->dtype != b->dtype)
        return sn_errorf(SN_ERR_SHAPE, "%s: dtypes differ: %s and %s (cast one first)", op,
                         sn_dtype_name(a->dtype), sn_dtype_name(b->dtype));
    return SN_OK;
}

sn_status sn_infer_binary(const sn_graph *g, sn_node_t *node);
sn_status sn_infer_binary(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *a = IN(g, node, 0), *b = IN(g, node, 1);
    const char *op = sn_ops[node->op]->name;
    char s1[128], s2[128];
    SN_TRY(same_dtype(op, a, b));
    if (!sn_broadcast_shape(&a->shape, &b->shape, &node->shape))
        return sn_errorf(SN_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", op,
                         sn_shape_str(&a->shape, s1, sizeof s1),
                         sn_shape_str(&b->shape, s2, sizeof s2));
    node->dtype = a->dtype;
    return SN_OK;
}

static sn_status infer_unary_float(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    if (!sn_dtype_is_float(x->dtype))
        return sn_errorf(SN_ERR_SHAPE, "%s: needs a float input, got %s",
                         sn_ops[node->op]->name, sn_dtype_name(x->dtype));
    node->dtype = x->dtype;
    node->shape = x->shape;
    return SN_OK;
}

/* (a, b) -> a's shape and dtype, b must match exactly: gradient helpers like relu_grad. */
static sn_status infer_like_first(const sn_graph *g, sn_node_t *node) {
    node->dtype = IN(g, node, 0)->dtype;
    node->shape = IN(g, node, 0)->shape;
    for (int i = 1; i < node->n_in; i++)
        if (IN(g, node, i)->dtype == node->dtype && !sn_shape_equal(&IN(g, node, i)->shape, &node->shape)) {
            char s1[128], s2[128];
            return sn_errorf(SN_ERR_SHAPE, "%s: shapes %s and %s differ", sn_ops[node->op]->name,
                             sn_shape_str(&node->shape, s1, sizeof s1),
                             sn_shape_str(&IN(g, node, i)->shape, s2, sizeof s2));
        }
    return SN_OK;
}

static sn_status infer_bias_add(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0), *b = IN(g, node, 1);
    char s1[128], s2[128];
    SN_TRY(same_dtype("bias_add", x, b));
    if (x->shape.ndim < 1 || b->shape.ndim != 1 ||
        b->shape.dim[0] != x->shape.dim[x->shape.ndim - 1])
        return sn_errorf(SN_ERR_SHAPE,
                         "bias_add: bias of shape %s does not match the last dimension of %s "
                         "(expected [%lld])", sn_shape_str(&b->shape, s1, sizeof s1),
                         sn_shape_str(&x->shape, s2, sizeof s2),
                         x->shape.ndim ? (long long)x->shape.dim[x->shape.ndim - 1] : 0LL);
    node->dtype = x->dtype;
    node->shape = x->shape;
    return SN_OK;
}

static sn_status infer_cast(const sn_graph *g, sn_node_t *node) {
    if ((unsigned)node->attr.cast.to >= SN_DTYPE_COUNT)
        return sn_errorf(SN_ERR_INVALID, "cast: target dtype %d is not a sinter dtype",
                         (int)node->attr.cast.to);
    node->dtype = node->attr.cast.to;
    node->shape = IN(g, node, 0)->shape;
    return SN_OK;
}

/* ---- builders -------------------------------------------------------------------------- */
static sn_node binary(sn_graph *g, sn_op op, sn_node a, sn_node b) {
    sn_node in[2] = {a, b};
    return sn_graph_add(g, op, 2, in, NULL);
}
static sn_node unary(sn_graph *g, sn_op op, sn_node x) { return sn_graph_add(g, op, 1, &x, NULL); }

sn_node sn_add(sn_graph *g, sn_node a, sn_node b) { return binary(g, SN_OP_ADD, a, b); }
sn_node sn_sub(sn_graph *g, sn_node a, sn_node b) { return binary(g, SN_OP_SUB, a, b); }
sn_node sn_mul(sn_graph *g, sn_node a, sn_node b) { return binary(g, SN_OP_MUL, a, b); }
sn_node sn_div(sn_graph *g, sn_node a, sn_node b) { return binary(g, SN_OP_DIV, a, b); }
sn_node sn_bias_add(sn_graph *g, sn_node x, sn_node b) { return binary(g, SN_OP_BIAS_ADD, x, b); }
/* relu is idempotent (NaN too: whatever relu makes of it, it makes of that again), so relu
 * of a relu's output is that output, bit for bit, and every gradient keeps its values: the
 * outer relu's gradient masks by the same y > 0 as the inner one's, which the gradient
 * reaching the inner output passes through anyway (a masked zero may change sign). Keras's small Xception applies Activation("relu") to a ReLU's output
 * in its first block: a pass over the activation forward and one backward (~3.5 ms of its
 * mixed-bf16 step on Zen 4). */
sn_node sn_relu(sn_graph *g, sn_node x) {
    if (g && x >= 0 && x < g->n_nodes && g->nodes[x].op == SN_OP_RELU) return x;
    return unary(g, SN_OP_RELU, x);
}
sn_node sn_sigmoid(sn_graph *g, sn_node x) { return unary(g, SN_OP_SIGMOID, x); }
sn_node sn_tanh(sn_graph *g, sn_node x) { return unary(g, SN_OP_TANH, x); }
sn_node sn_exp(sn_graph *g, sn_node x) { return unary(g, SN_OP_EXP, x); }
sn_node sn_log(sn_graph *g, sn_node x) { return unary(g, SN_OP_LOG, x); }
sn_node sn_sqrt(sn_graph *g, sn_node x) { return unary(g, SN_OP_SQRT, x); }
sn_node sn_neg(sn_graph *g, sn_node x) { return unary(g, SN_OP_NEG, x); }

sn_node sn_cast(sn_graph *g, sn_node x, sn_dtype dtype) {
    sn_attrs a = {.cast = {.to = dtype}};
    return sn_graph_add(g, SN_OP_CAST, 1, &x, &a);
}

sn_node sn_dropout(sn_graph *g, sn_node x, double rate, uint64_t seed) {
    if (g && g->status == SN_OK && !(rate >= 0.0 && rate < 1.0))
        return sn_graph_fail(g, SN_ERR_INVALID, "dropout: rate %g is outside [0, 1)", rate);
    if (rate == 0.0) return x;
    sn_attrs a = {.dropout = {.rate = rate, .seed = seed}};
    sn_node id = sn_graph_add(g, SN_OP_DROPOUT, 1, &x, &a);
    if (id != SN_NONE) g->nodes[id].attr.dropout.mask_node = id; /* keys the mask */
    return id;
}

/* ---- gradient rules -------------------------------------------------------------------- */
static sn_node scalar_like(sn_graph *g, sn_node like, double v) {
    return sn_scalar(g, g->nodes[like].dtype, v);
}

/* Gradient rules add nodes, which can move g->nodes: they copy what they need first (node,
 * shapes) and never hold a pointer into the array across a builder call. */
static void input_shapes(const sn_graph *g, sn_node n, sn_node_t *node, sn_shape *a, sn_shape *b) {
    *node = g->nodes[n];
    *a = g->nodes[node->in[0]].shape;
    *b = g->nodes[node->in[1]].shape;
}

static void grad_add(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node;
    sn_shape as, bs;
    input_shapes(g, n, &node, &as, &bs);
    dx[0] = sn_sum_to_shape(g, dy, &as);
    dx[1] = sn_sum_to_shape(g, dy, &bs);
}

static void grad_sub(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node;
    sn_shape as, bs;
    input_shapes(g, n, &node, &as, &bs);
    dx[0] = sn_sum_to_shape(g, dy, &as);
    dx[1] = sn_sum_to_shape(g, sn_neg(g, dy), &bs);
}

static void grad_mul(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node;
    sn_shape as, bs;
    input_shapes(g, n, &node, &as, &bs);
    dx[0] = sn_sum_to_shape(g, sn_mul(g, dy, node.in[1]), &as);
    dx[1] = sn_sum_to_shape(g, sn_mul(g, dy, node.in[0]), &bs);
}

static void grad_div(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    /* y = a / b: da = dy / b, db = -dy * y / b */
    sn_node_t node;
    sn_shape as, bs;
    input_shapes(g, n, &node, &as, &bs);
    sn_node da = sn_div(g, dy, node.in[1]);
    dx[0] = sn_sum_to_shape(g, da, &as);
    dx[1] = sn_sum_to_shape(g, sn_neg(g, sn_mul(g, da, n)), &bs);
}

static void grad_bias_add(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node;
    sn_shape xs, bs;
    input_shapes(g, n, &node, &xs, &bs);
    dx[0] = dy;
    dx[1] = sn_sum_to_shape(g, dy, &bs);
}

static void grad_relu(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    /* From the output: y > 0 exactly where x > 0, and reading y instead of x leaves x with a
     * single reader, so the planner can fuse the bias_add that made x with this relu. */
    sn_node in[2] = {n, dy};
    dx[0] = sn_graph_add(g, SN_OP_RELU_GRAD, 2, in, NULL);
}

static void grad_sigmoid(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node in[2] = {n, dy};
    dx[0] = sn_graph_add(g, SN_OP_SIGMOID_GRAD, 2, in, NULL);
}

static void grad_tanh(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node in[2] = {n, dy};
    dx[0] = sn_graph_add(g, SN_OP_TANH_GRAD, 2, in, NULL);
}

static void grad_exp(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    dx[0] = sn_mul(g, dy, n);
}

static void grad_log(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    dx[0] = sn_div(g, dy, g->nodes[n].in[0]);
}

static void grad_sqrt(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    dx[0] = sn_div(g, dy, sn_mul(g, scalar_like(g, n, 2.0), n));
}

static void grad_neg(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) { dx[0] = sn_neg(g, dy); }

static void grad_cast(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_dtype from = g->nodes[g->nodes[n].in[0]].dtype;
    dx[0] = sn_dtype_is_float(from) ? sn_cast(g, dy, from) : SN_NONE;
}

static void grad_dropout(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_attrs a = g->nodes[n].attr; /* same seed and mask_node: the same mask */
    dx[0] = sn_graph_add(g, SN_OP_DROPOUT_GRAD, 1, &dy, &a);
}

/* ---- registry rows (referenced by ops.c) ----------------------------------------------- */
const sn_op_def sn_def_add = {.name = "add", .n_in = 2, .infer = sn_infer_binary, .grad = grad_add};
const sn_op_def sn_def_sub = {.name = "sub", .n_in = 2, .infer = sn_infer_binary, .grad = grad_sub};
const sn_op_def sn_def_mul = {.name = "mul", .n_in = 2, .infer = sn_infer_binary, .grad = grad_mul};
const sn_op_def sn_def_div = {.name = "div", .n_in = 2, .infer = sn_infer_binary, .grad = grad_div};
const sn_op_def sn_def_bias_add = {.name = "bias_add", .n_in = 2, .infer = infer_bias_add,
    .grad = grad_bias_add};
const sn_op_def sn_def_relu = {.name = "relu", .n_in = 1, .infer = infer_unary_float,
    .grad = grad_relu};
const sn_op_def sn_def_sigmoid = {.name = "sigmoid", .n_in = 1, .infer = infer_unary_float,
    .grad = grad_sigmoid};
const sn_op_def sn_def_tanh = {.name = "tanh", .n_in = 1, .infer = infer_unary_float,
    .grad = grad_tanh};
const sn_op_def sn_def_exp = {.name = "exp", .n_in = 1, .infer = infer_unary_float,
    .grad = grad_exp};
const sn_op_def sn_def_log = {.name = "log", .n_in = 1, .infer = infer_unary_float,
    .grad = grad_log};
const sn_op_def sn_def_sqrt = {.name = "sqrt", .n_in = 1, .infer = infer_unary_float,
    .grad = grad_sqrt};
const sn_op_def sn_def_neg = {.name = "neg", .n_in = 1, .infer = infer_unary_float,
    .grad = grad_neg};
const sn_op_def sn_def_cast = {.name = "cast", .n_in = 1, .infer = infer_cast, .grad = grad_cast};
const sn_op_def sn_def_dropout = {.name = "dropout", .n_in = 1, .infer = infer_unary_float,
    .grad = grad_dropout};
const sn_op_def sn_def_dropout_grad = {.name = "dropout_grad", .n_in = 1,
    .infer = infer_unary_float};
const sn_op_def sn_def_relu_grad = {.name = "relu_grad", .n_in = 2, .infer = infer_like_first};
const sn_op_def sn_def_sigmoid_grad = {.name = "sigmoid_grad", .n_in = 2,
    .infer = infer_like_first};
const sn_op_def sn_def_tanh_grad = {.name = "tanh_grad", .n_in = 2, .infer = infer_like_first};
