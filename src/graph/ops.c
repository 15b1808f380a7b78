/* The op registry: one row per op (name, inputs, shape inference, gradient rule), defined in
 * the op family files (op_*.c) and gathered here. tests/test_graph.c checks every row exists. */
#include "graph/graph_impl.h"

/* Leaves have no inference (the builder sets dtype and shape) and no gradient rule. */
const sn_op_def sn_def_input = {.name = "input", .n_in = 0};
const sn_op_def sn_def_variable = {.name = "variable", .n_in = 0};
const sn_op_def sn_def_const = {.name = "const", .n_in = 0};

extern const sn_op_def sn_def_input;
extern const sn_op_def sn_def_variable;
extern const sn_op_def sn_def_const;
extern const sn_op_def sn_def_matmul;
extern const sn_op_def sn_def_add;
extern const sn_op_def sn_def_sub;
extern const sn_op_def sn_def_mul;
extern const sn_op_def sn_def_div;
extern const sn_op_def sn_def_bias_add;
extern const sn_op_def sn_def_relu;
extern const sn_op_def sn_def_sigmoid;
extern const sn_op_def sn_def_tanh;
extern const sn_op_def sn_def_exp;
extern const sn_op_def sn_def_log;
extern const sn_op_def sn_def_sqrt;
extern const sn_op_def sn_def_neg;
extern const sn_op_def sn_def_cast;
extern const sn_op_def sn_def_softmax;
extern const sn_op_def sn_def_log_softmax;
extern const sn_op_def sn_def_sparse_xent;
extern const sn_op_def sn_def_sparse_accuracy;
extern const sn_op_def sn_def_argmax;
extern const sn_op_def sn_def_reduce_sum;
extern const sn_op_def sn_def_reduce_mean;
extern const sn_op_def sn_def_reduce_max;
extern const sn_op_def sn_def_broadcast_to;
extern const sn_op_def sn_def_reshape;
extern const sn_op_def sn_def_transpose;
extern const sn_op_def sn_def_slice;
extern const sn_op_def sn_def_concat;
extern const sn_op_def sn_def_gather;
extern const sn_op_def sn_def_conv2d;
extern const sn_op_def sn_def_max_pool2d;
extern const sn_op_def sn_def_avg_pool2d;
extern const sn_op_def sn_def_dropout;
extern const sn_op_def sn_def_relu_grad;
extern const sn_op_def sn_def_sigmoid_grad;
extern const sn_op_def sn_def_tanh_grad;
extern const sn_op_def sn_def_softmax_grad;
extern const sn_op_def sn_def_log_softmax_grad;
extern const sn_op_def sn_def_sparse_xent_grad;
extern const sn_op_def sn_def_reduce_max_grad;
extern const sn_op_def sn_def_slice_grad;
extern const sn_op_def sn_def_gather_grad;
extern const sn_op_def sn_def_conv2d_bwd_data;
extern const sn_op_def sn_def_conv2d_bwd_filter;
extern const sn_op_def sn_def_max_pool2d_grad;
extern const sn_op_def sn_def_avg_pool2d_grad;
extern const sn_op_def sn_def_dropout_grad;
extern const sn_op_def sn_def_assign;
extern const sn_op_def sn_def_assign_add;
extern const sn_op_def sn_def_gelu, sn_def_silu, sn_def_elu, sn_def_leaky_relu, sn_def_relu6,
    sn_def_gelu_grad, sn_def_silu_grad, sn_def_elu_grad, sn_def_leaky_relu_grad,
    sn_def_relu6_grad;
extern const sn_op_def sn_def_apply_optimizer;
extern const sn_op_def sn_def_all_reduce;
extern const sn_op_def sn_def_lstm;
extern const sn_op_def sn_def_lstm_grad;
extern const sn_op_def sn_def_gru;
extern const sn_op_def sn_def_gru_grad;
extern const sn_op_def sn_def_gru_rb;
extern const sn_op_def sn_def_gru_rb_grad;
extern const sn_op_def sn_def_lstm_layer;
extern const sn_op_def sn_def_lstm_layer_grad;
extern const sn_op_def sn_def_gru_layer;
extern const sn_op_def sn_def_gru_layer_grad;
extern const sn_op_def sn_def_layer_norm, sn_def_layer_norm_grad, sn_def_gelu_tanh,
    sn_def_gelu_tanh_grad, sn_def_attention, sn_def_attention_grad, sn_def_attention_cached;
extern const sn_op_def sn_def_depthwise_conv2d, sn_def_depthwise_bwd_data,
    sn_def_depthwise_bwd_filter;
extern const sn_op_def sn_def_lstm_dense_step;
extern const sn_op_def sn_def_bn_stats, sn_def_bn_train, sn_def_bn_grad_params, sn_def_bn_grad_x;

const sn_op_def *const sn_ops[SN_OP_COUNT] = {
    [SN_OP_INPUT] = &sn_def_input,
    [SN_OP_VARIABLE] = &sn_def_variable,
    [SN_OP_CONST] = &sn_def_const,
    [SN_OP_MATMUL] = &sn_def_matmul,
    [SN_OP_ADD] = &sn_def_add,
    [SN_OP_SUB] = &sn_def_sub,
    [SN_OP_MUL] = &sn_def_mul,
    [SN_OP_DIV] = &sn_def_div,
    [SN_OP_BIAS_ADD] = &sn_def_bias_add,
    [SN_OP_RELU] = &sn_def_relu,
    [SN_OP_SIGMOID] = &sn_def_sigmoid,
    [SN_OP_TANH] = &sn_def_tanh,
    [SN_OP_EXP] = &sn_def_exp,
    [SN_OP_LOG] = &sn_def_log,
    [SN_OP_SQRT] = &sn_def_sqrt,
    [SN_OP_NEG] = &sn_def_neg,
    [SN_OP_CAST] = &sn_def_cast,
    [SN_OP_SOFTMAX] = &sn_def_softmax,
    [SN_OP_LOG_SOFTMAX] = &sn_def_log_softmax,
    [SN_OP_SPARSE_XENT] = &sn_def_sparse_xent,
    [SN_OP_SPARSE_ACCURACY] = &sn_def_sparse_accuracy,
    [SN_OP_ARGMAX] = &sn_def_argmax,
    [SN_OP_REDUCE_SUM] = &sn_def_reduce_sum,
    [SN_OP_REDUCE_MEAN] = &sn_def_reduce_mean,
    [SN_OP_REDUCE_MAX] = &sn_def_reduce_max,
    [SN_OP_BROADCAST_TO] = &sn_def_broadcast_to,
    [SN_OP_RESHAPE] = &sn_def_reshape,
    [SN_OP_TRANSPOSE] = &sn_def_transpose,
    [SN_OP_SLICE] = &sn_def_slice,
    [SN_OP_CONCAT] = &sn_def_concat,
    [SN_OP_GATHER] = &sn_def_gather,
    [SN_OP_CONV2D] = &sn_def_conv2d,
    [SN_OP_MAX_POOL2D] = &sn_def_max_pool2d,
    [SN_OP_AVG_POOL2D] = &sn_def_avg_pool2d,
    [SN_OP_DROPOUT] = &sn_def_dropout,
    [SN_OP_RELU_GRAD] = &sn_def_relu_grad,
    [SN_OP_SIGMOID_GRAD] = &sn_def_sigmoid_grad,
    [SN_OP_TANH_GRAD] = &sn_def_tanh_grad,
    [SN_OP_SOFTMAX_GRAD] = &sn_def_softmax_grad,
    [SN_OP_LOG_SOFTMAX_GRAD] = &sn_def_log_softmax_grad,
    [SN_OP_SPARSE_XENT_GRAD] = &sn_def_sparse_xent_grad,
    [SN_OP_REDUCE_MAX_GRAD] = &sn_def_reduce_max_grad,
    [SN_OP_SLICE_GRAD] = &sn_def_slice_grad,
    [SN_OP_GATHER_GRAD] = &sn_def_gather_grad,
    [SN_OP_CONV2D_BWD_DATA] = &sn_def_conv2d_bwd_data,
    [SN_OP_CONV2D_BWD_FILTER] = &sn_def_conv2d_bwd_filter,
    [SN_OP_MAX_POOL2D_GRAD] = &sn_def_max_pool2d_grad,
    [SN_OP_AVG_POOL2D_GRAD] = &sn_def_avg_pool2d_grad,
    [SN_OP_DROPOUT_GRAD] = &sn_def_dropout_grad,
    [SN_OP_GELU] = &sn_def_gelu,
    [SN_OP_SILU] = &sn_def_silu,
    [SN_OP_ELU] = &sn_def_elu,
    [SN_OP_LEAKY_RELU] = &sn_def_leaky_relu,
    [SN_OP_RELU6] = &sn_def_relu6,
    [SN_OP_GELU_GRAD] = &sn_def_gelu_grad,
    [SN_OP_SILU_GRAD] = &sn_def_silu_grad,
    [SN_OP_ELU_GRAD] = &sn_def_elu_grad,
    [SN_OP_LEAKY_RELU_GRAD] = &sn_def_leaky_relu_grad,
    [SN_OP_RELU6_GRAD] = &sn_def_relu6_grad,
    [SN_OP_ASSIGN] = &sn_def_assign,
    [SN_OP_ASSIGN_ADD] = &sn_def_assign_add,
    [SN_OP_APPLY_OPTIMIZER] = &sn_def_apply_optimizer,
    [SN_OP_ALL_REDUCE] = &sn_def_all_reduce,
    [SN_OP_LSTM] = &sn_def_lstm,
    [SN_OP_LSTM_GRAD] = &sn_def_lstm_grad,
    [SN_OP_GRU] = &sn_def_gru,
    [SN_OP_GRU_GRAD] = &sn_def_gru_grad,
    [SN_OP_GRU_RB] = &sn_def_gru_rb,
    [SN_OP_GRU_RB_GRAD] = &sn_def_gru_rb_grad,
    [SN_OP_LSTM_LAYER] = &sn_def_lstm_layer,
    [SN_OP_LSTM_LAYER_GRAD] = &sn_def_lstm_layer_grad,
    [SN_OP_GRU_LAYER] = &sn_def_gru_layer,
    [SN_OP_GRU_LAYER_GRAD] = &sn_def_gru_layer_grad,
    [SN_OP_LAYER_NORM] = &sn_def_layer_norm,
    [SN_OP_LAYER_NORM_GRAD] = &sn_def_layer_norm_grad,
    [SN_OP_GELU_TANH] = &sn_def_gelu_tanh,
    [SN_OP_GELU_TANH_GRAD] = &sn_def_gelu_tanh_grad,
    [SN_OP_ATTENTION] = &sn_def_attention,
    [SN_OP_ATTENTION_GRAD] = &sn_def_attention_grad,
    [SN_OP_ATTENTION_CACHED] = &sn_def_attention_cached,
    [SN_OP_DEPTHWISE_CONV2D] = &sn_def_depthwise_conv2d,
    [SN_OP_DEPTHWISE_BWD_DATA] = &sn_def_depthwise_bwd_data,
    [SN_OP_DEPTHWISE_BWD_FILTER] = &sn_def_depthwise_bwd_filter,
    [SN_OP_LSTM_DENSE_STEP] = &sn_def_lstm_dense_step,
    [SN_OP_BN_STATS] = &sn_def_bn_stats,
    [SN_OP_BN_TRAIN] = &sn_def_bn_train,
    [SN_OP_BN_GRAD_PARAMS] = &sn_def_bn_grad_params,
    [SN_OP_BN_GRAD_X] = &sn_def_bn_grad_x,
};

double sn_node_flops(const sn_graph *g, sn_node n) {
    const sn_node_t *nd = &g->nodes[n];
    double out = (double)sn_shape_numel(&nd->shape);
    switch (nd->op) {
    case SN_OP_MATMUL: {
        const sn_shape *a = &g->nodes[nd->in[0]].shape;
        double k = (double)(nd->attr.matmul.ta ? a->dim[a->ndim - 2] : a->dim[a->ndim - 1]);
        return 2.0 * out * k;
    }
    case SN_OP_CONV2D: {
        const sn_shape *w = &nd->attr.conv.w_shape;
        return 2.0 * out * (double)(w->dim[0] * w->dim[1] * w->dim[2]);
    }
    case SN_OP_DEPTHWISE_CONV2D:
    case SN_OP_DEPTHWISE_BWD_DATA:
    case SN_OP_DEPTHWISE_BWD_FILTER: {
        /* KH * KW multiply-adds per output element of the forward op */
        const sn_shape *w = &nd->attr.conv.w_shape, *x = &nd->attr.conv.x_shape;
        double ys = (double)(x->dim[0] * w->dim[2] * w->dim[3]);
        const sn_node_t *y = nd->op == SN_OP_DEPTHWISE_CONV2D ? nd
                             : &g->nodes[nd->in[nd->op == SN_OP_DEPTHWISE_BWD_DATA ? 0 : 1]];
        ys *= (double)(y->shape.dim[1] * y->shape.dim[2]);
        return 2.0 * ys * (double)(w->dim[0] * w->dim[1]);
    }
    case SN_OP_CONV2D_BWD_DATA:
    case SN_OP_CONV2D_BWD_FILTER: {
        /* the same multiply-adds as the forward convolution */
        const sn_shape *w = &nd->attr.conv.w_shape, *x = &nd->attr.conv.x_shape;
        const sn_node_t *dy = &g->nodes[nd->in[nd->op == SN_OP_CONV2D_BWD_DATA ? 0 : 1]];
        (void)x;
        return 2.0 * (double)sn_shape_numel(&dy->shape) * (double)(w->dim[0] * w->dim[1] * w->dim[2]);
    }
    case SN_OP_LSTM:
    case SN_OP_LSTM_GRAD:
    case SN_OP_GRU:
    case SN_OP_GRU_GRAD:
    case SN_OP_GRU_RB:
    case SN_OP_GRU_RB_GRAD: {
        /* the recurrent products h_{t-1} @ R (backward: dgates @ R^T), B * T * U * G
         * multiply-adds; the gates' elementwise work is not counted (as conv's bias isn't) */
        const sn_shape *r = &g->nodes[nd->in[nd->op == SN_OP_LSTM || nd->op == SN_OP_GRU ||
                                                    nd->op == SN_OP_GRU_RB ? 1 : 0]].shape;
        return 2.0 * (double)(nd->shape.dim[0] * nd->shape.dim[1]) * (double)(r->dim[0] * r->dim[1]);
    }
    case SN_OP_LSTM_LAYER:
    case SN_OP_LSTM_LAYER_GRAD:
    case SN_OP_GRU_LAYER:
    case SN_OP_GRU_LAYER_GRAD: {
        /* x @ W and h_{t-1} @ R over all B * T rows; the gradient does each twice (data and
         * weights) */
        const sn_shape *x = &g->nodes[nd->in[0]].shape, *r = &g->nodes[nd->in[2]].shape;
        double f = 2.0 * (double)(x->dim[0] * x->dim[1]) * (double)((x->dim[2] + r->dim[0]) * r->dim[1]);
        return nd->op == SN_OP_LSTM_LAYER || nd->op == SN_OP_GRU_LAYER ? f : 2 * f;
    }
    case SN_OP_ATTENTION:
    case SN_OP_ATTENTION_GRAD: {
        /* q.k and p.v per visible pair (about half the pairs when causal); the gradient
         * recomputes q.k and does four more products */
        const sn_shape *q = &g->nodes[nd->in[0]].shape, *k = &g->nodes[nd->in[1]].shape;
        double pairs = (double)(q->dim[0] * q->dim[2]) * (double)(q->dim[1] * k->dim[1]);
        if (nd->attr.attn.causal) pairs *= 0.5;
        return 2.0 * pairs * (double)q->dim[3] * (nd->op == SN_OP_ATTENTION ? 2 : 5);
    }
    case SN_OP_INPUT:
    case SN_OP_VARIABLE:
    case SN_OP_CONST:
    case SN_OP_RESHAPE: return 0;
    default: return out;
    }
}
