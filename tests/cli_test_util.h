/* Shared by the C tests that run the `sinter` command (test_numerics_cli.c, test_data_cli.c):
 * tmp_test_util.h's temporary folder, .npy images written into it as numpy writes them, and
 * running `sinter ARGS` with its output captured.
 * Uses sn_test.h's CHECK. */
#ifndef SN_CLI_TEST_UTIL_H
#define SN_CLI_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sn_test.h"
#include "tmp_test_util.h"

static char cli_out[1 << 16];

/* An .npy image (header padded as numpy pads it) of the given descr ('<f4', '|u1', ...) and
 * shape text ("(64, 28, 28)") holding n bytes of data, into buf (room for n + 512 bytes);
 * returns its size. */
static size_t cli_npy(unsigned char *buf, const char *descr, const char *shape,
                      const void *data, size_t n) {
    char h[256];
    int hl = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      descr, shape);
    size_t total = ((10 + (size_t)hl + 1 + 63) / 64) * 64 - 10;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(total & 0xFF);
    buf[9] = (unsigned char)(total >> 8);
    memcpy(buf + 10, h, (size_t)hl);
    memset(buf + 10 + hl, ' ', total - (size_t)hl);
    buf[10 + total - 1] = '\n';
    memcpy(buf + 10 + total, data, n);
    return 10 + total + n;
}

/* The same as a file at path. */
static void cli_write_npy(const char *path, const char *descr, const char *shape,
                          const void *data, size_t n) {
    unsigned char *buf = malloc(n + 512);
    if (!buf) {
        fprintf(stderr, "test setup: no memory for %s\n", path);
        return;
    }
    test_write_file(path, buf, cli_npy(buf, descr, shape, data, n));
    free(buf);
}

/* Runs `sinter ARGS` (2 threads) with stdout and stderr in cli_out; returns its exit code. */
static int cli_sinter(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "SN_NUM_THREADS=2 OMP_WAIT_POLICY=passive %s/sinter %s 2>&1",
             SN_BINARY_DIR, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(cli_out, 1, sizeof cli_out - 1, p);
    cli_out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `sinter ARGS` must exit rc with `needle` in its output. */
#define CLI_EXPECT(args, rc, needle)                                                           \
    do {                                                                                       \
        int rc_ = cli_sinter(args);                                                            \
        CHECK(rc_ == (rc) && strstr(cli_out, (needle)) != NULL,                                \
              "sinter %s: exit %d (wanted %d), output lacks '%s':\n%s", args, rc_, (rc),       \
              (needle), cli_out);                                                              \
    } while (0)

#endif
