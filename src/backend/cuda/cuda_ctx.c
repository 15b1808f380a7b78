/* One GPU's context: the compute stream, a copy stream with two pinned staging buffers, the
 * cuBLASLt and cuDNN handles, one workspace for both, and the device error flag. */
#include <cublasLt.h>
#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_ctx.h"
#include "backend/cuda/cuda_util.h"
#include "backend/gpu.h"

struct sn_cuda_ctx {
    int device;
    bool tf32;
    cudaStream_t stream, copy;
    cublasLtHandle_t lt;
    cudnnHandle_t dnn;
    void *workspace;
    size_t workspace_bytes;
    int *flag; /* device int: label errors (cuda_kernels.h) */
    /* Staging: buffer k is free again once done[k] has fired. */
    void *stage[2];
    size_t stage_bytes;
    cudaEvent_t done[2];
    cudaEvent_t queued; /* the compute stream's work so far, which may still read dst */
    int next;
};

sn_cuda_ctx_opts sn_cuda_ctx_opts_defaults(void) {
    return (sn_cuda_ctx_opts){.device = 0, .tf32 = true, .workspace_bytes = 64u << 20,
                              .staging_bytes = 16u << 20};
}

static sn_status ctx_init(sn_cuda_ctx *c, const sn_cuda_ctx_opts *o) {
    SN_CUDA(cudaSetDevice(o->device));
    SN_CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    SN_CUDA(cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking));
    SN_CUBLAS(sn_cu.cublasLtCreate(&c->lt));
    SN_CUDNN(sn_cu.cudnnCreate(&c->dnn));
    SN_CUDNN(sn_cu.cudnnSetStream(c->dnn, c->stream));
    if (o->workspace_bytes) SN_CUDA(cudaMalloc(&c->workspace, o->workspace_bytes));
    c->workspace_bytes = o->workspace_bytes;
    SN_CUDA(cudaMalloc((void **)&c->flag, sizeof(int)));
    SN_CUDA(cudaMemset(c->flag, 0, sizeof(int)));
    c->stage_bytes = o->staging_bytes;
    for (int k = 0; k < 2; k++) {
        if (c->stage_bytes) SN_CUDA(cudaHostAlloc(&c->stage[k], c->stage_bytes, cudaHostAllocDefault));
        SN_CUDA(cudaEventCreateWithFlags(&c->done[k], cudaEventDisableTiming));
    }
    SN_CUDA(cudaEventCreateWithFlags(&c->queued, cudaEventDisableTiming));
    return SN_OK;
}

sn_status sn_cuda_ctx_new(const sn_cuda_ctx_opts *o, sn_cuda_ctx **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_cuda_ctx_new: out is NULL");
    *out = NULL;
    sn_cuda_ctx_opts d = sn_cuda_ctx_opts_defaults();
    if (!o) o = &d;
    int n = sn_gpu_count();
    if (o->device < 0 || o->device >= n) {
        if (n == 0)
            return sn_errorf(SN_ERR_NOT_FOUND, "GPU:%d does not exist: no GPU was found (%s)",
                             o->device, sn_gpu_none_reason());
        return sn_errorf(SN_ERR_NOT_FOUND, "GPU:%d does not exist: this machine has GPU:0 to GPU:%d",
                         o->device, n - 1);
    }
    SN_TRY(sn_cuda_libs_load_dnn()); /* cuBLASLt and cuDNN, opened on the first context */
    sn_cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return sn_errorf(SN_ERR_NOMEM, "sn_cuda_ctx_new: out of host memory");
    c->device = o->device;
    c->tf32 = o->tf32;
    sn_status st = ctx_init(c, o);
    if (st != SN_OK) {
        sn_cuda_ctx_free(c);
        return st;
    }
    *out = c;
    return SN_OK;
}

/* Cleanup: results deliberately unchecked, a second error would only hide the first. */
void sn_cuda_ctx_free(sn_cuda_ctx *c) {
    if (!c) return;
    cudaSetDevice(c->device);
    if (c->stream) cudaStreamSynchronize(c->stream);
    if (c->copy) cudaStreamSynchronize(c->copy);
    for (int k = 0; k < 2; k++) {
        if (c->stage[k]) cudaFreeHost(c->stage[k]);
        if (c->done[k]) cudaEventDestroy(c->done[k]);
    }
    if (c->queued) cudaEventDestroy(c->queued);
    if (c->flag) cudaFree(c->flag);
    if (c->workspace) cudaFree(c->workspace);
    if (c->dnn) sn_cu.cudnnDestroy(c->dnn);
    if (c->lt) sn_cu.cublasLtDestroy(c->lt);
    if (c->copy) cudaStreamDestroy(c->copy);
    if (c->stream) cudaStreamDestroy(c->stream);
    free(c);
}

sn_cuda_stream sn_cuda_ctx_stream(const sn_cuda_ctx *c) { return (sn_cuda_stream)c->stream; }
int *sn_cuda_ctx_error_flag(const sn_cuda_ctx *c) { return c->flag; }
void *sn_cuda_ctx_lt(const sn_cuda_ctx *c) { return c->lt; }
void *sn_cuda_ctx_dnn(const sn_cuda_ctx *c) { return c->dnn; }
bool sn_cuda_ctx_tf32(const sn_cuda_ctx *c) { return c->tf32; }
void *sn_cuda_ctx_workspace(const sn_cuda_ctx *c, size_t *bytes) {
    *bytes = c->workspace_bytes;
    return c->workspace;
}

sn_status sn_cuda_ctx_sync(sn_cuda_ctx *c) {
    SN_CUDA(cudaSetDevice(c->device));
    SN_CUDA(cudaStreamSynchronize(c->stream));
    int flag = 0;
    SN_CUDA(cudaMemcpy(&flag, c->flag, sizeof flag, cudaMemcpyDeviceToHost));
    if (flag != 0) {
        SN_CUDA(cudaMemset(c->flag, 0, sizeof(int)));
        return sn_errorf(SN_ERR_INVALID, "a label at example %d is outside [0, classes) "
                         "(sparse cross-entropy or accuracy on GPU:%d)", flag - 1, c->device);
    }
    return SN_OK;
}

sn_status sn_cuda_alloc(sn_cuda_ctx *c, size_t bytes, void **out) {
    *out = NULL;
    SN_CUDA(cudaSetDevice(c->device));
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return sn_errorf(SN_ERR_NOMEM, "GPU:%d: cudaMalloc of %zu bytes failed (out of device "
                         "memory)", c->device, bytes);
    }
    SN_CUDA(e);
    return SN_OK;
}

void sn_cuda_free(sn_cuda_ctx *c, void *p) {
    if (!p) return;
    cudaSetDevice(c->device);
    cudaFree(p);
}

sn_status sn_cuda_to_device(sn_cuda_ctx *c, void *dst, const void *src, size_t bytes) {
    SN_CUDA(cudaStreamSynchronize(c->stream));
    SN_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return SN_OK;
}

sn_status sn_cuda_to_host(sn_cuda_ctx *c, void *dst, const void *src, size_t bytes) {
    SN_CUDA(cudaStreamSynchronize(c->stream));
    SN_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return SN_OK;
}

sn_status sn_cuda_stage_to_device(sn_cuda_ctx *c, void *dst, const void *src, size_t bytes) {
    if (bytes > c->stage_bytes)
        return sn_errorf(SN_ERR_INVALID, "GPU:%d: a staged copy of %zu bytes exceeds the %zu-byte "
                         "staging buffer (sn_cuda_ctx_opts.staging_bytes)", c->device, bytes,
                         c->stage_bytes);
    int k = c->next;
    c->next ^= 1;
    SN_CUDA(cudaEventSynchronize(c->done[k])); /* the copy that last used buffer k */
    memcpy(c->stage[k], src, bytes);
    /* dst may still be read by queued steps: the copy starts after them. The overlap is the
     * host-side staging above while the GPU computes, and the copies of an executor that
     * alternates two device input buffers. */
    SN_CUDA(cudaEventRecord(c->queued, c->stream));
    SN_CUDA(cudaStreamWaitEvent(c->copy, c->queued, 0));
    SN_CUDA(cudaMemcpyAsync(dst, c->stage[k], bytes, cudaMemcpyHostToDevice, c->copy));
    SN_CUDA(cudaEventRecord(c->done[k], c->copy));
    SN_CUDA(cudaStreamWaitEvent(c->stream, c->done[k], 0));
    return SN_OK;
}

size_t sn_cuda_ctx_staging_bytes(const sn_cuda_ctx *c) { return c->stage_bytes; }
