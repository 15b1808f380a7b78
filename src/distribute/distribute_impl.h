/* Internal to src/distribute/: the strategy's fields and the collectives behind one
 * interface. The layers above use the public sinter/dist.h and distribute/replicas.h,
 * never this header.
 *
 * Layering: distribute depends on core, backend, graph and data; nothing below depends on
 * it, and it knows nothing of nn (models, losses, optimizers). MPI is touched only by
 * collective_mpi.c (compiled when SN_HAVE_MPI). */
#ifndef SN_DIST_IMPL_H
#define SN_DIST_IMPL_H

#include "core/core.h"
#include "sinter/dist.h"
#include "sinter/graph.h"

/* ---- collectives ------------------------------------------------------------------------ */
/* Across workers (processes). In-process replicas are summed by sn_sum_replicas instead:
 * their buffers are all in one address space. */
typedef struct sn_collective sn_collective;
typedef struct sn_collective_vt {
    const char *name;
    /* In-place sum over all workers; every worker ends with identical bits. Buckets of
     * bucket_bytes are reduced as separate non-blocking operations in a fixed order. */
    sn_status (*allreduce_f32)(sn_collective *c, float *buf, size_t n, size_t bucket_bytes,
                               double timeout_s);
    /* The same sum split in phases, to overlap it with the backward pass: start_f32 starts
     * the in-place sum of buf[0, n) (in pieces of at most bucket_bytes) and returns at once;
     * progress lets the library move what is in flight (Open MPI advances non-blocking
     * collectives only inside MPI calls); finish waits for everything started, at most
     * timeout_s. Every worker starts the same pieces in the same order; buf is not touched
     * by the caller until finish returns. */
    sn_status (*start_f32)(sn_collective *c, float *buf, size_t n, size_t bucket_bytes,
                           double timeout_s);
    sn_status (*progress)(sn_collective *c);
    sn_status (*finish)(sn_collective *c, double timeout_s);
    sn_status (*allreduce_f64)(sn_collective *c, double *buf, size_t n, double timeout_s);
    sn_status (*broadcast)(sn_collective *c, void *buf, size_t bytes, int root, double timeout_s);
    void (*destroy)(sn_collective *c);
} sn_collective_vt;
struct sn_collective {
    const sn_collective_vt *vt;
    int rank, size;
};

/* One process, one worker: every operation is the identity. */
sn_collective *sn_collective_inproc_new(void);
#ifdef SN_HAVE_MPI
/* MPI_COMM_WORLD (initialised here when nobody has). */
sn_status sn_collective_mpi_new(sn_collective **out);
void sn_mpi_shutdown(bool ok);
#endif

/* dst[i] = srcs[0][i] + srcs[1][i] + ... in that order (so the bits do not depend on the
 * thread count), split over the thread team. */
void sn_sum_replicas(float *dst, const float *const *srcs, int n, size_t count);

/* ---- the strategy ------------------------------------------------------------------------ */
struct sn_strategy {
    sn_strategy_kind kind;
    int n_local;
    int devices[SN_MAX_LOGICAL_DEVICES]; /* local replica -> logical device index */
    char (*device_names)[96];
    int rank, workers;
    sn_collective *coll;
    double timeout_s;
    size_t bucket_bytes; /* gradient all-reduce bucket size ($SN_DIST_BUCKET_MB, default 1: measured
                          * 1.7x faster than 4 MB for 154 MB over shared memory here) */
    bool overlap;        /* start each bucket's all-reduce during the backward pass as soon as
                          * its gradients exist ($SN_DIST_OVERLAP=0 turns it off) */
    bool concurrent;     /* local replicas run at once, one host thread each
                          * ($SN_DIST_CONCURRENT=0: one after another; replicas.c) */
    struct sn_replicas *rep; /* the all-reduce and the replica workers (replicas.c), on first use */
};

/* Ends the replica workers and frees the collective (sn_strategy_free). */
void sn_replicas_free(struct sn_replicas *r);

#endif
