/* The CUDA backend's per-device state and its library calls, internal to src/backend/cuda/ and
 * to tests: one context per GPU (stream, cuBLASLt and cuDNN handles, a workspace, the error
 * flag that kernels set), device memory, pinned staging with asynchronous copies, and prepared
 * matmul, convolution and pooling calls over device pointers (f32, NHWC, Keras HWIO kernels).
 *
 * Ownership: *_new allocates, the matching *_free releases (NULL is accepted). Every call
 * checks the foreign library (cuda_util.h). None of this has run on a GPU yet (docs/cuda.md). */
#ifndef SN_BACKEND_CUDA_CTX_H
#define SN_BACKEND_CUDA_CTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_kernels.h"
#include "sinter/status.h"

typedef struct sn_cuda_ctx sn_cuda_ctx;

typedef struct sn_cuda_ctx_opts {
    int device;             /* GPU index */
    bool tf32;              /* matmul and convolution may use TF32 tensor cores (default true,
                               as TensorFlow on Ampere and newer); false = fp32-strict */
    size_t workspace_bytes; /* cuBLASLt/cuDNN workspace (default 64 MiB) */
    size_t staging_bytes;   /* each of the two pinned host staging buffers (default 16 MiB) */
} sn_cuda_ctx_opts;

sn_cuda_ctx_opts sn_cuda_ctx_opts_defaults(void);
/* SN_ERR_NOT_FOUND when the GPU does not exist (no GPU at all: the message says why). */
sn_status sn_cuda_ctx_new(const sn_cuda_ctx_opts *o, sn_cuda_ctx **out);
void sn_cuda_ctx_free(sn_cuda_ctx *c);
sn_cuda_stream sn_cuda_ctx_stream(const sn_cuda_ctx *c);
/* The device int that kernels set to 1 + row on a label out of range (cuda_kernels.h). */
int *sn_cuda_ctx_error_flag(const sn_cuda_ctx *c);
/* Waits for the stream, then turns a set error flag into SN_ERR_INVALID naming the row (and
 * clears it). */
sn_status sn_cuda_ctx_sync(sn_cuda_ctx *c);

/* Device memory: plain cudaMalloc (never managed memory), 256-byte aligned. */
sn_status sn_cuda_alloc(sn_cuda_ctx *c, size_t bytes, void **out);
void sn_cuda_free(sn_cuda_ctx *c, void *p);
/* Synchronous copies (tests, checkpoints); the stream is drained first. */
sn_status sn_cuda_to_device(sn_cuda_ctx *c, void *dst, const void *src, size_t bytes);
sn_status sn_cuda_to_host(sn_cuda_ctx *c, void *dst, const void *src, size_t bytes);
/* Asynchronous host -> device copy through pinned staging: src is copied into one of two
 * pinned buffers (waiting only until that buffer's previous copy finished, so batch k+1 is
 * staged while step k runs), then copied on a second stream; the compute stream waits for it
 * by an event. bytes must fit the staging buffer. src may be reused when this returns. */
sn_status sn_cuda_stage_to_device(sn_cuda_ctx *c, void *dst, const void *src, size_t bytes);
/* The size of each staging buffer (sn_cuda_ctx_opts.staging_bytes). */
size_t sn_cuda_ctx_staging_bytes(const sn_cuda_ctx *c);

/* C [M, N] = op(A) op(B) over row-major f32 (A [M, K] or [K, M] when ta; B likewise), through
 * cuBLASLt with the heuristic's first algorithm, chosen once at plan time. */
typedef struct sn_cuda_matmul sn_cuda_matmul;
sn_status sn_cuda_matmul_new(sn_cuda_ctx *c, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                             sn_cuda_matmul **out);
sn_status sn_cuda_matmul_run(sn_cuda_matmul *p, const float *a, const float *b, float *cout);
void sn_cuda_matmul_free(sn_cuda_matmul *p);
/* The general form: `batch` products (a strided batch; a_stride or b_stride 0 = that operand
 * is one matrix shared by every product; C is dense, m * n apart) with TF32 or not. */
typedef struct sn_cuda_matmul_desc {
    int64_t m, n, k;
    bool ta, tb;
    int64_t batch, a_stride, b_stride; /* in elements */
    bool tf32;
} sn_cuda_matmul_desc;
sn_status sn_cuda_matmul_new_desc(sn_cuda_ctx *c, const sn_cuda_matmul_desc *d,
                                  sn_cuda_matmul **out);

/* A 2-D convolution as the graph describes it: x [N, H, W, C], w [KH, KW, C, F] (Keras HWIO),
 * y [N, OH, OW, F]; explicit top/left padding, bottom/right implied by the output size. */
typedef struct sn_cuda_conv_desc {
    int64_t n, h, w, c, kh, kw, f, oh, ow;
    int stride_h, stride_w, pad_top, pad_left;
    bool fp32_strict; /* no TF32 tensor ops for this call, whatever the context's default */
} sn_cuda_conv_desc;
typedef struct sn_cuda_conv sn_cuda_conv;
/* SN_ERR_UNSUPPORTED for asymmetric padding (cuDNN pads both sides alike). */
sn_status sn_cuda_conv_new(sn_cuda_ctx *c, const sn_cuda_conv_desc *d, sn_cuda_conv **out);
sn_status sn_cuda_conv_fwd(sn_cuda_conv *p, const float *x, const float *w_hwio, float *y);
sn_status sn_cuda_conv_bwd_data(sn_cuda_conv *p, const float *dy, const float *w_hwio, float *dx);
sn_status sn_cuda_conv_bwd_filter(sn_cuda_conv *p, const float *x, const float *dy,
                                  float *dw_hwio);
void sn_cuda_conv_free(sn_cuda_conv *p);

/* Max or average pooling (average over the window's valid elements, Keras "same"), NHWC. */
typedef struct sn_cuda_pool_desc {
    int64_t n, h, w, c, oh, ow;
    int pool_h, pool_w, stride_h, stride_w, pad_top, pad_left;
    bool max;
} sn_cuda_pool_desc;
typedef struct sn_cuda_pool sn_cuda_pool;
sn_status sn_cuda_pool_new(sn_cuda_ctx *c, const sn_cuda_pool_desc *d, sn_cuda_pool **out);
sn_status sn_cuda_pool_fwd(sn_cuda_pool *p, const float *x, float *y);
/* dx from x and dy; max pooling recomputes y into the plan's own buffer first (the graph's
 * gradient op has no y input). */
sn_status sn_cuda_pool_bwd(sn_cuda_pool *p, const float *x, const float *dy, float *dx);
void sn_cuda_pool_free(sn_cuda_pool *p);

/* steps_per_execution as a CUDA graph (cuda_graph.c): what is issued on c's stream between
 * begin and end is captured (not run); launch runs it n times on the stream, in order. A
 * capture must not synchronise (no copies to the host, no sn_cuda_ctx_sync inside). */
typedef struct sn_cuda_graph sn_cuda_graph;
sn_status sn_cuda_capture_begin(sn_cuda_ctx *c);
sn_status sn_cuda_capture_end(sn_cuda_ctx *c, sn_cuda_graph **out);
sn_status sn_cuda_graph_launch(sn_cuda_graph *g, int64_t n);
void sn_cuda_graph_free(sn_cuda_graph *g);

/* Internal to the backend's files: the handles of a context. */
void *sn_cuda_ctx_lt(const sn_cuda_ctx *c);    /* cublasLtHandle_t */
void *sn_cuda_ctx_dnn(const sn_cuda_ctx *c);   /* cudnnHandle_t */
void *sn_cuda_ctx_workspace(const sn_cuda_ctx *c, size_t *bytes);
bool sn_cuda_ctx_tf32(const sn_cuda_ctx *c);

#endif
