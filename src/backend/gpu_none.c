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
