/* Reference kernels of the activation family (graph/op_activation.c): gelu, silu, elu,
 * leaky_relu, relu6 and their gradients (x, dy) -> dx. Any float dtype; computed in double
 * with libm's erfc, exp and expm1. NaN propagates everywhere, as in TensorFlow and PyTorch
 * (relu6(NaN) = NaN); the relu6 gradient is TensorFlow's dy * (0 < x < 6), so a NaN dy stays
 * NaN. */
#include "backend/ref/ref_common.h"

/* Phi(x), the standard normal CDF, as 0.5 erfc(-x / sqrt 2): no cancellation for x << 0, and
 * equal to Keras's 0.5 (1 + erf(x / sqrt 2)). */
static double ncdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752440); }

static double sigmoid(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

static double act_fwd(sn_op op, double x, double alpha) {
    switch (op) {
    case SN_OP_GELU: return x * ncdf(x);
    case SN_OP_SILU: return x * sigmoid(x);
    case SN_OP_ELU: return x > 0 ? x : alpha * expm1(x);
    case SN_OP_LEAKY_RELU: return x > 0 ? x : alpha * x;
    case SN_OP_RELU6: return x < 0 ? 0 : (x > 6 ? 6 : x);
    default: return NAN;
    }
}

static double act_bwd(sn_op op, double x, double dy, double alpha) {
    switch (op) {
    case SN_OP_GELU_GRAD:
        return dy * (ncdf(x) + x * exp(-0.5 * x * x) * 0.39894228040143267794);
    case SN_OP_SILU_GRAD: {
        double s = sigmoid(x);
        return dy * s * (1.0 + x * (1.0 - s));
    }
    case SN_OP_ELU_GRAD: return x < 0 ? dy * alpha * exp(x) : dy;
    case SN_OP_LEAKY_RELU_GRAD: return x > 0 ? dy : dy * alpha;
    case SN_OP_RELU6_GRAD: return dy * (x > 0 && x < 6 ? 1 : 0);
    default: return NAN;
    }
}

/* x [any] -> same shape */
static sn_status act_run(sn_kcall *c) {
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    double alpha = c->attr->act.alpha;
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int64_t i = 0; i < n; i++)
        sn_store(to, c->out, i, act_fwd(c->op, sn_load(tx, c->in[0], i), alpha));
    return SN_OK;
}

/* (x, dy), same shape -> dx */
static sn_status act_grad_run(sn_kcall *c) {
    sn_dtype tx = c->x[0].dtype, td = c->x[1].dtype, to = c->y.dtype;
    double alpha = c->attr->act.alpha;
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int64_t i = 0; i < n; i++)
        sn_store(to, c->out, i,
                 act_bwd(c->op, sn_load(tx, c->in[0], i), sn_load(td, c->in[1], i), alpha));
    return SN_OK;
}

static const sn_kernel k_act = REF_KERNEL(act_run), k_act_grad = REF_KERNEL(act_grad_run);

void sn_ref_register_activation(sn_kernel_table *t) {
    const sn_op fwd[] = {SN_OP_GELU, SN_OP_SILU, SN_OP_ELU, SN_OP_LEAKY_RELU, SN_OP_RELU6};
    const sn_op bwd[] = {SN_OP_GELU_GRAD, SN_OP_SILU_GRAD, SN_OP_ELU_GRAD,
                         SN_OP_LEAKY_RELU_GRAD, SN_OP_RELU6_GRAD};
    for (int i = 0; i < 5; i++) {
        t->k[fwd[i]] = &k_act;
        t->k[bwd[i]] = &k_act_grad;
    }
}
