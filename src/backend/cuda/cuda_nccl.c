/* NCCL communicators for the GPU all-reduce (backend/gpu.h): one per local GPU, made together
 * in one NCCL group (a process driving several GPUs must initialise their ranks in a group,
 * or the first init waits for the others forever). Compiled in every CUDA build; never run on
 * a GPU (docs/cuda.md). */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_util.h"
#include "backend/gpu.h"

_Static_assert(sizeof(ncclUniqueId) == SN_GPU_NCCL_ID_BYTES, "NCCL's unique id size changed");

struct sn_gpu_nccl {
    int n;
    ncclComm_t *comm;
};

sn_status sn_gpu_nccl_unique_id(unsigned char id[SN_GPU_NCCL_ID_BYTES]) {
    if (!id) return sn_errorf(SN_ERR_INVALID, "sn_gpu_nccl_unique_id: id is NULL");
    SN_TRY(sn_cuda_libs_load_nccl());
    ncclUniqueId u;
    SN_NCCL(sn_cu.ncclGetUniqueId(&u));
    memcpy(id, &u, sizeof u);
    return SN_OK;
}

void sn_gpu_nccl_free(sn_gpu_nccl *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++)
        if (c->comm[i]) sn_cu.ncclCommDestroy(c->comm[i]);
    free(c->comm);
    free(c);
}

sn_status sn_gpu_nccl_new(int n_local, const int *gpus, int nranks, int first_rank,
                          const unsigned char id[SN_GPU_NCCL_ID_BYTES], sn_gpu_nccl **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_gpu_nccl_new: out is NULL");
    *out = NULL;
    if (n_local < 1 || !gpus || !id || first_rank < 0 || first_rank + n_local > nranks)
        return sn_errorf(SN_ERR_INVALID, "sn_gpu_nccl_new: %d local GPU(s) from rank %d of %d; "
                         "expected 1 or more, inside [0, nranks)", n_local, first_rank, nranks);
    if (sn_gpu_count() == 0) return sn_errorf(SN_ERR_NOT_FOUND, "NCCL: no GPU (%s)", sn_gpu_none_reason());
    SN_TRY(sn_cuda_libs_load_nccl());
    sn_gpu_nccl *c = calloc(1, sizeof *c);
    if (c) c->comm = calloc((size_t)n_local, sizeof *c->comm);
    if (!c || !c->comm) {
        free(c);
        return sn_errorf(SN_ERR_NOMEM, "sn_gpu_nccl_new: out of host memory");
    }
    c->n = n_local;
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = sn_cu.ncclGroupStart();
    for (int i = 0; i < n_local && r == ncclSuccess; i++) {
        cudaError_t e = cudaSetDevice(gpus[i]);
        if (e != cudaSuccess) {
            (void)sn_cu.ncclGroupEnd();
            sn_gpu_nccl_free(c);
            return sn_errorf(SN_ERR_BACKEND, "NCCL: cudaSetDevice(%d) failed: %s", gpus[i],
                             cudaGetErrorString(e));
        }
        r = sn_cu.ncclCommInitRank(&c->comm[i], nranks, u, first_rank + i);
    }
    ncclResult_t r2 = sn_cu.ncclGroupEnd();
    if (r == ncclSuccess) r = r2;
    if (r != ncclSuccess) {
        sn_gpu_nccl_free(c);
        return sn_cuda_fail("NCCL", "ncclCommInitRank (in a group)", sn_cu.ncclGetErrorString(r),
                            (int)r, __FILE__, __LINE__);
    }
    *out = c;
    return SN_OK;
}

sn_status sn_gpu_nccl_allreduce(sn_gpu_nccl *c, int local, const float *in, float *out,
                                size_t n, void *stream) {
    if (!c || local < 0 || local >= c->n)
        return sn_errorf(SN_ERR_INVALID, "NCCL all-reduce: local GPU %d of %d", local, c ? c->n : 0);
    SN_NCCL(sn_cu.ncclAllReduce(in, out, n, ncclFloat, ncclSum, c->comm[local],
                                (cudaStream_t)stream));
    return SN_OK;
}
