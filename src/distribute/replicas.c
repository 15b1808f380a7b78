/* The all-reduce behind the all_reduce graph op and the replica workers (replicas.h).
 *
 * One waiting mechanism serves everything that synchronises the replicas (the all-reduce's
 * barrier, the per-step feed, the start and end of a run): a condition on atomics, spun on
 * briefly (replicas that run in step reach a barrier within microseconds of each other, and a
 * futex wake costs tens of them) and then slept on under one mutex and condition variable.
 * Every change of that state takes the mutex and broadcasts, so no waiter misses one.
 *
 * One after another ($SN_DIST_CONCURRENT=0): every replica still has its thread, but a thread
 * holds the baton (a mutex) while it computes and gives it up only while it waits, so one
 * replica computes at a time. The sums are taken after the barrier in replica order either
 * way, so the bits are the same. */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/gpu.h"
#include "distribute/distribute_impl.h"
#include "distribute/replicas.h"

enum { SPIN = 4000 }; /* polls before sleeping (a few microseconds to tens of them) */

typedef struct worker {
    struct sn_replicas *R;
    int rep;
    pthread_t th;
    bool started;
    sn_status st;
    bool stopped;   /* its feed ended the run with replica 0's (not a failure) */
    char msg[512];  /* its error text: sn_last_error() is per thread */
} worker;

struct sn_replicas {
    sn_allreduce_comm base; /* first: the handle the all_reduce nodes carry */
    sn_strategy *s;
    int n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t baton;  /* one after another: held by the replica that computes */
    bool seq;
    /* barrier */
    atomic_int arrived;
    atomic_uint gen;
    atomic_int failed;      /* the first replica that failed + 1; 0: none */
    /* the all-reduce in flight: every replica's buffers */
    const float *in[SN_MAX_LOGICAL_DEVICES];
    float *out[SN_MAX_LOGICAL_DEVICES];
    /* across workers (replica 0 only) */
    int64_t step_pieces, last_pieces, buckets, early;
    double wait_s;
    /* the current run */
    atomic_uint job;        /* bumped to start a run on the workers */
    atomic_int done;        /* workers finished with it */
    bool quit;
    sn_plan *const *plans;
    int64_t steps;
    const sn_replica_feed *feed;
    atomic_llong published; /* the last step whose batch next made ready */
    atomic_int filled;      /* replicas 1.. that copied their rows of it */
    atomic_llong stop_at;   /* next ended the run before this step */
    worker w[SN_MAX_LOGICAL_DEVICES];
    bool threads_made;
    sn_gpu_nccl *nccl;      /* replicas on GPUs: their communicators (made on first use) */
};

/* ---- waiting ------------------------------------------------------------------------------ */

static void notify(struct sn_replicas *R) {
    pthread_mutex_lock(&R->mu);
    pthread_cond_broadcast(&R->cv);
    pthread_mutex_unlock(&R->mu);
}

typedef bool (*cond_fn)(struct sn_replicas *R, const void *arg);
static sn_status wait_baton(struct sn_replicas *R, int me, cond_fn ok, const void *arg,
                            bool with_fail, bool baton);

static sn_status failed_err(struct sn_replicas *R, int me) {
    int f = atomic_load(&R->failed) - 1;
    return sn_errorf(SN_ERR_DIST, "replica %d stopped: replica %d failed", me, f);
}

/* Waits until ok(R, arg) holds; fails when a replica has failed (with_fail). A replica that
 * computes one after another gives up the baton while it waits. */
static sn_status wait_for(struct sn_replicas *R, int me, cond_fn ok, const void *arg,
                          bool with_fail) {
    return wait_baton(R, me, ok, arg, with_fail, R->seq);
}

static sn_status wait_baton(struct sn_replicas *R, int me, cond_fn ok, const void *arg,
                            bool with_fail, bool baton) {
    if (ok(R, arg)) return SN_OK;
    if (!R->seq)
        for (int i = 0; i < SPIN; i++) {
            if (ok(R, arg)) return SN_OK;
            if (with_fail && atomic_load(&R->failed)) return failed_err(R, me);
            if ((i & 63) == 63) sched_yield(); /* more replicas than cores */
        }
    if (baton) pthread_mutex_unlock(&R->baton);
    pthread_mutex_lock(&R->mu);
    while (!ok(R, arg) && !(with_fail && atomic_load(&R->failed))) pthread_cond_wait(&R->cv, &R->mu);
    pthread_mutex_unlock(&R->mu);
    if (baton) pthread_mutex_lock(&R->baton);
    return ok(R, arg) ? SN_OK : failed_err(R, me);
}

static bool gen_moved(struct sn_replicas *R, const void *arg) {
    return atomic_load(&R->gen) != *(const unsigned *)arg;
}

static sn_status barrier(struct sn_replicas *R, int me) {
    if (R->n == 1) return SN_OK;
    unsigned g = atomic_load(&R->gen);
    if (atomic_fetch_add(&R->arrived, 1) == R->n - 1) {
        atomic_store(&R->arrived, 0);
        pthread_mutex_lock(&R->mu);
        atomic_fetch_add(&R->gen, 1);
        pthread_cond_broadcast(&R->cv);
        pthread_mutex_unlock(&R->mu);
        return SN_OK;
    }
    return wait_for(R, me, gen_moved, &g, true);
}

/* A replica failed: wake every waiter, which then fails too (the first one is reported). */
static void fail(struct sn_replicas *R, int me) {
    int zero = 0;
    atomic_compare_exchange_strong(&R->failed, &zero, me + 1);
    notify(R);
}

/* ---- the all-reduce (op_desc.h's table) ------------------------------------------------------ */

static int64_t pieces(const sn_strategy *s, size_t n) {
    size_t per = s->bucket_bytes / sizeof(float);
    return per ? (int64_t)((n + per - 1) / per) : 1;
}

/* The replicas share the variables (to_first): each adds up its slice of the elements of
 * every replica's input into replica 0's output, r ascending per element, so the bits are
 * those of one replica summing all of them (sn_sum_replicas' order) and the work is split. */
static void sum_slice_to_first(struct sn_replicas *R, int me, size_t n) {
    int64_t lo, hi;
    sn_split_range((int64_t)n, me, R->n, &lo, &hi);
    if (hi <= lo) return;
    const float *src[SN_MAX_LOGICAL_DEVICES];
    for (int r = 0; r < R->n; r++) src[r] = R->in[r] + lo;
    sn_sum_replicas(R->out[0] + lo, src, R->n, (size_t)(hi - lo));
}

/* Every replica: out = sum over r of in[r], r ascending; then (several workers) replica 0
 * all-reduces its out over MPI, at once (WHOLE) or started here and completed by the WAIT
 * node; the other replicas take replica 0's result in WAIT (or here for WHOLE). The second
 * barrier keeps every input alive until every replica has read it: the planner may reuse a
 * gradient's memory right after its all_reduce. With SN_ALLREDUCE_TO_FIRST (replicas sharing
 * the variables, op_desc.h) only replica 0's out gets the sum, the replicas computing a slice
 * of it each, and nobody copies it back; BARRIER only waits for every replica. */
static sn_status ar_run(sn_allreduce_comm *base, int me, int phase, const float *in, float *out,
                        size_t n, void *stream) {
    struct sn_replicas *R = (struct sn_replicas *)base;
    const sn_strategy *s = R->s;
    bool mpi = s->workers > 1;
    bool to_first = (phase & SN_ALLREDUCE_TO_FIRST) != 0;
    phase &= ~SN_ALLREDUCE_TO_FIRST;
    if (stream)
        return sn_errorf(SN_ERR_UNSUPPORTED, "all_reduce: the in-process collective works on host "
                         "memory; a device stream needs a device collective (NCCL)");
    if (me < 0 || me >= R->n)
        return sn_errorf(SN_ERR_INVALID, "all_reduce: replica %d of %d", me, R->n);
    if (phase == SN_ALLREDUCE_BARRIER) return barrier(R, me);
    if (phase != SN_ALLREDUCE_WAIT) {
        R->in[me] = in;
        R->out[me] = out;
        SN_TRY(barrier(R, me));
        if (to_first) sum_slice_to_first(R, me, n);
        else sn_sum_replicas(out, R->in, R->n, n);
        SN_TRY(barrier(R, me));
        if (!mpi) return SN_OK;
        if (me == 0) {
            int64_t k = pieces(s, n);
            if (phase == SN_ALLREDUCE_START) {
                SN_TRY(s->coll->vt->start_f32(s->coll, out, n, s->bucket_bytes, s->timeout_s));
                R->step_pieces += k;
                R->last_pieces = k;
            } else {
                double t0 = sn_now();
                SN_TRY(s->coll->vt->allreduce_f32(s->coll, out, n, s->bucket_bytes, s->timeout_s));
                R->wait_s += sn_now() - t0;
                R->buckets += k;
            }
        }
        if (phase == SN_ALLREDUCE_START || to_first) return SN_OK;
    } else if (me == 0 && R->step_pieces > 0) {
        /* The first wait of the step completes every piece started (the starts all come
         * before the first wait in every plan); the last start came after the backward pass. */
        double t0 = sn_now();
        SN_TRY(sn_error_context(s->coll->vt->finish(s->coll, s->timeout_s),
                                "the gradient all-reduce"));
        R->wait_s += sn_now() - t0;
        R->buckets += R->step_pieces;
        R->early += R->step_pieces - R->last_pieces;
        R->step_pieces = 0;
    }
    if (R->n == 1 || to_first) return SN_OK;
    R->out[me] = out;
    SN_TRY(barrier(R, me));
    if (me != 0) memcpy(out, R->out[0], n * sizeof *out);
    return barrier(R, me);
}

static const sn_allreduce_vt ar_vt = {.name = "in-process + MPI", .run = ar_run};

/* ---- the GPU all-reduce: NCCL on each replica's stream -------------------------------------
 *
 * Replicas on GPUs all-reduce with NCCL, one rank per GPU over every worker (worker w's local
 * replica r is rank w * n_local + r, as the dropout keys count replicas). The sum is issued on
 * the replica's stream after the gradient's kernels and before the update's, so START does
 * everything and WAIT nothing (the stream orders them); NCCL's ring gives every rank the same
 * bits. Compiled in every build, never run on a GPU (docs/cuda.md). */

static bool on_gpus(const sn_strategy *s) {
    sn_device_info info;
    return s->n_local > 0 && sn_device_get(s->devices[0], &info) == SN_OK &&
           info.kind == SN_DEVICE_GPU;
}

/* The communicators: rank 0 makes NCCL's unique id and MPI takes it to the other workers. */
static sn_status nccl_make(struct sn_replicas *R) {
    const sn_strategy *s = R->s;
    unsigned char id[SN_GPU_NCCL_ID_BYTES] = {0};
    if (s->rank == 0) SN_TRY(sn_gpu_nccl_unique_id(id));
    if (s->workers > 1)
        SN_TRY(sn_error_context(sn_strategy_broadcast(s, id, sizeof id),
                                "sharing NCCL's unique id over MPI"));
    int gpus[SN_MAX_LOGICAL_DEVICES];
    for (int i = 0; i < R->n; i++) {
        sn_device_info info;
        SN_TRY(sn_device_get(s->devices[i], &info));
        if (info.kind != SN_DEVICE_GPU)
            return sn_errorf(SN_ERR_UNSUPPORTED, "strategy: replica %d is on %s and replica 0 on "
                             "a GPU; replicas on GPUs and CPUs cannot share one all-reduce", i,
                             info.name);
        gpus[i] = info.index;
    }
    int workers = s->workers > 1 ? s->workers : 1;
    return sn_error_context(sn_gpu_nccl_new(R->n, gpus, workers * R->n, s->rank * R->n, id,
                                            &R->nccl),
                            "a strategy of %d replica(s) over %d worker(s) on GPUs", R->n, workers);
}

static sn_status nccl_run(sn_allreduce_comm *base, int me, int phase, const float *in, float *out,
                          size_t n, void *stream) {
    struct sn_replicas *R = (struct sn_replicas *)base;
    if (!stream)
        return sn_errorf(SN_ERR_UNSUPPORTED, "all_reduce: the NCCL collective needs a GPU stream "
                         "(replica %d's plan is not on a GPU)", me);
    if ((phase & SN_ALLREDUCE_TO_FIRST) || phase == SN_ALLREDUCE_BARRIER)
        return sn_errorf(SN_ERR_UNSUPPORTED, "all_reduce: replicas on GPUs keep their own "
                         "variables; a sum to replica 0 alone or a barrier (phase %d) is for "
                         "replicas in one host memory", phase);
    if (phase == SN_ALLREDUCE_WAIT) return SN_OK; /* ordered on the stream after START */
    return sn_gpu_nccl_allreduce(R->nccl, me, in, out, n, stream);
}

static const sn_allreduce_vt nccl_vt = {.name = "NCCL", .run = nccl_run};

/* ---- the replica workers ------------------------------------------------------------------ */

typedef struct feed_ctx {
    struct sn_replicas *R;
    int rep;
    bool stopped;
} feed_ctx;

static bool all_filled(struct sn_replicas *R, const void *arg) {
    (void)arg;
    return atomic_load(&R->filled) == R->n - 1;
}

static bool batch_ready(struct sn_replicas *R, const void *arg) {
    int64_t step = *(const int64_t *)arg;
    return atomic_load(&R->published) >= step || atomic_load(&R->stop_at) <= step;
}

/* Replica 0's feed, on the calling thread: next, then its rows. */
static sn_status lead_feed(void *ctx, sn_plan *p, int64_t step) {
    feed_ctx *f = ctx;
    struct sn_replicas *R = f->R;
    const sn_replica_feed *fd = R->feed;
    /* The others have copied the previous batch before next replaces it. */
    if (step > 0 && R->n > 1) SN_TRY(wait_for(R, 0, all_filled, NULL, true));
    atomic_store(&R->filled, 0);
    sn_status st = fd->next(fd->ctx, step);
    if (st != SN_OK) {
        f->stopped = true;
        atomic_store(&R->stop_at, step);
        if (R->n > 1) notify(R);
        return st;
    }
    atomic_store(&R->published, step);
    if (R->n > 1) notify(R);
    return fd->fill(fd->ctx, 0, p, step);
}

static sn_status rep_feed(void *ctx, sn_plan *p, int64_t step) {
    feed_ctx *f = ctx;
    struct sn_replicas *R = f->R;
    SN_TRY(wait_for(R, f->rep, batch_ready, &step, true));
    if (atomic_load(&R->stop_at) <= step) {
        f->stopped = true;
        return sn_errorf(SN_ERR_STATE, "replica %d: the run ended before step %lld", f->rep,
                         (long long)step);
    }
    sn_status st = R->feed->fill(R->feed->ctx, f->rep, p, step);
    atomic_fetch_add(&R->filled, 1);
    notify(R);
    return st;
}

/* Replica 0's plan, with several workers: lets MPI progress the started pieces after every
 * kernel (Open MPI advances non-blocking collectives only inside MPI calls). */
static sn_status progress_hook(void *ctx, sn_plan *p, int call, sn_node n) {
    (void)p;
    (void)call;
    (void)n;
    const sn_strategy *s = ctx;
    return s->coll->vt->progress(s->coll);
}

static sn_status run_replica(struct sn_replicas *R, int rep, feed_ctx *fc) {
    sn_plan *p = R->plans[rep];
    if (R->seq) pthread_mutex_lock(&R->baton);
    sn_status st = sn_plan_run(p, R->steps, R->feed ? (rep == 0 ? lead_feed : rep_feed) : NULL, fc);
    if (R->seq) pthread_mutex_unlock(&R->baton);
    if (st != SN_OK && !fc->stopped) {
        st = sn_error_context(st, "replica %d on %s", rep, R->s->device_names[rep]);
        fail(R, rep);
    }
    return st;
}

static bool job_posted(struct sn_replicas *R, const void *arg) {
    return R->quit || atomic_load(&R->job) != *(const unsigned *)arg;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    struct sn_replicas *R = w->R;
    unsigned seen = 0;
    for (;;) {
        pthread_mutex_lock(&R->mu);
        while (!job_posted(R, &seen)) pthread_cond_wait(&R->cv, &R->mu);
        bool quit = R->quit;
        seen = atomic_load(&R->job);
        pthread_mutex_unlock(&R->mu);
        if (quit) return NULL;
        feed_ctx fc = {.R = R, .rep = w->rep};
        w->st = run_replica(R, w->rep, &fc);
        w->stopped = fc.stopped;
        if (w->st != SN_OK) snprintf(w->msg, sizeof w->msg, "%s", sn_last_error());
        atomic_fetch_add(&R->done, 1);
        notify(R);
    }
}

static bool workers_done(struct sn_replicas *R, const void *arg) {
    (void)arg;
    return atomic_load(&R->done) == R->n - 1;
}

void sn_replicas_free(struct sn_replicas *R) {
    if (!R) return;
    if (R->threads_made) {
        pthread_mutex_lock(&R->mu);
        R->quit = true;
        pthread_cond_broadcast(&R->cv);
        pthread_mutex_unlock(&R->mu);
        for (int i = 1; i < R->n; i++)
            if (R->w[i].started) pthread_join(R->w[i].th, NULL);
    }
    pthread_mutex_destroy(&R->mu);
    pthread_cond_destroy(&R->cv);
    pthread_mutex_destroy(&R->baton);
    sn_gpu_nccl_free(R->nccl);
    free(R);
}

static sn_status get(sn_strategy *s, struct sn_replicas **out) {
    if (!s->rep) {
        struct sn_replicas *R = sn_calloc(1, sizeof *R);
        if (!R) return SN_ERR_NOMEM;
        R->base.vt = &ar_vt;
        R->s = s;
        R->n = s->n_local;
        R->seq = !s->concurrent && s->n_local > 1;
        pthread_mutex_init(&R->mu, NULL);
        pthread_cond_init(&R->cv, NULL);
        pthread_mutex_init(&R->baton, NULL);
        for (int i = 0; i < R->n; i++) R->w[i] = (worker){.R = R, .rep = i};
        s->rep = R;
    }
    *out = s->rep;
    return SN_OK;
}

sn_status sn_strategy_allreduce(sn_strategy *s, sn_allreduce_comm **out) {
    struct sn_replicas *R;
    SN_TRY(get(s, &R));
    if (on_gpus(s) && !R->nccl) {
        SN_TRY(nccl_make(R));
        R->base.vt = &nccl_vt;
    }
    *out = &R->base;
    return SN_OK;
}

bool sn_strategy_overlaps(const sn_strategy *s) { return s && s->workers > 1 && s->overlap; }

bool sn_strategy_shares_variables(const sn_strategy *s) {
    if (!s || s->n_local < 2) return false;
    for (int i = 0; i < s->n_local; i++) {
        sn_device_info info;
        if (sn_device_get(s->devices[i], &info) != SN_OK || info.kind != SN_DEVICE_CPU)
            return false;
    }
    return true;
}

/* The workers, once per strategy: made on its first run with several replicas. */
static sn_status make_threads(struct sn_replicas *R) {
    if (R->threads_made) {
        for (int i = 1; i < R->n; i++)
            if (!R->w[i].started)
                return sn_errorf(SN_ERR_NOMEM, "strategy: the thread of replica %d of %d could "
                                 "not be started", i, R->n);
        return SN_OK;
    }
    R->threads_made = true;
    for (int i = 1; i < R->n; i++) {
        int rc = pthread_create(&R->w[i].th, NULL, worker_main, &R->w[i]);
        if (rc != 0)
            return sn_errorf(SN_ERR_NOMEM, "strategy: cannot start the thread of replica %d of %d "
                             "(pthread_create: %s)", i, R->n, strerror(rc));
        R->w[i].started = true;
    }
    return SN_OK;
}

/* One plan alone: fit without a strategy, or a strategy of one local replica. */
static sn_status run_single(sn_plan *p, int64_t steps, const sn_replica_feed *feed,
                            sn_strategy *s, struct sn_replicas *R) {
    if (!feed) return sn_plan_run(p, steps, NULL, NULL);
    struct sn_replicas one = {.n = 1, .feed = feed, .s = s};
    feed_ctx fc = {.R = R ? R : &one, .rep = 0};
    if (R) R->feed = feed;
    return sn_plan_run(p, steps, lead_feed, &fc);
}

sn_status sn_replicas_run(sn_strategy *s, sn_plan *const *plans, int64_t steps,
                          const sn_replica_feed *feed) {
    if (!plans || !plans[0]) return sn_errorf(SN_ERR_INVALID, "replicas_run: no plan");
    if (!s) return run_single(plans[0], steps, feed, NULL, NULL);
    struct sn_replicas *R;
    SN_TRY(get(s, &R));
    bool hook = s->workers > 1 && s->overlap;
    if (hook) sn_plan_set_node_hook(plans[0], progress_hook, s);
    atomic_store(&R->failed, 0);
    atomic_store(&R->arrived, 0);
    R->step_pieces = 0;
    if (R->n == 1) {
        R->feed = feed;
        atomic_store(&R->published, -1);
        atomic_store(&R->stop_at, LLONG_MAX);
        sn_status st = feed ? run_single(plans[0], steps, feed, s, R) : sn_plan_run(plans[0], steps, NULL, NULL);
        if (hook) sn_plan_set_node_hook(plans[0], NULL, NULL);
        return st;
    }
    for (int r = 1; r < R->n; r++)
        SN_TRY(sn_error_context(sn_plan_load_vars(plans[r]), "replica %d: loading the variables", r));
    SN_TRY(make_threads(R));
    R->plans = plans;
    R->steps = steps;
    R->feed = feed;
    atomic_store(&R->published, -1);
    atomic_store(&R->filled, 0);
    atomic_store(&R->stop_at, LLONG_MAX);
    atomic_store(&R->done, 0);
    for (int i = 1; i < R->n; i++) R->w[i].stopped = false;
    pthread_mutex_lock(&R->mu);
    atomic_fetch_add(&R->job, 1);
    pthread_cond_broadcast(&R->cv);
    pthread_mutex_unlock(&R->mu);
    feed_ctx fc = {.R = R, .rep = 0};
    sn_status st = run_replica(R, 0, &fc);
    char msg0[512] = "";
    if (st != SN_OK) snprintf(msg0, sizeof msg0, "%s", sn_last_error());
    /* Every worker ends: a failure woke the ones waiting on the others. */
    wait_baton(R, 0, workers_done, NULL, false, false);
    if (hook) sn_plan_set_node_hook(plans[0], NULL, NULL);
    int f = atomic_load(&R->failed) - 1;
    if (f > 0) return sn_errorf(R->w[f].st, "%s", R->w[f].msg);
    if (st != SN_OK && !fc.stopped) return f == 0 ? sn_errorf(st, "%s", msg0) : st;
    for (int i = 1; i < R->n; i++)
        if (R->w[i].st != SN_OK && !R->w[i].stopped) return sn_errorf(R->w[i].st, "%s", R->w[i].msg);
    /* Every replica ran the same steps with the same all-reduced updates: the private copies
     * equal the graph's buffer, which replica 0 wrote (no reload before the next run). */
    for (int r = 1; r < R->n; r++) sn_plan_vars_synced(plans[r]);
    return st; /* SN_OK, or next's status that ended the run */
}

void sn_strategy_allreduce_stats(const sn_strategy *s, int64_t *buckets, int64_t *early,
                                 double *wait_s) {
    const struct sn_replicas *R = s ? s->rep : NULL;
    if (!R) return;
    if (buckets) *buckets += R->buckets;
    if (early) *early += R->early;
    if (wait_s) *wait_s += R->wait_s;
}

sn_status sn_strategy_broadcast(const sn_strategy *s, void *buf, size_t bytes) {
    if (s->workers < 2) return SN_OK;
    return s->coll->vt->broadcast(s->coll, buf, bytes, 0, s->timeout_s);
}
