/* GPUs as the CUDA runtime sees them: how many, and what each one is. Below the graph, like the
 * rest of the backend layer; `sinter devices` and the device registry read it.
 *
 * In a build without CUDA (-DSN_WITH_CUDA=OFF, gpu_none.c) and on a machine without a GPU or
 * without the NVIDIA driver (cuda/cuda_device.c), sn_gpu_count() is 0 and sn_gpu_none_reason()
 * says why; nothing here aborts or prints. */
#ifndef SN_BACKEND_GPU_H
#define SN_BACKEND_GPU_H

#include <stdbool.h>

#include "core/core.h"

typedef struct sn_gpu_info {
    int index;                   /* GPU:<index> in TensorFlow-style names */
    char name[256];              /* the device's own name, e.g. "NVIDIA H200" (cudaDeviceProp.name) */
    long long memory_bytes;      /* global memory */
    int cc_major, cc_minor;      /* compute capability, 9.0 for Hopper */
    int multiprocessors;
} sn_gpu_info;

/* True when this build contains the CUDA backend. */
bool sn_gpu_built(void);
/* Number of usable GPUs (0 when none, when the driver is missing or too old, or in a build
 * without CUDA). The first call asks the runtime; later calls return the same answer. */
int sn_gpu_count(void);
/* Why sn_gpu_count() is 0 ("" when it is not): e.g. "CUDA driver version is insufficient for
 * CUDA runtime version (cudaGetDeviceCount: error 35)". Static storage; do not free. */
const char *sn_gpu_none_reason(void);
/* Fills *info for GPU i; SN_ERR_NOT_FOUND when i is not in [0, sn_gpu_count()). */
sn_status sn_gpu_get(int i, sn_gpu_info *info);

/* NCCL, for the distribution layer's GPU all-reduce (distribute/replicas.c). One object per
 * strategy: a communicator per local GPU, ranks first_rank .. first_rank + n_local - 1 of
 * nranks over every worker. The unique id is made by rank 0 (sn_gpu_nccl_unique_id) and shared
 * with the other workers before sn_gpu_nccl_new (over MPI). The sums run on the caller's CUDA
 * stream, ordered with its kernels; with a fixed set of GPUs and NCCL's algorithm fixed
 * ($NCCL_ALGO), the reduction order and so the bits are the same run after run. In a build
 * without CUDA every call is SN_ERR_UNSUPPORTED. */
enum { SN_GPU_NCCL_ID_BYTES = 128 };
typedef struct sn_gpu_nccl sn_gpu_nccl;
sn_status sn_gpu_nccl_unique_id(unsigned char id[SN_GPU_NCCL_ID_BYTES]);
sn_status sn_gpu_nccl_new(int n_local, const int *gpus, int nranks, int first_rank,
                          const unsigned char id[SN_GPU_NCCL_ID_BYTES], sn_gpu_nccl **out);
/* out = the sum over every rank of in (n floats; in == out allowed), issued on stream. */
sn_status sn_gpu_nccl_allreduce(sn_gpu_nccl *c, int local, const float *in, float *out,
                                size_t n, void *stream);
void sn_gpu_nccl_free(sn_gpu_nccl *c);

#endif
