/* Keras's activations beyond relu/sigmoid/tanh: gelu (erf form, Keras's default
 * approximate=False), silu ("swish"), elu, leaky_relu, relu6. Shape inference and gradient
 * rules; each gradient is one pointwise op reading x and dy (its kernels are in
 * backend/ref/ref_activation.c and backend/cpu/cpu_activation.c).
 *
 * Kinks, as TensorFlow's gradient kernels (which Keras runs on its TensorFlow backend) define
 * them: leaky_relu takes the negative slope at x = 0 (LeakyReluGrad: x > 0 ? dy : alpha dy),
 * relu6 is 0 at both ends (Relu6Grad: 0 < x < 6), elu is 1 at 0 (EluGrad: y < 0 ? dy (y + 1)
 * : dy). */
#include <math.h>

#include "graph/graph_impl.h"

static sn_status infer_activation(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = &g->nodes[node->in[0]];
    if (!sn_dtype_is_float(x->dtype))
        return sn_errorf(SN_ERR_SHAPE, "%s: needs a float input, got %s", sn_ops[node->op]->name,
                         sn_dtype_name(x->dtype));
    node->dtype = x->dtype;
    node->shape = x->shape;
    return SN_OK;
}

/* (x, dy) -> dx: same dtype and shape. */
static sn_status infer_activation_grad(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = &g->nodes[node->in[0]], *dy = &g->nodes[node->in[1]];
    if (x->dtype != dy->dtype || !sn_shape_equal(&x->shape, &dy->shape)) {
        char s1[128], s2[128];
        return sn_errorf(SN_ERR_SHAPE, "%s: x is %s %s, dy %s %s; expected the same",
                         sn_ops[node->op]->name, sn_dtype_name(x->dtype),
                         sn_shape_str(&x->shape, s1, sizeof s1), sn_dtype_name(dy->dtype),
                         sn_shape_str(&dy->shape, s2, sizeof s2));
    }
    return infer_activation(g, node);
}

static sn_node act_node(sn_graph *g, sn_op op, sn_node x, double alpha, const char *what) {
    if (!isfinite(alpha))
        return sn_graph_fail(g, SN_ERR_INVALID, "%s: alpha %g is not finite", what, alpha);
    sn_attrs a = {.act = {.alpha = alpha}};
    return sn_graph_add(g, op, 1, &x, &a);
}

sn_node sn_gelu(sn_graph *g, sn_node x) { return act_node(g, SN_OP_GELU, x, 0, "gelu"); }
sn_node sn_silu(sn_graph *g, sn_node x) { return act_node(g, SN_OP_SILU, x, 0, "silu"); }
sn_node sn_elu(sn_graph *g, sn_node x, double alpha) {
    return act_node(g, SN_OP_ELU, x, alpha, "elu");
}
sn_node sn_leaky_relu(sn_graph *g, sn_node x, double alpha) {
    return act_node(g, SN_OP_LEAKY_RELU, x, alpha, "leaky_relu");
}
sn_node sn_relu6(sn_graph *g, sn_node x) { return act_node(g, SN_OP_RELU6, x, 0, "relu6"); }

/* The gradient op of each forward op sits five rows further (graph_impl.h keeps the two
 * groups in the same order). */
static void grad_activation(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t *node = &g->nodes[n];
    sn_attrs a = node->attr;
    sn_node in[2] = {node->in[0], dy};
    dx[0] = sn_graph_add(g, (sn_op)(node->op + (SN_OP_GELU_GRAD - SN_OP_GELU)), 2, in, &a);
}

_Static_assert(SN_OP_RELU6_GRAD - SN_OP_RELU6 == SN_OP_GELU_GRAD - SN_OP_GELU &&
                   SN_OP_LEAKY_RELU_GRAD - SN_OP_LEAKY_RELU == SN_OP_GELU_GRAD - SN_OP_GELU &&
                   SN_OP_ELU_GRAD - SN_OP_ELU == SN_OP_GELU_GRAD - SN_OP_GELU &&
                   SN_OP_SILU_GRAD - SN_OP_SILU == SN_OP_GELU_GRAD - SN_OP_GELU,
               "activation ops and their gradients must be listed in the same order");

const sn_op_def sn_def_gelu = {.name = "gelu", .n_in = 1, .infer = infer_activation,
                               .grad = grad_activation};
const sn_op_def sn_def_silu = {.name = "silu", .n_in = 1, .infer = infer_activation,
                               .grad = grad_activation};
const sn_op_def sn_def_elu = {.name = "elu", .n_in = 1, .infer = infer_activation,
                              .grad = grad_activation};
const sn_op_def sn_def_leaky_relu = {.name = "leaky_relu", .n_in = 1, .infer = infer_activation,
                                     .grad = grad_activation};
const sn_op_def sn_def_relu6 = {.name = "relu6", .n_in = 1, .infer = infer_activation,
                                .grad = grad_activation};
/* Second derivatives are not needed (no gradient of a gradient is taken), so the gradient ops
 * have no rule. */
const sn_op_def sn_def_gelu_grad = {.name = "gelu_grad", .n_in = 2,
                                    .infer = infer_activation_grad};
const sn_op_def sn_def_silu_grad = {.name = "silu_grad", .n_in = 2,
                                    .infer = infer_activation_grad};
const sn_op_def sn_def_elu_grad = {.name = "elu_grad", .n_in = 2, .infer = infer_activation_grad};
const sn_op_def sn_def_leaky_relu_grad = {.name = "leaky_relu_grad", .n_in = 2,
                                          .infer = infer_activation_grad};
const sn_op_def sn_def_relu6_grad = {.name = "relu6_grad", .n_in = 2,
                                     .infer = infer_activation_grad};
