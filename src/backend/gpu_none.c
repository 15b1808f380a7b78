/* The GPU queries of a build without the CUDA backend (-DSN_WITH_CUDA=OFF, or no nvcc found):
 * no GPU, and a reason that says how to get one. */
#include "backend/gpu.h"

bool sn_gpu_built(void) { return false; }

int sn_gpu_count(void) { return 0; }

const char *sn_gpu_none_reason(void) {
    return "this build has no CUDA backend (configure with -DSN_WITH_CUDA=ON where the CUDA "
           "toolkit is installed)";
}

sn_status sn_gpu_get(int i, sn_gpu_info *info) {
    (void)info;
    return sn_errorf(SN_ERR_NOT_FOUND, "GPU:%d does not exist: %s", i, sn_gpu_none_reason());
}

sn_status sn_gpu_nccl_unique_id(unsigned char id[SN_GPU_NCCL_ID_BYTES]) {
    (void)id;
    return sn_errorf(SN_ERR_UNSUPPORTED, "NCCL: %s", sn_gpu_none_reason());
}

sn_status sn_gpu_nccl_new(int n_local, const int *gpus, int nranks, int first_rank,
                          const unsigned char id[SN_GPU_NCCL_ID_BYTES], sn_gpu_nccl **out) {
    (void)n_local, (void)gpus, (void)nranks, (void)first_rank, (void)id;
    if (out) *out = NULL;
    return sn_errorf(SN_ERR_UNSUPPORTED, "NCCL: %s", sn_gpu_none_reason());
}

sn_status sn_gpu_nccl_allreduce(sn_gpu_nccl *c, int local, const float *in, float *out,
                                size_t n, void *stream) {
    (void)c, (void)local, (void)in, (void)out, (void)n, (void)stream;
    return sn_errorf(SN_ERR_UNSUPPORTED, "NCCL: %s", sn_gpu_none_reason());
}

void sn_gpu_nccl_free(sn_gpu_nccl *c) { (void)c; }
