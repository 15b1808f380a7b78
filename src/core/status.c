/* Error text for sn_last_error(): one buffer per thread, so threads never see each other's
 * messages and no call has to free anything. */
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

#include "core/core.h"

static _Thread_local char sn_err_buf[1024];

const char *sn_last_error(void) { return sn_err_buf; }

/* One line, whatever the arguments held (core.h). */
static void one_line(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = ' ';
}

sn_status sn_errorf(sn_status code, const char *fmt, ...) {
    /* Formatted aside first: callers pass sn_last_error() itself as an argument ("...: %s"),
     * and vsnprintf into its own source is undefined. */
    char buf[sizeof sn_err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    one_line(buf);
    memcpy(sn_err_buf, buf, sizeof buf);
    return code;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char *sn_foreign_text(char *dst, size_t cap, const char *src) {
    static const char hx[] = "0123456789ABCDEF";
    size_t n = 0;
    bool space = true; /* drops leading spaces and runs of them */
    const char *s0 = src ? src : "";
    for (const char *p = s0; *p && n + 1 < cap; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '0' && (p[1] == 'x' || p[1] == 'X') && hexval(p[2]) >= 0 &&
            (p == s0 || hexval(p[-1]) < 0)) {
            size_t k = 2;
            while (hexval(p[k]) >= 0) k++;
            if (k <= 4 && n + 4 < cap) { /* one byte: 0xa, 0xff */
                int v = 0;
                for (size_t i = 2; i < k; i++) v = 16 * v + hexval(p[i]);
                dst[n++] = '\\';
                dst[n++] = 'x';
                dst[n++] = hx[v >> 4];
                dst[n++] = hx[v & 15];
                space = false;
            }
            p += k - 1;
            continue;
        }
        if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
            if (!space) dst[n++] = ' ';
            space = true;
            continue;
        }
        if (c < 0x20 || c == 0x7f) {
            if (n + 4 >= cap) break;
            dst[n++] = '\\';
            dst[n++] = 'x';
            dst[n++] = hx[c >> 4];
            dst[n++] = hx[c & 15];
        } else {
            dst[n++] = (char)c;
        }
        space = false;
    }
    while (n > 0 && dst[n - 1] == ' ') n--;
    if (cap) dst[n < cap ? n : cap - 1] = '\0';
    return dst;
}

sn_status sn_error_context(sn_status code, const char *fmt, ...) {
    /* Nothing failed, so there is no message to explain: hot paths wrap calls that succeed
     * (the stepper wraps one plan run per generated character), and formatting here cost
     * more than copying that step's states. */
    if (code == SN_OK) return code;
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
    one_line(sn_err_buf);
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
