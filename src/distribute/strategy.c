/* Strategies (one device, mirrored, multi-worker), strategy.run, per-replica values, their
 * printing and reduce. The distributed datasets are dist_dataset.c; the training step under a
 * strategy is nn's one training plan per replica, run by this layer's replica workers with
 * the all-reduce inside the plans (replicas.c); the collectives are in collective_*.c. */
#include <math.h>
#include <string.h>

#include "distribute/distribute_impl.h"

/* ---- construction ------------------------------------------------------------------------ */

static sn_status strategy_alloc(sn_strategy_kind kind, int n_local, const int *devices,
                                sn_strategy **out) {
    *out = NULL;
    sn_strategy *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    s->device_names = sn_calloc((size_t)n_local, sizeof *s->device_names);
    if (!s->device_names) {
        free(s);
        return SN_ERR_NOMEM;
    }
    s->kind = kind;
    s->n_local = n_local;
    for (int i = 0; i < n_local; i++) {
        s->devices[i] = devices[i];
        sn_device_info info;
        SN_ASSERT(sn_device_get(devices[i], &info) == SN_OK);
        snprintf(s->device_names[i], sizeof s->device_names[i], "%s", info.name);
    }
    s->rank = 0;
    s->workers = 1;
    s->timeout_s = sn_env_double(SN_ENV_DIST_TIMEOUT, 25.0, 0.001, 1e9);
    s->bucket_bytes = (size_t)(sn_env_double(SN_ENV_DIST_BUCKET_MB, 1.0, 0.001, 4096.0) * 1048576.0);
    s->overlap = sn_env_double(SN_ENV_DIST_OVERLAP, 1.0, 0.0, 1.0) != 0.0;
    s->concurrent = sn_env_double(SN_ENV_DIST_CONCURRENT, 1.0, 0.0, 1.0) != 0.0;
    *out = s;
    return SN_OK;
}

sn_status sn_strategy_one_device(const char *device, sn_strategy **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "one_device: out is NULL");
    *out = NULL;
    int idx;
    SN_TRY(sn_error_context(sn_device_find(device, &idx), "one_device strategy"));
    SN_TRY(strategy_alloc(SN_STRATEGY_ONE_DEVICE, 1, &idx, out));
    if (!((*out)->coll = sn_collective_inproc_new())) {
        sn_strategy_free(*out);
        *out = NULL;
        return SN_ERR_NOMEM;
    }
    return SN_OK;
}

sn_status sn_strategy_mirrored(int n, const char *const *devices, sn_strategy **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "mirrored: out is NULL");
    *out = NULL;
    int count = sn_device_count();
    int idx[SN_MAX_LOGICAL_DEVICES];
    if (!devices) {
        if (n == 0) n = count;
        if (n < 1 || n > count)
            return sn_errorf(SN_ERR_INVALID, "mirrored strategy: %d replicas requested but this "
                             "process has %d logical device(s) (sn_device_configure_cpu / "
                             "--cpu-devices N makes more)", n, count);
        for (int i = 0; i < n; i++) idx[i] = i;
    } else {
        if (n < 1 || n > count)
            return sn_errorf(SN_ERR_INVALID, "mirrored strategy: %d devices listed; expected 1 "
                             "to %d", n, count);
        for (int i = 0; i < n; i++) {
            SN_TRY(sn_error_context(sn_device_find(devices[i], &idx[i]),
                                    "mirrored strategy, device %d", i));
            for (int j = 0; j < i; j++)
                if (idx[j] == idx[i])
                    return sn_errorf(SN_ERR_INVALID, "mirrored strategy: device '%s' is listed "
                                     "twice (entries %d and %d)", devices[i], j, i);
        }
    }
    SN_TRY(strategy_alloc(SN_STRATEGY_MIRRORED, n, idx, out));
    if (!((*out)->coll = sn_collective_inproc_new())) {
        sn_strategy_free(*out);
        *out = NULL;
        return SN_ERR_NOMEM;
    }
    return SN_OK;
}

sn_status sn_strategy_multi_worker(int local_replicas, sn_strategy **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "multi_worker: out is NULL");
    *out = NULL;
#ifdef SN_HAVE_MPI
    if (local_replicas == 0) local_replicas = 1;
    if (local_replicas < 1 || local_replicas > sn_device_count())
        return sn_errorf(SN_ERR_INVALID, "multi_worker strategy: %d local replicas requested but "
                         "this process has %d logical device(s)", local_replicas,
                         sn_device_count());
    int idx[SN_MAX_LOGICAL_DEVICES];
    for (int i = 0; i < local_replicas; i++) idx[i] = i;
    sn_collective *c = NULL;
    SN_TRY(sn_error_context(sn_collective_mpi_new(&c), "multi_worker strategy"));
    sn_status st = strategy_alloc(SN_STRATEGY_MULTI_WORKER, local_replicas, idx, out);
    if (st != SN_OK) {
        c->vt->destroy(c);
        return st;
    }
    (*out)->coll = c;
    (*out)->rank = c->rank;
    (*out)->workers = c->size;
    return SN_OK;
#else
    (void)local_replicas;
    return sn_errorf(SN_ERR_UNSUPPORTED, "multi_worker strategy: this build of sinter has no "
                     "MPI (install Open MPI's development package and rebuild)");
#endif
}

void sn_strategy_free(sn_strategy *s) {
    if (!s) return;
    sn_replicas_free(s->rep);
    if (s->coll) s->coll->vt->destroy(s->coll);
    free(s->device_names);
    free(s);
}

void sn_dist_shutdown(bool ok) {
#ifdef SN_HAVE_MPI
    sn_mpi_shutdown(ok);
#else
    (void)ok;
#endif
}

sn_strategy_kind sn_strategy_get_kind(const sn_strategy *s) { return s->kind; }

const char *sn_strategy_name(const sn_strategy *s) {
    switch (s ? s->kind : SN_STRATEGY_ONE_DEVICE) {
    case SN_STRATEGY_MIRRORED: return "MirroredStrategy";
    case SN_STRATEGY_MULTI_WORKER: return "MultiWorkerMirroredStrategy";
    default: return "OneDeviceStrategy";
    }
}

int sn_strategy_num_replicas(const sn_strategy *s) { return s ? s->n_local * s->workers : 0; }
int sn_strategy_local_replicas(const sn_strategy *s) { return s ? s->n_local : 0; }
const char *sn_strategy_replica_device(const sn_strategy *s, int i) {
    return s && i >= 0 && i < s->n_local ? s->device_names[i] : NULL;
}
int sn_strategy_worker_rank(const sn_strategy *s) { return s ? s->rank : 0; }
int sn_strategy_num_workers(const sn_strategy *s) { return s ? s->workers : 1; }
bool sn_strategy_is_chief(const sn_strategy *s) { return !s || s->rank == 0; }
void sn_strategy_set_timeout(sn_strategy *s, double seconds) {
    if (s && seconds > 0) s->timeout_s = seconds;
}

/* ---- per-replica values --------------------------------------------------------------------- */

struct sn_per_replica {
    int n;
    sn_tensor **v;
};

sn_status sn_per_replica_new(int n, sn_tensor **values, sn_per_replica **out) {
    sn_status st = SN_OK;
    if (!out || n < 1 || !values)
        st = sn_errorf(SN_ERR_INVALID, "per_replica_new: %d values (expected >= 1, non-NULL)", n);
    sn_per_replica *v = st == SN_OK ? sn_calloc(1, sizeof *v) : NULL;
    if (st == SN_OK && (!v || !(v->v = sn_calloc((size_t)n, sizeof *v->v)))) st = SN_ERR_NOMEM;
    if (st != SN_OK) {
        if (values)
            for (int i = 0; i < n; i++) sn_tensor_free(values[i]);
        free(v);
        if (out) *out = NULL;
        return st;
    }
    v->n = n;
    for (int i = 0; i < n; i++) v->v[i] = values[i];
    *out = v;
    return SN_OK;
}

int sn_per_replica_count(const sn_per_replica *v) { return v ? v->n : 0; }
sn_tensor *sn_per_replica_get(const sn_per_replica *v, int i) {
    return v && i >= 0 && i < v->n ? v->v[i] : NULL;
}
void sn_per_replica_free(sn_per_replica *v) {
    if (!v) return;
    for (int i = 0; i < v->n; i++) sn_tensor_free(v->v[i]);
    free(v->v);
    free(v);
}

sn_status sn_strategy_run(sn_strategy *s, sn_replica_fn fn, void *ctx, sn_per_replica **out) {
    if (!s || !fn || !out)
        return sn_errorf(SN_ERR_INVALID, "strategy run: NULL %s", !s ? "strategy" : !fn ? "fn" : "out");
    *out = NULL;
    sn_tensor **vals = sn_calloc((size_t)s->n_local, sizeof *vals);
    if (!vals) return SN_ERR_NOMEM;
    sn_status st = SN_OK;
    /* Replica order, one after another: fn may build graphs and plans, which are not
     * thread-safe; the kernels inside each run use the device's share of the team. */
    for (int r = 0; r < s->n_local && st == SN_OK; r++) {
        sn_replica_context rc = {.replica_id_in_sync_group = s->rank * s->n_local + r,
                                 .local_replica = r,
                                 .num_replicas_in_sync = sn_strategy_num_replicas(s),
                                 .device = s->device_names[r]};
        st = fn(ctx, &rc, &vals[r]);
        if (st != SN_OK) st = sn_error_context(st, "replica %d on %s", rc.replica_id_in_sync_group, rc.device);
    }
    if (st != SN_OK) {
        for (int r = 0; r < s->n_local; r++) sn_tensor_free(vals[r]);
        free(vals);
        return st;
    }
    st = sn_per_replica_new(s->n_local, vals, out);
    free(vals);
    return st;
}

/* ---- printing as TensorFlow does (each tensor by core/tensor_print.c) ---------------------- */

sn_status sn_per_replica_print(const sn_per_replica *v, FILE *o) {
    if (!v || !o) return sn_errorf(SN_ERR_INVALID, "per_replica_print: NULL %s", v ? "file" : "value");
    if (v->n == 1) return sn_tensor_print_tf(v->v[0], o);
    fputs("PerReplica:{\n", o);
    for (int i = 0; i < v->n; i++) {
        fprintf(o, "  %d: ", i);
        if (v->v[i]) SN_TRY(sn_tensor_print_tf(v->v[i], o));
        else fputs("None", o);
        fputs(i + 1 < v->n ? ",\n" : "\n", o);
    }
    fputs("}", o);
    return SN_OK;
}

/* ---- reduce ----------------------------------------------------------------------------------- */

sn_status sn_strategy_reduce(sn_strategy *s, sn_reduce_op op, const sn_per_replica *v, int axis,
                             sn_tensor **out) {
    if (!s || !v || !out)
        return sn_errorf(SN_ERR_INVALID, "reduce: NULL %s", !s ? "strategy" : !v ? "value" : "out");
    *out = NULL;
    if (op != SN_REDUCE_SUM && op != SN_REDUCE_MEAN)
        return sn_errorf(SN_ERR_INVALID, "reduce: unknown op %d (SN_REDUCE_SUM or _MEAN)", (int)op);
    if (axis != -1 && axis != 0)
        return sn_errorf(SN_ERR_INVALID, "reduce: axis %d; expected -1 (across replicas only) or 0",
                         axis);
    if (v->n != s->n_local)
        return sn_errorf(SN_ERR_INVALID, "reduce: the value has %d replicas but the strategy %d "
                         "local ones", v->n, s->n_local);
    const sn_tensor *t0 = v->v[0];
    if (!t0) return sn_errorf(SN_ERR_INVALID, "reduce: replica 0 has no value");
    sn_dtype dt = sn_tensor_dtype(t0);
    /* The result's shape: the replicas' shape, without dim 0 for axis 0. */
    sn_shape rs = *sn_tensor_shape(t0);
    if (axis == 0) {
        if (rs.ndim < 1) return sn_errorf(SN_ERR_SHAPE, "reduce: axis 0 of a scalar");
        for (int i = 1; i < rs.ndim; i++) rs.dim[i - 1] = rs.dim[i];
        rs.ndim--;
    }
    int64_t n = sn_shape_numel(&rs);
    double *acc = sn_calloc((size_t)n + 1, sizeof *acc); /* + the count along axis 0 */
    if (!acc) return SN_ERR_NOMEM;
    char b1[128], b2[128];
    for (int r = 0; r < v->n; r++) {
        const sn_tensor *t = v->v[r];
        const sn_shape *ts = t ? sn_tensor_shape(t) : NULL;
        bool ok = t && sn_tensor_dtype(t) == dt;
        if (ok && axis == -1) ok = sn_shape_equal(ts, sn_tensor_shape(t0));
        if (ok && axis == 0) {
            sn_shape inner = *ts;
            for (int i = 1; i < inner.ndim; i++) inner.dim[i - 1] = inner.dim[i];
            inner.ndim--;
            ok = ts->ndim >= 1 && sn_shape_equal(&inner, &rs);
        }
        if (!ok) {
            free(acc);
            return sn_errorf(SN_ERR_SHAPE, "reduce: replica %d has %s %s but replica 0 %s %s", r,
                             t ? sn_dtype_name(sn_tensor_dtype(t)) : "no value",
                             t ? sn_shape_str(ts, b1, sizeof b1) : "",
                             sn_dtype_name(dt), sn_shape_str(sn_tensor_shape(t0), b2, sizeof b2));
        }
        int64_t rows = axis == 0 ? ts->dim[0] : 1;
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < n; j++) acc[j] += sn_tensor_get(t, i * n + j);
        acc[n] += (double)rows;
    }
    sn_status st = s->coll->vt->allreduce_f64(s->coll, acc, (size_t)n + 1, s->timeout_s);
    if (st != SN_OK) {
        free(acc);
        return sn_error_context(st, "reduce");
    }
    if (op == SN_REDUCE_MEAN)
        for (int64_t j = 0; j < n; j++) acc[j] /= acc[n];
    sn_dtype odt = dt == SN_F64 ? SN_F64 : SN_F32;
    st = sn_tensor_new(out, odt, &rs);
    if (st == SN_OK) {
        void *d = sn_tensor_data(*out);
        for (int64_t j = 0; j < n; j++) {
            if (odt == SN_F64) ((double *)d)[j] = acc[j];
            else ((float *)d)[j] = (float)acc[j];
        }
    }
    free(acc);
    return st;
}
