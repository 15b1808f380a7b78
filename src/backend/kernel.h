/* The kernel interface shared by every backend.
 *
 * A backend holds one kernel per op. The CPU backend's table is filled first by the portable
 * reference kernels (backend/ref/, any dtype, computed in double), then overridden by the fast
 * kernels (backend/cpu/: vectorised loops, oneDNN, OpenBLAS) for the cases they support. The
 * environment variable SN_KERNELS=ref keeps the reference kernels (for debugging). */
#ifndef SN_BACKEND_KERNEL_H
#define SN_BACKEND_KERNEL_H

#include "backend/op_desc.h"
#include "core/core.h"

/* One call of a kernel: what to compute (op, attributes), on what (dtypes and shapes of the
 * output and of each input) and where (buffers). Filled once at plan time; the buffers are
 * rebound when the graph's variable buffer moves. Nothing here refers to the graph: a kernel
 * can be called on buffers a test or a benchmark made by hand (tests/kernel_test_util.h). */
/* Fused patterns (graph/plan_fuse.c says which nodes each one covers). A backend runs one only
 * where its table has a kernel for it (sn_kernel_table.fused) that supports the call; the
 * planner fuses nothing else, so a pattern needs no reference kernel. */
typedef enum sn_fused_kind {
    SN_FUSED_NONE = 0,
    /* conv2d -> bias_add -> relu [-> max_pool2d]: op CONV2D, in (x, w, bias), out the relu
     * output; with a pool, out2[0] is the pool's output (attr2[0] its attributes). out is
     * NULL where nothing reads the relu output but the pool (and a backward that recomputes
     * it): only the pool is stored. */
    SN_FUSED_CONV_BIAS_RELU,
    /* max_pool2d_grad -> relu_grad [-> reduce_sum over N, H, W]: op MAX_POOL2D_GRAD, in (x,
     * dy) where x is the relu's output, out the relu_grad's output; with the reduction,
     * out2[0] is the bias gradient ([C] elements). */
    SN_FUSED_POOL_RELU_GRAD,
    /* the same with the bias gradient, and the conv2d_bwd_filter that reads the relu_grad's
     * output, of a first layer (nothing else reads that gradient): in (x, dy, conv input),
     * out unused (the activation gradient is never stored), out2 (bias gradient, filter
     * gradient), attr2[1] the convolution's attributes. With in (-, dy, conv input, w,
     * bias) (n_in 5) the relu output is recomputed per image from the layer's input and never
     * stored (in[0] is NULL, and the forward call's out too). */
    SN_FUSED_POOL_RELU_GRAD_FILTER,
    /* add(G, add(mul(B, w), mul(B, w))) (either order) with B the broadcast of one element s:
     * a data gradient plus the L2 penalty's, as autodiff writes it. Op ADD, in (-, -, G, w, s)
     * (the node's own inputs are never stored: in[0], in[1] NULL): out = G + 2 (s w) with the
     * graph's roundings (two products fl(s w), their exact sum, then + G). */
    SN_FUSED_ADD_L2,
    /* conv2d -> bias_add, the bias_add without a relu (a convolution followed by
     * BatchNormalization): op CONV2D, in (x, w, bias), out the bias_add's output. */
    SN_FUSED_CONV_BIAS,
    /* BatchNormalization followed by its activation, relu or relu6 (graph/plan_fuse.c,
     * fuse_bn_act). Three calls carry it, each its op's own inputs first:
     *   op BN_TRAIN, in (x, stats, gamma, beta): out the activation's output (the
     *     normalised value before it is never stored);
     *   op BN_GRAD_PARAMS, in (x, stats, -, dy, gamma, beta): dy is the gradient reaching the
     *     activation's output (in[2], the activation gradient's value, is never stored:
     *     NULL); the kernel masks dy by the activation's derivative at the normalised value,
     *     recomputed from x and the coefficients exactly as the forward call computed it;
     *   op BN_GRAD_X, in (x, stats, gamma, -, dparams, dy, beta): the same for dx. */
    SN_FUSED_BN_RELU,
    SN_FUSED_BN_RELU6,
    /* bn_grad_x whose output's sum over every axis but the last is read (reduce_sum: the bias
     * gradient of the layer before the BatchNormalization, a Conv2D or Dense with use_bias):
     * op BN_GRAD_X, its own inputs, out2[0] that sum ([C] elements), attr2[0] the
     * reduce_sum's attributes. A BN_GRAD_X call of SN_FUSED_BN_RELU/RELU6 carries the same
     * out2 where it applies (graph/plan_fuse.c, fuse_bn_grad_sum). */
    SN_FUSED_BN_GRAD_SUM,
    SN_FUSED_COUNT
} sn_fused_kind;
#define SN_FUSED_MAX_OUT2 2

struct sn_kernel;

typedef struct sn_kcall {
    sn_op op;
    /* Read at every run, not copied: a learning-rate schedule changes optim.lr between runs
     * (nn/train/lr_schedule.c). Owned by the caller (the graph's node, or the test). */
    const sn_attrs *attr;
    int32_t id;                            /* the graph node it computes (messages, profiles) */
    sn_tdesc y;                            /* output dtype and shape */
    int n_in;
    sn_tdesc x[SN_MAX_INPUTS];             /* input dtypes and shapes */
    const void *in[SN_MAX_INPUTS];         /* input buffers, contiguous */
    void *out;                             /* output buffer, contiguous */
    void *scratch;                         /* scratch_bytes asked for by prepare */
    size_t scratch_bytes;
    void *state;                           /* the kernel's own, from prepare */
    void *stream;                          /* the backend's stream (backend.h); NULL on CPU */
    int64_t step;                          /* the plan's step counter (dropout) */
    /* Changes whenever the variables the kernel reads may have changed since its last run (a
     * caller wrote them, or a side effect did): a kernel that keeps a copy of a weight in its
     * own layout (the bf16 LSTM step) makes it again when this differs from its last run's. */
    uint64_t vars_version;
    bool bf16;                             /* sn_plan_opts.bf16_compute (matmul, conv2d) */
    bool fp32_strict;                      /* sn_plan_opts.fp32_strict (GPU: no TF32) */
    /* Epilogue: the planner fused a following relu into this bias_add, so the kernel writes
     * max(x + b, 0) in one pass (see plan.c, fuse_bias_relu). Only bias_add sees it set. */
    bool relu;
    /* A call that computes several graph nodes at once (graph/plan_fuse.c): fused names the
     * pattern (SN_FUSED_*, 0 = the op alone). Its extra inputs follow the op's own in x/in;
     * its extra outputs (with the attributes of the nodes they are) are y2/out2/attr2. */
    int fused;
    int n_out2;
    sn_tdesc y2[SN_FUSED_MAX_OUT2];
    void *out2[SN_FUSED_MAX_OUT2];
    const sn_attrs *attr2[SN_FUSED_MAX_OUT2];
    /* A gradient op whose forward kernel may keep what it needs (graph op_def
     * fwd_state_input: lstm_layer_grad): the forward's call, already prepared, and the kernel
     * chosen for it, so that this kernel reads fwd->state only when that kernel is its own
     * partner. NULL when the forward is not in the plan as a call of its own. */
    const struct sn_kcall *fwd;
    const struct sn_kernel *fwd_kernel;
} sn_kcall;

typedef struct sn_kernel {
    const char *impl; /* "ref", "avx512", "dnnl", "openblas", ... (shown by profiles) */
    /* Whether this kernel handles the call's dtypes and shapes; NULL = all. */
    bool (*supports)(const sn_kcall *c);
    /* Optional, at plan time: build state, say how much scratch memory a run needs. Input and
     * output pointers are not yet valid here. */
    sn_status (*prepare)(sn_kcall *c, size_t *scratch_bytes);
    /* One execution. Threads come from sn_parallel. */
    sn_status (*run)(sn_kcall *c);
    void (*release)(sn_kcall *c); /* optional: free state */
    /* Optional: 1 + the index of an input (of the output's size and dtype) that the kernel may
     * write its output over. Where that input's value has no reader after this call, the
     * planner gives the output the input's buffer (c->out == c->in[i]); 0: never. */
    int overwrite_input;
    /* The planner may store an operand of this kernel's calls in bfloat16 under mixed bf16
     * (graph/plan_bf16.c): supports() accepts a bfloat16 input or output exactly where the
     * kernel reads or writes one as it would compute with the float32 one under
     * sn_kcall.bf16 (the same roundings), and refuses it everywhere else. */
    bool bf16_io;
} sn_kernel;

typedef struct sn_kernel_table {
    const sn_kernel *k[SN_OP_COUNT];
    const sn_kernel *fused[SN_FUSED_COUNT]; /* by sn_fused_kind; NULL: never fused */
} sn_kernel_table;

/* Reference kernels (backend/ref/): one registration function per op family. */
void sn_ref_register_elementwise(sn_kernel_table *t);
void sn_ref_register_reduce(sn_kernel_table *t);
void sn_ref_register_softmax(sn_kernel_table *t);
void sn_ref_register_shape(sn_kernel_table *t);
void sn_ref_register_matmul(sn_kernel_table *t);
void sn_ref_register_conv(sn_kernel_table *t);
void sn_ref_register_depthwise(sn_kernel_table *t); /* called by sn_ref_register_conv */
void sn_ref_register_state(sn_kernel_table *t); /* leaves are not kernels; assign, optimizer */
void sn_ref_register_rnn(sn_kernel_table *t);
void sn_ref_register_rnn_layer(sn_kernel_table *t); /* whole-layer LSTM, GRU (ref_rnn_layer.c) */
void sn_ref_register_activation(sn_kernel_table *t); /* gelu, silu, elu, leaky_relu, relu6 */
void sn_ref_register_attention(sn_kernel_table *t); /* layer_norm, gelu_tanh, attention */
void sn_ref_register_batch_norm(sn_kernel_table *t); /* bn_stats, bn_train and gradients */

/* Fast CPU kernels (backend/cpu/): they override reference rows. */
void sn_cpu_register_elementwise(sn_kernel_table *t);
void sn_cpu_register_reduce(sn_kernel_table *t);
void sn_cpu_register_softmax(sn_kernel_table *t);
void sn_cpu_register_matmul(sn_kernel_table *t);
void sn_cpu_register_conv(sn_kernel_table *t);
void sn_cpu_register_depthwise(sn_kernel_table *t); /* called by sn_cpu_register_conv */
void sn_cpu_register_state(sn_kernel_table *t);
void sn_cpu_register_rnn(sn_kernel_table *t);
void sn_cpu_register_gru_rb(sn_kernel_table *t); /* GRU reset_after=False (cpu_gru_rb.c) */
void sn_cpu_register_rnn_layer(sn_kernel_table *t); /* oneDNN LSTM, GRU (cpu_rnn_layer.c) */
/* the same ops on the loop's kernels (cpu_rnn_layer_loop.c): where oneDNN is not built, and
 * the whole table under SN_RNN=loop */
void sn_cpu_register_rnn_layer_loop(sn_kernel_table *t);
void sn_cpu_register_shape(sn_kernel_table *t);
void sn_cpu_register_activation(sn_kernel_table *t);
void sn_cpu_register_fused(sn_kernel_table *t); /* backend/cpu/cpu_fused*.c */
void sn_cpu_register_attention(sn_kernel_table *t); /* layer_norm, gelu_tanh, attention */
void sn_cpu_register_lstm_step(sn_kernel_table *t); /* lstm_dense_step in bf16 (cpu_lstm_step.c) */
void sn_cpu_register_batch_norm(sn_kernel_table *t); /* bn_* (cpu_batch_norm.c) */

/* Tables built once: the reference alone, and the CPU backend (reference + fast). */
const sn_kernel_table *sn_ref_kernels(void);
const sn_kernel_table *sn_cpu_kernels(void);

/* Picks the kernel for a call: the table's row when it supports the call, else the reference
 * row, else NULL. A fused call (c->fused) gets the table's fused kernel or NULL. */
const sn_kernel *sn_kernel_select(const sn_kernel_table *t, const sn_kcall *c);

/* The dropout mask, shared by every implementation so that they agree bit for bit: element i
 * of node `mask_node` at plan step `step` is kept when this returns true. */
static inline uint64_t sn_dropout_hi(int32_t mask_node, int64_t step) {
    return ((uint64_t)(uint32_t)mask_node << 40) | ((uint64_t)step & ((1ull << 40) - 1));
}
static inline bool sn_dropout_keep(uint64_t seed, int32_t mask_node, int64_t step, int64_t i,
                                   double rate) {
    uint32_t r[4];
    sn_philox(seed, sn_dropout_hi(mask_node, step), (uint64_t)i >> 2, r);
    return sn_u32_to_unit(r[i & 3]) >= (float)rate;
}

/* Dtype-generic element access for reference kernels. */
static inline double sn_load(sn_dtype t, const void *p, int64_t i) {
    switch (t) {
    case SN_F32: return ((const float *)p)[i];
    case SN_F64: return ((const double *)p)[i];
    case SN_BF16: return sn_bf16_to_f32(((const uint16_t *)p)[i]);
    case SN_I32: return ((const int32_t *)p)[i];
    case SN_U8: return ((const uint8_t *)p)[i];
    default: return 0;
    }
}
static inline void sn_store(sn_dtype t, void *p, int64_t i, double v) {
    switch (t) {
    case SN_F32: ((float *)p)[i] = (float)v; break;
    case SN_F64: ((double *)p)[i] = v; break;
    case SN_BF16: ((uint16_t *)p)[i] = sn_f32_to_bf16((float)v); break;
    case SN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case SN_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    default: break;
    }
}

#endif
