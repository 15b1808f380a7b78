/* Minimal test harness: CHECK records a failure with file:line and a message, and the test's
 * main returns sn_test_finish(), which prints "N passed, N failed" and the exit status.
 * SN_TEST_SKIP_CODE (77) is CTest's SKIP_RETURN_CODE for every test: a test that skips all
 * or part of its cases (no data set, no such CPU feature) calls sn_test_skip(), and
 * sn_test_finish() then exits 77 so CTest shows it as skipped, never as passed. CTest has no
 * "partly passed": a failure still wins (exit 1). */
#ifndef SN_TEST_H
#define SN_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sinter/graph.h"
#include "sinter/status.h"

#define SN_TEST_SKIP_CODE 77

static int sn_test_pass, sn_test_fail, sn_test_skipped;

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

/* Records that a part of the test did not run, and why (printed). */
static inline void sn_test_skip(const char *what) {
    sn_test_skipped++;
    printf("SKIPPED: %s\n", what);
}

static inline int sn_test_finish(const char *name) {
    printf("%s: %d passed, %d failed, %d parts skipped\n", name, sn_test_pass, sn_test_fail,
           sn_test_skipped);
    return sn_test_fail ? 1 : sn_test_skipped ? SN_TEST_SKIP_CODE : 0;
}

#endif
