/* Internal to backend/cpu/: the heavy kernels (matmul, convolution, pooling) by
 * implementation, so that the benchmark (examples/bench_kernels.c) and the tests can run each
 * candidate, not only the one sn_cpu_register_* installs. docs/kernels.md says which one wins
 * per op and why. */
#ifndef SN_BACKEND_CPU_BLAS_H
#define SN_BACKEND_CPU_BLAS_H

#include "backend/kernel.h"

/* y = op(a) @ op(b) + beta * y, row-major (op: transposed when ta / tb), on OpenBLAS with one
 * thread whether or not the caller is inside a parallel region: OpenBLAS cuts a product by its
 * own thread count, and on some CPUs that changes the bits (cpu_matmul.c). Every sgemm of the
 * CPU backend goes through here; parallel callers split the work themselves, by the shape. */
void sn_cpu_sgemm_1t(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t lda, const float *b, int64_t ldb, float beta, float *y, int64_t ldy);

/* MATMUL by "openblas" (cblas_sgemm) or "dnnl" (oneDNN matmul); NULL when not built. */
const sn_kernel *sn_cpu_matmul_impl(const char *impl);
/* Tests: whether a bf16 matmul with tb makes its bf16 copy of b itself (default) or leaves
 * the transposition to oneDNN's reorder; same bits either way (cpu_matmul.c). */
void sn_cpu_matmul_set_own_tb(bool on);

/* CONV2D, CONV2D_BWD_DATA, CONV2D_BWD_FILTER by "dnnl" (oneDNN convolution, weights layout
 * chosen by channel count, Winograd where cpu_conv_wino.h says), "dnnl_blocked" /
 * "dnnl_plain" (direct oneDNN with its own blocked weights layout / with plain HWIO weights,
 * for measurements), "dnnl_wino" (Winograd only), "wino_avx2" (sinter's f32 Winograd on AVX2,
 * cpu_conv_wino_f32.c) or "openblas" (im2col + sgemm);
 * NULL when not built or for another op. */
const sn_kernel *sn_cpu_conv_impl(sn_op op, const char *impl);

/* Depthwise convolution (the three DEPTHWISE ops, cpu_depthwise.c) by name: "dnnl" (the
 * table's, f32 compute) or "dnnl_bf16" (bf16 compute under sn_kcall.bf16 on AVX512-BF16, for
 * tests and A/B measurements); NULL without oneDNN. */
const sn_kernel *sn_cpu_depthwise_impl(const char *impl);

/* The im2col + sgemm convolution (cpu_conv_gemm.c): one kernel for the three conv ops. */
const sn_kernel *sn_cpu_conv_gemm_kernel(void);

/* CONV2D_BWD_FILTER with one input channel (cpu_conv_c1.c); supports() says where. */
const sn_kernel *sn_cpu_conv_c1_kernel(void);
/* The fused first-layer conv2d + bias + relu (+ max-pool) (cpu_conv_fused.c). */
const sn_kernel *sn_cpu_conv_fused_kernel(void);

/* Pooling (MAX/AVG_POOL2D and their gradients): hand-written vectorised loops ("avx512" with
 * an AVX2/SSE fallback chosen at load time). */
const sn_kernel *sn_cpu_pool_impl(sn_op op);

/* Shared by the convolution implementations (cpu_conv_geom.c): the geometry of one NHWC convolution with HWIO
 * weights, taken from a CONV2D / CONV2D_BWD_DATA / CONV2D_BWD_FILTER call. pad_bottom and
 * pad_right follow from the output shape and may exceed pad_top / pad_left (TF SAME). */
typedef struct sn_conv_geom {
    int64_t n, h, w, c;     /* x */
    int64_t kh, kw, f;      /* w: [kh, kw, c, f] */
    int64_t oh, ow;         /* y: [n, oh, ow, f] */
    int64_t sh, sw, pt, pl, pb, pr;
} sn_conv_geom;
/* False when the call is not an f32 NHWC convolution whose shapes agree. */
bool sn_conv_geom_of(const sn_kcall *c, sn_conv_geom *g);
/* sn_conv_geom_of where the operands a convolution converts to bf16 under mixed bf16 (x of
 * the forward and the filter gradient, dy of both gradients) may be bfloat16 already
 * (graph/plan_bf16.c); the weights and the output are float32. Only oneDNN's convolution
 * (cpu_conv.c) takes such calls. */
bool sn_conv_geom_bf16_of(const sn_kcall *c, sn_conv_geom *g);

#endif
