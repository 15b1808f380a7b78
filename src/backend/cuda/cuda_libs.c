/* Opening cuBLASLt, cuDNN and NCCL on first use (cuda_libs.h says why). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_libs.h"
#include "core/core.h"

/* The sonames this build was compiled against, and where CMake found each library (CMake
 * passes both; the soname comes first so LD_LIBRARY_PATH and the system cache are honoured). */
#ifndef SN_CUBLASLT_SONAME
#error "CMake defines SN_CUBLASLT_SONAME, SN_CUBLASLT_PATH, SN_CUDNN_PATH and SN_NCCL_PATH"
#endif

sn_cuda_libs sn_cu;

/* The soname first, then the path CMake found the library at. */
static sn_status open_handle(const char *what, const char *soname, const char *built_path,
                             void **out) {
    *out = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (*out) return SN_OK;
    char first[256];
    const char *e = dlerror();
    snprintf(first, sizeof first, "%s", e ? e : "unknown error");
    if (!built_path || !*built_path)
        return sn_errorf(SN_ERR_NOT_FOUND, "the CUDA backend needs %s, which could not be loaded "
                         "as %s (%s); put its folder on LD_LIBRARY_PATH", what, soname, first);
    *out = dlopen(built_path, RTLD_NOW | RTLD_LOCAL);
    if (*out) return SN_OK;
    e = dlerror();
    return sn_errorf(SN_ERR_NOT_FOUND, "the CUDA backend needs %s, which could not be loaded as "
                     "%s (%s) nor from %s (%s); put its folder on LD_LIBRARY_PATH", what, soname,
                     first, built_path, e ? e : "unknown error");
}

sn_status sn_cuda_lib_open(const char *what, const char *soname, const char *built_path,
                           const char *const *names, void *const *slots, int n) {
    void *h;
    sn_status st = open_handle(what, soname, built_path, &h);
    if (st != SN_OK) return st;
    for (int i = 0; i < n; i++) {
        (void)dlerror();
        void *sym = dlsym(h, names[i]);
        if (!sym) {
            st = sn_errorf(SN_ERR_NOT_FOUND, "%s (%s) has no function %s: older than the "
                           "version sinter was built against?", what, soname, names[i]);
            for (int j = 0; j < i; j++) memset(slots[j], 0, sizeof(void *));
            dlclose(h);
            return st;
        }
        /* POSIX guarantees a function's address survives the trip through void *; memcpy
         * keeps ISO C's object/function pointer rule out of it. */
        memcpy(slots[i], &sym, sizeof sym);
    }
    return SN_OK; /* the handle stays open for the process's life, as a linked library would */
}

#define SN_NAME(f) #f,
#define SN_SLOT(f) (void *)&sn_cu.f,

/* One load's outcome, kept so that later callers get the same status and message. */
typedef struct lib_load {
    pthread_once_t once;
    sn_status st;
    char msg[768];
} lib_load;

static void remember(lib_load *l, sn_status st) {
    l->st = st;
    snprintf(l->msg, sizeof l->msg, "%s", st == SN_OK ? "" : sn_last_error());
}

static sn_status replay(const lib_load *l) {
    return l->st == SN_OK ? SN_OK : sn_errorf(l->st, "%s", l->msg);
}

static lib_load dnn_load = {.once = PTHREAD_ONCE_INIT};
static lib_load nccl_load = {.once = PTHREAD_ONCE_INIT};

static void load_dnn(void) {
    static const char *const lt_names[] = {SN_CUBLASLT_FNS(SN_NAME)};
    void *const lt_slots[] = {SN_CUBLASLT_FNS(SN_SLOT)};
    static const char *const dnn_names[] = {SN_CUDNN_FNS(SN_NAME)};
    void *const dnn_slots[] = {SN_CUDNN_FNS(SN_SLOT)};
    enum { N_LT = sizeof lt_names / sizeof *lt_names };
    enum { N_DNN = sizeof dnn_names / sizeof *dnn_names };
    sn_status st = sn_cuda_lib_open("cuBLASLt", SN_CUBLASLT_SONAME, SN_CUBLASLT_PATH, lt_names,
                                    lt_slots, N_LT);
    if (st == SN_OK) {
        st = sn_cuda_lib_open("cuDNN 9", "libcudnn.so.9", SN_CUDNN_PATH, dnn_names, dnn_slots,
                              N_DNN);
        /* Both or neither: a context needs the two (cuBLASLt stays mapped; it is not used). */
        if (st != SN_OK)
            for (int i = 0; i < N_LT; i++) memset(lt_slots[i], 0, sizeof(void *));
    }
    remember(&dnn_load, st);
}

static void load_nccl(void) {
    static const char *const names[] = {SN_NCCL_FNS(SN_NAME)};
    void *const slots[] = {SN_NCCL_FNS(SN_SLOT)};
    remember(&nccl_load, sn_cuda_lib_open("NCCL", "libnccl.so.2", SN_NCCL_PATH, names, slots,
                                          (int)(sizeof names / sizeof *names)));
}

sn_status sn_cuda_libs_load_dnn(void) {
    pthread_once(&dnn_load.once, load_dnn);
    return replay(&dnn_load);
}

sn_status sn_cuda_libs_load_nccl(void) {
    pthread_once(&nccl_load.once, load_nccl);
    return replay(&nccl_load);
}
