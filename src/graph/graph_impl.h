/* Internal graph representation: nodes, attributes, the op registry.
 *
 * Depends on core and backend. The op enum and attribute union live below, in
 * backend/op_desc.h, because kernels read them; a node adds its inputs, name and storage. The
 * builder (graph.c), the op families (op_*.c: shape inference + gradient rule), autodiff
 * (autodiff.c) and the planner/executor (plan.c) live here. */
#ifndef SN_GRAPH_IMPL_H
#define SN_GRAPH_IMPL_H

#include "backend/op_desc.h"
#include "core/core.h"
#include "sinter/graph.h"

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
    /* Advanced whenever something outside a training replica may have written the buffer (a
     * mutable accessor handed it out, a plan without private variables ran, a variable was
     * added): a private-variables plan reloads its copy only when it changed
     * (sn_plan_load_vars). Reading without advancing it: sn_variable_cdata. */
    uint64_t vars_version;
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
    /* > 0: 1 + the input whose call's kernel state this op's kernels may read: a gradient op
     * whose forward kernel keeps what the backward needs outside the graph (lstm_layer_grad
     * and oneDNN's workspace). The planner links the two calls (sn_kcall.fwd). */
    int fwd_state_input;
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
/* A convolution window's output size and leading padding along one dimension (TensorFlow's
 * rules, op_conv.c); false when a 'valid' window does not fit. */
bool sn_conv_out_size(int64_t in, int64_t k, int s, sn_padding pad, int64_t *out, int *pad_lo);
/* conv2d's and depthwise_conv2d's strides (>= 1) and window (x [N, H, W, C], w [KH, KW, ...]):
 * sets *oh, *ow, the node's pads, x_shape, w_shape and dtype; `op` names the op in the error.
 * And the shape of their data and filter gradients: attr.conv.x_shape / w_shape (op_conv.c). */
sn_status sn_conv_window(sn_node_t *node, const sn_node_t *x, const sn_node_t *w,
                         const char *op, int64_t *oh, int64_t *ow);
/* conv2d's and depthwise_conv2d's builders: a VALID convolution of a zero padding that is a
 * SAME convolution of the unpadded input becomes that (*x and o->padding change; op_conv.c). */
void sn_conv_fold_zero_pad(const sn_graph *g, sn_node *x, sn_node w, sn_conv2d_opts *o);
sn_status sn_infer_conv_x_shape(const sn_graph *g, sn_node_t *node);
sn_status sn_infer_conv_w_shape(const sn_graph *g, sn_node_t *node);

/* Gradient helper: reduces dy (shaped like a broadcast result) back to `shape` by summing the
 * broadcast dimensions (identity when the shapes are equal). */
sn_node sn_sum_to_shape(sn_graph *g, sn_node dy, const sn_shape *shape);
sn_node sn_broadcast_to(sn_graph *g, sn_node x, const sn_shape *shape);
/* Used by the optimizers of nn/: one fused update op over a variable. */
sn_node sn_apply_optimizer(sn_graph *g, int n_in, const sn_node *in, const sn_attrs *attr);

/* A variable's storage, read only (does not advance vars_version). */
static inline const void *sn_variable_cdata(const sn_graph *g, sn_node var) {
    return g->vars + g->nodes[var].var_offset;
}

/* The replicas' sum of x (f32) through the collective comm, for local replica `replica` of
 * the plan that runs it (op_desc.h: phases, and what the distribution layer provides). With
 * hoist the planner runs it as soon as x exists (the gradient all-reduce overlapping the rest
 * of the backward pass); a WAIT node runs where it was created and writes in place. */
sn_node sn_all_reduce(sn_graph *g, sn_node x, sn_allreduce_comm *comm, int replica, int phase,
                      bool hoist);
/* The same, for replicas that share one variable buffer (op_desc.h, SN_ALLREDUCE_TO_FIRST):
 * replica 0's node is the sum; another replica's is its own x, given to replica 0. */
sn_node sn_all_reduce_to_first(sn_graph *g, sn_node x, sn_allreduce_comm *comm, int replica,
                               int phase, bool hoist);
/* Every local replica waits here until all arrived (a side effect after the step's updates;
 * var: a variable of the step, which it leaves as it is). */
sn_node sn_all_reduce_barrier(sn_graph *g, sn_node var, sn_allreduce_comm *comm, int replica);

/* Generation with a cache of keys and values (nn/model/stepper.c): attention of the s new queries q
 * over the keys kc[0:pos] followed by the s new keys k (values likewise), query i seeing keys
 * up to pos + i; pos (int32 [1]) is read at run time, so one plan serves every position.
 * Caches [B, C, H, D], pos + s <= C (checked by the kernels). Forward only. */
sn_node sn_attention_cached(sn_graph *g, sn_node q, sn_node k, sn_node v, sn_node k_cache,
                            sn_node v_cache, sn_node pos, double scale);

/* Profiling, for `sinter bench --profile`: with profiling on, every kernel call of a plan is
 * timed (two clock reads per call); entry c gives the node, the kernel implementation and the
 * seconds accumulated since profiling was turned on. Returns false past the last call. */
sn_status sn_plan_profile(sn_plan *p, bool on);
bool sn_plan_profile_entry(const sn_plan *p, int c, sn_node *node, const char **impl,
                           double *seconds);
/* What fills the arena at its peak, for `sinter bench --profile`: the call during which it
 * was reached (-1: the inputs), and value i live then (its storage root) with its bytes.
 * Returns false past the last. */
int sn_plan_peak_call(const sn_plan *p);
bool sn_plan_peak_value(const sn_plan *p, int i, sn_node *node, size_t *bytes);
/* Dropout masks are keyed by the plan step; replica r of R keys step s as s * R + r so that
 * replicas draw distinct masks: the kernels see step * mul + add (default 1 and 0). */
void sn_plan_set_step_key(sn_plan *p, int64_t mul, int64_t add);
/* The position of node n in the plan's execution order, or -1 when it does not execute. */
int sn_plan_call_of(const sn_plan *p, sn_node n);

/* Floating-point operations of one execution of node n (2 per multiply-add for matmul and
 * convolutions, 1 per element for elementwise work). */
double sn_node_flops(const sn_graph *g, sn_node n);

#endif
