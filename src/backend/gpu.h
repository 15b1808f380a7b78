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

#endif
