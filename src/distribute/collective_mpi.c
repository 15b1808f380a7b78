/* Collectives over MPI (compiled only when CMake finds MPI: SN_HAVE_MPI).
 *
 * Every call is non-blocking (MPI_Iallreduce, MPI_Ibcast) and waited for by polling with a
 * deadline, so a worker that died or hangs turns into SN_ERR_DIST ("stopped responding")
 * after timeout_s instead of a hang. Errors return (MPI_ERRORS_RETURN on our communicator)
 * rather than abort, and go through SN_MPI_CHECK into a status naming the call and MPI's text.
 * (Open MPI's mpirun also kills the whole job when one rank dies, which usually ends the
 * others sooner; the deadline covers a rank that hangs, and launchers that do not.)
 *
 * Gradients are reduced in buckets (1 MB by default, in a fixed order), many in flight at
 * once so the network streams while MPI progresses them. replicas.c starts each all_reduce
 * node's sum (start_f32) where the planner hoisted the node, right after its gradient is
 * computed; the executor's node hook calls progress after every later kernel, and the first
 * wait node calls finish before the optimizer update: the all-reduce overlaps the rest of the
 * backward pass. */
#include <mpi.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "distribute/distribute_impl.h"

enum { MAX_INFLIGHT = 64 }; /* all-reduce pieces in flight at once; the rest wait in a queue */

typedef struct piece {
    float *p;
    int n;
} piece;

typedef struct mpi_coll {
    sn_collective base;
    MPI_Comm comm;
    /* The pieces of the split-phase all-reduce since the last finish, in start order:
     * [0, n_done) complete, [n_done, n_started) in flight (req), [n_started, n_pc) queued. */
    piece *pc;
    MPI_Request *req;
    int n_pc, n_started, n_done, cap;
    int idx[MAX_INFLIGHT]; /* MPI_Testsome's output indices */
    bool broken;           /* a wait failed: requests were abandoned */
} mpi_coll;

static bool g_we_initialised = false;

static sn_status mpi_fail(int rc, const char *call, const char *file, int line) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "code %d", rc);
    return sn_errorf(SN_ERR_DIST, "MPI: %s failed (%s) at %s:%d; a worker may have stopped",
                     call, msg, file, line);
}
#define SN_MPI_CHECK(call)                                                                     \
    do {                                                                                       \
        int sn_mpi_rc_ = (call);                                                               \
        if (sn_mpi_rc_ != MPI_SUCCESS) return mpi_fail(sn_mpi_rc_, #call, __FILE__, __LINE__); \
    } while (0)

static sn_status stalled(const mpi_coll *c, const char *what, double timeout_s) {
    return sn_errorf(SN_ERR_DIST, "MPI: %s did not complete within %.0f s: another worker of "
                     "the %d stopped responding (it died or hangs); this is worker %d "
                     "($SN_DIST_TIMEOUT sets the limit)", what, timeout_s, c->base.size,
                     c->base.rank);
}

/* Waits for n requests, polling, until timeout_s passes. */
static sn_status wait_all(mpi_coll *c, int n, MPI_Request *req, double timeout_s,
                          const char *what) {
    double t0 = sn_now();
    long polls = 0;
    for (;;) {
        int done = 0;
        SN_MPI_CHECK(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE));
        if (done) return SN_OK;
        double waited = sn_now() - t0;
        if (timeout_s > 0 && waited > timeout_s) return stalled(c, what, timeout_s);
        /* Spin briefly (a step's collectives usually finish in microseconds to
         * milliseconds), then sleep 0.1 ms between polls so a waiting rank leaves the cores to
         * whatever else runs on the node. */
        if (++polls > 1000) nanosleep(&(struct timespec){0, 100000}, NULL);
    }
}

/* Split-phase all-reduce. start_f32 queues its pieces; pump starts queued pieces, in queue
 * order, while fewer than MAX_INFLIGHT are in flight, so a 150 MB gradient never makes the
 * backward pass wait inside start. progress tests what is in flight (MPI_Testsome frees a
 * completed request and leaves MPI_REQUEST_NULL) and pumps again; finish does that until
 * everything is done or the deadline passes. */
static sn_status pump(mpi_coll *c) {
    while (c->n_started < c->n_pc && c->n_started - c->n_done < MAX_INFLIGHT) {
        const piece *q = &c->pc[c->n_started];
        SN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, q->p, q->n, MPI_FLOAT, MPI_SUM, c->comm,
                                    &c->req[c->n_started]));
        c->n_started++;
    }
    return SN_OK;
}

static sn_status mpi_progress(sn_collective *base) {
    mpi_coll *c = (mpi_coll *)base;
    if (c->n_started > c->n_done) {
        int outcount = 0;
        SN_MPI_CHECK(MPI_Testsome(c->n_started - c->n_done, c->req + c->n_done, &outcount,
                                  c->idx, MPI_STATUSES_IGNORE));
        while (c->n_done < c->n_started && c->req[c->n_done] == MPI_REQUEST_NULL) c->n_done++;
    }
    return pump(c);
}

static sn_status mpi_start_f32(sn_collective *base, float *buf, size_t n, size_t bucket_bytes,
                               double timeout_s) {
    mpi_coll *c = (mpi_coll *)base;
    if (c->broken)
        return sn_errorf(SN_ERR_DIST, "MPI: an earlier gradient all-reduce of this worker (%d) "
                         "did not complete, so the workers are out of step; restart the job",
                         base->rank);
    if (n == 0 || base->size == 1) return SN_OK;
    size_t per = bucket_bytes / sizeof(float);
    if (per == 0) per = n;
    if (per > (size_t)INT32_MAX) per = (size_t)INT32_MAX;
    for (size_t off = 0; off < n; off += per) {
        if (c->n_pc == c->cap) {
            int cap = c->cap ? 2 * c->cap : 64;
            piece *q = realloc(c->pc, (size_t)cap * sizeof *q);
            if (q) c->pc = q;
            MPI_Request *r = realloc(c->req, (size_t)cap * sizeof *r);
            if (r) c->req = r;
            if (!q || !r) return SN_ERR_NOMEM;
            c->cap = cap;
        }
        c->pc[c->n_pc++] = (piece){buf + off, (int)(n - off < per ? n - off : per)};
    }
    return pump(c);
}

static sn_status mpi_finish(sn_collective *base, double timeout_s) {
    mpi_coll *c = (mpi_coll *)base;
    double t0 = sn_now();
    long polls = 0;
    sn_status st = SN_OK;
    for (;;) {
        st = mpi_progress(base);
        if (st != SN_OK || c->n_done == c->n_pc) break;
        if (timeout_s > 0 && sn_now() - t0 > timeout_s) {
            char what[96];
            snprintf(what, sizeof what, "the gradient all-reduce (%d of its %d pieces not done)",
                     c->n_pc - c->n_done, c->n_pc);
            st = stalled(c, what, timeout_s);
            break;
        }
        if (++polls > 1000) nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    /* On failure the requests stay pending and are abandoned with the job (MPI_Abort);
     * broken makes any later start say so instead of mismatching the peers' collectives. */
    if (st != SN_OK) c->broken = true;
    c->n_pc = c->n_started = c->n_done = 0;
    return st;
}

static sn_status mpi_allreduce_f32(sn_collective *base, float *buf, size_t n, size_t bucket_bytes,
                                   double timeout_s) {
    SN_TRY(mpi_start_f32(base, buf, n, bucket_bytes, timeout_s));
    return mpi_finish(base, timeout_s);
}

static sn_status mpi_allreduce_f64(sn_collective *base, double *buf, size_t n, double timeout_s) {
    mpi_coll *c = (mpi_coll *)base;
    if (n == 0 || base->size == 1) return SN_OK;
    if (n > (size_t)INT32_MAX)
        return sn_errorf(SN_ERR_INVALID, "MPI: all-reduce of %zu doubles is over 2^31", n);
    MPI_Request req;
    SN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_DOUBLE, MPI_SUM, c->comm, &req));
    return wait_all(c, 1, &req, timeout_s, "an all-reduce");
}

static sn_status mpi_broadcast(sn_collective *base, void *buf, size_t bytes, int root,
                               double timeout_s) {
    mpi_coll *c = (mpi_coll *)base;
    if (bytes == 0 || base->size == 1) return SN_OK;
    const size_t chunk = (size_t)1 << 30;
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t cnt = bytes - off < chunk ? bytes - off : chunk;
        MPI_Request req;
        SN_MPI_CHECK(MPI_Ibcast((char *)buf + off, (int)cnt, MPI_BYTE, root, c->comm, &req));
        SN_TRY(wait_all(c, 1, &req, timeout_s, "a broadcast of the variables"));
    }
    return SN_OK;
}

static void mpi_destroy(sn_collective *base) {
    mpi_coll *c = (mpi_coll *)base;
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin && c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    free(c->pc);
    free(c->req);
    free(c);
}

static const sn_collective_vt mpi_vt = {
    .name = "MPI",
    .allreduce_f32 = mpi_allreduce_f32,
    .start_f32 = mpi_start_f32,
    .progress = mpi_progress,
    .finish = mpi_finish,
    .allreduce_f64 = mpi_allreduce_f64,
    .broadcast = mpi_broadcast,
    .destroy = mpi_destroy,
};

/* A worker's default thread count: its cores shared with the workers of its node that may run
 * on any of them. Without this, workers started unbound (`mpirun --bind-to none`, or more
 * ranks than cores, where Open MPI binds none) would each default to every core of the node,
 * and k workers would run k times as many threads as there are cores, each team spinning
 * while the others hold its cores. Bound workers (Open MPI's default of one core each for up
 * to 2 ranks) see only their own cores and share with nobody: their count stays. A count
 * chosen by SN_NUM_THREADS or sn_set_num_threads is left alone. */
static void share_cores(MPI_Comm comm) {
    /* Collective: every rank takes part, whatever it then does with the answer. */
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_ZERO(&mine);
    MPI_Comm node = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return;
    int n = 0;
    cpu_set_t *all = NULL;
    if (MPI_Comm_size(node, &n) == MPI_SUCCESS && n > 1 && (all = sn_calloc((size_t)n, sizeof *all)) &&
        MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, node) ==
            MPI_SUCCESS) {
        int sharing = 0; /* itself included */
        for (int i = 0; i < n; i++) {
            cpu_set_t both;
            CPU_AND(&both, &mine, &all[i]);
            if (CPU_COUNT(&both) > 0) sharing++;
        }
        int share = CPU_COUNT(&mine) / (sharing > 0 ? sharing : 1);
        if (share < 1) share = 1;
        if (CPU_COUNT(&mine) > 0 && !sn_num_threads_chosen() && share < sn_num_threads())
            sn_set_num_threads(share);
    }
    free(all);
    MPI_Comm_free(&node);
}

sn_status sn_collective_mpi_new(sn_collective **out) {
    *out = NULL;
    int init = 0, fin = 0;
    SN_MPI_CHECK(MPI_Finalized(&fin));
    if (fin) return sn_errorf(SN_ERR_STATE, "multi_worker: MPI was already finalized");
    SN_MPI_CHECK(MPI_Initialized(&init));
    if (!init) {
        /* FUNNELED: only the thread that made the strategy calls MPI; the prefetch threads
         * and the OpenMP team never do. */
        int provided = 0;
        SN_MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided));
        g_we_initialised = true;
    }
    mpi_coll *c = sn_calloc(1, sizeof *c);
    if (!c) return SN_ERR_NOMEM;
    c->comm = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    if (rc != MPI_SUCCESS) {
        free(c);
        return mpi_fail(rc, "MPI_Comm_dup(MPI_COMM_WORLD)", __FILE__, __LINE__);
    }
    c->base.vt = &mpi_vt;
    if (MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
        MPI_Comm_rank(c->comm, &c->base.rank) != MPI_SUCCESS ||
        MPI_Comm_size(c->comm, &c->base.size) != MPI_SUCCESS) {
        mpi_destroy(&c->base);
        return sn_errorf(SN_ERR_DIST, "MPI: setting up the communicator failed");
    }
    share_cores(c->comm);
    *out = &c->base;
    return SN_OK;
}

void sn_mpi_shutdown(bool ok) {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin || !g_we_initialised) return;
    if (ok) MPI_Finalize();
    else MPI_Abort(MPI_COMM_WORLD, 1);
}
