/* One team of threads for everything: OpenMP (libgomp), the runtime Debian's oneDNN and the
 * OpenMP build of OpenBLAS already use. Two thread pools on two cores spin against each other
 * (measured on PyTorch: up to 6x slower small ops), so sinter owns no pool of its own. */
#include <omp.h>
#include <string.h>

#include "core/core.h"

void openblas_set_num_threads(int n); /* from OpenBLAS; declared here to avoid its header */

static int sn_threads = 0;
static bool sn_threads_chosen = false; /* by SN_NUM_THREADS or sn_set_num_threads */
/* The team size of the plan this thread is running (its device's share), 0 when none. */
static _Thread_local int tl_threads = 0;

static void set_threads(int n) {
    if (n < 1) n = 1;
    sn_threads = n;
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

static void threads_init(void) {
    if (sn_threads > 0) return;
    int n = 0;
    const char *env = sn_env(SN_ENV_NUM_THREADS);
    if (env) n = atoi(env);
    if (n <= 0) n = omp_get_num_procs();
    set_threads(n);
    sn_threads_chosen = env != NULL;
}

int sn_num_threads(void) {
    threads_init();
    return sn_threads;
}

int sn_num_cores(void) { return omp_get_num_procs(); }

void sn_set_num_threads(int n) {
    set_threads(n);
    sn_threads_chosen = true;
}

bool sn_num_threads_chosen(void) {
    threads_init();
    return sn_threads_chosen;
}

int sn_threads_enter(int n) {
    int prev = tl_threads;
    if (n < 1) n = sn_num_threads();
    tl_threads = n;
    omp_set_num_threads(n); /* per calling thread: oneDNN's regions follow it too */
    return prev;
}

void sn_threads_leave(int prev) {
    tl_threads = prev;
    omp_set_num_threads(prev > 0 ? prev : sn_num_threads());
}

void sn_parallel(sn_task_fn fn, void *ctx, int nth) {
    int max = tl_threads > 0 ? tl_threads : sn_num_threads();
    if (nth <= 0 || nth > max) nth = max;
    if (nth == 1) {
        fn(ctx, 0, 1);
        return;
    }
#pragma omp parallel num_threads(nth)
    {
        fn(ctx, omp_get_thread_num(), omp_get_num_threads());
    }
}
