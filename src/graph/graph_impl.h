/* Internal graph representation: nodes, attributes, the op registry.
 *
 * Depends on core only. Backends read nodes (op, attrs, shapes) but never build them; the
 * builder (graph.c), the op families (op_*.c: shape inference + gradient rule), autodiff
 * (autodiff.c) and the planner/executor (plan.c, exec.c) live here. */
#ifndef SN_GRAPH_IMPL_H
#define SN_GRAPH_IMPL_H

#include "core/core.h"
#include "sinter/graph.h"

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
    SN_OP_APPLY_OPTIMIZER,  /* (var, grad, iterations, slots...) see nn/optimizer.c */
    /* recurrent ops over a whole sequence (op_rnn.c; graph/op_rnn.h says what they hold) */
    SN_OP_LSTM,             /* (xw, r, h0, c0) -> workspace [B, T, 6U] */
    SN_OP_LSTM_GRAD,        /* (r, c0, ws, dws) -> d xw [B, T, 4U] */
    SN_OP_GRU,              /* (xw, r, rb, h0) -> workspace [B, T, 5U] */
    SN_OP_GRU_GRAD,         /* (r, h0, ws, dws) -> d xw | d rec [B, T, 6U] */
    SN_OP_COUNT
} sn_op;

typedef enum sn_optimizer_kind {
    SN_OPTIM_SGD = 0,
    SN_OPTIM_ADAM,
    SN_OPTIM_ADAMW,
    SN_OPTIM_RMSPROP,
} sn_optimizer_kind;

/* Per-op attributes. One small struct per op family; the op's row says which one it uses. */
typedef union sn_attrs {
    struct { bool ta, tb; } matmul;
    struct { int axis; } axis;                               /* softmax, log_softmax, concat */
    struct { uint32_t mask; bool keepdims; } reduce;          /* bit i set: reduce axis i */
    struct { int perm[SN_MAX_DIMS]; } transpose;
    struct { int64_t begin[SN_MAX_DIMS]; sn_shape in_shape; } slice; /* size = out shape */
    struct { int stride_h, stride_w; sn_padding padding; int pad_top, pad_left;
             sn_shape x_shape, w_shape; } conv;              /* shapes for the backward ops */
    struct { int pool_h, pool_w, stride_h, stride_w; sn_padding padding; int pad_top, pad_left;
             sn_shape x_shape; } pool;
    struct { double rate; uint64_t seed; int32_t mask_node; } dropout;
    struct { int64_t vocab; } gather;
    struct { sn_dtype to; } cast;
    struct { sn_shape shape; } target;                        /* reshape, broadcast_to */
    struct { sn_optimizer_kind kind; double lr, beta1, beta2, epsilon, momentum, rho,
             weight_decay; bool nesterov, centered; } optim;
    struct { double value; } scalar;
    struct { double alpha; } act;                             /* elu, leaky_relu */
} sn_attrs;

enum {
    SN_NODE_TRAINABLE = 1u << 0,
    SN_NODE_SIDE_EFFECT = 1u << 1,
};

typedef struct sn_node_t {
    sn_op op;
    sn_dtype dtype;
    sn_shape shape;
    int n_in;
    sn_node in[SN_MAX_INPUTS];
    sn_attrs attr;
    uint32_t flags;
    char *name;        /* owned; may be NULL */
    size_t var_offset; /* SN_OP_VARIABLE: byte offset in the variable buffer */
    void *const_data;  /* SN_OP_CONST: owned copy */
} sn_node_t;

struct sn_graph {
    sn_node_t *nodes;
    int n_nodes, cap_nodes;
    sn_status status; /* first builder error (sticky) */
    unsigned char *vars; /* the one variable buffer, 64-byte aligned */
    size_t vars_bytes, vars_cap;
};

/* One row of the op registry. */
typedef struct sn_op_def {
    const char *name;
    int n_in;       /* inputs; -1 = variadic (concat) */
    /* Sets node->dtype and node->shape from its inputs and attributes; on a mismatch returns a
     * status whose message names the op, the shapes and what was expected. */
    sn_status (*infer)(const sn_graph *g, sn_node_t *node);
    /* Adds the nodes of d loss / d input[i] given dy = d loss / d node, writing them to dx[i]
     * (SN_NONE where an input gets no gradient). NULL: the op is not differentiable. */
    void (*grad)(sn_graph *g, sn_node node, sn_node dy, sn_node *dx);
    bool side_effect;
} sn_op_def;

extern const sn_op_def *const sn_ops[SN_OP_COUNT];

static inline sn_node_t *sn_node_at(const sn_graph *g, sn_node n) { return &g->nodes[n]; }

/* Appends a node after checking its inputs and running its shape inference. Returns SN_NONE
 * (recording the first error in the graph) when an input is invalid or inference fails. */
sn_node sn_graph_add(sn_graph *g, sn_op op, int n_in, const sn_node *in, const sn_attrs *attr);
/* Records a builder error in g (first one wins) and returns SN_NONE. */
sn_node sn_graph_fail(sn_graph *g, sn_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Shape helpers shared by inference rules. */
/* NumPy broadcast of a and b into out; false when they do not broadcast. */
bool sn_broadcast_shape(const sn_shape *a, const sn_shape *b, sn_shape *out);
/* Normalises axis (negative counts from the end); false when out of [-ndim, ndim). */
bool sn_norm_axis(int axis, int ndim, int *out);
bool sn_dtype_is_float(sn_dtype t);

/* Gradient helper: reduces dy (shaped like a broadcast result) back to `shape` by summing the
 * broadcast dimensions (identity when the shapes are equal). */
sn_node sn_sum_to_shape(sn_graph *g, sn_node dy, const sn_shape *shape);
sn_node sn_broadcast_to(sn_graph *g, sn_node x, const sn_shape *shape);
/* Used by the optimizers of nn/: one fused update op over a variable. */
sn_node sn_apply_optimizer(sn_graph *g, int n_in, const sn_node *in, const sn_attrs *attr);

/* Profiling, for `sinter bench --profile`: with profiling on, every kernel call of a plan is
 * timed (two clock reads per call); entry c gives the node, the kernel implementation and the
 * seconds accumulated since profiling was turned on. Returns false past the last call. */
sn_status sn_plan_profile(sn_plan *p, bool on);
bool sn_plan_profile_entry(const sn_plan *p, int c, sn_node *node, const char **impl,
                           double *seconds);
/* A hook the executor calls after each kernel call c (node n) of every step, e.g. to start the
 * all-reduce of a gradient bucket as soon as its last gradient is computed, overlapping it with
 * the rest of the backward pass. A non-SN_OK return stops the run with that status. */
typedef sn_status (*sn_node_hook)(void *ctx, sn_plan *p, int call, sn_node n);
void sn_plan_set_node_hook(sn_plan *p, sn_node_hook hook, void *ctx);
/* The position of node n in the plan's execution order, or -1 when it does not execute. */
int sn_plan_call_of(const sn_plan *p, sn_node n);

/* Floating-point operations of one execution of node n (2 per multiply-add for matmul and
 * convolutions, 1 per element for elementwise work). */
double sn_node_flops(const sn_graph *g, sn_node n);

#endif
