/* GPU discovery through the CUDA runtime (backend/gpu.h). A machine without a GPU, without the
 * NVIDIA driver (libcuda.so) or with a driver older than the runtime is a machine with no GPU:
 * cudaGetDeviceCount's error becomes the reason, never a crash. The answer is taken once per
 * process (devices do not come and go under a running program). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_util.h"
#include "backend/gpu.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_count;
static char g_reason[256];

sn_status sn_cuda_fail(const char *lib, const char *call, const char *msg, int code,
                       const char *file, int line) {
    return sn_errorf(SN_ERR_BACKEND, "%s call %s failed at %s:%d: %s (error %d)", lib, call, file,
                     line, msg && *msg ? msg : "no message", code);
}

static void probe(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        int rt = 0;
        (void)cudaRuntimeGetVersion(&rt);
        snprintf(g_reason, sizeof g_reason, "%s (cudaGetDeviceCount: error %d%s; CUDA runtime %d.%d)",
                 cudaGetErrorString(e), (int)e,
                 e == cudaErrorInsufficientDriver ? ": no NVIDIA driver, or one older than the runtime" : "",
                 rt / 1000, rt % 1000 / 10);
        (void)cudaGetLastError(); /* reset the runtime's last-error slot */
        g_count = 0;
        return;
    }
    if (n <= 0) {
        snprintf(g_reason, sizeof g_reason, "the CUDA runtime reports no device");
        g_count = 0;
        return;
    }
    g_count = n;
    g_reason[0] = '\0';
}

bool sn_gpu_built(void) { return true; }

int sn_gpu_count(void) {
    pthread_once(&g_once, probe);
    return g_count;
}

const char *sn_gpu_none_reason(void) {
    pthread_once(&g_once, probe);
    return g_reason;
}

sn_status sn_gpu_get(int i, sn_gpu_info *info) {
    if (!info) return sn_errorf(SN_ERR_INVALID, "sn_gpu_get: info is NULL");
    int n = sn_gpu_count();
    if (i < 0 || i >= n) {
        if (n == 0) return sn_errorf(SN_ERR_NOT_FOUND, "GPU:%d does not exist: no GPU (%s)", i, g_reason);
        return sn_errorf(SN_ERR_NOT_FOUND, "GPU:%d does not exist: this machine has GPU:0 to GPU:%d",
                         i, n - 1);
    }
    struct cudaDeviceProp p;
    SN_CUDA(cudaGetDeviceProperties(&p, i));
    memset(info, 0, sizeof *info);
    info->index = i;
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->memory_bytes = (long long)p.totalGlobalMem;
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->multiprocessors = p.multiProcessorCount;
    return SN_OK;
}
