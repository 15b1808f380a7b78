/* fit / evaluate / predict: the host loop around the cached plans.
 *
 * One "execution" is one sn_plan_run call of up to steps_per_execution steps. Its feed
 * callback pulls the next batch from the dataset before each step and copies it into the
 * plan's inputs. When the data ends, or the next batch has another shape (the last partial
 * batch), the feed stops the execution there: that batch stays pending (the dataset keeps it
 * valid until the next sn_dataset_next) and opens the next execution, with its own plan.
 * Loss and metric sums accumulate on the device; the host reads them once per execution, for
 * the callbacks, which therefore see progress in steps of steps_per_execution. */
#include <math.h>
#include <string.h>

#include "distribute/replicas.h"
#include "nn/train/train_impl.h"

sn_fit_opts sn_fit_defaults(void) {
    sn_fit_opts o;
    memset(&o, 0, sizeof o);
    o.epochs = 1;
    return o;
}

/* ---- one pass over a dataset, in executions ------------------------------------------------ */

typedef struct runner {
    sn_model *m;
    sn_dataset *ds;
    sn_plan_kind kind;
    const char *what; /* "fit", "evaluate": the prefix of messages */
    int epoch;        /* 0-based, for messages */
    sn_tensor *pending[SN_DATASET_MAX_COMPONENTS];
    bool have_pending, ended;
    int64_t done;     /* steps done in this pass */
    sn_cached_plan *cp;
    bool stopped;     /* the feed ended the execution early (not an error) */
    bool weighted;    /* the dataset's last component is Keras's sample_weight */
} runner;

static void runner_start(runner *r) {
    r->have_pending = false;
    r->ended = false;
    r->done = 0;
}

static sn_shape in_shape_at(const sn_model *m, int i) {
    return m->fn ? m->fn->nodes[m->fn->inputs[i]].shape : m->input_shape;
}

static sn_shape out_shape_at(const sn_model *m, int k) {
    return m->fn ? m->fn->nodes[m->fn->outputs[k]].shape : sn_model_out_shape(m);
}

/* Input i's batch b[i] (several inputs: named by the model's input). */
static sn_status check_input(const runner *r, int i, const sn_tensor *x, int64_t *bsz) {
    const sn_model *m = r->m;
    const sn_shape *xs = sn_tensor_shape(x);
    char s1[128], s2[128], who[160] = "images";
    if (m->fn && m->fn->n_inputs > 1)
        snprintf(who, sizeof who, "input %d ('%s')", i, m->fn->nodes[m->fn->inputs[i]].input_name);
    long long idx = (long long)r->done;
    if (xs->ndim < 1 || xs->dim[0] < 1)
        return sn_errorf(SN_ERR_SHAPE, "%s: batch %lld has %s of shape %s; expected a batch "
                         "dimension first (batch the dataset)", r->what, idx, who,
                         sn_shape_str(xs, s1, sizeof s1));
    if (i > 0 && xs->dim[0] != *bsz)
        return sn_errorf(SN_ERR_SHAPE, "%s: batch %lld has %lld rows of %s but %lld of input 0; "
                         "every input and label takes the same batch", r->what, idx,
                         (long long)xs->dim[0], who, (long long)*bsz);
    *bsz = xs->dim[0];
    sn_shape img = {.ndim = xs->ndim - 1}, want = in_shape_at(m, i);
    for (int d = 1; d < xs->ndim; d++) img.dim[d - 1] = xs->dim[d];
    if (!sn_shape_equal(&img, &want))
        return sn_errorf(SN_ERR_SHAPE, "%s: batch %lld has %s of shape %s but the model "
                         "expects %s", r->what, idx, who, sn_shape_str(&img, s1, sizeof s1),
                         sn_shape_str(&want, s2, sizeof s2));
    if (sn_tensor_dtype(x) != SN_F32)
        return sn_errorf(SN_ERR_SHAPE, "%s: batch %lld has %s of dtype %s but the model "
                         "expects f32 (sn_dataset_map_normalize converts u8 images)", r->what,
                         idx, who, sn_dtype_name(sn_tensor_dtype(x)));
    return SN_OK;
}

static sn_status check_labels(const runner *r, int k, const sn_tensor *yt, int64_t bsz) {
    const sn_model *m = r->m;
    const sn_train_state *t = m->train;
    sn_loss_type loss = t->loss[k].type;
    const sn_shape *ys = sn_tensor_shape(yt);
    char s1[128], s2[128], who[160] = "labels";
    if (t->n_out > 1) {
        const sn_fnode *nd = &m->fn->nodes[m->fn->outputs[k]];
        snprintf(who, sizeof who, "labels of output %d ('%s')", k,
                 nd->layer ? nd->layer->name : nd->input_name);
    }
    long long idx = (long long)r->done;
    sn_shape out = out_shape_at(m, k);
    sn_shape want = {.ndim = out.ndim + 1};
    want.dim[0] = bsz;
    for (int i = 0; i < out.ndim; i++) want.dim[i + 1] = out.dim[i];
    bool ok;
    if (loss == SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY) {
        if (sn_tensor_dtype(yt) != SN_I32)
            return sn_errorf(SN_ERR_SHAPE, "%s: batch %lld has %s of dtype %s but %s expects "
                             "int32 class indices (sn_dataset_map_cast(&ds, 1, SN_I32))",
                             r->what, idx, who, sn_dtype_name(sn_tensor_dtype(yt)),
                             sn_loss_name(loss));
        /* [B, ...] without the class axis, or with a trailing 1 in its place */
        want.ndim--;
        sn_shape w1 = want;
        w1.dim[w1.ndim++] = 1;
        ok = sn_shape_equal(ys, &want) || sn_shape_equal(ys, &w1);
    } else {
        if (sn_tensor_dtype(yt) != SN_F32)
            return sn_errorf(SN_ERR_SHAPE, "%s: batch %lld has %s of dtype %s but %s expects "
                             "f32", r->what, idx, who, sn_dtype_name(sn_tensor_dtype(yt)),
                             sn_loss_name(loss));
        sn_shape w1 = {.ndim = 1, .dim = {bsz}};
        ok = sn_shape_equal(ys, &want) ||
             (loss != SN_LOSS_CATEGORICAL_CROSSENTROPY && out.ndim == 1 && out.dim[0] == 1 &&
              sn_shape_equal(ys, &w1));
    }
    if (!ok)
        return sn_errorf(SN_ERR_SHAPE, "%s: batch %lld has %s of shape %s but %s on the "
                         "model's output %s expects %s", r->what, idx, who,
                         sn_shape_str(ys, s1, sizeof s1), sn_loss_name(loss),
                         sn_shape_str(&out, s2, sizeof s2),
                         sn_shape_str(&want, (char[128]){0}, 128));
    return SN_OK;
}

/* Sample weights: [B] (or [B, 1]) f32, one per example. */
static bool weights_fit(const sn_tensor *w, int64_t bsz) {
    const sn_shape *ws = sn_tensor_shape(w);
    return sn_tensor_dtype(w) == SN_F32 && ws->ndim >= 1 && ws->ndim <= 2 && ws->dim[0] == bsz &&
           (ws->ndim == 1 || ws->dim[1] == 1);
}

static sn_status check_batch(const runner *r, sn_tensor *const *b) {
    int n_in = sn_train_n_inputs(r->m), n_out = sn_train_n_outputs(r->m);
    int64_t bsz = 0;
    for (int i = 0; i < n_in; i++) SN_TRY(check_input(r, i, b[i], &bsz));
    for (int k = 0; k < n_out; k++) SN_TRY(check_labels(r, k, b[n_in + k], bsz));
    if (r->weighted && !weights_fit(b[n_in + n_out], bsz)) {
        char s1[128];
        return sn_errorf(SN_ERR_SHAPE, "%s: batch %lld has sample weights (the dataset's last "
                         "component) of dtype %s and shape %s; expected float32 of shape [%lld]",
                         r->what, (long long)r->done, sn_dtype_name(sn_tensor_dtype(b[n_in + n_out])),
                         sn_shape_str(sn_tensor_shape(b[n_in + n_out]), s1, sizeof s1),
                         (long long)bsz);
    }
    return SN_OK;
}

static bool fits_plan(const runner *r, sn_tensor *const *b) {
    const sn_cached_plan *cp = r->cp;
    int n_in = sn_train_n_inputs(r->m);
    for (int i = 0; i < n_in; i++) {
        sn_shape is = in_shape_at(r->m, i);
        sn_shape xs = {.ndim = is.ndim + 1};
        xs.dim[0] = cp->batch;
        for (int d = 0; d < is.ndim; d++) xs.dim[d + 1] = is.dim[d];
        if (sn_tensor_dtype(b[i]) != SN_F32 || !sn_shape_equal(sn_tensor_shape(b[i]), &xs))
            return false;
    }
    for (int k = 0; k < cp->n_y; k++)
        if (sn_tensor_dtype(b[n_in + k]) != cp->y_dtypes[k] ||
            !sn_shape_equal(sn_tensor_shape(b[n_in + k]), &cp->y_shapes[k]))
            return false;
    if (cp->weighted != r->weighted ||
        (cp->weighted && !weights_fit(b[n_in + cp->n_y], cp->batch)))
        return false;
    return true;
}

static sn_status next_batch(void *ctx, int64_t step, const void **x, const void **y) {
    (void)step;
    runner *r = ctx;
    if (!r->have_pending) {
        bool end = false;
        SN_TRY(sn_dataset_next(r->ds, r->pending, &end));
        if (end) {
            r->ended = r->stopped = true;
            /* not an error: ends the execution before this step (the message only keeps
             * sn_plan_run's context from piling up in the thread's error text) */
            return sn_errorf(SN_ERR_STATE, "end of the data");
        }
        r->have_pending = true;
    }
    /* A batch of another shape (or a bad one) opens the next execution, which checks it. */
    if (!fits_plan(r, r->pending)) {
        r->stopped = true;
        return sn_errorf(SN_ERR_STATE, "next batch needs another plan");
    }
    /* The tensors stay valid until the next sn_dataset_next, which comes after every replica
     * has copied its rows (sn_train_run). */
    int n_in = sn_train_n_inputs(r->m);
    for (int i = 0; i < n_in; i++) x[i] = sn_tensor_cdata(r->pending[i]);
    for (int k = 0; k < r->cp->n_y; k++) y[k] = sn_tensor_cdata(r->pending[n_in + k]);
    if (r->cp->weighted) y[r->cp->n_y] = sn_tensor_cdata(r->pending[n_in + r->cp->n_y]);
    r->have_pending = false;
    return SN_OK;
}

/* ---- running a cached plan: one path, with or without a strategy ---------------------------- */

typedef struct train_feed {
    sn_model *m;
    sn_cached_plan *cp;
    sn_batch_fn next;
    void *ctx;
    const char *x, *y, *w; /* the step's global batch (w: its sample weights) */
    const void *xs[SN_FIT_MAX_IO], *ys[SN_FIT_MAX_IO]; /* every input and label */
} train_feed;

static sn_status tf_next(void *ctx, int64_t step) {
    train_feed *f = ctx;
    memset(f->xs, 0, sizeof f->xs);
    memset(f->ys, 0, sizeof f->ys);
    SN_TRY(f->next(f->ctx, step, f->xs, f->ys));
    f->x = f->xs[0];
    f->y = f->ys[0];
    f->w = f->cp->weighted ? f->ys[f->cp->n_y] : NULL;
    return SN_OK;
}

/* Replica r's rows of the global batch into its plan (the whole batch without a strategy). */
static sn_status tf_fill(void *ctx, int rep, sn_plan *p, int64_t step) {
    (void)step;
    train_feed *f = ctx;
    const sn_cached_plan *cp = f->cp;
    const sn_model *m = f->m;
    size_t xrow = (size_t)sn_shape_numel(&m->input_shape) * sizeof(float);
    size_t yrow = (size_t)(sn_shape_numel(&cp->y_shape) / cp->batch) * sn_dtype_size(cp->y_dtype);
    if (!cp->rep && (cp->n_x > 1 || cp->n_y > 1)) {
        for (int i = 0; i < cp->n_x; i++) {
            sn_shape xs = sn_node_shape(m->g, cp->xs[i]);
            SN_TRY(sn_plan_set_input(p, cp->xs[i], f->xs[i],
                                     (size_t)sn_shape_numel(&xs) * sizeof(float)));
        }
        for (int k = 0; k < cp->n_y; k++)
            SN_TRY(sn_plan_set_input(p, cp->ys[k], f->ys[k],
                                     (size_t)sn_shape_numel(&cp->y_shapes[k]) *
                                         sn_dtype_size(cp->y_dtypes[k])));
        if (cp->weighted)
            SN_TRY(sn_plan_set_input(p, cp->w, f->w, (size_t)cp->batch * sizeof(float)));
        return SN_OK;
    }
    if (!cp->rep) {
        SN_TRY(sn_plan_set_input(p, cp->x, f->x, (size_t)cp->batch * xrow));
        if (cp->y != SN_NONE) SN_TRY(sn_plan_set_input(p, cp->y, f->y, (size_t)cp->batch * yrow));
        if (cp->weighted)
            SN_TRY(sn_plan_set_input(p, cp->w, f->w, (size_t)cp->batch * sizeof(float)));
        return SN_OK;
    }
    /* replica r's rows of every input and label; the weights split with the batch too:
     * replica r weighs its own rows */
    const sn_replica_plan *rp = &cp->rep[rep];
    for (int i = 0; i < cp->n_x; i++) {
        sn_shape xs = in_shape_at(m, i);
        xrow = (size_t)sn_shape_numel(&xs) * sizeof(float);
        SN_TRY(sn_plan_set_input(p, rp->xs[i], (const char *)f->xs[i] + (size_t)rp->lo * xrow,
                                 (size_t)rp->rows * xrow));
    }
    for (int k = 0; k < cp->n_y; k++) {
        yrow = (size_t)(sn_shape_numel(&cp->y_shapes[k]) / cp->batch) *
               sn_dtype_size(cp->y_dtypes[k]);
        SN_TRY(sn_plan_set_input(p, rp->ys[k], (const char *)f->ys[k] + (size_t)rp->lo * yrow,
                                 (size_t)rp->rows * yrow));
    }
    if (cp->weighted)
        SN_TRY(sn_plan_set_input(p, rp->w, f->w + (size_t)rp->lo * sizeof(float),
                                 (size_t)rp->rows * sizeof(float)));
    return SN_OK;
}

sn_status sn_train_run(sn_model *m, sn_cached_plan *cp, int64_t steps, sn_batch_fn next,
                       void *ctx) {
    sn_plan *plans[SN_MAX_LOGICAL_DEVICES];
    int n = cp->rep ? cp->n_rep : 1;
    for (int r = 0; r < n; r++) plans[r] = cp->rep ? cp->rep[r].plan : cp->plan;
    sn_strategy *s = cp->rep ? m->strategy : NULL;
    if (s && !m->dist_synced) {
        /* Every worker starts from rank 0's variables (optimizer state and counters too). */
        size_t bytes = 0;
        void *buf = sn_graph_variable_buffer(m->g, &bytes);
        SN_TRY(sn_error_context(sn_strategy_broadcast(s, buf, bytes),
                                "distributed training: broadcasting rank 0's variables"));
        m->dist_synced = true;
    }
    train_feed f = {.m = m, .cp = cp, .next = next, .ctx = ctx};
    sn_replica_feed rf = {.next = tf_next, .fill = tf_fill, .ctx = &f};
    int64_t before = sn_plan_step(cp->plan);
    sn_status st = sn_replicas_run(s, plans, steps, next ? &rf : NULL);
    if (s) m->dist_steps += sn_plan_step(cp->plan) - before;
    return st;
}

void sn_dist_allreduce_stats(const sn_model *m, int64_t *buckets, int64_t *early,
                             double *wait_s) {
    if (buckets) *buckets = 0;
    if (early) *early = 0;
    if (wait_s) *wait_s = 0;
    if (m && m->strategy) sn_strategy_allreduce_stats(m->strategy, buckets, early, wait_s);
}

/* Runs up to max_steps steps; *ran receives how many ran (0 at the end of the data). */
static sn_status execute(runner *r, int64_t max_steps, int64_t *ran) {
    *ran = 0;
    if (!r->have_pending) {
        bool end = false;
        sn_status s = sn_dataset_next(r->ds, r->pending, &end);
        if (s != SN_OK)
            return sn_error_context(s, "%s: epoch %d, reading batch %lld", r->what, r->epoch + 1,
                                    (long long)r->done);
        if (end) {
            r->ended = true;
            return SN_OK;
        }
        r->have_pending = true;
    }
    SN_TRY(check_batch(r, r->pending));
    sn_train_state *t = r->m->train;
    int n_in = sn_train_n_inputs(r->m), n_out = sn_train_n_outputs(r->m);
    sn_shape ys[SN_FIT_MAX_IO];
    sn_dtype yd[SN_FIT_MAX_IO];
    for (int k = 0; k < n_out; k++) {
        ys[k] = *sn_tensor_shape(r->pending[n_in + k]);
        yd[k] = sn_tensor_dtype(r->pending[n_in + k]);
    }
    SN_TRY(sn_error_context(sn_train_plan_w(r->m, r->kind, sn_tensor_shape(r->pending[0])->dim[0],
                                            n_out, ys, yd, r->weighted, &r->cp),
                            "%s", r->what));
    sn_cached_plan *cp = r->cp;
    sn_plan *p = cp->plan;
    /* Dropout masks are keyed by the plan step: the global step keeps them identical
     * whatever the steps per execution and whichever plan (full or partial batch) runs. */
    if (r->kind == SN_PLAN_TRAIN)
        for (int i = 0; i < (cp->rep ? cp->n_rep : 1); i++)
            sn_plan_set_step(cp->rep ? cp->rep[i].plan : p, t->step);
    int64_t before = sn_plan_step(p);
    r->stopped = false;
    sn_status s = sn_train_run(r->m, cp, max_steps, next_batch, r);
    *ran = sn_plan_step(p) - before;
    if (r->kind == SN_PLAN_TRAIN) t->step += *ran;
    if (s != SN_OK && !r->stopped) {
        if (r->kind == SN_PLAN_TRAIN)
            return sn_error_context(s, "%s: epoch %d, step %lld", r->what, r->epoch + 1,
                                    (long long)(r->done + *ran + 1));
        return sn_error_context(s, "%s: step %lld", r->what, (long long)(r->done + *ran + 1));
    }
    return SN_OK;
}

/* ---- accumulators and logs ------------------------------------------------------------------ */

static void zero_acc(sn_model *m, int which) {
    sn_train_state *t = m->train;
    for (int i = 0; i < t->n_acc + 1; i++)
        *(float *)sn_variable_data(m->g, t->acc[which][i]) = 0.0f;
}

/* values[0] = mean loss, then each metric: sums over the example count. */
static int read_acc(sn_model *m, int which, double *values) {
    sn_train_state *t = m->train;
    int n = t->n_acc;
    /* Read only: a handed-out mutable pointer would make the replicas reload the variables. */
    double count = *(const float *)sn_variable_cdata(m->g, t->acc[which][n]);
    for (int i = 0; i < n; i++) {
        double sum = *(const float *)sn_variable_cdata(m->g, t->acc[which][i]);
        values[i] = count > 0 ? sum / count : NAN;
    }
    return n;
}

static void train_logs(sn_model *m, sn_logs *l) {
    sn_train_state *t = m->train;
    l->n = read_acc(m, 0, l->values);
    for (int i = 0; i < l->n; i++) l->names[i] = sn_train_log_name(t, i);
}

/* A dataset for m yields its inputs then one label per output, and optionally (as Keras's
 * (x, y, sample_weight)) one weight per example last. */
static sn_status check_components(const sn_model *m, sn_dataset *ds, const char *what) {
    int nc = sn_dataset_num_components(ds);
    int n_in = sn_train_n_inputs(m), n_out = sn_train_n_outputs(m);
    if (nc == n_in + n_out || nc == n_in + n_out + 1) return SN_OK;
    if (n_in == 1 && n_out == 1)
        return sn_errorf(SN_ERR_INVALID, "%s: the dataset yields %d components; expected 2 "
                         "(images, labels) or 3 (images, labels, sample weights)", what, nc);
    return sn_errorf(SN_ERR_INVALID, "%s: the dataset yields %d components; model '%s' has %d "
                     "inputs and %d outputs, so it expects %d (the inputs in the model's order, "
                     "then one label per output), or one more (sample weights)", what, nc,
                     m->name, n_in, n_out, n_in + n_out);
}

static bool ds_weighted(const sn_model *m, sn_dataset *ds) {
    return sn_dataset_num_components(ds) == sn_train_n_inputs(m) + sn_train_n_outputs(m) + 1;
}

static sn_status check_compiled(const sn_model *m, sn_dataset *ds, const char *what) {
    if (!m) return sn_errorf(SN_ERR_INVALID, "%s: model is NULL", what);
    if (!m->train || !m->train->compiled)
        return sn_errorf(SN_ERR_STATE, "%s: model '%s' is not compiled; call sn_model_compile "
                         "first", what, m->name ? m->name : "");
    if (!ds) return sn_errorf(SN_ERR_INVALID, "%s: dataset is NULL", what);
    return check_components(m, ds, what);
}

/* The evaluation accumulators as logs (Keras's names, without "val_"). */
static void eval_logs(sn_model *m, int64_t done, sn_logs *l) {
    memset(l, 0, sizeof *l);
    l->n = read_acc(m, 1, l->values);
    for (int i = 0; i < l->n; i++) l->names[i] = sn_train_log_name(m->train, i);
    l->step = done;
    l->steps = -1;
}

/* One evaluation pass from the dataset's start: values as read_acc. The callbacks' on_test_*
 * hooks run around it and between its executions (Keras's evaluate(callbacks=)). */
static sn_status eval_pass(sn_model *m, sn_dataset *ds, int64_t steps, const char *what,
                           int ncb, sn_callback *const *cbs, double *values, int *n) {
    sn_train_state *t = m->train;
    SN_TRY(sn_error_context(sn_dataset_reset(ds), "%s: resetting the dataset", what));
    zero_acc(m, 1);
    runner r = {.m = m, .ds = ds, .kind = SN_PLAN_EVAL, .what = what,
                .weighted = ds_weighted(m, ds)};
    runner_start(&r);
    for (int c = 0; c < ncb; c++)
        if (cbs[c] && cbs[c]->on_test_begin) SN_TRY(cbs[c]->on_test_begin(cbs[c]->user));
    int64_t spe = t->opts.steps_per_execution;
    int64_t card = sn_dataset_cardinality(ds);
    sn_logs logs;
    for (;;) {
        int64_t want = spe;
        if (steps > 0 && steps - r.done < want) want = steps - r.done;
        if (want <= 0) break;
        /* a batch begins only where one is known to come (as Keras's iterator) */
        if (card < 0 || r.done < card)
            for (int c = 0; c < ncb; c++)
                if (cbs[c] && cbs[c]->on_test_batch_begin)
                    SN_TRY(cbs[c]->on_test_batch_begin(cbs[c]->user, r.done));
        int64_t ran;
        SN_TRY(execute(&r, want, &ran));
        r.done += ran;
        if (ran > 0 && ncb > 0) {
            eval_logs(m, r.done, &logs);
            for (int c = 0; c < ncb; c++)
                if (cbs[c] && cbs[c]->on_test_batch_end)
                    SN_TRY(cbs[c]->on_test_batch_end(cbs[c]->user, &logs));
        }
        if (r.ended) break;
    }
    if (r.done == 0)
        return sn_errorf(SN_ERR_INVALID, "%s: the dataset produced no batch", what);
    *n = read_acc(m, 1, values);
    if (ncb > 0) {
        eval_logs(m, r.done, &logs);
        for (int c = 0; c < ncb; c++)
            if (cbs[c] && cbs[c]->on_test_end) SN_TRY(cbs[c]->on_test_end(cbs[c]->user, &logs));
    }
    return SN_OK;
}

sn_status sn_model_evaluate(sn_model *m, sn_dataset *data, int64_t steps, double *values, int cap,
                            int *n_values) {
    return sn_model_evaluate_cb(m, data, steps, 0, NULL, values, cap, n_values);
}

sn_status sn_model_evaluate_cb(sn_model *m, sn_dataset *data, int64_t steps, int n_callbacks,
                               sn_callback *const *callbacks, double *values, int cap,
                               int *n_values) {
    SN_TRY(check_compiled(m, data, "evaluate"));
    if (n_callbacks < 0 || (n_callbacks > 0 && !callbacks))
        return sn_errorf(SN_ERR_INVALID, "evaluate: n_callbacks %d with callbacks %s",
                         n_callbacks, callbacks ? "set" : "NULL");
    if (steps < 0) return sn_errorf(SN_ERR_INVALID, "evaluate: steps %lld is negative",
                                    (long long)steps);
    if (cap > 0 && !values) return sn_errorf(SN_ERR_INVALID, "evaluate: values is NULL");
    double v[SN_ACC_MAX];
    int n = 0;
    SN_TRY(eval_pass(m, data, steps, "evaluate", n_callbacks, callbacks, v, &n));
    for (int i = 0; i < n && i < cap; i++) values[i] = v[i];
    if (n_values) *n_values = n < cap ? n : cap;
    return SN_OK;
}

/* ---- fit ------------------------------------------------------------------------------------- */

/* Replays the first `n` batches of the epoch just reset (a resumed checkpoint's position). */
static sn_status skip_batches(runner *r, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        bool end = false;
        SN_TRY(sn_error_context(sn_dataset_next(r->ds, r->pending, &end), "fit: resuming epoch "
                                "%d at step %lld", r->epoch + 1, (long long)n));
        if (end)
            return sn_errorf(SN_ERR_INVALID, "fit: the checkpoint is at step %lld of epoch %d but "
                             "the training data ends after %lld batches (other data?)",
                             (long long)n, r->epoch + 1, (long long)i);
    }
    return SN_OK;
}

static sn_status fit_epochs(sn_model *m, sn_dataset *train, const sn_fit_opts *o, sn_history *h,
                            sn_fit_progress *fp) {
    sn_train_state *t = m->train;
    int64_t spe = t->opts.steps_per_execution;
    int64_t card = sn_dataset_cardinality(train);
    if (card == SN_CARDINALITY_INFINITE && o->steps_per_epoch == 0)
        return sn_errorf(SN_ERR_INVALID, "fit: the training dataset is infinite (repeat(-1)); "
                         "set steps_per_epoch");
    if (card == 0) return sn_errorf(SN_ERR_INVALID, "fit: the training dataset is empty");
    for (int c = 0; c < o->n_callbacks; c++)
        if (o->callbacks[c] && o->callbacks[c]->on_train_begin)
            SN_TRY(o->callbacks[c]->on_train_begin(o->callbacks[c]->user, m));
    const sn_backup_opts *bk = o->backup;
    bool resumed = false;
    if (bk) SN_TRY(sn_fit_backup_resume(m, bk, &resumed));
    int first = o->initial_epoch;
    bool mid = false; /* resumed inside an epoch */
    if (resumed) {
        if (fp->epoch_done && fp->stopped) return SN_OK; /* that run had stopped for good */
        first = fp->epoch_done ? fp->epoch + 1 : fp->epoch;
        mid = !fp->epoch_done;
    }
    runner r = {.m = m, .ds = train, .kind = SN_PLAN_TRAIN, .what = "fit",
                .weighted = ds_weighted(m, train)};
    bool stop = false;
    for (int epoch = first; epoch < o->epochs && !stop; epoch++) {
        bool resume_here = mid && epoch == first;
        /* Every epoch, the first too, starts from the dataset's beginning (as a new Keras
         * iterator): a dataset that an earlier fit or evaluate ended must not look empty.
         * A checkpoint records the pipeline's counters from just before this reset. */
        if (!resume_here) SN_TRY(sn_dataset_state_get(train, &fp->train_state));
        SN_TRY(sn_error_context(sn_dataset_reset(train), "fit: epoch %d: resetting the "
                                "training dataset", epoch + 1));
        fp->epoch = epoch;
        fp->epoch_done = false;
        runner_start(&r);
        r.epoch = epoch;
        for (int c = 0; c < o->n_callbacks; c++)
            if (o->callbacks[c] && o->callbacks[c]->on_epoch_begin)
                SN_TRY(o->callbacks[c]->on_epoch_begin(o->callbacks[c]->user, epoch, o->epochs));
        if (resume_here) {
            /* The accumulators came back with the variables; the data moves past the steps
             * already done. */
            SN_TRY(skip_batches(&r, fp->done));
            r.done = fp->done;
            stop = fp->stopped;
        } else {
            zero_acc(m, 0);
            fp->done = 0;
            fp->stopped = false;
        }
        int64_t total = card >= 0 ? card : fp->known;
        if (o->steps_per_epoch > 0 && (total < 0 || total > o->steps_per_epoch))
            total = o->steps_per_epoch;
        double t0 = sn_now();
        sn_logs logs;
        memset(&logs, 0, sizeof logs);
        logs.epoch = epoch;
        logs.steps = total;
        while (!stop) {
            int64_t want = spe;
            if (o->steps_per_epoch > 0 && o->steps_per_epoch - r.done < want)
                want = o->steps_per_epoch - r.done;
            if (want <= 0) break;
            if (total < 0 || r.done < total)
                for (int c = 0; c < o->n_callbacks; c++)
                    if (o->callbacks[c] && o->callbacks[c]->on_batch_begin)
                        SN_TRY(o->callbacks[c]->on_batch_begin(o->callbacks[c]->user, epoch,
                                                               r.done));
            int64_t ran;
            SN_TRY(execute(&r, want, &ran));
            r.done += ran;
            if (ran > 0) {
                train_logs(m, &logs);
                logs.step = r.done;
                logs.seconds = sn_now() - t0;
                bool bstop = false;
                for (int c = 0; c < o->n_callbacks; c++)
                    if (o->callbacks[c] && o->callbacks[c]->on_batch_end)
                        SN_TRY(o->callbacks[c]->on_batch_end(o->callbacks[c]->user, &logs,
                                                             &bstop));
                fp->done = r.done;
                fp->stopped = bstop;
                /* Between executions nothing is in flight: the state is whole. */
                if (bk && bk->every_steps > 0 &&
                    t->step / bk->every_steps > (t->step - ran) / bk->every_steps)
                    SN_TRY(sn_fit_backup_save(m, bk));
                if (bstop) {
                    stop = true;
                    break;
                }
            }
            if (r.ended) break;
        }
        if (r.done == 0)
            return sn_errorf(SN_ERR_INVALID, "fit: the training dataset produced no batch in "
                             "epoch %d", epoch + 1);
        fp->known = r.done;
        train_logs(m, &logs);
        logs.step = r.done;
        if (logs.steps < 0 || r.ended) logs.steps = r.done;
        if (o->validation) {
            double v[SN_ACC_MAX];
            int nv = 0;
            SN_TRY(eval_pass(m, o->validation, o->validation_steps, "fit: validation",
                             o->n_callbacks, o->callbacks, v, &nv));
            for (int i = 0; i < nv; i++) {
                logs.names[logs.n] = t->val_names[i];
                logs.values[logs.n++] = v[i];
            }
        }
        if (t->log_lr && logs.n < SN_LOGS_MAX) {
            logs.names[logs.n] = "learning_rate";
            /* Keras keeps the rate in a float32 variable and logs that value. */
            logs.values[logs.n++] = (double)(float)t->opts.optimizer.learning_rate;
        }
        logs.seconds = sn_now() - t0;
        SN_TRY(sn_history_append(h, &logs));
        for (int c = 0; c < o->n_callbacks; c++)
            if (o->callbacks[c] && o->callbacks[c]->on_epoch_end) {
                bool estop = false;
                SN_TRY(o->callbacks[c]->on_epoch_end(o->callbacks[c]->user, &logs, &estop));
                if (estop) stop = true;
            }
        fp->epoch_done = true;
        fp->stopped = stop;
        /* Resuming after this epoch starts the next one from the counters as they are now. */
        SN_TRY(sn_dataset_state_get(train, &fp->train_state));
        if (bk && bk->every_steps == 0) SN_TRY(sn_fit_backup_save(m, bk));
    }
    return SN_OK;
}

static sn_status fit_loop(sn_model *m, sn_dataset *train, const sn_fit_opts *o, sn_history *h) {
    sn_fit_progress fp = {.opts = o, .train = train, .history = h, .epoch = o->initial_epoch,
                          .known = -1};
    m->train->fit = &fp;
    m->train->log_lr = false;
    sn_status s = fit_epochs(m, train, o, h, &fp);
    m->train->fit = NULL;
    return s;
}

sn_status sn_model_fit(sn_model *m, sn_dataset *train, const sn_fit_opts *o, sn_history **history) {
    if (history) *history = NULL;
    SN_TRY(check_compiled(m, train, "fit"));
    sn_fit_opts opts = o ? *o : sn_fit_defaults();
    if (opts.epochs < 0 || opts.initial_epoch < 0)
        return sn_errorf(SN_ERR_INVALID, "fit: epochs %d and initial_epoch %d must be >= 0",
                         opts.epochs, opts.initial_epoch);
    if (opts.steps_per_epoch < 0 || opts.validation_steps < 0)
        return sn_errorf(SN_ERR_INVALID, "fit: steps_per_epoch %lld and validation_steps %lld "
                         "must be >= 0", (long long)opts.steps_per_epoch,
                         (long long)opts.validation_steps);
    if (opts.n_callbacks < 0 || (opts.n_callbacks > 0 && !opts.callbacks))
        return sn_errorf(SN_ERR_INVALID, "fit: n_callbacks %d with callbacks %s",
                         opts.n_callbacks, opts.callbacks ? "set" : "NULL");
    if (opts.backup) {
        const sn_backup_opts *b = opts.backup;
        if ((!b->dir || !*b->dir) && !b->resume_path)
            return sn_errorf(SN_ERR_INVALID, "fit: backup.dir is %s", b->dir ? "empty" : "NULL");
        if (b->every_steps < 0 || b->keep < 1)
            return sn_errorf(SN_ERR_INVALID, "fit: backup every_steps %lld (>= 0, 0 = each "
                             "epoch) and keep %d (>= 1)", (long long)b->every_steps, b->keep);
    }
    if (opts.validation)
        SN_TRY(check_components(m, opts.validation, "fit: validation"));
    sn_history *h = sn_history_new();
    if (!h) return SN_ERR_NOMEM;
    sn_status s = fit_loop(m, train, &opts, h);
    /* on_train_end runs also after an error, so files are closed; it cannot fail. */
    for (int c = 0; c < opts.n_callbacks; c++)
        if (opts.callbacks[c] && opts.callbacks[c]->on_train_end)
            opts.callbacks[c]->on_train_end(opts.callbacks[c]->user);
    if (history) *history = h;
    else sn_history_free(h);
    return s;
}

/* ---- predict --------------------------------------------------------------------------------- */

sn_status sn_model_predict(sn_model *m, const sn_tensor *x, sn_tensor **out) {
    if (!m || !x || !out)
        return sn_errorf(SN_ERR_INVALID, "predict: NULL %s", !m ? "model" : !x ? "x" : "out");
    *out = NULL;
    if (sn_train_n_inputs(m) != 1 || sn_train_n_outputs(m) != 1)
        return sn_errorf(SN_ERR_INVALID, "predict: model '%s' has %d inputs and %d outputs; "
                         "sn_model_predict feeds one and takes one (use sn_model_predict_n)",
                         m->name ? m->name : "", sn_train_n_inputs(m),
                         sn_train_n_outputs(m));
    if (!m->built)
        return sn_errorf(SN_ERR_STATE, "predict: model '%s' is not built; call sn_model_build "
                         "first", m->name ? m->name : "");
    const sn_shape *xs = sn_tensor_shape(x);
    char s1[128], s2[128];
    sn_shape img = {.ndim = xs->ndim > 0 ? xs->ndim - 1 : 0};
    for (int i = 1; i < xs->ndim; i++) img.dim[i - 1] = xs->dim[i];
    if (xs->ndim < 1 || xs->dim[0] < 1 || !sn_shape_equal(&img, &m->input_shape))
        return sn_errorf(SN_ERR_SHAPE, "predict: x has shape %s but the model expects [B, %s] "
                         "with B >= 1", sn_shape_str(xs, s1, sizeof s1),
                         sn_shape_str(&m->input_shape, s2, sizeof s2));
    if (sn_tensor_dtype(x) != SN_F32)
        return sn_errorf(SN_ERR_SHAPE, "predict: x has dtype %s; the model expects f32",
                         sn_dtype_name(sn_tensor_dtype(x)));
    sn_cached_plan *cp;
    SN_TRY(sn_error_context(sn_train_plan(m, SN_PLAN_PREDICT, xs->dim[0], NULL, SN_F32, &cp),
                            "predict"));
    size_t bytes = (size_t)sn_tensor_numel(x) * sizeof(float);
    if (sn_tensor_is_contiguous(x)) {
        SN_TRY(sn_plan_set_input(cp->plan, cp->x, sn_tensor_cdata(x), bytes));
    } else {
        float *dst = sn_plan_buffer(cp->plan, cp->x);
        if (!dst) return SN_ERR_INVALID;
        for (int64_t i = 0; i < sn_tensor_numel(x); i++) dst[i] = (float)sn_tensor_get(x, i);
    }
    SN_TRY(sn_error_context(sn_plan_run(cp->plan, 1, NULL, NULL), "predict"));
    const float *res = sn_plan_buffer(cp->plan, cp->out);
    if (!res) return SN_ERR_INVALID;
    sn_shape os = sn_node_shape(m->g, cp->out);
    return sn_tensor_from_data(out, SN_F32, &os, res);
}

sn_status sn_model_predict_n(sn_model *m, int n_x, const sn_tensor *const *x, int n_out,
                             sn_tensor **out) {
    if (!m || !x || !out)
        return sn_errorf(SN_ERR_INVALID, "predict: NULL %s", !m ? "model" : !x ? "x" : "out");
    for (int k = 0; k < n_out; k++) out[k] = NULL;
    if (!m->built)
        return sn_errorf(SN_ERR_STATE, "predict: model '%s' is not built; call sn_model_build "
                         "first", m->name ? m->name : "");
    int ni = sn_train_n_inputs(m), no = sn_train_n_outputs(m);
    if (n_x != ni || n_out != no)
        return sn_errorf(SN_ERR_INVALID, "predict: %d inputs and %d outputs given, but model "
                         "'%s' has %d inputs and %d outputs", n_x, n_out, m->name, ni, no);
    int64_t b = 0;
    for (int i = 0; i < ni; i++) {
        if (!x[i]) return sn_errorf(SN_ERR_INVALID, "predict: x[%d] is NULL", i);
        const sn_shape *xs = sn_tensor_shape(x[i]);
        sn_shape want = in_shape_at(m, i);
        sn_shape img = {.ndim = xs->ndim > 0 ? xs->ndim - 1 : 0};
        for (int d = 1; d < xs->ndim; d++) img.dim[d - 1] = xs->dim[d];
        char s1[128], s2[128];
        if (xs->ndim < 1 || xs->dim[0] < 1 || !sn_shape_equal(&img, &want) ||
            (i > 0 && xs->dim[0] != b))
            return sn_errorf(SN_ERR_SHAPE, "predict: x[%d] has shape %s but the model's input "
                             "'%s' expects [B, %s] with the same B >= 1 for every input", i,
                             sn_shape_str(xs, s1, sizeof s1),
                             m->fn ? m->fn->nodes[m->fn->inputs[i]].input_name : "input",
                             sn_shape_str(&want, s2, sizeof s2));
        if (sn_tensor_dtype(x[i]) != SN_F32)
            return sn_errorf(SN_ERR_SHAPE, "predict: x[%d] has dtype %s; the model expects f32",
                             i, sn_dtype_name(sn_tensor_dtype(x[i])));
        b = xs->dim[0];
    }
    sn_cached_plan *cp;
    SN_TRY(sn_error_context(sn_train_plan_n(m, SN_PLAN_PREDICT, b, 0, NULL, NULL, &cp),
                            "predict"));
    for (int i = 0; i < ni; i++) {
        size_t bytes = (size_t)sn_tensor_numel(x[i]) * sizeof(float);
        if (sn_tensor_is_contiguous(x[i])) {
            SN_TRY(sn_plan_set_input(cp->plan, cp->xs[i], sn_tensor_cdata(x[i]), bytes));
        } else {
            float *dst = sn_plan_buffer(cp->plan, cp->xs[i]);
            if (!dst) return SN_ERR_INVALID;
            for (int64_t j = 0; j < sn_tensor_numel(x[i]); j++)
                dst[j] = (float)sn_tensor_get(x[i], j);
        }
    }
    SN_TRY(sn_error_context(sn_plan_run(cp->plan, 1, NULL, NULL), "predict"));
    for (int k = 0; k < no; k++) {
        const float *res = sn_plan_buffer(cp->plan, cp->outs[k]);
        sn_shape os = sn_node_shape(m->g, cp->outs[k]);
        sn_status st = res ? sn_tensor_from_data(&out[k], SN_F32, &os, res) : SN_ERR_INVALID;
        if (st != SN_OK) {
            for (int j = 0; j < k; j++) {
                sn_tensor_free(out[j]);
                out[j] = NULL;
            }
            return st;
        }
    }
    return SN_OK;
}
