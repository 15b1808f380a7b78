/* The `sinter` command: main() only; the commands are dispatched by sn_cli_main
 * (dispatch.c). */
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"

/* libgomp spin-waits up to 300,000 rounds between parallel regions unless told otherwise, and it
 * reads that setting once, when it loads. On cores that something else also uses, spinning
 * workers steal the cores the other threads need: measured here, small_cnn steps went from
 * 15 ms to 1,190 ms with two busy processes beside it, while a spin count of 1,000 kept 15 ms
 * on idle cores and 20-40 ms on busy ones (docs/benchmarks.md). So, unless the user chose a
 * policy, the command starts itself again once with GOMP_SPINCOUNT=1000. */
static void tune_openmp_wait(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    if (setenv("GOMP_SPINCOUNT", "1000", 1) != 0) return;
    execv("/proc/self/exe", argv);
    /* Not reached unless exec failed: go on with libgomp's default. */
}

int main(int argc, char **argv) {
    tune_openmp_wait(argv);
    return sn_cli_main(argc, argv);
}
