/* Logical devices. One CPU device per process for now (the logical split of the CPU into N
 * devices comes with the distribution strategies). */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"
#include "sinter/device.h"

int sn_device_count(void) { return 1; }

sn_status sn_device_get(int i, sn_device_info *info) {
    if (!info) return sn_errorf(SN_ERR_INVALID, "sn_device_get: info is NULL");
    if (i < 0 || i >= sn_device_count())
        return sn_errorf(SN_ERR_INVALID, "device index %d is outside [0, %d)", i,
                         sn_device_count());
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "/job:localhost/replica:0/task:0/device:CPU:%d", i);
    info->kind = SN_DEVICE_CPU;
    info->index = i;
    info->threads = sn_num_threads();
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
    if (kind != SN_DEVICE_CPU || idx >= sn_device_count())
        return sn_errorf(SN_ERR_NOT_FOUND,
                         "device '%s' does not exist: this process has %d logical device(s), "
                         "CPU:0 to CPU:%d, and no GPU", name, sn_device_count(),
                         sn_device_count() - 1);
    *index = idx;
    return SN_OK;
}
