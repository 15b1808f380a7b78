/* Check macros for every call into the CUDA runtime, cuBLASLt, cuDNN and NCCL (the last three
 * through sn_cu, cuda_libs.h; STYLE.md rule 4): a failure becomes SN_ERR_BACKEND with the call,
 * the library's own message, file and line. Only src/backend/cuda/ includes this. */
#ifndef SN_BACKEND_CUDA_UTIL_H
#define SN_BACKEND_CUDA_UTIL_H

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_libs.h"
#include "core/core.h"

/* Record "CUDA <call> failed at <file>:<line>: <message> (error N)" and return SN_ERR_BACKEND. */
sn_status sn_cuda_fail(const char *lib, const char *call, const char *msg, int code,
                       const char *file, int line);

/* Each returns the failure status from the enclosing function. */
#define SN_CUDA(expr)                                                                          \
    do {                                                                                       \
        cudaError_t sn_e_ = (expr);                                                            \
        if (sn_e_ != cudaSuccess)                                                              \
            return sn_cuda_fail("CUDA", #expr, cudaGetErrorString(sn_e_), (int)sn_e_,          \
                                __FILE__, __LINE__);                                           \
    } while (0)

#define SN_CUBLAS(expr)                                                                        \
    do {                                                                                       \
        int sn_e_ = (int)(expr);                                                               \
        if (sn_e_ != 0)                                                                        \
            return sn_cuda_fail("cuBLASLt", #expr, "", sn_e_, __FILE__, __LINE__);             \
    } while (0)

#define SN_CUDNN(expr)                                                                         \
    do {                                                                                       \
        cudnnStatus_t sn_e_ = (expr);                                                          \
        if (sn_e_ != CUDNN_STATUS_SUCCESS)                                                     \
            return sn_cuda_fail("cuDNN", #expr, sn_cu.cudnnGetErrorString(sn_e_), (int)sn_e_,  \
                                __FILE__, __LINE__);                                           \
    } while (0)

#define SN_NCCL(expr)                                                                          \
    do {                                                                                       \
        ncclResult_t sn_e_ = (expr);                                                           \
        if (sn_e_ != ncclSuccess)                                                              \
            return sn_cuda_fail("NCCL", #expr, sn_cu.ncclGetErrorString(sn_e_), (int)sn_e_,    \
                                __FILE__, __LINE__);                                           \
    } while (0)

#endif
