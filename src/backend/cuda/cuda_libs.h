/* cuBLASLt, cuDNN and NCCL, opened with dlopen when a GPU is first used, not when sinter loads.
 *
 * Why: linking them made every process of a CUDA build map them, GPU or not, and cuBLASLt
 * alone costs about 147 MB of resident memory on load (61 MB of its pages and 82 MB that its
 * initialisers allocate) and 0.2 s, measured on the CPU-only machine of docs/benchmarks.md:
 * a fifth of a MobileNetV2 training process's peak (678 MB, now 529). The CUDA runtime stays
 * linked statically (it finds the driver itself; cudaGetDeviceCount is all listing GPUs needs).
 *
 * Every call into the three libraries goes through sn_cu, whose members have the libraries'
 * own declared types (from their headers), so a call is checked by the compiler as a direct
 * one would be. sn_cu is written once, by the first successful load (pthread_once), and only
 * read after; a member is NULL until its library is loaded. Only src/backend/cuda/ and tests
 * include this. */
#ifndef SN_BACKEND_CUDA_LIBS_H
#define SN_BACKEND_CUDA_LIBS_H

#include <cublasLt.h>
#include <cudnn.h>
#include <nccl.h>

#include "sinter/status.h"

#define SN_CUBLASLT_FNS(X)                                                                     \
    X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmul) X(cublasLtMatmulAlgoGetHeuristic)  \
    X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) \
    X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                       \
    X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatrixLayoutCreate)                      \
    X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute)

#define SN_CUDNN_FNS(X)                                                                        \
    X(cudnnCreate) X(cudnnDestroy) X(cudnnGetErrorString) X(cudnnSetStream)                    \
    X(cudnnConvolutionForward) X(cudnnConvolutionBackwardData)                                 \
    X(cudnnConvolutionBackwardFilter) X(cudnnCreateConvolutionDescriptor)                      \
    X(cudnnCreateFilterDescriptor) X(cudnnCreatePoolingDescriptor)                             \
    X(cudnnCreateTensorDescriptor) X(cudnnDestroyConvolutionDescriptor)                        \
    X(cudnnDestroyFilterDescriptor) X(cudnnDestroyPoolingDescriptor)                           \
    X(cudnnDestroyTensorDescriptor) X(cudnnGetConvolution2dForwardOutputDim)                   \
    X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionBackwardDataAlgorithm_v7)   \
    X(cudnnGetConvolutionBackwardFilterAlgorithm_v7) X(cudnnGetPooling2dForwardOutputDim)      \
    X(cudnnPoolingForward) X(cudnnPoolingBackward) X(cudnnSetConvolution2dDescriptor)          \
    X(cudnnSetConvolutionMathType) X(cudnnSetFilter4dDescriptor)                               \
    X(cudnnSetPooling2dDescriptor) X(cudnnSetTensor4dDescriptor)

#define SN_NCCL_FNS(X)                                                                         \
    X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclAllReduce)                 \
    X(ncclGroupStart) X(ncclGroupEnd) X(ncclGetErrorString)

typedef struct sn_cuda_libs {
#define SN_CUDA_LIBS_MEMBER(f) __typeof__(f) *f;
    SN_CUBLASLT_FNS(SN_CUDA_LIBS_MEMBER)
    SN_CUDNN_FNS(SN_CUDA_LIBS_MEMBER)
    SN_NCCL_FNS(SN_CUDA_LIBS_MEMBER)
#undef SN_CUDA_LIBS_MEMBER
} sn_cuda_libs;

extern sn_cuda_libs sn_cu;

/* Opens cuBLASLt and cuDNN (a GPU context needs both) once per process; later calls return
 * the first call's answer. On failure: SN_ERR_NOT_FOUND naming the library, the paths tried
 * and the loader's message, and sn_cu's members stay NULL. */
sn_status sn_cuda_libs_load_dnn(void);
/* The same for NCCL, which only a multi-GPU all-reduce needs. */
sn_status sn_cuda_libs_load_nccl(void);

/* One library by its soname (the loader's own search: LD_LIBRARY_PATH, the system cache), then
 * by the path CMake found it at when sinter was built (NULL: none); fills the named symbols.
 * For the loads above and for tests. */
sn_status sn_cuda_lib_open(const char *what, const char *soname, const char *built_path,
                           const char *const *names, void *const *slots, int n);

#endif
