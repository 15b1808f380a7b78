/* Distributed datasets (tf.distribute's experimental_distribute_dataset and
 * distribute_datasets_from_function): a global batch split into per-replica values, or one
 * batch per local replica from a per-worker input pipeline. */
#include <string.h>

#include "distribute/distribute_impl.h"

struct sn_dist_dataset {
    sn_strategy *s;
    sn_dataset *ds;
    bool owns_ds;      /* from a function: one batch per local replica per step */
    int nc;
};

sn_status sn_strategy_distribute_dataset(sn_strategy *s, sn_dataset *ds, sn_dist_dataset **out) {
    if (!s || !ds || !out)
        return sn_errorf(SN_ERR_INVALID, "distribute_dataset: NULL %s",
                         !s ? "strategy" : !ds ? "dataset" : "out");
    sn_dist_dataset *d = sn_calloc(1, sizeof *d);
    if (!d) return SN_ERR_NOMEM;
    d->s = s;
    d->ds = ds;
    d->nc = sn_dataset_num_components(ds);
    *out = d;
    return SN_OK;
}

sn_status sn_input_context_per_replica_batch(const sn_input_context *ic, int64_t global_batch,
                                             int64_t *out) {
    if (!ic || !out || ic->num_replicas_in_sync < 1)
        return sn_errorf(SN_ERR_INVALID, "get_per_replica_batch_size: bad input context");
    if (global_batch % ic->num_replicas_in_sync != 0)
        return sn_errorf(SN_ERR_INVALID, "the global batch size %lld is not divisible by "
                         "num_replicas_in_sync %d", (long long)global_batch,
                         ic->num_replicas_in_sync);
    *out = global_batch / ic->num_replicas_in_sync;
    return SN_OK;
}

sn_status sn_strategy_distribute_datasets_from_function(sn_strategy *s, sn_dataset_fn fn,
                                                        void *ctx, sn_dist_dataset **out) {
    if (!s || !fn || !out)
        return sn_errorf(SN_ERR_INVALID, "distribute_datasets_from_function: NULL %s",
                         !s ? "strategy" : !fn ? "fn" : "out");
    *out = NULL;
    sn_input_context ic = {.num_input_pipelines = s->workers, .input_pipeline_id = s->rank,
                           .num_replicas_in_sync = sn_strategy_num_replicas(s)};
    sn_dataset *ds = NULL;
    SN_TRY(sn_error_context(fn(ctx, &ic, &ds), "distribute_datasets_from_function: worker %d",
                            s->rank));
    if (!ds) return sn_errorf(SN_ERR_INVALID, "distribute_datasets_from_function: the function "
                              "returned no dataset");
    sn_status st = sn_strategy_distribute_dataset(s, ds, out);
    if (st != SN_OK) {
        sn_dataset_free(ds);
        return st;
    }
    (*out)->owns_ds = true;
    return SN_OK;
}

/* Rows [lo, hi) of t (contiguous, as datasets give) as a new tensor. */
static sn_status slice_rows(const sn_tensor *t, int64_t lo, int64_t hi, sn_tensor **out) {
    sn_shape s = *sn_tensor_shape(t);
    int64_t row = s.dim[0] > 0 ? sn_tensor_numel(t) / s.dim[0] : 0;
    s.dim[0] = hi - lo;
    size_t es = sn_dtype_size(sn_tensor_dtype(t));
    return sn_tensor_from_data(out, sn_tensor_dtype(t), &s,
                               (const char *)sn_tensor_cdata(t) + (size_t)(lo * row) * es);
}

sn_status sn_dist_dataset_next(sn_dist_dataset *d, sn_per_replica **comps, bool *end) {
    if (!d || !comps || !end) return sn_errorf(SN_ERR_INVALID, "dist_dataset_next: NULL argument");
    *end = false;
    sn_strategy *s = d->s;
    int nl = s->n_local, nc = d->nc;
    sn_tensor **vals = sn_calloc((size_t)(nc * nl), sizeof *vals);
    if (!vals) return SN_ERR_NOMEM;
    sn_status st = SN_OK;
    if (d->owns_ds) {
        /* Consecutive batches of this worker's dataset, one per local replica; a step the
         * data cannot fill for every replica ends the epoch (TensorFlow pads it instead). */
        for (int r = 0; r < nl && st == SN_OK && !*end; r++) {
            sn_tensor *b[SN_DATASET_MAX_COMPONENTS];
            st = sn_dataset_next(d->ds, b, end);
            for (int c = 0; c < nc && st == SN_OK && !*end; c++)
                st = sn_tensor_from_data(&vals[c * nl + r], sn_tensor_dtype(b[c]),
                                         sn_tensor_shape(b[c]), sn_tensor_cdata(b[c]));
        }
    } else {
        sn_tensor *b[SN_DATASET_MAX_COMPONENTS];
        st = sn_dataset_next(d->ds, b, end);
        int R = sn_strategy_num_replicas(s);
        for (int c = 0; c < nc && st == SN_OK && !*end; c++) {
            const sn_shape *bs = sn_tensor_shape(b[c]);
            if (bs->ndim < 1 || bs->dim[0] < R) {
                st = sn_errorf(SN_ERR_SHAPE, "distribute_dataset: component %d of a global batch "
                               "has %lld rows, fewer than the %d replicas", c,
                               bs->ndim ? (long long)bs->dim[0] : 0LL, R);
                break;
            }
            for (int r = 0; r < nl && st == SN_OK; r++) {
                int64_t lo, hi;
                sn_split_range(bs->dim[0], s->rank * nl + r, R, &lo, &hi);
                st = slice_rows(b[c], lo, hi, &vals[c * nl + r]);
            }
        }
    }
    if (st == SN_OK && !*end) {
        for (int c = 0; c < nc; c++) {
            sn_status s2 = sn_per_replica_new(nl, vals + c * nl, &comps[c]);
            if (s2 != SN_OK && st == SN_OK) st = s2;
        }
        if (st != SN_OK)
            for (int c = 0; c < nc; c++) {
                sn_per_replica_free(comps[c]);
                comps[c] = NULL;
            }
    } else {
        for (int i = 0; i < nc * nl; i++) sn_tensor_free(vals[i]);
    }
    free(vals);
    return st;
}

sn_status sn_dist_dataset_reset(sn_dist_dataset *d) {
    if (!d) return sn_errorf(SN_ERR_INVALID, "dist_dataset_reset: NULL");
    return sn_dataset_reset(d->ds);
}

int sn_dist_dataset_num_components(const sn_dist_dataset *d) { return d ? d->nc : 0; }

void sn_dist_dataset_free(sn_dist_dataset *d) {
    if (!d) return;
    if (d->owns_ds) sn_dataset_free(d->ds);
    free(d);
}
