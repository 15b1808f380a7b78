/* Minimal test harness: CHECK records a failure with file:line and a message, and the test's
 * main returns sn_test_finish(), which prints "N passed, N failed" and the exit status. */
#ifndef SN_TEST_H
#define SN_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sinter/graph.h"
#include "sinter/status.h"

static int sn_test_pass, sn_test_fail;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (cond) {                                                                            \
            sn_test_pass++;                                                                    \
        } else {                                                                               \
            sn_test_fail++;                                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                    \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
        }                                                                                      \
    } while (0)

/* A call that must succeed; on failure shows the library's message. */
#define CHECK_OK(expr)                                                                         \
    do {                                                                                       \
        sn_status s_ = (expr);                                                                 \
        CHECK(s_ == SN_OK, "%s -> %s: %s", #expr, sn_status_name(s_), sn_last_error());       \
    } while (0)

/* A call that must fail with `code` and a message containing `needle`. */
#define CHECK_ERR(expr, code, needle)                                                          \
    do {                                                                                       \
        sn_status s_ = (expr);                                                                 \
        CHECK(s_ == (code) && strstr(sn_last_error(), (needle)) != NULL,                       \
              "%s -> %s (wanted %s) message '%s' (wanted it to contain '%s')", #expr,          \
              sn_status_name(s_), sn_status_name(code), sn_last_error(), (needle));            \
    } while (0)

static inline int sn_test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, sn_test_pass, sn_test_fail);
    return sn_test_fail ? 1 : 0;
}

#endif
