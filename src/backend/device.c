/* The device registry: every device of this process, each a backend (backend.h), numbered
 * kind by kind (the CPU devices first, then GPUs where a GPU provider is built in).
 *
 * The logical CPU devices and their thread shares are the CPU backend's
 * (backend/cpu/cpu_backend.c); a GPU provider lists the GPUs it finds. Device i of the
 * registry is a handle that lives for the process (sn_device_backend). */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "backend/backend_impl.h"
#include "backend/gpu.h"
#include "core/core.h"
#include "sinter/device.h"

#ifdef SN_HAVE_CUDA
extern const sn_device_provider sn_cuda_device_provider;
#endif

/* Device kinds in registry order. */
static const sn_device_provider *const providers[] = {
    &sn_cpu_device_provider,
#ifdef SN_HAVE_CUDA
    &sn_cuda_device_provider,
#endif
};
enum { N_PROVIDERS = (int)(sizeof providers / sizeof providers[0]) };

int sn_device_count(void) {
    int n = 0;
    for (int k = 0; k < N_PROVIDERS; k++) n += providers[k]->count();
    return n;
}

/* The provider and index within its kind of registry device i; false when out of range. */
static bool locate(int i, const sn_device_provider **prov, int *local) {
    if (i < 0) return false;
    for (int k = 0; k < N_PROVIDERS; k++) {
        int c = providers[k]->count();
        if (i < c) {
            *prov = providers[k];
            *local = i;
            return true;
        }
        i -= c;
    }
    return false;
}

sn_backend *sn_device_backend(int i) {
    const sn_device_provider *prov;
    int local;
    return locate(i, &prov, &local) ? prov->backend(local) : NULL;
}

int sn_device_threads(int i) {
    sn_backend *b = sn_device_backend(i);
    return b ? sn_backend_get_caps(b).threads : 0;
}

sn_status sn_device_get(int i, sn_device_info *info) {
    if (!info) return sn_errorf(SN_ERR_INVALID, "sn_device_get: info is NULL");
    sn_backend *b = sn_device_backend(i);
    if (!b)
        return sn_errorf(SN_ERR_INVALID, "device index %d is outside [0, %d)", i,
                         sn_device_count());
    sn_backend_caps caps = sn_backend_get_caps(b);
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", sn_backend_name(b));
    info->kind = sn_backend_kind(b);
    info->index = sn_backend_index(b);
    info->threads = caps.threads;
    info->memory_bytes = caps.memory_bytes;
    return SN_OK;
}

/* Parses "<kind>:<index>" at the end of any accepted form. */
static bool parse_tail(const char *s, sn_device_kind *kind, int *index) {
    const char *p = strrchr(s, '/');
    p = p ? p + 1 : s;
    if (strncasecmp(p, "device:", 7) == 0) p += 7;
    if (strncasecmp(p, "cpu:", 4) == 0) *kind = SN_DEVICE_CPU;
    else if (strncasecmp(p, "gpu:", 4) == 0) *kind = SN_DEVICE_GPU;
    else return false;
    p += 4;
    if (!isdigit((unsigned char)*p)) return false;
    char *end;
    long v = strtol(p, &end, 10);
    if (*end || v < 0 || v > 1 << 20) return false;
    *index = (int)v;
    return true;
}

sn_status sn_device_find(const char *name, int *index) {
    if (!index) return sn_errorf(SN_ERR_INVALID, "sn_device_find: index is NULL");
    if (!name || !*name) {
        *index = 0;
        return SN_OK;
    }
    sn_device_kind kind;
    int idx;
    if (!parse_tail(name, &kind, &idx))
        return sn_errorf(SN_ERR_NOT_FOUND,
                         "unknown device '%s': expected a name like 'cpu:0' or "
                         "'/job:localhost/replica:0/task:0/device:CPU:0'", name);
    int first = 0;
    for (int k = 0; k < N_PROVIDERS; k++) {
        int c = providers[k]->count();
        if (providers[k]->kind == kind && idx < c) {
            *index = first + idx;
            return SN_OK;
        }
        first += c;
    }
    int gpus = 0;
    for (int k = 0; k < N_PROVIDERS; k++)
        if (providers[k]->kind == SN_DEVICE_GPU) gpus += providers[k]->count();
    if (kind == SN_DEVICE_GPU && gpus == 0) /* the common case on a CPU machine: say why */
        return sn_errorf(SN_ERR_NOT_FOUND, "no GPU: device '%s' does not exist in this process "
                         "(%s); use --device cpu:0", name, sn_gpu_none_reason());
    char gpu_text[64] = "and no GPU";
    if (gpus) snprintf(gpu_text, sizeof gpu_text, "and GPU:0 to GPU:%d", gpus - 1);
    return sn_errorf(SN_ERR_NOT_FOUND,
                     "device '%s' does not exist: this process has %d logical device(s), "
                     "CPU:0 to CPU:%d, %s%s", name, sn_device_count(),
                     sn_device_count_cpu() - 1, gpu_text,
                     !sn_cpu_devices_configured() && kind == SN_DEVICE_CPU
                         ? " (sn_device_configure_cpu / --cpu-devices N splits the CPU into N)"
                         : "");
}

sn_status sn_backend_find(const char *name, sn_backend **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_backend_find: out is NULL");
    *out = NULL;
    int i;
    SN_TRY(sn_device_find(name, &i));
    *out = sn_device_backend(i);
    return SN_OK;
}
