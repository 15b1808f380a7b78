/* sinter's own CUDA kernels (cuda_kernels.cu), as plain C launchers over device pointers: f32
 * data, contiguous row-major, launched asynchronously on `stream`. Each returns SN_OK or the
 * launch error (SN_ERR_BACKEND); errors inside a kernel (a label out of range) are written to
 * a device flag the caller reads after synchronising. The kernel rows of the CUDA backend call
 * these; tests/test_cuda_kernels.c compares each with the reference kernels of backend/ref/.
 *
 * None of this has run on a GPU yet (docs/cuda.md): it compiles for sm_90 in every CUDA build. */
#ifndef SN_BACKEND_CUDA_KERNELS_H
#define SN_BACKEND_CUDA_KERNELS_H

#include <stdint.h>

#include <stdbool.h>

#include "sinter/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *sn_cuda_stream; /* = cudaStream_t, without the runtime header */

#define SN_CUDA_MAX_DIMS 8

/* A shape and the element strides of an operand read through a NumPy broadcast to it (0 on a
 * broadcast dimension). Passed to kernels by value. */
typedef struct sn_cuda_bcast {
    int ndim;
    int64_t dim[SN_CUDA_MAX_DIMS];
    int64_t sa[SN_CUDA_MAX_DIMS], sb[SN_CUDA_MAX_DIMS];
} sn_cuda_bcast;

typedef enum sn_cuda_binary { SN_CU_ADD, SN_CU_SUB, SN_CU_MUL, SN_CU_DIV } sn_cuda_binary;

typedef enum sn_cuda_unary {
    SN_CU_RELU, SN_CU_SIGMOID, SN_CU_TANH, SN_CU_EXP, SN_CU_LOG, SN_CU_SQRT, SN_CU_NEG,
    SN_CU_GELU, SN_CU_SILU, SN_CU_ELU, SN_CU_LEAKY_RELU, SN_CU_RELU6,
    SN_CU_GELU_TANH /* Keras gelu(approximate=True) */
} sn_cuda_unary;

/* (v, dy) -> dx; v is x, except y = f(x) for sigmoid and tanh (as the graph's *_GRAD ops). */
typedef enum sn_cuda_grad {
    SN_CU_RELU_GRAD, SN_CU_SIGMOID_GRAD, SN_CU_TANH_GRAD, SN_CU_GELU_GRAD, SN_CU_SILU_GRAD,
    SN_CU_ELU_GRAD, SN_CU_LEAKY_RELU_GRAD, SN_CU_RELU6_GRAD, SN_CU_GELU_TANH_GRAD
} sn_cuda_grad;

/* a, b [n] -> out [n] */
sn_status sn_cuda_binary_f32(sn_cuda_stream s, sn_cuda_binary op, int64_t n, const float *a,
                             const float *b, float *out);
/* a, b broadcast to bc->dim -> out [bc->dim] (bc->sa, bc->sb: their broadcast strides) */
sn_status sn_cuda_binary_bcast_f32(sn_cuda_stream s, sn_cuda_binary op, const sn_cuda_bcast *bc,
                                   const float *a, const float *b, float *out);
/* x [rows, ch], b [ch] -> out [rows, ch] = x + b, or max(x + b, 0) when relu */
sn_status sn_cuda_bias_add_f32(sn_cuda_stream s, int64_t rows, int64_t ch, const float *x,
                               const float *b, bool relu, float *out);
/* x [n] -> out [n]; alpha for elu and leaky_relu */
sn_status sn_cuda_unary_f32(sn_cuda_stream s, sn_cuda_unary op, int64_t n, const float *x,
                            double alpha, float *out);
/* v [n], dy [n] -> dx [n] */
sn_status sn_cuda_grad_f32(sn_cuda_stream s, sn_cuda_grad op, int64_t n, const float *v,
                           const float *dy, double alpha, float *dx);
/* x [n] f32 -> out [n] bf16 (round to nearest even, as sn_f32_to_bf16), and back */
sn_status sn_cuda_f32_to_bf16(sn_cuda_stream s, int64_t n, const float *x, uint16_t *out);
sn_status sn_cuda_bf16_to_f32(sn_cuda_stream s, int64_t n, const uint16_t *x, float *out);
/* x [n] -> out [n] = keep ? x / (1 - rate) : 0, keep = sn_dropout_keep(seed, mask_node, step,
 * i, rate) bit for bit (the same Philox stream as the CPU kernels, so the same mask) */
sn_status sn_cuda_dropout_f32(sn_cuda_stream s, int64_t n, const float *x, uint64_t seed,
                              int32_t mask_node, int64_t step, double rate, float *out);
/* x [outer, len, inner] -> out [outer, inner]: sum, mean or max over len, each output summed by
 * one block in a fixed order (run-to-run identical) */
typedef enum sn_cuda_reduce { SN_CU_SUM, SN_CU_MEAN, SN_CU_MAX } sn_cuda_reduce;
sn_status sn_cuda_reduce_f32(sn_cuda_stream s, sn_cuda_reduce op, int64_t outer, int64_t len,
                             int64_t inner, const float *x, float *out);
/* x [rows, len] -> out [rows, len]: softmax or log_softmax over the last axis */
sn_status sn_cuda_softmax_f32(sn_cuda_stream s, int64_t rows, int64_t len, const float *x,
                              bool log_out, float *out);
/* y, dy [rows, len] -> dx: softmax y * (dy - sum(dy y)); log_softmax dy - exp(y) sum(dy) */
sn_status sn_cuda_softmax_grad_f32(sn_cuda_stream s, int64_t rows, int64_t len, const float *y,
                                   const float *dy, bool log_in, float *dx);
/* logits [rows, classes], labels [rows] i32 -> loss [rows] = logsumexp - logit[label].
 * A label outside [0, classes) sets *bad (device int) to 1 + that row (first writer wins). */
sn_status sn_cuda_sparse_xent_f32(sn_cuda_stream s, int64_t rows, int64_t classes,
                                  const float *logits, const int32_t *labels, float *loss,
                                  int *bad);
/* logits, labels, dloss [rows] -> dlogits [rows, classes] = (softmax - onehot) * dloss */
sn_status sn_cuda_sparse_xent_grad_f32(sn_cuda_stream s, int64_t rows, int64_t classes,
                                       const float *logits, const int32_t *labels,
                                       const float *dloss, float *dlogits, int *bad);
/* logits [rows, classes], labels [rows] -> out [rows] f32: 1 where argmax == label */
sn_status sn_cuda_sparse_accuracy_f32(sn_cuda_stream s, int64_t rows, int64_t classes,
                                      const float *logits, const int32_t *labels, float *out,
                                      int *bad);

/* The fused optimizer update of one variable (Keras 3 semantics, as ref_state.c):
 * var, grad, slots [n] f32; iterations: device i32 scalar (updates done so far). */
typedef struct sn_cuda_optim {
    int kind; /* sn_optimizer_kind: 0 SGD, 1 Adam, 2 AdamW, 3 RMSprop */
    double lr, beta1, beta2, epsilon, momentum, rho, weight_decay;
    bool nesterov, centered;
} sn_cuda_optim;
sn_status sn_cuda_apply_optimizer_f32(sn_cuda_stream s, const sn_cuda_optim *o, int64_t n,
                                      float *var, const float *grad, const int32_t *iterations,
                                      float *slot0, float *slot1, float *slot2);
/* var [bc->dim] = (add ? var : 0) + value read through the broadcast strides bc->sb */
sn_status sn_cuda_assign_f32(sn_cuda_stream s, const sn_cuda_bcast *bc, const float *value,
                             bool add, float *var);

/* The i32 form (the iteration counter: iterations += 1). */
sn_status sn_cuda_assign_i32(sn_cuda_stream s, const sn_cuda_bcast *bc, const int32_t *value,
                             bool add, int32_t *var);
/* x [n] i32 -> out [n] f32 (exact below 2^24, rounded to nearest as (float) above), and f32 ->
 * i32 truncated toward zero as C's (int32_t) and TensorFlow's cast (NaN and out-of-range:
 * whatever the hardware's cvt.rzi gives, as on the CPU: undefined in C) */
sn_status sn_cuda_i32_to_f32(sn_cuda_stream s, int64_t n, const int32_t *x, float *out);
sn_status sn_cuda_f32_to_i32(sn_cuda_stream s, int64_t n, const float *x, int32_t *out);
/* Layer normalisation over the last axis, x [rows, ch]: y = (x - mean) / sqrt(var + eps) *
 * gamma + beta, one block per row (fixed-order sums; rows < 2^31, cuda_table.c checks). The gradient writes dx [rows, ch], then
 * dgamma [ch] and dbeta [ch] right after it (the graph op's flat output), each channel's sums
 * taken over the rows in order by one thread (run-to-run identical, no atomics), from the
 * row statistics the dx pass leaves in stats (device scratch of 2 * rows floats). */
sn_status sn_cuda_layer_norm_f32(sn_cuda_stream s, int64_t rows, int64_t ch, const float *x,
                                 const float *gamma, const float *beta, double eps, float *y);
sn_status sn_cuda_layer_norm_grad_f32(sn_cuda_stream s, int64_t rows, int64_t ch, const float *x,
                                      const float *gamma, const float *dy, double eps,
                                      float *stats, float *out); /* stats: 2 * rows floats */

/* The fused BatchNormalization training ops on x [m, ch] (graph/op_batch_norm.c says what
 * each computes): op 0 bn_stats (x) -> out [2, ch]; 1 bn_train (x, st, g, b); 2
 * bn_grad_params (x, st, dy) -> [2, ch]; 3 bn_grad_x (x, st, g, dy, dp). Channels < 2^31
 * (one block each for the sums, fixed-order trees). */
sn_status sn_cuda_bn_f32(sn_cuda_stream s, int op, int64_t m, int64_t ch, const float *x,
                         const float *st, const float *g, const float *b, const float *dy,
                         const float *dp, double eps, float *out);

/* HWIO [kh, kw, c, f] <-> cuDNN's NHWC filter KRSC [f, kh, kw, c], on the stream. */
sn_status sn_cuda_hwio_to_krsc(sn_cuda_stream s, int64_t kh, int64_t kw, int64_t c, int64_t f,
                               const float *in, float *out);
sn_status sn_cuda_krsc_to_hwio(sn_cuda_stream s, int64_t kh, int64_t kw, int64_t c, int64_t f,
                               const float *in, float *out);

#ifdef __cplusplus
}
#endif
#endif
