/* The transforms that hold elements: shuffle, batch, cache, prefetch.
 *
 * Each keeps its element copies in tensors it owns and reuses them (sn_data_copy_into only
 * allocates when a dtype or shape changes), so after the first epoch fills the buffers the
 * per-step path does no allocation: a batch is bs memcpy's into one preallocated tensor. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "data/data_impl.h"

static int64_t card_of_src(const sn_dataset *ds) { return sn_dataset_cardinality(ds->src); }

/* Grows an array of n-component slots (pointers, zero-filled) to hold at least `want`. */
static sn_status grow_slots(sn_tensor ***slots, int64_t *alloc, int64_t want, int n,
                            int64_t limit) {
    if (want <= *alloc) return SN_OK;
    int64_t a = *alloc ? *alloc * 2 : 64;
    if (a < want) a = want;
    if (limit > 0 && a > limit) a = limit;
    sn_tensor **p = sn_realloc(*slots, (size_t)a * (size_t)n * sizeof *p);
    if (!p) return SN_ERR_NOMEM;
    memset(p + *alloc * n, 0, (size_t)(a - *alloc) * (size_t)n * sizeof *p);
    *slots = p;
    *alloc = a;
    return SN_OK;
}

static void free_slots(sn_tensor **slots, int64_t count) {
    if (!slots) return;
    for (int64_t i = 0; i < count; i++) sn_tensor_free(slots[i]);
    free(slots);
}

/* ---- shuffle --------------------------------------------------------------------------- */

typedef struct {
    sn_dataset base;
    int64_t cap;     /* buffer_size */
    int64_t count;   /* elements in the buffer */
    int64_t alloc;   /* slots allocated (grows up to cap, so a huge buffer_size costs only
                      * what the data needs) */
    int64_t pending; /* slot handed out by the last call, dropped at the next; -1 none */
    bool src_done, reshuffle;
    uint64_t seed;
    sn_rng rng;
    sn_tensor **slot; /* alloc * n */
    /* Over an in-memory source (ops->at): the buffer holds element indices instead of copies,
     * filled and permuted by exactly the steps below, so the order is the same element for
     * element; the element is viewed in the source's memory when handed out. */
    int64_t *idx;     /* min(cap, source cardinality) entries; NULL in copy mode */
    int64_t fill, src_count;
} ds_shuffle;

static void shuffle_swap(ds_shuffle *ds, int64_t a, int64_t b) {
    int n = ds->base.n;
    for (int k = 0; k < n; k++) {
        sn_tensor *t = ds->slot[a * n + k];
        ds->slot[a * n + k] = ds->slot[b * n + k];
        ds->slot[b * n + k] = t;
    }
}

static sn_status shuffle_next_index(ds_shuffle *ds, sn_tensor **out, bool *end) {
    sn_dataset *d = &ds->base;
    if (ds->pending >= 0) {
        int64_t t = ds->idx[ds->pending];
        ds->idx[ds->pending] = ds->idx[ds->count - 1];
        ds->idx[ds->count - 1] = t;
        ds->count--;
        ds->pending = -1;
    }
    while (!ds->src_done && ds->count < ds->cap) {
        if (ds->fill >= ds->src_count) {
            ds->src_done = true;
            break;
        }
        ds->idx[ds->count++] = ds->fill++;
    }
    if (ds->count == 0) {
        *end = true;
        return SN_OK;
    }
    int64_t i = (int64_t)sn_rng_below(&ds->rng, (uint64_t)ds->count);
    SN_TRY(d->src->ops->at(d->src, ds->idx[i], out));
    ds->pending = i;
    return SN_OK;
}

static sn_status shuffle_next(sn_dataset *d, sn_tensor **out, bool *end) {
    ds_shuffle *ds = (ds_shuffle *)d;
    if (ds->idx) return shuffle_next_index(ds, out, end);
    int n = d->n;
    /* Drop last call's element now that the caller is done with it: the last element moves
     * into its place and its tensors go to the free end, to be reused by the next fill. */
    if (ds->pending >= 0) {
        shuffle_swap(ds, ds->pending, ds->count - 1);
        ds->count--;
        ds->pending = -1;
    }
    while (!ds->src_done && ds->count < ds->cap) {
        SN_TRY(grow_slots(&ds->slot, &ds->alloc, ds->count + 1, n, ds->cap));
        sn_tensor *in[SN_DATASET_MAX_COMPONENTS];
        bool e = false;
        SN_TRY(sn_dataset_next(d->src, in, &e));
        if (e) {
            ds->src_done = true;
            break;
        }
        for (int k = 0; k < n; k++) SN_TRY(sn_data_copy_into(&ds->slot[ds->count * n + k], in[k]));
        ds->count++;
    }
    if (ds->count == 0) {
        *end = true;
        return SN_OK;
    }
    int64_t i = (int64_t)sn_rng_below(&ds->rng, (uint64_t)ds->count);
    for (int k = 0; k < n; k++) out[k] = ds->slot[i * n + k];
    ds->pending = i;
    return SN_OK;
}

static sn_status shuffle_reset(sn_dataset *d) {
    ds_shuffle *ds = (ds_shuffle *)d;
    ds->count = 0;
    ds->pending = -1;
    ds->src_done = false;
    ds->fill = 0;
    sn_rng_init(&ds->rng, ds->seed, ds->reshuffle ? d->epoch : 0);
    return sn_dataset_reset(d->src);
}

static void shuffle_destroy(sn_dataset *d) {
    ds_shuffle *ds = (ds_shuffle *)d;
    free_slots(ds->slot, ds->alloc * d->n);
    free(ds->idx);
}

static const sn_dataset_ops shuffle_ops = {.name = "shuffle",
                                           .next = shuffle_next,
                                           .reset = shuffle_reset,
                                           .cardinality = card_of_src,
                                           .destroy = shuffle_destroy};

sn_status sn_dataset_shuffle(sn_dataset **ds, int64_t buffer_size, uint64_t seed,
                             bool reshuffle_each_iteration) {
    SN_TRY(sn_dataset_check_arg(ds, "shuffle"));
    if (buffer_size < 1)
        return sn_errorf(SN_ERR_INVALID,
                         "shuffle: buffer_size %lld must be at least 1 (the data set size gives "
                         "a full shuffle)",
                         (long long)buffer_size);
    ds_shuffle *s = (ds_shuffle *)sn_dataset_alloc(sizeof *s, &shuffle_ops, *ds, (*ds)->n);
    if (!s) return SN_ERR_NOMEM;
    s->cap = buffer_size;
    s->pending = -1;
    s->seed = seed;
    s->reshuffle = reshuffle_each_iteration;
    sn_rng_init(&s->rng, seed, 0);
    int64_t c = sn_dataset_cardinality(*ds);
    if ((*ds)->ops->at && c > 0) {
        s->src_count = c;
        s->idx = sn_malloc((size_t)(c < buffer_size ? c : buffer_size) * sizeof *s->idx);
        if (!s->idx) {
            free(s);
            return SN_ERR_NOMEM;
        }
    }
    return sn_dataset_install(ds, &s->base);
}

/* ---- batch ----------------------------------------------------------------------------- */

typedef struct {
    sn_dataset base;
    int64_t bs;
    bool drop;
    sn_tensor *buf[SN_DATASET_MAX_COMPONENTS]; /* [bs, ...], reused batch to batch */
    sn_tensor view[SN_DATASET_MAX_COMPONENTS]; /* the short last batch: a header into buf */
} ds_batch;

static sn_status batch_next(sn_dataset *d, sn_tensor **out, bool *end) {
    ds_batch *ds = (ds_batch *)d;
    int n = d->n;
    int64_t i;
    for (i = 0; i < ds->bs; i++) {
        sn_tensor *in[SN_DATASET_MAX_COMPONENTS];
        SN_TRY(sn_dataset_next(d->src, in, end));
        if (*end) break;
        for (int k = 0; k < n; k++) {
            const sn_shape *es = sn_tensor_shape(in[k]);
            if (i == 0) {
                if (es->ndim >= SN_MAX_DIMS)
                    return sn_errorf(SN_ERR_SHAPE,
                                     "batch: component %d has %d dims; batching would make %d, "
                                     "more than the %d a tensor can have",
                                     k, es->ndim, es->ndim + 1, SN_MAX_DIMS);
                sn_shape bshape = {.ndim = es->ndim + 1};
                bshape.dim[0] = ds->bs;
                for (int j = 0; j < es->ndim; j++) bshape.dim[j + 1] = es->dim[j];
                SN_TRY(sn_dataset_ensure_output(&ds->buf[k], in[k]->dtype, &bshape));
            } else {
                const sn_shape *bs = sn_tensor_shape(ds->buf[k]);
                bool same = in[k]->dtype == ds->buf[k]->dtype && es->ndim == bs->ndim - 1;
                for (int j = 0; same && j < es->ndim; j++) same = es->dim[j] == bs->dim[j + 1];
                if (!same) {
                    char b0[128], b1[128];
                    sn_shape s0 = {.ndim = bs->ndim - 1};
                    for (int j = 1; j < bs->ndim; j++) s0.dim[j - 1] = bs->dim[j];
                    return sn_errorf(SN_ERR_SHAPE,
                                     "batch: element %lld of a batch has %s %s in component %d "
                                     "but element 0 has %s %s; the elements of a batch need "
                                     "equal shapes and dtypes (resize them in a map first)",
                                     (long long)i, sn_dtype_name(in[k]->dtype),
                                     sn_shape_str(es, b1, sizeof b1), k,
                                     sn_dtype_name(ds->buf[k]->dtype),
                                     sn_shape_str(&s0, b0, sizeof b0));
                }
            }
            size_t eb = sn_data_nbytes(in[k]);
            sn_data_copy_to((unsigned char *)ds->buf[k]->data + (size_t)i * eb, in[k]);
        }
    }
    *end = false;
    if (i == 0 || (i < ds->bs && ds->drop)) {
        *end = true;
        return SN_OK;
    }
    for (int k = 0; k < n; k++) {
        if (i == ds->bs) {
            out[k] = ds->buf[k];
        } else {
            sn_shape s = ds->buf[k]->shape;
            s.dim[0] = i;
            sn_data_set_view(&ds->view[k], ds->buf[k]->dtype, &s, ds->buf[k]->data);
            out[k] = &ds->view[k];
        }
    }
    return SN_OK;
}

static int64_t batch_card(const sn_dataset *d) {
    const ds_batch *ds = (const ds_batch *)d;
    int64_t c = card_of_src(d);
    if (c < 0) return c;
    return ds->drop ? c / ds->bs : (c + ds->bs - 1) / ds->bs;
}

static void batch_destroy(sn_dataset *d) {
    ds_batch *ds = (ds_batch *)d;
    for (int k = 0; k < d->n; k++) sn_tensor_free(ds->buf[k]);
}

static const sn_dataset_ops batch_ops = {
    .name = "batch", .next = batch_next, .cardinality = batch_card, .destroy = batch_destroy};

sn_status sn_dataset_batch(sn_dataset **ds, int64_t batch_size, bool drop_remainder) {
    SN_TRY(sn_dataset_check_arg(ds, "batch"));
    if (batch_size < 1)
        return sn_errorf(SN_ERR_INVALID, "batch: batch_size %lld must be at least 1",
                         (long long)batch_size);
    int64_t c = sn_dataset_cardinality(*ds);
    if (drop_remainder && c >= 0 && c < batch_size)
        return sn_errorf(SN_ERR_INVALID,
                         "batch: batch_size %lld is larger than the %lld elements of the dataset "
                         "with drop_remainder=true, so no batch can be made",
                         (long long)batch_size, (long long)c);
    ds_batch *b = (ds_batch *)sn_dataset_alloc(sizeof *b, &batch_ops, *ds, (*ds)->n);
    if (!b) return SN_ERR_NOMEM;
    b->bs = batch_size;
    b->drop = drop_remainder;
    return sn_dataset_install(ds, &b->base);
}

/* ---- cache ----------------------------------------------------------------------------- */

typedef struct {
    sn_dataset base;
    sn_tensor **items; /* count * n copies */
    int64_t count, alloc, pos;
    bool complete;
} ds_cache;

static sn_status cache_next(sn_dataset *d, sn_tensor **out, bool *end) {
    ds_cache *ds = (ds_cache *)d;
    int n = d->n;
    if (ds->complete) {
        if (ds->pos >= ds->count) {
            *end = true;
            return SN_OK;
        }
        for (int k = 0; k < n; k++) out[k] = ds->items[ds->pos * n + k];
        ds->pos++;
        return SN_OK;
    }
    sn_tensor *in[SN_DATASET_MAX_COMPONENTS];
    SN_TRY(sn_dataset_next(d->src, in, end));
    if (*end) {
        ds->complete = true;
        ds->pos = ds->count;
        return SN_OK;
    }
    SN_TRY(grow_slots(&ds->items, &ds->alloc, ds->count + 1, n, 0));
    for (int k = 0; k < n; k++) {
        SN_TRY(sn_data_copy_into(&ds->items[ds->count * n + k], in[k]));
        out[k] = ds->items[ds->count * n + k];
    }
    ds->count++;
    return SN_OK;
}

static sn_status cache_reset(sn_dataset *d) {
    ds_cache *ds = (ds_cache *)d;
    ds->pos = 0;
    if (ds->complete) return SN_OK; /* served from memory: the source is not touched again */
    /* A partial pass is discarded (tf.data does the same): the cache must equal one epoch. */
    for (int64_t i = 0; i < ds->count * d->n; i++) {
        sn_tensor_free(ds->items[i]);
        ds->items[i] = NULL;
    }
    ds->count = 0;
    return sn_dataset_reset(d->src);
}

static void cache_destroy(sn_dataset *d) {
    ds_cache *ds = (ds_cache *)d;
    free_slots(ds->items, ds->alloc * d->n);
}

static const sn_dataset_ops cache_ops = {.name = "cache",
                                         .next = cache_next,
                                         .reset = cache_reset,
                                         .cardinality = card_of_src,
                                         .destroy = cache_destroy};

sn_status sn_dataset_cache(sn_dataset **ds) {
    SN_TRY(sn_dataset_check_arg(ds, "cache"));
    ds_cache *c = (ds_cache *)sn_dataset_alloc(sizeof *c, &cache_ops, *ds, (*ds)->n);
    if (!c) return SN_ERR_NOMEM;
    return sn_dataset_install(ds, &c->base);
}

/* ---- prefetch -------------------------------------------------------------------------- */

/* A ring of cap = buffer_size + 1 slots. The producer thread fills the slot at head + count;
 * the consumer takes the slot at head and holds it (`held`) until its next call, because the
 * tensors it returned must stay valid until then. So at most buffer_size elements wait while
 * one is in the caller's hands. */
typedef struct {
    sn_dataset base;
    int cap;
    sn_tensor **slot; /* cap * n */
    int head, count, held;
    bool running, stop, src_end;
    sn_status err;
    char errmsg[1024]; /* the worker's message: sn_last_error is per thread */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t not_full, not_empty;
} ds_prefetch;

static void *prefetch_worker(void *arg) {
    ds_prefetch *ds = arg;
    sn_dataset *d = &ds->base;
    int n = d->n;
    pthread_mutex_lock(&ds->mu);
    for (;;) {
        while (!ds->stop && ds->count + (ds->held >= 0 ? 1 : 0) >= ds->cap)
            pthread_cond_wait(&ds->not_full, &ds->mu);
        if (ds->stop) break;
        int tail = (ds->head + ds->count) % ds->cap;
        pthread_mutex_unlock(&ds->mu);
        /* The slot at tail is neither queued nor held, so it is ours while unlocked. */
        sn_tensor *in[SN_DATASET_MAX_COMPONENTS];
        bool end = false;
        sn_status s = sn_dataset_next(d->src, in, &end);
        for (int k = 0; s == SN_OK && !end && k < n; k++)
            s = sn_data_copy_into(&ds->slot[tail * n + k], in[k]);
        pthread_mutex_lock(&ds->mu);
        if (s != SN_OK) {
            ds->err = s;
            snprintf(ds->errmsg, sizeof ds->errmsg, "%s", sn_last_error());
        }
        if (s != SN_OK || end) {
            ds->src_end = true;
            pthread_cond_signal(&ds->not_empty);
            break;
        }
        ds->count++;
        pthread_cond_signal(&ds->not_empty);
    }
    pthread_mutex_unlock(&ds->mu);
    return NULL;
}

static void prefetch_stop(ds_prefetch *ds) {
    if (!ds->running) return;
    pthread_mutex_lock(&ds->mu);
    ds->stop = true;
    pthread_cond_broadcast(&ds->not_full);
    pthread_mutex_unlock(&ds->mu);
    /* The worker may be inside its source's next (a map, a nested prefetch): that call ends
     * by itself, then the worker sees `stop`. */
    pthread_join(ds->th, NULL);
    ds->running = false;
}

static sn_status prefetch_next(sn_dataset *d, sn_tensor **out, bool *end) {
    ds_prefetch *ds = (ds_prefetch *)d;
    if (!ds->running) {
        ds->stop = false;
        int rc = pthread_create(&ds->th, NULL, prefetch_worker, ds);
        if (rc != 0)
            return sn_errorf(SN_ERR_STATE, "prefetch: cannot start its thread: %s",
                             strerror(rc));
        ds->running = true;
    }
    pthread_mutex_lock(&ds->mu);
    if (ds->held >= 0) {
        ds->held = -1;
        pthread_cond_signal(&ds->not_full);
    }
    while (ds->count == 0 && !ds->src_end) pthread_cond_wait(&ds->not_empty, &ds->mu);
    if (ds->count > 0) {
        int h = ds->head;
        ds->head = (h + 1) % ds->cap;
        ds->count--;
        ds->held = h;
        pthread_mutex_unlock(&ds->mu);
        for (int k = 0; k < d->n; k++) out[k] = ds->slot[h * d->n + k];
        return SN_OK;
    }
    sn_status s = ds->err;
    char msg[sizeof ds->errmsg];
    memcpy(msg, ds->errmsg, sizeof msg);
    pthread_mutex_unlock(&ds->mu);
    if (s != SN_OK) return sn_errorf(s, "%s", msg); /* sticky until reset */
    *end = true;
    return SN_OK;
}

static sn_status prefetch_reset(sn_dataset *d) {
    ds_prefetch *ds = (ds_prefetch *)d;
    prefetch_stop(ds);
    ds->head = ds->count = 0;
    ds->held = -1;
    ds->src_end = false;
    ds->err = SN_OK;
    ds->errmsg[0] = 0;
    return sn_dataset_reset(d->src); /* the thread restarts at the next call */
}

static void prefetch_destroy(sn_dataset *d) {
    ds_prefetch *ds = (ds_prefetch *)d;
    prefetch_stop(ds);
    pthread_cond_destroy(&ds->not_full);
    pthread_cond_destroy(&ds->not_empty);
    pthread_mutex_destroy(&ds->mu);
    free_slots(ds->slot, (int64_t)ds->cap * d->n);
}

static const sn_dataset_ops prefetch_ops = {.name = "prefetch",
                                            .next = prefetch_next,
                                            .reset = prefetch_reset,
                                            .cardinality = card_of_src,
                                            .destroy = prefetch_destroy};

sn_status sn_dataset_prefetch(sn_dataset **ds, int buffer_size) {
    SN_TRY(sn_dataset_check_arg(ds, "prefetch"));
    if (buffer_size < 1 || buffer_size > 4096)
        return sn_errorf(SN_ERR_INVALID, "prefetch: buffer_size %d is outside [1, 4096]",
                         buffer_size);
    int n = (*ds)->n;
    ds_prefetch *p = (ds_prefetch *)sn_dataset_alloc(sizeof *p, &prefetch_ops, *ds, n);
    if (!p) return SN_ERR_NOMEM;
    p->cap = buffer_size + 1;
    p->held = -1;
    p->slot = sn_calloc((size_t)p->cap * (size_t)n, sizeof *p->slot);
    if (!p->slot) {
        free(p);
        return SN_ERR_NOMEM;
    }
    int rc = pthread_mutex_init(&p->mu, NULL);
    int rc1 = rc ? rc : pthread_cond_init(&p->not_full, NULL);
    int rc2 = rc1 ? rc1 : pthread_cond_init(&p->not_empty, NULL);
    if (rc2) {
        if (!rc1) pthread_cond_destroy(&p->not_full);
        if (!rc) pthread_mutex_destroy(&p->mu);
        free(p->slot);
        free(p);
        return sn_errorf(SN_ERR_STATE, "prefetch: cannot create its lock: %s", strerror(rc2));
    }
    return sn_dataset_install(ds, &p->base);
}
