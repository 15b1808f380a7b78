/* cuBLASLt, cuDNN and NCCL are opened on first use (backend/cuda/cuda_libs.h), never by
 * loading sinter or listing devices: a CPU-only process of a CUDA build must not map them
 * (cuBLASLt alone is ~147 MB of resident memory). Checks, with no GPU needed: nothing of
 * the three is mapped after sn_gpu_count() (and, on a machine without a GPU, after a refused
 * GPU context); a library that cannot be opened, or lacks a function, is a clear error naming
 * it; the real loads fill every entry point, and a second load returns the first's answer.
 * Skips (77) in a build without CUDA. */
#include <stdio.h>
#include <string.h>

#ifndef SN_HAVE_CUDA
int main(void) {
    printf("SKIP: this build has no CUDA backend\n");
    return 77;
}
#else
#include "backend/cuda/cuda_ctx.h"
#include "backend/cuda/cuda_libs.h"
#include "backend/gpu.h"
#include "sn_test.h"

/* Whether a file whose name contains `name` is mapped into this process. */
static bool mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, name) != NULL;
    fclose(f);
    return found;
}

static bool all_set(void *const *slots, int n) {
    for (int i = 0; i < n; i++) {
        void *p;
        memcpy(&p, slots[i], sizeof p);
        if (!p) return false;
    }
    return n > 0;
}

#define NAME(f) #f,
#define SLOT(f) (void *)&sn_cu.f,

int main(void) {
    int gpus = sn_gpu_count();
    printf("GPUs: %d (%s)\n", gpus, gpus ? "" : sn_gpu_none_reason());
    CHECK(!mapped("libcublasLt") && !mapped("libcudnn") && !mapped("libnccl"),
          "listing the GPUs mapped a CUDA library");
    if (gpus == 0) {
        sn_cuda_ctx *c = NULL;
        CHECK_ERR(sn_cuda_ctx_new(NULL, &c), SN_ERR_NOT_FOUND, "no GPU was found");
        CHECK(!mapped("libcublasLt") && !mapped("libcudnn"),
              "a GPU context refused for want of a GPU still mapped cuBLASLt or cuDNN");
    }

    /* A library that is not there: named, with both places tried. */
    const char *one[] = {"cublasLtCreate"};
    void *slot = NULL;
    void *const slots1[] = {&slot};
    CHECK_ERR(sn_cuda_lib_open("cuBLASLt", "libsinter_no_such_lib.so.7",
                               "/nonexistent/libsinter_no_such_lib.so.7", one, slots1, 1),
              SN_ERR_NOT_FOUND, "the CUDA backend needs cuBLASLt, which could not be loaded as "
              "libsinter_no_such_lib.so.7");
    CHECK(strstr(sn_last_error(), "nor from /nonexistent/libsinter_no_such_lib.so.7") &&
              strstr(sn_last_error(), "LD_LIBRARY_PATH"),
          "message: %s", sn_last_error());
    /* A library without a function: named, and no slot left half-filled. */
    const char *two[] = {"zlibVersion", "sn_no_such_function"};
    void *s0 = NULL, *s1 = NULL;
    void *const slots2[] = {&s0, &s1};
    CHECK_ERR(sn_cuda_lib_open("zlib", "libz.so.1", NULL, two, slots2, 2), SN_ERR_NOT_FOUND,
              "zlib (libz.so.1) has no function sn_no_such_function");
    CHECK(!s0 && !s1, "a failed open left a function pointer set");

    /* The real libraries: every entry point filled, once. */
    void *const dnn[] = {SN_CUBLASLT_FNS(SLOT) SN_CUDNN_FNS(SLOT)};
    void *const nccl[] = {SN_NCCL_FNS(SLOT)};
    int n_dnn = (int)(sizeof dnn / sizeof *dnn), n_nccl = (int)(sizeof nccl / sizeof *nccl);
    CHECK(!all_set(dnn, 1) && !all_set(nccl, 1), "sn_cu was filled before any load");
    CHECK_OK(sn_cuda_libs_load_dnn());
    CHECK(all_set(dnn, n_dnn), "a cuBLASLt or cuDNN entry point is NULL after the load");
    CHECK(mapped("libcublasLt") && mapped("libcudnn"), "the load mapped no cuBLASLt or cuDNN");
    CHECK(!mapped("libnccl"), "loading cuBLASLt and cuDNN also mapped NCCL");
    CHECK_OK(sn_cuda_libs_load_dnn());
    CHECK_OK(sn_cuda_libs_load_nccl());
    CHECK(all_set(nccl, n_nccl), "an NCCL entry point is NULL after the load");
    CHECK(mapped("libnccl"), "the load mapped no NCCL");
    /* The pointers reach the libraries: two calls that need no GPU. */
    CHECK(strlen(sn_cu.cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)) > 0, "cuDNN's message");
    CHECK(strlen(sn_cu.ncclGetErrorString(ncclInvalidArgument)) > 0, "NCCL's message");
    printf("%d cuBLASLt/cuDNN and %d NCCL entry points\n", n_dnn, n_nccl);
    return sn_test_finish("test_cuda_libs");
}
#endif
