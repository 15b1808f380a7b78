/* Matmul through cuBLASLt. sinter's tensors are row-major; cuBLASLt's default is column-major,
 * and a row-major [M, N] C is the column-major [N, M] C^T = op(B)^T op(A)^T: so the call below
 * swaps A and B and keeps the transposes, with no copy. TF32 tensor cores are used unless the
 * context is fp32-strict (CUBLAS_COMPUTE_32F_FAST_TF32 vs CUBLAS_COMPUTE_32F). The algorithm is
 * the heuristic's first choice, taken once at plan time (no timing runs: the choice, and so the
 * result, is the same run after run). */
#include <cublasLt.h>
#include <stdlib.h>

#include "backend/cuda/cuda_ctx.h"
#include "backend/cuda/cuda_util.h"

struct sn_cuda_matmul {
    sn_cuda_ctx *ctx;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc; /* la: the B buffer, lb: the A buffer (swapped) */
    cublasLtMatmulAlgo_t algo;
};

void sn_cuda_matmul_free(sn_cuda_matmul *p) {
    if (!p) return;
    if (p->lc) sn_cu.cublasLtMatrixLayoutDestroy(p->lc);
    if (p->lb) sn_cu.cublasLtMatrixLayoutDestroy(p->lb);
    if (p->la) sn_cu.cublasLtMatrixLayoutDestroy(p->la);
    if (p->op) sn_cu.cublasLtMatmulDescDestroy(p->op);
    free(p);
}

/* A strided batch on one layout: `count` matrices `stride` elements apart (0: one matrix
 * shared by every batch, cuBLAS's broadcast). */
static sn_status set_batch(cublasLtMatrixLayout_t l, int64_t count, int64_t stride) {
    int32_t n = (int32_t)count;
    SN_CUBLAS(sn_cu.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &n,
                                                     sizeof n));
    SN_CUBLAS(sn_cu.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                     &stride, sizeof stride));
    return SN_OK;
}

static sn_status matmul_init(sn_cuda_matmul *p, const sn_cuda_matmul_desc *d) {
    sn_cuda_ctx *c = p->ctx;
    int64_t m = d->m, n = d->n, k = d->k;
    bool ta = d->ta, tb = d->tb;
    cublasComputeType_t ct = d->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    SN_CUBLAS(sn_cu.cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F));
    cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    SN_CUBLAS(
        sn_cu.cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    SN_CUBLAS(
        sn_cu.cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    /* Column-major views: B row-major [K, N] is [N, K] ld N (or [N, K] stored, ld K, when tb);
     * A row-major [M, K] is [K, M] ld K (or ld M when ta); C is [N, M] ld N. */
    uint64_t ar = tb ? (uint64_t)k : (uint64_t)n, ac = tb ? (uint64_t)n : (uint64_t)k;
    uint64_t br = ta ? (uint64_t)m : (uint64_t)k, bc = ta ? (uint64_t)k : (uint64_t)m;
    SN_CUBLAS(sn_cu.cublasLtMatrixLayoutCreate(&p->la, CUDA_R_32F, ar, ac, (int64_t)ar));
    SN_CUBLAS(sn_cu.cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_32F, br, bc, (int64_t)br));
    SN_CUBLAS(sn_cu.cublasLtMatrixLayoutCreate(&p->lc, CUDA_R_32F, (uint64_t)n, (uint64_t)m, n));
    if (d->batch > 1) {
        SN_TRY(set_batch(p->la, d->batch, d->b_stride));
        SN_TRY(set_batch(p->lb, d->batch, d->a_stride));
        SN_TRY(set_batch(p->lc, d->batch, m * n));
    }

    size_t ws = 0;
    (void)sn_cuda_ctx_workspace(c, &ws);
    cublasLtMatmulPreference_t pref;
    SN_CUBLAS(sn_cu.cublasLtMatmulPreferenceCreate(&pref));
    cublasStatus_t e = sn_cu.cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    if (e == CUBLAS_STATUS_SUCCESS)
        e = sn_cu.cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)sn_cuda_ctx_lt(c), p->op, p->la,
                                                 p->lb, p->lc, p->lc, pref, 1, &h, &found);
    sn_cu.cublasLtMatmulPreferenceDestroy(pref);
    SN_CUBLAS(e);
    if (found < 1)
        return sn_errorf(SN_ERR_UNSUPPORTED, "cuBLASLt has no algorithm for a %lldx%lldx%lld f32 "
                         "matmul (ta=%d, tb=%d)", (long long)m, (long long)n, (long long)k, ta, tb);
    p->algo = h.algo;
    return SN_OK;
}

sn_status sn_cuda_matmul_new(sn_cuda_ctx *c, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                             sn_cuda_matmul **out) {
    sn_cuda_matmul_desc d = {.m = m, .n = n, .k = k, .ta = ta, .tb = tb, .batch = 1,
                             .tf32 = sn_cuda_ctx_tf32(c)};
    return sn_cuda_matmul_new_desc(c, &d, out);
}

sn_status sn_cuda_matmul_new_desc(sn_cuda_ctx *c, const sn_cuda_matmul_desc *d,
                                  sn_cuda_matmul **out) {
    *out = NULL;
    if (d->m <= 0 || d->n <= 0 || d->k <= 0 || d->batch < 1 || d->batch > INT32_MAX)
        return sn_errorf(SN_ERR_SHAPE, "GPU matmul: sizes M=%lld N=%lld K=%lld batch=%lld; "
                         "expected all > 0 (batch < 2^31)", (long long)d->m, (long long)d->n,
                         (long long)d->k, (long long)d->batch);
    sn_cuda_matmul *p = calloc(1, sizeof *p);
    if (!p) return sn_errorf(SN_ERR_NOMEM, "sn_cuda_matmul_new: out of host memory");
    p->ctx = c;
    sn_status st = matmul_init(p, d);
    if (st != SN_OK) {
        sn_cuda_matmul_free(p);
        return st;
    }
    *out = p;
    return SN_OK;
}

sn_status sn_cuda_matmul_run(sn_cuda_matmul *p, const float *a, const float *b, float *cout) {
    const float one = 1.0f, zero = 0.0f;
    size_t ws = 0;
    void *w = sn_cuda_ctx_workspace(p->ctx, &ws);
    SN_CUBLAS(sn_cu.cublasLtMatmul((cublasLtHandle_t)sn_cuda_ctx_lt(p->ctx), p->op, &one, b, p->la,
                                   a, p->lb, &zero, cout, p->lc, cout, p->lc, &p->algo, w, ws,
                                   (cudaStream_t)sn_cuda_ctx_stream(p->ctx)));
    return SN_OK;
}
