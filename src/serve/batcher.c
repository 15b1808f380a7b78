/* Dynamic batching: one queue and one batcher thread per model.
 *
 * HTTP threads queue parsed requests; the batcher takes rows from the queue's head until it
 * has max_batch of them or the first queued request has waited timeout_us, runs them through
 * the prepared plan of the smallest bucket (1, 2, 4, ..., max_batch) that holds them, padding
 * with zero rows, and copies each request's rows back. A request larger than max_batch is
 * answered over several batches. Only this thread touches the model, so plans are never
 * built or run concurrently.
 *
 * Bit-for-bit: a row's answer must not depend on which rows share its batch. At start every
 * bucket runs probe rows and each row is compared with the same row run alone (bucket 1); a
 * bucket that differs is not used (its batches go to smaller buckets). On the CPUs tried every
 * bucket passed: the GEMMs and convolutions reduce along K in an order that does not depend on
 * the number of rows (docs/serving.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "serve/serve_impl.h"

/* Probe rows in [0, 1): a fixed sequence (splitmix64), so every start checks the same rows. */
static void probe_rows(float *x, int64_t n) {
    uint64_t s = 0x5eed;
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        x[i] = (float)((double)(z >> 40) / (double)(1ull << 24));
    }
}

/* Runs `rows` rows of sm->bx through bucket b (the rows after them are zero), into sm->by. */
static sn_status run_bucket(sn_serve_model *sm, int b, int64_t rows) {
    int64_t bs = sm->bucket[b];
    if (rows < bs)
        memset(sm->bx + rows * sm->in_numel, 0, (size_t)((bs - rows) * sm->in_numel) * sizeof(float));
    return sn_model_predict_into(sm->m, bs, sm->bx, sm->by);
}

static sn_status check_buckets(sn_serve_model *sm) {
    int64_t maxb = sm->bucket[sm->n_buckets - 1];
    float *probe = malloc((size_t)(maxb * sm->in_numel) * sizeof(float));
    float *ref = malloc((size_t)(maxb * sm->out_numel) * sizeof(float));
    if (!probe || !ref) {
        free(probe);
        free(ref);
        return SN_ERR_NOMEM;
    }
    probe_rows(probe, maxb * sm->in_numel);
    sn_status s = SN_OK;
    size_t out_row = (size_t)sm->out_numel * sizeof(float);
    for (int64_t r = 0; r < maxb && s == SN_OK; r++) {
        memcpy(sm->bx, probe + r * sm->in_numel, (size_t)sm->in_numel * sizeof(float));
        s = run_bucket(sm, 0, 1);
        memcpy(ref + r * sm->out_numel, sm->by, out_row);
    }
    sm->bucket_ok[0] = true;
    for (int b = 1; b < sm->n_buckets && s == SN_OK; b++) {
        /* Fewer rows than the bucket, so the padding is checked too. */
        int64_t rows = sm->bucket[b] - 1;
        memcpy(sm->bx, probe, (size_t)(rows * sm->in_numel) * sizeof(float));
        s = run_bucket(sm, b, rows);
        sm->bucket_ok[b] = s == SN_OK && memcmp(sm->by, ref, (size_t)rows * out_row) == 0;
    }
    free(probe);
    free(ref);
    return s;
}

/* The bucket for `rows` rows: the smallest usable one that holds them, else the largest
 * usable one (the rest goes to the next run). */
static int pick_bucket(const sn_serve_model *sm, int64_t rows) {
    int best = 0;
    for (int b = 0; b < sm->n_buckets; b++) {
        if (!sm->bucket_ok[b]) continue;
        best = b;
        if (sm->bucket[b] >= rows) break;
    }
    return best;
}

typedef struct slice {
    sn_serve_req *r;
    int64_t first, rows;
} slice;

static void finish(sn_serve_model *sm, sn_serve_req *r) {
    atomic_store_explicit(&r->finished, 1, memory_order_release);
    sm->on_done(r);
}

/* One run of up to max_batch rows taken from the queue (mu held on entry and exit). */
static void run_batch(sn_serve_model *sm, slice *sl) {
    int ns = 0;
    int64_t rows = 0;
    int b = pick_bucket(sm, sm->queued_rows < sm->max_batch ? sm->queued_rows : sm->max_batch);
    int64_t cap = sm->bucket[b];
    while (sm->head && rows < cap) {
        sn_serve_req *r = sm->head;
        int64_t take = r->n - r->next;
        if (take > cap - rows) take = cap - rows;
        sl[ns++] = (slice){r, r->next, take};
        r->next += take;
        rows += take;
        sm->queued_rows -= take;
        if (r->next == r->n) {
            sm->head = r->qnext;
            if (!sm->head) sm->tail = NULL;
        }
    }
    pthread_mutex_unlock(&sm->mu);

    int64_t at = 0;
    for (int i = 0; i < ns; i++) {
        memcpy(sm->bx + at * sm->in_numel, sl[i].r->x + sl[i].first * sm->in_numel,
               (size_t)(sl[i].rows * sm->in_numel) * sizeof(float));
        at += sl[i].rows;
    }
    sn_status s = run_bucket(sm, b, rows);
    at = 0;
    for (int i = 0; i < ns; i++) {
        sn_serve_req *r = sl[i].r;
        if (s == SN_OK) {
            memcpy(r->y + sl[i].first * sm->out_numel, sm->by + at * sm->out_numel,
                   (size_t)(sl[i].rows * sm->out_numel) * sizeof(float));
        } else if (!r->failed) {
            r->failed = true;
            snprintf(r->err, sizeof r->err, "%s", sn_last_error());
        }
        at += sl[i].rows;
        r->done_rows += sl[i].rows;
        if (r->done_rows == r->n) finish(sm, r);
    }
    int h = 0;
    while (h < SN_SERVE_BATCH_HIST && (1LL << h) < rows) h++;
    atomic_fetch_add(&sm->batch_hist[h], 1);
    atomic_fetch_add(&sm->batches, 1);
    atomic_fetch_add(&sm->batch_rows, rows);
    atomic_fetch_add(&sm->padded_rows, cap - rows);
    pthread_mutex_lock(&sm->mu);
}

static void deadline_after(struct timespec *ts, double t) {
    /* pthread_cond_timedwait counts on CLOCK_MONOTONIC (set at init). */
    ts->tv_sec = (time_t)t;
    ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *batcher_main(void *arg) {
    sn_serve_model *sm = arg;
    /* The slices of one batch: at most one per row. */
    slice *sl = malloc((size_t)sm->max_batch * sizeof *sl);
    pthread_mutex_lock(&sm->mu);
    for (;;) {
        while (!sm->head && !sm->stop) pthread_cond_wait(&sm->cv, &sm->mu);
        if (!sm->head) break; /* stopping and nothing queued */
        /* Wait for a full batch, at most timeout_us after the head request was queued
         * (a request already partly run goes at once). */
        if (sm->head->next == 0 && sm->timeout_us > 0) {
            struct timespec ts;
            deadline_after(&ts, sn_now() + 1e-6 * (double)sm->timeout_us);
            while (sm->queued_rows < sm->max_batch && !sm->stop)
                if (pthread_cond_timedwait(&sm->cv, &sm->mu, &ts) == ETIMEDOUT) break;
        }
        if (!sl) {
            /* Out of memory at start: answer with an error rather than hang. */
            sn_serve_req *r = sm->head;
            sm->head = r->qnext;
            if (!sm->head) sm->tail = NULL;
            sm->queued_rows -= r->n - r->next;
            r->failed = true;
            snprintf(r->err, sizeof r->err, "out of memory in the batcher");
            finish(sm, r);
            continue;
        }
        run_batch(sm, sl);
    }
    pthread_mutex_unlock(&sm->mu);
    free(sl);
    return NULL;
}

sn_status sn_serve_model_init(sn_serve_model *sm, const char *name, sn_model *m, int max_batch,
                              int64_t timeout_us, void (*on_done)(sn_serve_req *r)) {
    memset(sm, 0, sizeof *sm);
    sm->m = m;
    sm->on_done = on_done;
    sm->max_batch = max_batch;
    sm->timeout_us = timeout_us;
    sm->in = sn_model_input_shape(m);
    sm->out = sn_model_output_shape(m);
    sm->in_numel = sn_shape_numel(&sm->in);
    sm->out_numel = sn_shape_numel(&sm->out);
    if (sm->in.ndim < 1 || sm->in_numel < 1 || sm->out_numel < 1)
        return sn_errorf(SN_ERR_STATE, "serve: model '%s' is not built (no input shape)", name);
    sm->name = strdup(name);
    if (!sm->name) return SN_ERR_NOMEM;
    for (int64_t b = 1; b < max_batch && sm->n_buckets < SN_SERVE_MAX_BUCKETS - 1; b *= 2)
        sm->bucket[sm->n_buckets++] = b;
    sm->bucket[sm->n_buckets++] = max_batch;
    sm->bx = malloc((size_t)(max_batch * sm->in_numel) * sizeof(float));
    sm->by = malloc((size_t)(max_batch * sm->out_numel) * sizeof(float));
    if (!sm->bx || !sm->by) return SN_ERR_NOMEM;
    for (int b = 0; b < sm->n_buckets; b++)
        SN_TRY(sn_error_context(sn_model_predict_prepare(m, sm->bucket[b]),
                                "serve: model '%s', batch %lld", name, (long long)sm->bucket[b]));
    SN_TRY(sn_error_context(check_buckets(sm), "serve: model '%s': checking the buckets", name));
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0 ||
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&sm->cv, &ca) != 0 || pthread_mutex_init(&sm->mu, NULL) != 0)
        return sn_errorf(SN_ERR_IO, "serve: cannot create the batcher's lock");
    pthread_condattr_destroy(&ca);
    if (pthread_create(&sm->thread, NULL, batcher_main, sm) != 0)
        return sn_errorf(SN_ERR_IO, "serve: cannot start the batcher thread of '%s'", name);
    sm->thread_started = true;
    return SN_OK;
}

bool sn_serve_model_submit(sn_serve_model *sm, sn_serve_req *r) {
    r->model = sm;
    r->next = r->done_rows = 0;
    r->qnext = NULL;
    pthread_mutex_lock(&sm->mu);
    if (sm->stop) {
        pthread_mutex_unlock(&sm->mu);
        return false;
    }
    if (sm->tail) sm->tail->qnext = r;
    else sm->head = r;
    sm->tail = r;
    sm->queued_rows += r->n;
    pthread_cond_signal(&sm->cv);
    pthread_mutex_unlock(&sm->mu);
    return true;
}

void sn_serve_model_fini(sn_serve_model *sm) {
    if (sm->thread_started) {
        pthread_mutex_lock(&sm->mu);
        sm->stop = true;
        pthread_cond_signal(&sm->cv);
        pthread_mutex_unlock(&sm->mu);
        pthread_join(sm->thread, NULL);
        pthread_mutex_destroy(&sm->mu);
        pthread_cond_destroy(&sm->cv);
        sm->thread_started = false;
    }
    free(sm->bx);
    free(sm->by);
    free(sm->name);
    sm->bx = sm->by = NULL;
    sm->name = NULL;
}
