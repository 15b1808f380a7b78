/* Collectives over MPI (compiled only when CMake finds MPI: SN_HAVE_MPI).
 *
 * Every call is non-blocking (MPI_Iallreduce, MPI_Ibcast) and waited for by polling with a
 * deadline, so a worker that died or hangs turns into SN_ERR_DIST ("stopped responding")
 * after timeout_s instead of a hang. Errors return (MPI_ERRORS_RETURN on our communicator)
 * rather than abort, and go through SN_MPI_CHECK into a status naming the call and MPI's text.
 * (Open MPI's mpirun also kills the whole job when one rank dies, which usually ends the
 * others sooner; the deadline covers a rank that hangs, and launchers that do not.)
 *
 * Gradients are reduced in buckets (a few MB each, in a fixed order): all buckets are in
 * flight at once, so the network streams while MPI progresses them, and a bucket is the unit
 * a future overlap with the backward pass would start as soon as its gradients exist. */
#include <mpi.h>
#include <string.h>
#include <time.h>

#include "dist/dist_impl.h"

typedef struct mpi_coll {
    sn_collective base;
    MPI_Comm comm;
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
        if (timeout_s > 0 && waited > timeout_s)
            return sn_errorf(SN_ERR_DIST, "MPI: %s did not complete within %.0f s: another "
                             "worker of the %d stopped responding (it died or hangs); this is "
                             "worker %d ($SN_DIST_TIMEOUT sets the limit)", what, timeout_s,
                             c->base.size, c->base.rank);
        /* Spin briefly (a step's collectives usually finish in microseconds to
         * milliseconds), then sleep 0.1 ms between polls so a waiting rank leaves the cores to
         * whatever else runs on the node. */
        if (++polls > 1000) nanosleep(&(struct timespec){0, 100000}, NULL);
    }
}

static sn_status mpi_allreduce_f32(sn_collective *base, float *buf, size_t n, size_t bucket_bytes,
                                   double timeout_s) {
    mpi_coll *c = (mpi_coll *)base;
    if (n == 0 || base->size == 1) return SN_OK;
    size_t per = bucket_bytes / sizeof(float);
    if (per == 0) per = n;
    if (per > (size_t)INT32_MAX) per = (size_t)INT32_MAX;
    enum { MAX_INFLIGHT = 32 };
    MPI_Request req[MAX_INFLIGHT];
    size_t nb = (n + per - 1) / per;
    /* Buckets in a fixed order, at most MAX_INFLIGHT outstanding. */
    for (size_t b0 = 0; b0 < nb; b0 += MAX_INFLIGHT) {
        int k = 0;
        for (size_t b = b0; b < nb && k < MAX_INFLIGHT; b++, k++) {
            size_t off = b * per, cnt = n - off < per ? n - off : per;
            SN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, buf + off, (int)cnt, MPI_FLOAT, MPI_SUM,
                                        c->comm, &req[k]));
        }
        char what[96];
        snprintf(what, sizeof what, "the gradient all-reduce (buckets %zu-%zu of %zu)", b0 + 1,
                 b0 + (size_t)k, nb);
        SN_TRY(wait_all(c, k, req, timeout_s, what));
    }
    return SN_OK;
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
    free(c);
}

static const sn_collective_vt mpi_vt = {
    .name = "MPI",
    .allreduce_f32 = mpi_allreduce_f32,
    .allreduce_f64 = mpi_allreduce_f64,
    .broadcast = mpi_broadcast,
    .destroy = mpi_destroy,
};

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
