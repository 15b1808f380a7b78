/* Reference elementwise kernels: binary ops with NumPy broadcasting, bias add, unary maths,
 * cast, the pointwise gradient helpers and dropout. Any float dtype; computed in double.
 * NaN and Inf propagate as in TensorFlow: relu(NaN) = NaN, relu_grad = dy * (x > 0). */
#include "backend/ref/ref_common.h"

/* ---- binary ops with broadcasting ------------------------------------------------------- */

typedef enum { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV } bin_kind;

static double bin_apply(bin_kind k, double a, double b) {
    switch (k) {
    case BIN_ADD: return a + b;
    case BIN_SUB: return a - b;
    case BIN_MUL: return a * b;
    case BIN_DIV: return a / b;
    }
    return 0;
}

/* a, b: any shapes that broadcast to out's shape (NumPy rules) -> out */
static sn_status binary_run(sn_kcall *c, bin_kind k) {
    const sn_shape *os = &c->y.shape;
    sn_dtype ta = c->x[0].dtype, tb = c->x[1].dtype, to = c->y.dtype;
    int64_t n = sn_shape_numel(os);
    if (sn_shape_equal(&c->x[0].shape, os) && sn_shape_equal(&c->x[1].shape, os)) {
        for (int64_t i = 0; i < n; i++)
            sn_store(to, c->out, i, bin_apply(k, sn_load(ta, c->in[0], i), sn_load(tb, c->in[1], i)));
        return SN_OK;
    }
    int64_t sa[SN_MAX_DIMS], sb[SN_MAX_DIMS];
    ref_bcast_strides(&c->x[0].shape, os, sa);
    ref_bcast_strides(&c->x[1].shape, os, sb);
    ref_iter it;
    ref_iter_init(&it, os);
    int ka = ref_iter_track(&it, sa, 0), kb = ref_iter_track(&it, sb, 0);
    for (int64_t i = 0; i < n; i++, ref_iter_next(&it))
        sn_store(to, c->out, i,
                 bin_apply(k, sn_load(ta, c->in[0], it.off[ka]), sn_load(tb, c->in[1], it.off[kb])));
    return SN_OK;
}

static sn_status add_run(sn_kcall *c) { return binary_run(c, BIN_ADD); }
static sn_status sub_run(sn_kcall *c) { return binary_run(c, BIN_SUB); }
static sn_status mul_run(sn_kcall *c) { return binary_run(c, BIN_MUL); }
static sn_status div_run(sn_kcall *c) { return binary_run(c, BIN_DIV); }

/* x [..., C], b [C] -> [..., C] */
static sn_status bias_add_run(sn_kcall *c) {
    const sn_shape *xs = &c->x[0].shape;
    int64_t ch = xs->ndim > 0 ? xs->dim[xs->ndim - 1] : 1;
    int64_t rows = ch > 0 ? sn_shape_numel(xs) / ch : 0;
    sn_dtype tx = c->x[0].dtype, tb = c->x[1].dtype, to = c->y.dtype;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < ch; j++) {
            int64_t i = r * ch + j;
            double v = sn_load(tx, c->in[0], i) + sn_load(tb, c->in[1], j);
            if (c->relu) v = v < 0 ? 0 : v; /* a relu the planner fused into this op */
            sn_store(to, c->out, i, v);
        }
    return SN_OK;
}

/* ---- unary ------------------------------------------------------------------------------ */

/* Stable for large |x|: never evaluates exp of a large positive number. */
static double sigmoid(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

typedef enum { UN_RELU, UN_SIGMOID, UN_TANH, UN_EXP, UN_LOG, UN_SQRT, UN_NEG } un_kind;

/* x [any] -> same shape */
static sn_status unary_run(sn_kcall *c, un_kind k) {
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int64_t i = 0; i < n; i++) {
        double x = sn_load(tx, c->in[0], i), y = 0;
        switch (k) {
        case UN_RELU: y = x < 0 ? 0 : x; break; /* NaN goes through */
        case UN_SIGMOID: y = sigmoid(x); break;
        case UN_TANH: y = tanh(x); break;
        case UN_EXP: y = exp(x); break;
        case UN_LOG: y = log(x); break;
        case UN_SQRT: y = sqrt(x); break;
        case UN_NEG: y = -x; break;
        }
        sn_store(to, c->out, i, y);
    }
    return SN_OK;
}

static sn_status relu_run(sn_kcall *c) { return unary_run(c, UN_RELU); }
static sn_status sigmoid_run(sn_kcall *c) { return unary_run(c, UN_SIGMOID); }
static sn_status tanh_run(sn_kcall *c) { return unary_run(c, UN_TANH); }
static sn_status exp_run(sn_kcall *c) { return unary_run(c, UN_EXP); }
static sn_status log_run(sn_kcall *c) { return unary_run(c, UN_LOG); }
static sn_status sqrt_run(sn_kcall *c) { return unary_run(c, UN_SQRT); }
static sn_status neg_run(sn_kcall *c) { return unary_run(c, UN_NEG); }

/* x [any] -> same shape in the node's dtype (bf16 rounds to nearest even through f32) */
static sn_status cast_run(sn_kcall *c) {
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int64_t i = 0; i < n; i++) sn_store(to, c->out, i, sn_load(tx, c->in[0], i));
    return SN_OK;
}

/* ---- pointwise gradients: (x or y, dy) -> dx, all the same shape ------------------------ */

typedef enum { G_RELU, G_SIGMOID, G_TANH } grad_kind;

static sn_status pointwise_grad_run(sn_kcall *c, grad_kind k) {
    sn_dtype t0 = c->x[0].dtype, t1 = c->x[1].dtype, to = c->y.dtype;
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int64_t i = 0; i < n; i++) {
        double v = sn_load(t0, c->in[0], i), dy = sn_load(t1, c->in[1], i), dx = 0;
        switch (k) {
        case G_RELU: dx = dy * (v > 0 ? 1 : 0); break;     /* v = x; TF's: NaN dy stays */
        case G_SIGMOID: dx = dy * v * (1.0 - v); break;     /* v = sigmoid(x) */
        case G_TANH: dx = dy * (1.0 - v * v); break;        /* v = tanh(x) */
        }
        sn_store(to, c->out, i, dx);
    }
    return SN_OK;
}

static sn_status relu_grad_run(sn_kcall *c) { return pointwise_grad_run(c, G_RELU); }
static sn_status sigmoid_grad_run(sn_kcall *c) { return pointwise_grad_run(c, G_SIGMOID); }
static sn_status tanh_grad_run(sn_kcall *c) { return pointwise_grad_run(c, G_TANH); }

/* ---- dropout ---------------------------------------------------------------------------- */

/* x [any] -> same shape. DROPOUT_GRAD carries the forward node's attributes (its mask_node is
 * the forward node), so the same function applied to dy gives the gradient. */
static sn_status dropout_run(sn_kcall *c) {
    double rate = c->attr->dropout.rate;
    uint64_t seed = c->attr->dropout.seed;
    int32_t mask = c->attr->dropout.mask_node;
    /* rate >= 1 drops everything; avoid the division by zero. */
    double scale = rate < 1.0 ? 1.0 / (1.0 - rate) : 0.0;
    sn_dtype tx = c->x[0].dtype, to = c->y.dtype;
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int64_t i = 0; i < n; i++) {
        bool keep = sn_dropout_keep(seed, mask, c->step, i, rate);
        sn_store(to, c->out, i, keep ? sn_load(tx, c->in[0], i) * scale : 0.0);
    }
    return SN_OK;
}

static const sn_kernel k_add = REF_KERNEL(add_run), k_sub = REF_KERNEL(sub_run),
                       k_mul = REF_KERNEL(mul_run), k_div = REF_KERNEL(div_run),
                       k_bias_add = REF_KERNEL(bias_add_run), k_relu = REF_KERNEL(relu_run),
                       k_sigmoid = REF_KERNEL(sigmoid_run), k_tanh = REF_KERNEL(tanh_run),
                       k_exp = REF_KERNEL(exp_run), k_log = REF_KERNEL(log_run),
                       k_sqrt = REF_KERNEL(sqrt_run), k_neg = REF_KERNEL(neg_run),
                       k_cast = REF_KERNEL(cast_run), k_relu_grad = REF_KERNEL(relu_grad_run),
                       k_sigmoid_grad = REF_KERNEL(sigmoid_grad_run),
                       k_tanh_grad = REF_KERNEL(tanh_grad_run), k_dropout = REF_KERNEL(dropout_run);

void sn_ref_register_elementwise(sn_kernel_table *t) {
    t->k[SN_OP_ADD] = &k_add;
    t->k[SN_OP_SUB] = &k_sub;
    t->k[SN_OP_MUL] = &k_mul;
    t->k[SN_OP_DIV] = &k_div;
    t->k[SN_OP_BIAS_ADD] = &k_bias_add;
    t->k[SN_OP_RELU] = &k_relu;
    t->k[SN_OP_SIGMOID] = &k_sigmoid;
    t->k[SN_OP_TANH] = &k_tanh;
    t->k[SN_OP_EXP] = &k_exp;
    t->k[SN_OP_LOG] = &k_log;
    t->k[SN_OP_SQRT] = &k_sqrt;
    t->k[SN_OP_NEG] = &k_neg;
    t->k[SN_OP_CAST] = &k_cast;
    t->k[SN_OP_RELU_GRAD] = &k_relu_grad;
    t->k[SN_OP_SIGMOID_GRAD] = &k_sigmoid_grad;
    t->k[SN_OP_TANH_GRAD] = &k_tanh_grad;
    t->k[SN_OP_DROPOUT] = &k_dropout;
    t->k[SN_OP_DROPOUT_GRAD] = &k_dropout;
}
