/* Error text for sn_last_error(): one buffer per thread, so threads never see each other's
 * messages and no call has to free anything. */
#include <stdarg.h>
#include <string.h>

#include "core/core.h"

static _Thread_local char sn_err_buf[1024];

const char *sn_last_error(void) { return sn_err_buf; }

sn_status sn_errorf(sn_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sn_err_buf, sizeof sn_err_buf, fmt, ap);
    va_end(ap);
    return code;
}

sn_status sn_error_context(sn_status code, const char *fmt, ...) {
    char prefix[512], old[sizeof sn_err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, sn_err_buf, sizeof old);
    /* Truncation is acceptable: the head of a long message is the useful part. */
    size_t n = strlen(prefix);
    memcpy(sn_err_buf, prefix, n);
    size_t room = sizeof sn_err_buf - n;
    if (room > 2) {
        sn_err_buf[n] = ':';
        sn_err_buf[n + 1] = ' ';
        size_t m = strnlen(old, room - 3);
        memcpy(sn_err_buf + n + 2, old, m);
        sn_err_buf[n + 2 + m] = 0;
    } else {
        sn_err_buf[sizeof sn_err_buf - 1] = 0;
    }
    return code;
}

const char *sn_status_name(sn_status s) {
    switch (s) {
    case SN_OK: return "SN_OK";
    case SN_ERR_INVALID: return "SN_ERR_INVALID";
    case SN_ERR_SHAPE: return "SN_ERR_SHAPE";
    case SN_ERR_NOMEM: return "SN_ERR_NOMEM";
    case SN_ERR_IO: return "SN_ERR_IO";
    case SN_ERR_FORMAT: return "SN_ERR_FORMAT";
    case SN_ERR_NOT_FOUND: return "SN_ERR_NOT_FOUND";
    case SN_ERR_UNSUPPORTED: return "SN_ERR_UNSUPPORTED";
    case SN_ERR_BACKEND: return "SN_ERR_BACKEND";
    case SN_ERR_DIST: return "SN_ERR_DIST";
    case SN_ERR_NUMERIC: return "SN_ERR_NUMERIC";
    case SN_ERR_STATE: return "SN_ERR_STATE";
    }
    return "SN_ERR_UNKNOWN";
}

void sn_assert_fail(const char *what, const char *file, int line) {
    fprintf(stderr, "sinter: internal error: %s failed at %s:%d\n", what, file, line);
    abort();
}
