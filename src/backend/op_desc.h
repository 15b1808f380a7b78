/* What an op is, as a kernel sees it: the op enum, its attributes and the description of a
 * tensor (dtype and shape). The graph (graph/graph_impl.h) builds nodes out of these and adds
 * inputs, names and storage; a backend's kernels (backend/kernel.h) read nothing else. Lives
 * in the backend layer so that no kernel includes the graph (core < backend < graph).
 *
 * Depends on core only. */
#ifndef SN_BACKEND_OP_DESC_H
#define SN_BACKEND_OP_DESC_H

#include <stdbool.h>
#include <stdint.h>

#include "sinter/tensor.h"

#define SN_MAX_INPUTS 8

typedef enum sn_op {
    /* leaves */
    SN_OP_INPUT = 0,
    SN_OP_VARIABLE,
    SN_OP_CONST,
    /* linear algebra, elementwise */
    SN_OP_MATMUL,
    SN_OP_ADD,
    SN_OP_SUB,
    SN_OP_MUL,
    SN_OP_DIV,
    SN_OP_BIAS_ADD,
    SN_OP_RELU,
    SN_OP_SIGMOID,
    SN_OP_TANH,
    SN_OP_EXP,
    SN_OP_LOG,
    SN_OP_SQRT,
    SN_OP_NEG,
    SN_OP_CAST,
    /* softmax family and losses */
    SN_OP_SOFTMAX,
    SN_OP_LOG_SOFTMAX,
    SN_OP_SPARSE_XENT,
    SN_OP_SPARSE_ACCURACY,
    SN_OP_ARGMAX,
    /* reductions and broadcasts */
    SN_OP_REDUCE_SUM,
    SN_OP_REDUCE_MEAN,
    SN_OP_REDUCE_MAX,
    SN_OP_BROADCAST_TO,
    /* shape ops */
    SN_OP_RESHAPE,
    SN_OP_TRANSPOSE,
    SN_OP_SLICE,
    SN_OP_CONCAT,
    SN_OP_GATHER,
    /* convolution and pooling */
    SN_OP_CONV2D,
    SN_OP_MAX_POOL2D,
    SN_OP_AVG_POOL2D,
    SN_OP_DROPOUT,
    /* gradient helpers: built by gradient rules, not by users */
    SN_OP_RELU_GRAD,        /* (x, dy) -> dy * (x > 0) */
    SN_OP_SIGMOID_GRAD,     /* (y, dy) -> dy * y * (1 - y) */
    SN_OP_TANH_GRAD,        /* (y, dy) -> dy * (1 - y^2) */
    SN_OP_SOFTMAX_GRAD,     /* (y, dy) -> y * (dy - sum(dy * y, axis)) */
    SN_OP_LOG_SOFTMAX_GRAD, /* (y, dy) -> dy - exp(y) * sum(dy, axis) */
    SN_OP_SPARSE_XENT_GRAD, /* (logits, labels, dloss [N]) -> dlogits [N, C] */
    SN_OP_REDUCE_MAX_GRAD,  /* (x, y keepdims, dy keepdims) -> dx: dy where x == y (first) */
    SN_OP_SLICE_GRAD,       /* (dy) -> zero-padded to the input shape */
    SN_OP_GATHER_GRAD,      /* (indices, dy) -> [V, D] scatter-add */
    SN_OP_CONV2D_BWD_DATA,  /* (dy, w) -> dx */
    SN_OP_CONV2D_BWD_FILTER,/* (x, dy) -> dw */
    SN_OP_MAX_POOL2D_GRAD,  /* (x, dy) -> dx */
    SN_OP_AVG_POOL2D_GRAD,  /* (dy) -> dx */
    SN_OP_DROPOUT_GRAD,     /* (dy) -> dy * same mask as the forward node (attrs copied) */
    /* activations beyond relu/sigmoid/tanh (op_activation.c); their gradients read x */
    SN_OP_GELU,             /* x Phi(x), erf form */
    SN_OP_SILU,             /* x sigmoid(x) */
    SN_OP_ELU,              /* x > 0 ? x : alpha (e^x - 1); attr.act.alpha */
    SN_OP_LEAKY_RELU,       /* x > 0 ? x : alpha x; attr.act.alpha */
    SN_OP_RELU6,            /* min(max(x, 0), 6) */
    SN_OP_GELU_GRAD,        /* (x, dy) -> dy (Phi(x) + x phi(x)) */
    SN_OP_SILU_GRAD,        /* (x, dy) -> dy s (1 + x (1 - s)), s = sigmoid(x) */
    SN_OP_ELU_GRAD,         /* (x, dy) -> x < 0 ? dy alpha e^x : dy */
    SN_OP_LEAKY_RELU_GRAD,  /* (x, dy) -> x > 0 ? dy : dy alpha */
    SN_OP_RELU6_GRAD,       /* (x, dy) -> 0 < x < 6 ? dy : 0 */
    /* side effects */
    SN_OP_ASSIGN,           /* (var, value) */
    SN_OP_ASSIGN_ADD,       /* (var, value) */
    SN_OP_APPLY_OPTIMIZER,  /* (var, grad, iterations, slots...) see nn/train/optimizer.c */
    /* recurrent ops over a whole sequence (op_rnn.c; graph/op_rnn.h says what they hold) */
    SN_OP_LSTM,             /* (xw, r, h0, c0) -> workspace [B, T, 6U] */
    SN_OP_LSTM_GRAD,        /* (r, c0, ws, dws) -> d xw [B, T, 4U] */
    SN_OP_GRU,              /* (xw, r, rb, h0) -> workspace [B, T, 5U] */
    SN_OP_GRU_GRAD,         /* (r, h0, ws, dws) -> d xw | d rec [B, T, 6U] */
    SN_OP_GRU_RB,           /* Keras reset_after=False: (xw, r, h0) -> workspace [B, T, 5U] */
    SN_OP_GRU_RB_GRAD,      /* (r, h0, ws, dws) -> d xw [B, T, 3U] */
    /* the whole LSTM layer, input projection included (oneDNN's RNN primitives take it so) */
    SN_OP_LSTM_LAYER,       /* (x, w, r, b, h0, c0) -> y [B, T, U] (keep_c: [B, T+1, U]) */
    SN_OP_LSTM_LAYER_GRAD,  /* (x, w, r, b, h0, c0, y, dy) -> dx | dw | dr | db, flat */
    SN_OP_GRU_LAYER,        /* Keras reset_after=True: (x, w, r, b [4U], h0) -> y [B, T, U] */
    SN_OP_GRU_LAYER_GRAD,   /* (x, w, r, b, h0, y, dy) -> dx | dw | dr | db, flat */
    /* collectives: the replicas' sum of a value (attr.allreduce names the collective) */
    SN_OP_ALL_REDUCE,       /* (x f32) -> the sum of x over every replica, x's shape */
    /* Transformer ops (graph/op_attention.c) */
    SN_OP_LAYER_NORM,       /* (x [..., C], gamma [C], beta [C]) -> y; attr.norm */
    SN_OP_LAYER_NORM_GRAD,  /* (x, gamma, dy) -> dx | dgamma | dbeta, flat */
    SN_OP_GELU_TANH,        /* Keras gelu(approximate=True): 0.5 x (1 + tanh(...)) */
    SN_OP_GELU_TANH_GRAD,   /* (x, dy) -> dx */
    SN_OP_ATTENTION,        /* (q [B,Tq,H,D], k, v [B,Tk,H,D]) -> [B,Tq,H,D]; attr.attn */
    SN_OP_ATTENTION_GRAD,   /* (q, k, v, o, dy) -> dq | dk | dv, flat */
    SN_OP_ATTENTION_CACHED, /* (q, k, v [B,s,H,D], kc, vc [B,C,H,D], pos i32 [1]): keys
                               kc[0:pos] then k, causal from pos (generation); no gradient */
    /* depthwise convolution (graph/op_depthwise.c): w [KH, KW, C, M], output channel c*M+m */
    SN_OP_DEPTHWISE_CONV2D, /* (x [N,H,W,C], w) -> [N,OH,OW,C*M]; attr.conv */
    SN_OP_DEPTHWISE_BWD_DATA,   /* (dy, w) -> dx (attr.conv.x_shape) */
    SN_OP_DEPTHWISE_BWD_FILTER, /* (x, dy) -> dw (attr.conv.w_shape) */
    SN_OP_LSTM_DENSE_STEP,  /* (xw [B,4U], r [U,4U], h, c [B,U], wd [U,V], bd [V]) -> [B, 2U+V]:
                               h' | c' | h' @ wd + bd, one LSTM step and a linear Dense
                               (generation, op_rnn.c); no gradient */
    /* BatchNormalization in training, fused (graph/op_batch_norm.c); attr.norm */
    SN_OP_BN_STATS,         /* (x [..., C]) -> [2, C]: batch mean | biased variance per channel */
    SN_OP_BN_TRAIN,         /* (x, stats [2, C], gamma [C], beta [C]) -> y, x's shape */
    SN_OP_BN_GRAD_PARAMS,   /* (x, stats, dy) -> [2, C]: dgamma | dbeta */
    SN_OP_BN_GRAD_X,        /* (x, stats, gamma, dy, dparams [2, C]) -> dx */
    SN_OP_COUNT
} sn_op;

typedef enum sn_optimizer_kind {
    SN_OPTIM_SGD = 0,
    SN_OPTIM_ADAM,
    SN_OPTIM_ADAMW,
    SN_OPTIM_RMSPROP,
} sn_optimizer_kind;

/* The collective an all_reduce node calls. The distribution layer (src/distribute) provides
 * the table and the object behind it (its replicas, barrier and MPI communicator), so that the
 * graph and the kernels below it carry a handle without knowing what is behind it: a kernel
 * calls vt->run and nothing else. Phases: WHOLE computes the sum at once; START begins it (the
 * in-process sum, then a non-blocking MPI start) as soon as the gradient exists, and the WAIT
 * node that reads START's output, in place, completes it before anything reads the sum.
 * in and out are device memory of the kernel's backend (a CPU collective takes host memory
 * and a NULL stream; an NCCL one would take the CUDA stream). */
enum { SN_ALLREDUCE_WHOLE = 0, SN_ALLREDUCE_START, SN_ALLREDUCE_WAIT, SN_ALLREDUCE_BARRIER };
/* Or-ed into run's phase for a node with attr.allreduce.to_first: the replicas of one process
 * share the variables and only replica 0 applies the update, so only replica 0 receives the
 * sum (the replicas each add up a slice of it into replica 0's output, in replica order per
 * element: the same bits); the others give their input and their output is that input,
 * unchanged. BARRIER (a side effect, after the update) holds every replica until all reach
 * it: nobody reads the next step's weights while replica 0 still writes them. */
enum { SN_ALLREDUCE_TO_FIRST = 16 };
typedef struct sn_allreduce_comm sn_allreduce_comm;
typedef struct sn_allreduce_vt {
    const char *name;
    sn_status (*run)(sn_allreduce_comm *c, int replica, int phase, const float *in, float *out,
                     size_t n, void *stream);
} sn_allreduce_vt;
struct sn_allreduce_comm {
    const sn_allreduce_vt *vt;
};

/* Per-op attributes. One small struct per op family; the op's row says which one it uses.
 * `padding` holds an sn_padding (include/sinter/graph.h): kept as int so this header needs
 * nothing above core; kernels read the resolved pad_top/pad_left instead. */
typedef union sn_attrs {
    struct { bool ta, tb; } matmul;
    struct { int axis; } axis;                               /* softmax, log_softmax, concat */
    struct { uint32_t mask; bool keepdims; } reduce;          /* bit i set: reduce axis i */
    struct { int perm[SN_MAX_DIMS]; } transpose;
    struct { int64_t begin[SN_MAX_DIMS]; sn_shape in_shape; } slice; /* size = out shape */
    struct { int stride_h, stride_w; int padding; int pad_top, pad_left;
             sn_shape x_shape, w_shape; } conv;              /* shapes for the backward ops */
    struct { int pool_h, pool_w, stride_h, stride_w; int padding; int pad_top, pad_left;
             sn_shape x_shape; } pool;
    struct { double rate; uint64_t seed; int32_t mask_node; } dropout;
    struct { int64_t vocab; } gather;
    struct { sn_dtype to; } cast;
    struct { sn_shape shape; } target;                        /* reshape, broadcast_to */
    struct { sn_optimizer_kind kind; double lr, beta1, beta2, epsilon, momentum, rho,
             weight_decay; bool nesterov, centered; } optim;
    struct { double value; } scalar;
    struct { double alpha; } act;                             /* elu, leaky_relu */
    struct { bool keep_c; } lstm; /* lstm_layer: row T of each batch row holds c_T */
    /* all_reduce: the collective, this plan's local replica, the phase; hoist: the planner
     * runs the node (and the concat/reshapes only it reads) as soon as its input exists;
     * to_first: only replica 0 receives the sum (SN_ALLREDUCE_TO_FIRST) */
    struct { sn_allreduce_comm *comm; int replica, phase; bool hoist, to_first; } allreduce;
    struct { double epsilon; } norm;                          /* layer_norm, bn_* */
    /* attention: scores scale * q.k; causal: key j is seen by query i when j <= i + q_offset
     * (q_offset 0 is Keras's use_causal_mask; a query block continuing a cached context sets
     * it to the number of cached positions); drop_rate > 0: dropout on the probabilities,
     * element (b, h, i, j) kept as sn_dropout_keep(drop_seed, drop_node, step,
     * ((b H + h) Tq + i) Tk + j), the index of a [B, H, Tq, Tk] probability tensor, so the
     * materialised path's dropout node with mask_node drop_node draws the same mask */
    struct {
        double scale;
        bool causal;
        int64_t q_offset;
        double drop_rate;
        uint64_t drop_seed;
        int32_t drop_node;
    } attn;
} sn_attrs;

/* The slot inputs apply_optimizer takes after (var, grad, iterations): the one place this is
 * written (nn/train/optimizer.c creates that many slot variables; every backend checks a call
 * against it). -1: an unknown kind. */
static inline int sn_optim_slot_count(const sn_attrs *a) {
    switch (a->optim.kind) {
    case SN_OPTIM_SGD: return a->optim.momentum != 0 ? 1 : 0;
    case SN_OPTIM_ADAM:
    case SN_OPTIM_ADAMW: return 2;
    case SN_OPTIM_RMSPROP: return 1 + (a->optim.momentum > 0) + (a->optim.centered ? 1 : 0);
    }
    return -1;
}

/* A tensor as a kernel sees it: element type and shape. A kernel's buffers are contiguous and
 * row-major (the planner places every value so), so the strides follow from the shape. */
typedef struct sn_tdesc {
    sn_dtype dtype;
    sn_shape shape;
} sn_tdesc;

/* Workspace slots of the recurrent ops (layout: graph/op_rnn.h): columns [k*U, (k+1)*U) of the
 * last axis of SN_OP_LSTM / SN_OP_GRU / SN_OP_GRU_RB's output (GRU_RB's rh slot holds
 * r * h_prev, GRU's the h part of h_prev @ r + rb). */
enum { SN_LSTM_H = 0, SN_LSTM_C = 1, SN_LSTM_GATES = 2, SN_LSTM_WS = 6 };
enum { SN_GRU_H = 0, SN_GRU_Z = 1, SN_GRU_R = 2, SN_GRU_HH = 3, SN_GRU_RH = 4, SN_GRU_WS = 5 };

#endif
