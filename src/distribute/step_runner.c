/* The step runner (step_runner.h): runs the local replicas of one data-parallel step, sums
 * their targets in replica order and all-reduces the sum across workers.
 *
 * Reduce buffer (floats): every target at a 16-float (64-byte) aligned offset, then a
 * 16-float slot whose first float is the example count (the host knows the rows; it rides
 * along in the last bucket so that one all-reduce gives the global count). */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "distribute/distribute_impl.h"
#include "distribute/step_runner.h"
#include "graph/graph_impl.h"

/* The replicas of one step (see "running the replicas" below). */
typedef struct rep_job {
    sn_plan *plan;
    const char *device;
    int rep;
    bool started;   /* on a thread of its own, to be joined */
    sn_status st;
    char msg[512];  /* its error text: sn_last_error() is per thread */
} rep_job;

typedef struct rep_group {
    int n;
    rep_job *job;   /* n, and n threads' handles (the last replica's unused) */
    pthread_t *th;
    bool joined;    /* replicas 0 .. n-2 are finished */
} rep_group;

struct sn_step_runner {
    const sn_strategy *s;
    sn_graph *g;
    int n_rep, n_tg;
    sn_node *tg;        /* n_rep * n_tg: tg[r * n_tg + k] */
    size_t *off;        /* n_tg + 1 float offsets into red; off[n_tg] = total */
    size_t count_off;
    float *red;
    /* Overlap (multi-worker only): the targets in the order the last replica's plan
     * produces them (rank 0's order, so every worker has the same buckets), laid out in
     * that order in red; bucket b holds order[bk[b], bk[b + 1]) and, for the last bucket,
     * the count slot; it can start once call bk_ready[b] of the last replica has run. */
    bool overlap_set;
    int *order;
    int n_bk;
    int *bk;            /* n_bk + 1 */
    int *bk_ready;      /* n_bk */
    int64_t buckets, early;
    double wait_s;
    rep_group gr;
};

static sn_node tg_of(const sn_step_runner *r, int rep, int k) { return r->tg[rep * r->n_tg + k]; }

/* Floats a target takes in the reduce buffer (a multiple of 16: 64-byte aligned pieces). */
static size_t padded(sn_graph *g, sn_node n) {
    sn_shape s = sn_node_shape(g, n);
    return ((size_t)sn_shape_numel(&s) + 15) & ~(size_t)15;
}

void sn_step_runner_free(sn_step_runner *r) {
    if (!r) return;
    free(r->tg);
    free(r->off);
    sn_free_aligned(r->red);
    free(r->order);
    free(r->bk);
    free(r->bk_ready);
    free(r->gr.job);
    free(r->gr.th);
    free(r);
}

sn_status sn_step_runner_new(const sn_strategy *s, sn_graph *g, int n_tg, sn_node *const *tg,
                             sn_step_runner **out) {
    *out = NULL;
    sn_step_runner *r = sn_calloc(1, sizeof *r);
    if (!r) return SN_ERR_NOMEM;
    r->s = s;
    r->g = g;
    r->n_rep = s->n_local;
    r->n_tg = n_tg;
    r->tg = sn_calloc((size_t)(r->n_rep * n_tg) + 1, sizeof *r->tg);
    r->off = sn_calloc((size_t)n_tg + 1, sizeof *r->off);
    r->gr.job = sn_calloc((size_t)r->n_rep, sizeof *r->gr.job);
    r->gr.th = sn_calloc((size_t)r->n_rep, sizeof *r->gr.th);
    if (!r->tg || !r->off || !r->gr.job || !r->gr.th) {
        sn_step_runner_free(r);
        return SN_ERR_NOMEM;
    }
    for (int rep = 0; rep < r->n_rep; rep++)
        memcpy(r->tg + rep * n_tg, tg[rep], (size_t)n_tg * sizeof *r->tg);
    /* Offsets in target order (sn_step_runner_prepare lays them out again in the order the
     * backward pass produces them when the all-reduce overlaps it). */
    size_t o = 0;
    for (int k = 0; k < n_tg; k++) {
        r->off[k] = o;
        o += padded(g, tg_of(r, 0, k));
    }
    r->count_off = o;
    o += 16;
    r->off[n_tg] = o;
    r->red = sn_malloc_aligned(o * sizeof(float));
    if (!r->red) {
        sn_step_runner_free(r);
        return SN_ERR_NOMEM;
    }
    memset(r->red, 0, o * sizeof(float));
    *out = r;
    return SN_OK;
}

const float *sn_step_runner_sum(const sn_step_runner *r, int k) { return r->red + r->off[k]; }
float sn_step_runner_count(const sn_step_runner *r) { return r->red[r->count_off]; }

void sn_step_runner_stats(const sn_step_runner *r, int64_t *buckets, int64_t *early,
                          double *wait_s) {
    if (!r) return;
    if (buckets) *buckets += r->buckets;
    if (early) *early += r->early;
    if (wait_s) *wait_s += r->wait_s;
}

sn_status sn_strategy_broadcast(const sn_strategy *s, void *buf, size_t bytes) {
    if (s->workers < 2) return SN_OK;
    return s->coll->vt->broadcast(s->coll, buf, bytes, 0, s->timeout_s);
}

/* ---- running the replicas ----------------------------------------------------------------- */

/* The local replicas run at once: replicas 0 .. n-2 each on a host thread of its own, the
 * last one on the calling thread (which keeps every MPI call, made by the overlap hook, on
 * the thread that initialised MPI). Each thread's sn_plan_run enters its device's share of
 * the cores (sn_threads_enter: the OpenMP team size of that thread, which also sizes the
 * oneDNN primitives the plan made), so two devices of one core each run side by side, one
 * OpenMP team per host thread. Nested OpenMP was the first attempt and stalled: oneDNN's JIT
 * convolutions size their work split and barriers to the thread count at creation and spin
 * forever inside a one-thread nested region; separate host threads have separate teams.
 *
 * Each replica writes only its own plan's arena; all read the shared variables, which no
 * replica plan assigns (batch normalization's new statistics are targets, assigned by the
 * caller after the step). The sums that follow are taken in replica order after every
 * replica has finished, so the bits are those of the replicas run one after another, which
 * $SN_DIST_CONCURRENT=0 still does (for measurements and as a fallback). */
static sn_status run_one(rep_job *j) {
    sn_status st = sn_plan_run(j->plan, 1, NULL, NULL);
    return st == SN_OK ? SN_OK : sn_error_context(st, "replica %d on %s", j->rep, j->device);
}

static void *rep_thread(void *arg) {
    rep_job *j = arg;
    j->st = run_one(j);
    if (j->st != SN_OK) snprintf(j->msg, sizeof j->msg, "%s", sn_last_error());
    return NULL;
}

/* Waits for replicas 0 .. n-2; the first failure in replica order, with its message. */
static sn_status join_others(rep_group *gr) {
    if (!gr->joined) {
        for (int i = 0; i + 1 < gr->n; i++)
            if (gr->job[i].started) pthread_join(gr->th[i], NULL);
        gr->joined = true;
    }
    for (int i = 0; i + 1 < gr->n; i++)
        if (gr->job[i].st != SN_OK) return sn_errorf(gr->job[i].st, "%s", gr->job[i].msg);
    return SN_OK;
}

static void start_replicas(sn_step_runner *r, sn_plan *const *plans) {
    rep_group *gr = &r->gr;
    gr->n = r->n_rep;
    gr->joined = false;
    bool at_once = r->s->concurrent && r->n_rep > 1;
    for (int i = 0; i < r->n_rep; i++)
        gr->job[i] = (rep_job){.plan = plans[i], .device = r->s->device_names[i], .rep = i};
    for (int i = 0; i + 1 < r->n_rep; i++) {
        rep_job *j = &gr->job[i];
        /* Without a thread (one after another asked, or none to be had) it runs here. */
        if (at_once && pthread_create(&gr->th[i], NULL, rep_thread, j) == 0) j->started = true;
        else rep_thread(j);
    }
}

/* Runs every replica once; the caller has set an overlap hook on the last one or not. */
static sn_status run_replicas(rep_group *gr) {
    sn_status last = run_one(&gr->job[gr->n - 1]);
    sn_status others = join_others(gr);
    return others != SN_OK ? others : last;
}

/* ---- overlapping the all-reduce with the backward pass (multi-worker) ----------------------
 *
 * Autodiff emits the gradients roughly in reverse layer order, and the last replica's plan
 * computes them one after another. The executor calls overlap_hook after each kernel call;
 * once the last target of a bucket has been computed by the last replica (and, the first
 * time, after waiting for the other replicas, which run at once with it), the hook sums
 * the bucket's targets over the local replicas into red and starts its all-reduce, then lets
 * MPI progress what is in flight. After the run the buckets no kernel fills are started and
 * everything is waited for (with the deadline) before the caller runs the optimizer: the
 * update is a separate plan, so no variable is written while a bucket is in flight. Per
 * element the sums are unchanged (replicas in order, then MPI's sum of the workers' values),
 * so the weights are bitwise those of the all-reduce after the backward pass, which
 * $SN_DIST_OVERLAP=0 still runs. */

/* The call after which target node n exists in plan p. A reshape is a view of its input
 * (no kernel runs for it), so it exists once its input does; a target no kernel computes (a
 * variable, a constant) counts as ready after the run. */
static int ready_call(const sn_graph *g, const sn_plan *p, sn_node n) {
    while (g->nodes[n].op == SN_OP_RESHAPE) n = g->nodes[n].in[0];
    int c = sn_plan_call_of(p, n);
    return c < 0 ? INT_MAX : c;
}

/* Once per runner, on every worker at the same point (its first prepare): the order of the
 * targets, the layout of red in that order, and the buckets. */
static sn_status overlap_setup(sn_step_runner *r, const sn_plan *last) {
    const sn_strategy *s = r->s;
    sn_graph *g = r->g;
    int n = r->n_tg, lr = r->n_rep - 1;
    free(r->order); /* from an earlier attempt that failed */
    free(r->bk);
    free(r->bk_ready);
    int *key = sn_calloc((size_t)n + 1, sizeof *key);
    r->order = sn_calloc((size_t)n + 1, sizeof *r->order);
    r->bk = sn_calloc((size_t)n + 2, sizeof *r->bk);
    r->bk_ready = sn_calloc((size_t)n + 1, sizeof *r->bk_ready);
    if (!key || !r->order || !r->bk || !r->bk_ready) {
        free(key);
        return SN_ERR_NOMEM;
    }
    /* Stable insertion sort by the call that produces each target (a few dozen targets). */
    for (int k = 0; k < n; k++) {
        int kk = ready_call(g, last, tg_of(r, lr, k)), i = k;
        for (; i > 0 && key[i - 1] > kk; i--) {
            key[i] = key[i - 1];
            r->order[i] = r->order[i - 1];
        }
        key[i] = kk;
        r->order[i] = k;
    }
    free(key);
    /* MPI collectives must match on every worker: rank 0's order decides the buckets (the
     * workers build the same graph, so it normally is everyone's order anyway). */
    SN_TRY(sn_error_context(s->coll->vt->broadcast(s->coll, r->order, (size_t)n * sizeof *r->order,
                                                   0, s->timeout_s),
                            "distributed training: agreeing on the gradient buckets"));
    bool *seen = sn_calloc((size_t)n + 1, sizeof *seen);
    if (!seen) return SN_ERR_NOMEM;
    bool perm = true;
    for (int i = 0; i < n && perm; i++) {
        int k = r->order[i];
        perm = k >= 0 && k < n && !seen[k];
        if (perm) seen[k] = true;
    }
    free(seen);
    if (!perm)
        return sn_errorf(SN_ERR_DIST, "distributed training: rank 0's gradient order does not fit "
                         "worker %d's %d targets (the workers built different models?)", s->rank, n);
    /* Lay red out in that order (same total), and cut it into buckets of about
     * bucket_bytes, each whole targets (a larger target is one bucket, which start_f32
     * reduces in bucket_bytes pieces). */
    size_t o = 0, total = r->off[n], cur = 0;
    int nb = 0;
    r->bk[0] = 0;
    for (int i = 0; i < n; i++) {
        int k = r->order[i];
        size_t f = padded(g, tg_of(r, 0, k));
        r->off[k] = o;
        o += f;
        if (cur > 0 && (cur + f) * sizeof(float) > s->bucket_bytes) {
            r->bk[++nb] = i;
            cur = 0;
        }
        cur += f;
    }
    r->bk[++nb] = n;
    r->n_bk = nb;
    r->count_off = o;
    SN_ASSERT(o + 16 == total);
    memset(r->red, 0, total * sizeof(float));
    return SN_OK;
}

sn_status sn_step_runner_prepare(sn_step_runner *r, sn_plan *const *plans) {
    const sn_strategy *s = r->s;
    if (s->workers < 2 || !s->overlap) return SN_OK;
    const sn_plan *last = plans[r->n_rep - 1];
    if (!r->overlap_set) {
        SN_TRY(overlap_setup(r, last));
        r->overlap_set = true;
    }
    /* Per execution (plans may have been remade): the call after which each bucket is
     * complete here. */
    for (int b = 0; b < r->n_bk; b++) {
        int c = -1;
        for (int i = r->bk[b]; i < r->bk[b + 1]; i++) {
            int ci = ready_call(r->g, last, tg_of(r, r->n_rep - 1, r->order[i]));
            if (ci > c) c = ci;
        }
        r->bk_ready[b] = c;
    }
    return SN_OK;
}

typedef struct overlap {
    sn_step_runner *r;
    sn_plan *const *plans;
    rep_group *gr;  /* the replicas running at once: the first bucket waits for them */
    int next;       /* the first bucket not started; buckets start in order on every worker */
    int64_t pieces; /* MPI all-reduces started (a bucket over bucket_bytes is several) */
} overlap;

/* dst = the replicas' target k summed in replica order. */
static sn_status sum_target(const sn_step_runner *r, sn_plan *const *plans, int k) {
    const float *srcs[SN_MAX_LOGICAL_DEVICES];
    for (int rep = 0; rep < r->n_rep; rep++) {
        srcs[rep] = sn_plan_buffer(plans[rep], tg_of(r, rep, k));
        if (!srcs[rep]) return SN_ERR_INVALID;
    }
    sn_shape ks = sn_node_shape(r->g, tg_of(r, 0, k));
    sn_sum_replicas(r->red + r->off[k], srcs, r->n_rep, (size_t)sn_shape_numel(&ks));
    return SN_OK;
}

/* Sums bucket o->next over the local replicas into red and starts its all-reduce. */
static sn_status launch(overlap *o) {
    sn_step_runner *r = o->r;
    const sn_strategy *s = r->s;
    int b = o->next++;
    for (int i = r->bk[b]; i < r->bk[b + 1]; i++) SN_TRY(sum_target(r, o->plans, r->order[i]));
    size_t lo = r->bk[b] < r->n_tg ? r->off[r->order[r->bk[b]]] : r->count_off;
    size_t hi = b + 1 == r->n_bk ? r->off[r->n_tg] : r->off[r->order[r->bk[b + 1]]];
    size_t per = s->bucket_bytes / sizeof(float);
    o->pieces += per ? (int64_t)((hi - lo + per - 1) / per) : 1;
    return sn_error_context(s->coll->vt->start_f32(s->coll, r->red + lo, hi - lo,
                                                   s->bucket_bytes, s->timeout_s),
                            "starting gradient bucket %d of %d", b + 1, r->n_bk);
}

static sn_status overlap_hook(void *ctx, sn_plan *p, int call, sn_node n) {
    (void)p;
    (void)n;
    overlap *o = ctx;
    if (o->next < o->r->n_bk && o->r->bk_ready[o->next] <= call) SN_TRY(join_others(o->gr));
    while (o->next < o->r->n_bk && o->r->bk_ready[o->next] <= call) SN_TRY(launch(o));
    return o->r->s->coll->vt->progress(o->r->s->coll);
}

sn_status sn_step_runner_run(sn_step_runner *r, sn_plan *const *plans, float rows, int64_t step) {
    const sn_strategy *s = r->s;
    r->red[r->count_off] = rows;
    if (r->overlap_set) {
        /* The buckets start inside the last replica's run (overlap_hook). The hook's context
         * lives on this stack, so it is unset before returning. */
        overlap o = {.r = r, .plans = plans, .gr = &r->gr, .next = 0};
        sn_plan *last = plans[r->n_rep - 1];
        sn_plan_set_node_hook(last, overlap_hook, &o);
        start_replicas(r, plans);
        sn_status rs = run_replicas(&r->gr);
        sn_plan_set_node_hook(last, NULL, NULL);
        SN_TRY(rs);
        double t0 = sn_now();
        r->early += o.pieces;
        while (o.next < r->n_bk) SN_TRY(launch(&o));
        r->buckets += o.pieces;
        SN_TRY(sn_error_context(s->coll->vt->finish(s->coll, s->timeout_s), "step %lld",
                                (long long)step + 1));
        r->wait_s += sn_now() - t0;
        return SN_OK;
    }
    start_replicas(r, plans);
    SN_TRY(run_replicas(&r->gr));
    double t0 = sn_now();
    /* Sum the replicas' targets in replica order, then across workers. */
    for (int k = 0; k < r->n_tg; k++) SN_TRY(sum_target(r, plans, k));
    SN_TRY(sn_error_context(s->coll->vt->allreduce_f32(s->coll, r->red, r->off[r->n_tg],
                                                       s->bucket_bytes, s->timeout_s),
                            "step %lld", (long long)step + 1));
    if (s->workers > 1) {
        size_t per = s->bucket_bytes / sizeof(float);
        r->buckets += per ? (int64_t)((r->off[r->n_tg] + per - 1) / per) : 1;
        r->wait_s += sn_now() - t0;
    }
    return SN_OK;
}
