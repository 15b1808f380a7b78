/* A test-only `sinter`: the same commands (sn_cli_main), with the checkpoint writer's seam
 * (io/checkpoint_io.h) set from flags that come before the command. The library itself holds
 * no hook that kills the process; this program, which only the tests build and run, does.
 *
 *   sinter_hooked [--kill N:PHASE] [--delay-us US] COMMAND [FLAGS...]
 *
 * --kill N:PHASE   SIGKILL this process in its N-th checkpoint write (1-based) at PHASE: data,
 *                  sealed, synced or renamed (checkpoint_io.h says where each is).
 * --delay-us US    sleep US microseconds in every write between its fsync and its rename, so
 *                  that a kill from outside often lands inside a write. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/checkpoint_io.h"

typedef struct hook_cfg {
    int kill_write;        /* 0: none */
    const char *kill_phase;
    long delay_us;
} hook_cfg;

static void hook(int write_no, const char *phase, void *ctx) {
    const hook_cfg *h = ctx;
    if (h->delay_us > 0 && strcmp(phase, "synced") == 0) usleep((useconds_t)h->delay_us);
    if (h->kill_write == write_no && strcmp(h->kill_phase, phase) == 0) raise(SIGKILL);
}

int main(int argc, char **argv) {
    static hook_cfg h;
    int i = 1;
    for (; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--kill") == 0) {
            char *end = NULL;
            h.kill_write = (int)strtol(argv[i + 1], &end, 10);
            if (!end || *end != ':' || h.kill_write < 1) {
                fprintf(stderr, "sinter_hooked: --kill takes N:PHASE, got '%s'\n", argv[i + 1]);
                return 2;
            }
            h.kill_phase = end + 1;
        } else if (strcmp(argv[i], "--delay-us") == 0) {
            h.delay_us = strtol(argv[i + 1], NULL, 10);
        } else {
            break;
        }
    }
    sn_ckpt_set_write_hook(hook, &h);
    argv[i - 1] = argv[0];
    return sn_cli_main(argc - (i - 1), argv + (i - 1));
}
