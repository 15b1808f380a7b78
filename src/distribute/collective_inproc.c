/* In-process collectives: one worker, so a cross-worker sum is the identity; and the sum of
 * the local replicas' gradient buffers, which all live in this address space. That sum runs
 * in replica order per element, so its bits are the same whatever the thread count and equal
 * to what two MPI workers with one replica each compute (one addition per element pair). */
#include "distribute/distribute_impl.h"

static sn_status inproc_allreduce_f32(sn_collective *c, float *buf, size_t n,
                                      size_t bucket_bytes, double timeout_s) {
    return SN_OK;
}

static sn_status inproc_start_f32(sn_collective *c, float *buf, size_t n, size_t bucket_bytes,
                                  double timeout_s) {
    return SN_OK;
}

static sn_status inproc_progress(sn_collective *c) { return SN_OK; }

static sn_status inproc_finish(sn_collective *c, double timeout_s) { return SN_OK; }

static sn_status inproc_allreduce_f64(sn_collective *c, double *buf, size_t n, double timeout_s) {
    return SN_OK;
}

static sn_status inproc_broadcast(sn_collective *c, void *buf, size_t bytes, int root,
                                  double timeout_s) {
    return SN_OK;
}

static void inproc_destroy(sn_collective *c) { free(c); }

static const sn_collective_vt inproc_vt = {
    .name = "in-process",
    .allreduce_f32 = inproc_allreduce_f32,
    .start_f32 = inproc_start_f32,
    .progress = inproc_progress,
    .finish = inproc_finish,
    .allreduce_f64 = inproc_allreduce_f64,
    .broadcast = inproc_broadcast,
    .destroy = inproc_destroy,
};

sn_collective *sn_collective_inproc_new(void) {
    sn_collective *c = sn_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->vt = &inproc_vt;
    c->rank = 0;
    c->size = 1;
    return c;
}

typedef struct sum_ctx {
    float *dst;
    const float *const *srcs;
    int n;
    size_t count;
} sum_ctx;

/* dst [count] = sum over r of srcs[r] [count], r ascending. */
static void sum_task(void *vctx, int ith, int nth) {
    const sum_ctx *c = vctx;
    int64_t lo, hi;
    sn_split_range((int64_t)c->count, ith, nth, &lo, &hi);
    float *d = c->dst;
    if (c->srcs[0] != d)
        for (int64_t i = lo; i < hi; i++) d[i] = c->srcs[0][i];
    for (int r = 1; r < c->n; r++) {
        const float *s = c->srcs[r];
        for (int64_t i = lo; i < hi; i++) d[i] += s[i];
    }
}

void sn_sum_replicas(float *dst, const float *const *srcs, int n, size_t count) {
    SN_ASSERT(n >= 1);
    sum_ctx c = {dst, srcs, n, count};
    /* Below ~64 K floats a thread team costs more than it saves. */
    int nth = count < (1u << 16) ? 1 : sn_num_threads();
    sn_parallel(sum_task, &c, nth);
}
