/* Internal to the CPU recurrences (cpu_rnn.c: LSTM and GRU, cpu_gru_rb.c: GRU with
 * reset_after=False): the one choice of sgemm for a step's recurrent product, and running a
 * kernel's rows over the threads. Everything is static inline: nothing here is exported. */
#ifndef SN_BACKEND_CPU_RNN_IMPL_H
#define SN_BACKEND_CPU_RNN_IMPL_H

#include "backend/cpu/cpu_blas.h"
#include "backend/kernel.h"
#ifdef SN_HAVE_DNNL
#include <dnnl.h>
#define SN_RNN_IMPL "dnnl_sgemm"
#else
#define SN_RNN_IMPL "openblas"
#endif

/* C = A @ B (B^T when tb) + beta * C, row-major, single-threaded inside a team's thread.
 * oneDNN's sgemm where it is built: Debian's OpenBLAS does not know this CPU and runs its SSE3
 * "Prescott" kernels (docs/kernels.md), 3x slower here. Returns false when the call failed. */
static inline bool sn_rnn_gemm(bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                               int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                               int64_t ldc) {
#ifdef SN_HAVE_DNNL
    return dnnl_sgemm('N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc) ==
           dnnl_success;
#else
    sn_cpu_sgemm_1t(false, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    return true;
#endif
}

/* What a recurrence's tasks share: the call, its sizes, and whether a GEMM failed. */
typedef struct sn_rnn_ctx {
    const sn_kcall *c;
    int64_t B, T, U;
    int64_t t;  /* the step, for per-step unit splits */
    int failed; /* a GEMM call failed (set by any thread) */
} sn_rnn_ctx;

static inline void sn_rnn_fail(sn_rnn_ctx *x) {
    __atomic_store_n(&x->failed, 1, __ATOMIC_RELAXED);
}

static inline sn_status sn_rnn_status(const sn_rnn_ctx *x, const char *op) {
    return x->failed ? sn_errorf(SN_ERR_BACKEND, "%s: a GEMM call of the recurrence failed", op)
                     : SN_OK;
}

/* Batch rows are independent through the whole recurrence: fn(ctx, ith, nth) takes its slice
 * of rows (sn_split_range of B) through all T steps, one slice per thread, no barrier per
 * step. The output is [B, T, ...]; U is the first dimension of input u_in (the recurrent
 * kernel [U, G*U]). */
static inline sn_status sn_rnn_run_rows(sn_kcall *c, int u_in, sn_task_fn fn, const char *op) {
    sn_rnn_ctx x = {.c = c, .B = c->y.shape.dim[0], .T = c->y.shape.dim[1],
                    .U = c->x[u_in].shape.dim[0]};
    int nth = sn_num_threads();
    sn_parallel(fn, &x, (int)(x.B < nth ? x.B : nth));
    return sn_rnn_status(&x, op);
}

#endif
