/* sinter — graph builder, symbolic autodiff (the GradientTape), plans and their execution.
 *
 * A graph is a list of nodes in the order they were added; every node has a dtype and a
 * static shape. Builder calls return an sn_node. A call that fails (a shape mismatch, an
 * out-of-range axis, an invalid node) returns SN_NONE and records the first such error in
 * the graph: sn_graph_status() returns it and sn_last_error() names what was wrong. Calls
 * that receive SN_NONE return SN_NONE, so a whole model can be built and checked once.
 *
 * Variables live in one contiguous buffer owned by the graph (parameters, optimizer slots,
 * counters: the buffer a checkpoint or an all-reduce touches in one call). */
#ifndef SINTER_GRAPH_H
#define SINTER_GRAPH_H

#include "sinter/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sn_graph sn_graph;
typedef int32_t sn_node;
#define SN_NONE ((sn_node)-1)

/* New empty graph; NULL only when out of memory. Freed with sn_graph_free. */
sn_graph *sn_graph_new(void);
void sn_graph_free(sn_graph *g);
/* The first error of any builder call on g (SN_OK when none). */
sn_status sn_graph_status(const sn_graph *g);
int sn_graph_node_count(const sn_graph *g);

/* ---- leaves ---------------------------------------------------------------------------- */
/* A value fed at every step of a plan (a batch of images, labels). */
sn_node sn_input(sn_graph *g, const char *name, sn_dtype dtype, const sn_shape *shape);
/* A variable: zero-initialised storage kept across steps and plans. */
sn_node sn_variable(sn_graph *g, const char *name, sn_dtype dtype, const sn_shape *shape,
                    bool trainable);
/* A constant holding a copy of `data`. */
sn_node sn_const(sn_graph *g, sn_dtype dtype, const sn_shape *shape, const void *data);
sn_node sn_scalar(sn_graph *g, sn_dtype dtype, double value);

/* ---- ops ------------------------------------------------------------------------------- */
/* a [..., M, K] (or [..., K, M] with ta) times b [..., K, N] (or [..., N, K] with tb);
 * leading (batch) dimensions must match or one side must have none. */
sn_node sn_matmul(sn_graph *g, sn_node a, sn_node b, bool ta, bool tb);
/* Elementwise with NumPy broadcasting. */
sn_node sn_add(sn_graph *g, sn_node a, sn_node b);
sn_node sn_sub(sn_graph *g, sn_node a, sn_node b);
sn_node sn_mul(sn_graph *g, sn_node a, sn_node b);
sn_node sn_div(sn_graph *g, sn_node a, sn_node b);
/* x [..., C] + b [C] */
sn_node sn_bias_add(sn_graph *g, sn_node x, sn_node b);
sn_node sn_relu(sn_graph *g, sn_node x);
sn_node sn_sigmoid(sn_graph *g, sn_node x);
sn_node sn_tanh(sn_graph *g, sn_node x);
/* Keras's activations: gelu (exact, x * Phi(x) with the normal CDF by erf), silu (x *
 * sigmoid(x), "swish"), elu (alpha (e^x - 1) below 0), leaky_relu (alpha x below 0), relu6
 * (min(max(x, 0), 6)). Gradients at the kinks as TensorFlow's: leaky_relu alpha at 0, relu6 0
 * at 0 and at 6, elu 1 at 0. */
sn_node sn_gelu(sn_graph *g, sn_node x);
sn_node sn_silu(sn_graph *g, sn_node x);
sn_node sn_elu(sn_graph *g, sn_node x, double alpha);
sn_node sn_leaky_relu(sn_graph *g, sn_node x, double alpha);
sn_node sn_relu6(sn_graph *g, sn_node x);
/* Keras's gelu(approximate=True): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
sn_node sn_gelu_tanh(sn_graph *g, sn_node x);
/* Layer normalisation over the last axis: (x - mean) / sqrt(var + epsilon) * gamma + beta,
 * x [..., C], gamma and beta [C] (Keras's LayerNormalization, axis -1). */
sn_node sn_layer_norm(sn_graph *g, sn_node x, sn_node gamma, sn_node beta, double epsilon);
/* Batch normalisation in training, fused: per channel (the last axis) the batch mean and the
 * biased variance over all other axes, y = (x - mean) / sqrt(var + epsilon) * gamma + beta,
 * gamma and beta [C]. *stats (when not NULL) gets a [2, C] node: mean | variance, for the
 * moving averages (no gradient flows through it; y's gradient includes the statistics'). */
sn_node sn_batch_norm_train(sn_graph *g, sn_node x, sn_node gamma, sn_node beta, double epsilon,
                            sn_node *stats);
/* Scaled-dot-product attention, fused: softmax(scale q k^T [+ causal mask]) v per batch row
 * and head, q [B, Tq, H, D], k and v [B, Tk, H, D] -> [B, Tq, H, D] (Keras's
 * MultiHeadAttention layout). causal: query i sees key j when j <= i + q_offset (q_offset 0
 * is Keras's use_causal_mask). The CPU kernel never stores the Tq x Tk matrix. */
sn_node sn_attention(sn_graph *g, sn_node q, sn_node k, sn_node v, double scale, bool causal,
                     int64_t q_offset);
/* The same with a mask [B, Tq, Tk] of q's dtype (SN_NONE: none): key j is visible to query i
 * of row b when mask[b, i, j] != 0 and, if causal, j <= i. As Keras (which puts a large
 * negative in place of a masked score), a query that sees no key at all gets the plain mean
 * of all the values, and no gradient reaches q or k from it. Tq may differ from Tk. */
sn_node sn_attention_masked(sn_graph *g, sn_node q, sn_node k, sn_node v, sn_node mask,
                            double scale, bool causal);
/* The same with dropout at `rate` on the probabilities (after the softmax, before v; kept
 * ones scaled by 1 / (1 - rate)), masks drawn from seed, this node and the plan step, as
 * sn_dropout's on the [B, H, Tq, Tk] probabilities; never stored (the backward redraws
 * them). rate 0 is sn_attention_masked. */
sn_node sn_attention_dropout(sn_graph *g, sn_node q, sn_node k, sn_node v, sn_node mask,
                             double scale, bool causal, double rate, uint64_t seed);
sn_node sn_exp(sn_graph *g, sn_node x);
sn_node sn_log(sn_graph *g, sn_node x);
sn_node sn_sqrt(sn_graph *g, sn_node x);
sn_node sn_neg(sn_graph *g, sn_node x);
sn_node sn_softmax(sn_graph *g, sn_node x, int axis);
sn_node sn_log_softmax(sn_graph *g, sn_node x, int axis);
/* logits [N, C], labels [N] int32 in [0, C) -> per-example loss [N] */
sn_node sn_sparse_softmax_xent(sn_graph *g, sn_node logits, sn_node labels);
/* Reductions over the listed axes (negative axes count from the end; naxes = 0: all). */
sn_node sn_reduce_sum(sn_graph *g, sn_node x, int naxes, const int *axes, bool keepdims);
sn_node sn_reduce_mean(sn_graph *g, sn_node x, int naxes, const int *axes, bool keepdims);
sn_node sn_reduce_max(sn_graph *g, sn_node x, int naxes, const int *axes, bool keepdims);
/* One dimension of the new shape may be -1 (inferred). */
sn_node sn_reshape(sn_graph *g, sn_node x, const sn_shape *shape);
/* [N, ...] -> [N, prod(...)] */
sn_node sn_flatten(sn_graph *g, sn_node x);
sn_node sn_transpose(sn_graph *g, sn_node x, const int *perm);

typedef enum sn_padding { SN_PAD_VALID = 0, SN_PAD_SAME = 1 } sn_padding;
typedef struct sn_conv2d_opts {
    int stride_h, stride_w;
    sn_padding padding;
} sn_conv2d_opts;
sn_conv2d_opts sn_conv2d_opts_defaults(void); /* stride 1, valid */
/* x [N, H, W, C] (NHWC), w [KH, KW, C, F] (Keras kernel layout) -> [N, OH, OW, F] */
sn_node sn_conv2d(sn_graph *g, sn_node x, sn_node w, const sn_conv2d_opts *opts);
/* Depthwise: x [N, H, W, C], w [KH, KW, C, M] (Keras's depthwise_kernel) -> [N, OH, OW, C*M],
 * output channel c*M + m from input channel c (Keras's DepthwiseConv2D). */
sn_node sn_depthwise_conv2d(sn_graph *g, sn_node x, sn_node w, const sn_conv2d_opts *opts);
/* Transposed: x [N, H, W, I], w [KH, KW, O, I] (Keras's Conv2DTranspose kernel) -> [N, OH, OW, O]
 * with Keras's sizes (output_padding None): same H*s, valid H*s + max(KH - s, 0). It is the
 * data gradient of the convolution from [N, OH, OW, O] with w and opts. */
sn_node sn_conv2d_transpose(sn_graph *g, sn_node x, sn_node w, const sn_conv2d_opts *opts);

typedef struct sn_pool2d_opts {
    int pool_h, pool_w;
    int stride_h, stride_w; /* 0 = the pool size, as Keras */
    sn_padding padding;
} sn_pool2d_opts;
sn_pool2d_opts sn_pool2d_opts_defaults(void); /* 2x2, stride 2, valid */
sn_node sn_max_pool2d(sn_graph *g, sn_node x, const sn_pool2d_opts *opts);
sn_node sn_avg_pool2d(sn_graph *g, sn_node x, const sn_pool2d_opts *opts);

/* Inverted dropout in training: keeps each element with probability 1 - rate and scales it by
 * 1 / (1 - rate). The mask is a counter-based function of (seed, node, plan step, element):
 * the same seed gives the same masks whatever the thread count. */
sn_node sn_dropout(sn_graph *g, sn_node x, double rate, uint64_t seed);
sn_node sn_slice(sn_graph *g, sn_node x, const int64_t *begin, const int64_t *size);
/* x with before[d] zeros ahead of it and after[d] behind it along each dimension d (Keras's
 * ZeroPadding2D, tf.pad with zeros): one copy into a zeroed buffer; the gradient is dy's
 * window back (a slice). */
sn_node sn_zero_pad(sn_graph *g, sn_node x, const int64_t *before, const int64_t *after);
sn_node sn_concat(sn_graph *g, int n, const sn_node *xs, int axis);
/* table [V, D], indices int32 of any shape -> indices.shape + [D] (embedding lookup) */
sn_node sn_gather(sn_graph *g, sn_node table, sn_node indices);
sn_node sn_cast(sn_graph *g, sn_node x, sn_dtype dtype);
/* logits [N, C], labels [N] int32 -> [N] f32, 1 where argmax(logits) == label */
sn_node sn_sparse_accuracy(sn_graph *g, sn_node logits, sn_node labels);
/* argmax over the last axis -> int32 */
sn_node sn_argmax(sn_graph *g, sn_node x);

/* ---- side effects: run when their node is a target of a plan --------------------------- */
/* var <- value; var <- var + value (value broadcast to var's shape). Return var's new value. */
sn_node sn_assign(sn_graph *g, sn_node var, sn_node value);
sn_node sn_assign_add(sn_graph *g, sn_node var, sn_node value);

/* ---- autodiff -------------------------------------------------------------------------- */
/* Adds nodes computing d loss / d wrt[i] into grads[i] (the GradientTape.gradient of this
 * system). loss must be a scalar of a float dtype. A wrt node the loss does not depend on gets
 * a zero gradient of its shape. */
sn_status sn_gradients(sn_graph *g, sn_node loss, int n, const sn_node *wrt, sn_node *grads);

/* ---- introspection --------------------------------------------------------------------- */
sn_dtype sn_node_dtype(const sn_graph *g, sn_node n);
sn_shape sn_node_shape(const sn_graph *g, sn_node n);
const char *sn_node_name(const sn_graph *g, sn_node n);
const char *sn_node_op_name(const sn_graph *g, sn_node n);
/* Variables in creation order; returns how many there are (writes at most cap of them). */
int sn_graph_variables(const sn_graph *g, bool trainable_only, sn_node *out, int cap);
/* A variable's storage (contiguous, its dtype); valid until the next sn_variable call. */
void *sn_variable_data(sn_graph *g, sn_node var);
/* The whole variable buffer: every variable, one after another (aligned to 64 bytes). */
void *sn_graph_variable_buffer(sn_graph *g, size_t *bytes);

/* ---- plans ----------------------------------------------------------------------------- */
typedef struct sn_plan sn_plan;
/* Memory that plans take turns with: plans made with the same sn_plan_memory (their
 * sn_plan_opts.memory) place their arena and kernel scratch in one shared pair of blocks,
 * grown to the largest plan's need, so plans that never run at the same time (the traced
 * functions of a program, one replica's plans) cost the memory of the largest. The price:
 * such a plan's inputs and targets hold their values only until another plan of the same
 * memory runs, or a new plan is made with it; the caller feeds every input before each run,
 * reads the targets before running another plan of the memory, and never runs two of them at
 * once nor makes a plan with it while one of them runs (a new plan may move the blocks). All
 * its plans must be on one device. The creator's reference is dropped by
 * sn_plan_memory_free; each plan holds its own, so the order of the frees does not matter. */
typedef struct sn_plan_memory sn_plan_memory;
sn_plan_memory *sn_plan_memory_new(void);
void sn_plan_memory_free(sn_plan_memory *m);
/* Bytes of the shared block now (the largest arena of its plans so far, kernel scratch
 * included). */
size_t sn_plan_memory_size(const sn_plan_memory *m);

typedef struct sn_plan_opts {
    const char *device;  /* "cpu:0", "/device:CPU:0", ... ; NULL = the default device */
    bool reuse_buffers;  /* share memory between values whose lifetimes do not overlap */
    /* Mixed bfloat16 (Keras's mixed_bfloat16): matmul, conv2d (forward and both backward
     * ops) and attention (its q k^T and p v products) compute in bfloat16 with float32
     * accumulation and float32 inputs/outputs where the CPU has AVX512-BF16 and bfloat16
     * arithmetic is faster than float32 there (AMD Zen 4/5, or AMX; not Intel without AMX,
     * where they compute in float32: SN_BF16_COMPUTE, docs/environment.md); every other op,
     * the variables and the loss stay float32; ignored elsewhere. Default false. */
    bool bf16_compute;
    /* The plan keeps its own copy of the variable buffer, refreshed from the graph's by
     * sn_plan_load_vars and never written back: a mirrored replica other than the first,
     * which updates its copy with the same bits as the first. Default false. */
    bool private_vars;
    /* f32 matmuls and convolutions in full f32 on a GPU (no TF32 tensor cores). Default false. */
    bool fp32_strict;
    /* Shared arena and scratch (sn_plan_memory above); NULL (the default): the plan's own. */
    sn_plan_memory *memory;
} sn_plan_opts;
sn_plan_opts sn_plan_opts_defaults(void);

/* A plan computes `targets` (values to read back and side effects to run) from the graph's
 * inputs and variables: nodes in topological order, every buffer placed in one arena from
 * liveness. Side-effect targets run after every other node of the step, in creation order;
 * except that in a plan without collectives an optimizer update (sn_optimizer_update) runs as
 * soon as every other reader of its variable and slots has run and its gradient is made, which
 * frees the gradient's buffer for the rest of the step and changes no value.
 * The caller frees it with sn_plan_free before the graph. */
sn_status sn_plan_new(sn_plan **out, sn_graph *g, int ntargets, const sn_node *targets,
                      const sn_plan_opts *opts);
void sn_plan_free(sn_plan *p);

/* Called before each step of sn_plan_run to fill the inputs for that step. */
typedef sn_status (*sn_feed_fn)(void *ctx, sn_plan *p, int64_t step);

/* Runs the plan `steps` times in one call; before each step, feed (if not NULL) fills the
 * inputs. Targets hold the last step's values afterwards. */
sn_status sn_plan_run(sn_plan *p, int64_t steps, sn_feed_fn feed, void *ctx);
/* The buffer of an input (to fill) or of a target (to read): contiguous, the node's dtype.
 * NULL (with an error) for any other node. Valid for the plan's lifetime. */
void *sn_plan_buffer(sn_plan *p, sn_node n);
/* Copies bytes into input n's buffer; checks the size. */
sn_status sn_plan_set_input(sn_plan *p, sn_node n, const void *data, size_t bytes);
size_t sn_plan_peak_bytes(const sn_plan *p);    /* bytes of the planned arena (values and scratch) */
/* What the plan itself holds: its arena (kernel scratch included) and its private copy of the variables
 * (sn_plan_opts.private_vars), not the graph's variables or a kernel's own state. */
size_t sn_plan_memory_bytes(const sn_plan *p);
int sn_plan_node_count(const sn_plan *p);       /* nodes that execute per step */
/* The plan's step counter (feeds dropout masks); advanced by every executed step. */
int64_t sn_plan_step(const sn_plan *p);
void sn_plan_set_step(sn_plan *p, int64_t step);
/* How many sn_plan_run calls ran at least one step: steps_per_execution enters the executor
 * once per N steps, which tests check with this count. */
int64_t sn_plan_run_count(const sn_plan *p);
/* A hook the executor calls after each kernel call c (node n) of every step: the strategy's
 * MPI progress while gradient all-reduces are in flight. A non-SN_OK return stops the run with
 * that status. NULL unsets it. */
typedef sn_status (*sn_node_hook)(void *ctx, sn_plan *p, int call, sn_node n);
void sn_plan_set_node_hook(sn_plan *p, sn_node_hook hook, void *ctx);
/* A private_vars plan: copy the graph's variables into its own copy (before a run); nothing
 * to do when they did not change since it was loaded or marked synced. */
sn_status sn_plan_load_vars(sn_plan *p);
/* A private_vars plan whose run applied exactly the updates the graph's buffer received (a
 * mirrored replica, after a run of every replica): its copy equals the buffer again. */
void sn_plan_vars_synced(sn_plan *p);
const char *sn_plan_device(const sn_plan *p);

/* Eager use: evaluates one node at once on a device (a one-node plan) and returns a new tensor
 * the caller frees. */
sn_status sn_eval(sn_graph *g, sn_node n, const char *device, sn_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
