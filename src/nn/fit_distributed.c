/* Synchronous data-parallel training under a strategy: what fit runs instead of its one
 * training plan when a strategy is attached (compile.c and fit.c call the two hooks of
 * train_impl.h). This file knows the model (forward pass, loss, metrics, optimizer); the
 * strategy's step runner (src/distribute/step_runner.h) runs the replicas and sums their
 * targets, so the distribution layer below never reaches up into nn.
 *
 * The model keeps one graph and one variable buffer: replicas of a process read the same
 * variables (mirrored by construction), and each has its own plan, hence its own arena for
 * inputs, activations and gradients. Per global batch shape B:
 *
 *   staging plan   x [B, ...], y [B, ...]: the buffers fit's feed fills (no kernels);
 *   replica r      x_r [b_r, ...] (its rows of the global batch: sn_split_range over all
 *                  replicas of all workers), forward in training mode, per-example loss,
 *                  loss_r = sum(per) / B (compute_average_loss), d loss_r / d vars; targets:
 *                  the gradients, sum(per), the metric sums, and the new values batch
 *                  normalization would assign to its moving averages;
 *   apply plan     (one per model) grad inputs -> one apply_optimizer per variable and
 *                  iterations += 1, exactly the update fit's own plan runs.
 *
 * A step: slice the batch into the replicas' inputs; the strategy's step runner runs the
 * replicas, sums their targets in replica order into one buffer and all-reduces that buffer
 * across workers (buckets, MPI; with several workers each bucket starts during the backward
 * pass: src/distribute/step_runner.c); then this file feeds
 * the gradients to the apply plan and run it, then add the loss/metric/count sums to fit's
 * accumulators and set the moving averages to the replicas' mean. Every worker applies the
 * same bits, so the workers' variables stay identical; the first step broadcasts rank 0's
 * variables so that they also start identical.
 *
 * Bitwise: two replicas in one process and two workers with one replica each compute the
 * same sums (g_0 + g_1 per element), so they end with identical weights. One replica on the
 * whole batch sums the examples in another order inside the kernels, so it agrees to float
 * rounding (~1e-6 relative per step), not bitwise. */
#include <string.h>

#include "distribute/step_runner.h"
#include "nn/train_impl.h"

typedef struct replica {
    int64_t lo, rows;  /* rows [lo, lo + rows) of the global batch */
    sn_node x, y;
    sn_node *tg;       /* targets: see target layout below */
} replica;

/* Target layout of every replica (and of the runner's sums):
 * [grad 0 .. grad n_vars-1 | loss sum | metric sums | bn values ...]; the example count
 * rides along in the runner. */
typedef struct entry {
    sn_cached_plan cp;  /* what fit sees; cp.plan is the staging plan */
    int n_rep;
    replica *rep;
    sn_plan **plans;    /* n_rep: replica r's plan */
    int n_tg;           /* targets per replica */
    int n_bn;
    sn_node *bn_var;    /* the variable each bn value goes to */
    int *bn_op;         /* SN_OP_ASSIGN or SN_OP_ASSIGN_ADD */
    sn_step_runner *run;
    struct entry *next;
} entry;

struct sn_dist_train {
    const sn_strategy *s;
    const sn_train_state *train_seen; /* rebuilt after a new compile */
    entry *entries;
    sn_plan *apply;
    sn_node *gin;       /* apply plan's gradient inputs */
    int n_apply;
    sn_node *apply_tg;
    bool synced;        /* rank 0's variables broadcast */
    int64_t steps_run;
};

static void entry_free(entry *e) {
    sn_plan_free(e->cp.plan);
    free(e->cp.targets);
    for (int r = 0; r < e->n_rep; r++) {
        if (e->plans) sn_plan_free(e->plans[r]);
        free(e->rep[r].tg);
    }
    free(e->rep);
    free(e->plans);
    free(e->bn_var);
    free(e->bn_op);
    sn_step_runner_free(e->run);
    free(e);
}

void sn_dist_train_free(sn_dist_train *d) {
    if (!d) return;
    for (entry *e = d->entries, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
    sn_plan_free(d->apply);
    free(d->gin);
    free(d->apply_tg);
    free(d);
}

sn_status sn_model_set_strategy(sn_model *m, sn_strategy *s) {
    if (!m) return sn_errorf(SN_ERR_INVALID, "set_strategy: model is NULL");
    sn_dist_train_free(m->dist);
    m->dist = NULL;
    m->strategy = s;
    return SN_OK;
}

sn_strategy *sn_model_get_strategy(const sn_model *m) { return m ? m->strategy : NULL; }

int64_t sn_model_distributed_steps(const sn_model *m) {
    return m && m->dist ? m->dist->steps_run : 0;
}

void sn_dist_allreduce_stats(const sn_model *m, int64_t *buckets, int64_t *early,
                             double *wait_s) {
    if (buckets) *buckets = 0;
    if (early) *early = 0;
    if (wait_s) *wait_s = 0;
    const sn_dist_train *d = m ? m->dist : NULL;
    for (const entry *e = d ? d->entries : NULL; e; e = e->next)
        sn_step_runner_stats(e->run, buckets, early, wait_s);
}

/* ---- building ----------------------------------------------------------------------------- */

/* Replica and update plans take the model's precision, as fit's own plans do. */
static sn_status plan_on(sn_model *m, int n, const sn_node *tg, const char *device,
                         sn_plan **out) {
    sn_plan_opts po = sn_plan_opts_defaults();
    po.device = device;
    po.bf16_compute = m->train && m->train->opts.mixed_bfloat16;
    return sn_plan_new(out, m->g, n, tg, &po);
}

static sn_status build_apply(sn_model *m, sn_dist_train *d) {
    sn_train_state *t = m->train;
    sn_graph *g = m->g;
    int n = t->n_vars;
    d->gin = sn_calloc((size_t)(n ? n : 1), sizeof *d->gin);
    d->apply_tg = sn_calloc((size_t)n + 1, sizeof *d->apply_tg);
    if (!d->gin || !d->apply_tg) return SN_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        sn_shape vs = sn_node_shape(g, t->vars[i]);
        char name[64];
        snprintf(name, sizeof name, "allreduced_grad_%d", i);
        d->gin[i] = sn_input(g, name, SN_F32, &vs);
    }
    if (n > 0)
        SN_TRY(sn_optimizer_apply(g, &t->opts.optimizer, n, t->vars, d->gin, t->slots,
                                  t->iterations, d->apply_tg));
    d->n_apply = n > 0 ? n + 1 : 0;
    SN_TRY(sn_graph_status(g));
    if (d->n_apply) SN_TRY(plan_on(m, d->n_apply, d->apply_tg, sn_strategy_replica_device(d->s, 0),
                                 &d->apply));
    return SN_OK;
}

static sn_status build_replica(sn_model *m, sn_dist_train *d, entry *e, replica *rp, int64_t B) {
    sn_train_state *t = m->train;
    const sn_compile_opts *o = &t->opts;
    sn_graph *g = m->g;
    sn_shape xs = {.ndim = m->input_shape.ndim + 1};
    xs.dim[0] = rp->rows;
    for (int i = 0; i < m->input_shape.ndim; i++) xs.dim[i + 1] = m->input_shape.dim[i];
    sn_shape ys = e->cp.y_shape;
    ys.dim[0] = rp->rows;
    sn_node penalty = SN_NONE;
    bool no_penalty = true;
    SN_TRY(sn_model_regularization(m, &penalty, &no_penalty));
    rp->x = sn_input(g, "replica_x", SN_F32, &xs);
    rp->y = sn_input(g, "replica_y", e->cp.y_dtype, &ys);
    sn_updates upd = {0};
    sn_node out = SN_NONE;
    SN_TRY(sn_model_forward(m, rp->x, true, &upd, &out));
    sn_node y = rp->y;
    sn_shape os = sn_node_shape(g, out);
    if (o->loss >= SN_LOSS_BINARY_CROSSENTROPY && ys.ndim + 1 == os.ndim) y = sn_reshape(g, y, &os);
    sn_node per = sn_loss_per_example(g, o->loss, o->from_logits, out, y);
    sn_node lsum = sn_reduce_sum(g, per, 0, NULL, false);
    /* compute_average_loss: the per-example losses over the GLOBAL batch. */
    sn_node loss = sn_mul(g, lsum, sn_scalar(g, SN_F32, 1.0 / (double)B));
    /* Regularization penalties, as Keras's TensorFlow trainer: each replica adds penalty /
     * num_replicas (scale_loss_for_distribution of _aggregate_additional_loss), so the summed
     * gradients count it once per global step; the logged loss is each replica's unscaled
     * loss weighted by its rows, i.e. lsum + penalty * rows summed over the replicas. */
    if (!no_penalty) {
        int R = sn_strategy_num_replicas(d->s);
        loss = sn_add(g, loss, sn_mul(g, penalty, sn_scalar(g, SN_F32, 1.0 / (double)R)));
        lsum = sn_add(g, lsum, sn_mul(g, penalty, sn_scalar(g, SN_F32, (double)rp->rows)));
    }
    int nv = t->n_vars, nm = o->n_metrics;
    rp->tg = sn_calloc((size_t)(nv + 1 + nm + upd.n), sizeof *rp->tg);
    if (!rp->tg) {
        sn_updates_free(&upd);
        return SN_ERR_NOMEM;
    }
    sn_status s = nv > 0 ? sn_gradients(g, loss, nv, t->vars, rp->tg) : SN_OK;
    int k = nv;
    rp->tg[k++] = lsum;
    for (int i = 0; i < nm; i++) {
        sn_node ms = sn_metric_batch_sum(g, o->metrics[i], o->loss, o->from_logits, out, y);
        if (ms != SN_NONE && sn_node_dtype(g, ms) != SN_F32) ms = sn_cast(g, ms, SN_F32);
        rp->tg[k++] = ms;
    }
    /* Batch normalization's moving averages: target the values it would assign; the host
     * assigns their mean over the replicas (sync on write, aggregation MEAN). */
    bool first = e->bn_var == NULL;
    if (first && upd.n > 0) {
        e->bn_var = sn_calloc((size_t)upd.n, sizeof *e->bn_var);
        e->bn_op = sn_calloc((size_t)upd.n, sizeof *e->bn_op);
        if (!e->bn_var || !e->bn_op) s = SN_ERR_NOMEM;
        e->n_bn = upd.n;
    }
    for (int i = 0; i < upd.n && s == SN_OK; i++) {
        const sn_node_t *un = &g->nodes[upd.nodes[i]];
        if ((un->op != SN_OP_ASSIGN && un->op != SN_OP_ASSIGN_ADD) ||
            g->nodes[un->in[1]].dtype != SN_F32) {
            s = sn_errorf(SN_ERR_UNSUPPORTED, "distributed training: layer side effect %s (node "
                          "%d) is not an f32 assign", sn_node_op_name(g, upd.nodes[i]),
                          (int)upd.nodes[i]);
            break;
        }
        if (first) {
            e->bn_var[i] = un->in[0];
            e->bn_op[i] = un->op;
        }
        rp->tg[k++] = un->in[1];
    }
    sn_updates_free(&upd);
    SN_TRY(s);
    SN_TRY(sn_error_context(sn_graph_status(g), "building replica graphs for a global batch of "
                            "%lld", (long long)B));
    e->n_tg = k;
    return SN_OK;
}

static sn_status replan_entry(sn_model *m, const sn_strategy *s, entry *e) {
    sn_plan_free(e->cp.plan);
    e->cp.plan = NULL;
    SN_TRY(plan_on(m, e->cp.n_targets, e->cp.targets, sn_strategy_replica_device(s, 0),
                   &e->cp.plan));
    for (int r = 0; r < e->n_rep; r++) {
        sn_plan_free(e->plans[r]);
        e->plans[r] = NULL;
        SN_TRY(sn_error_context(plan_on(m, e->n_tg, e->rep[r].tg, sn_strategy_replica_device(s, r),
                                        &e->plans[r]),
                                "planning replica %d", r));
    }
    return SN_OK;
}

static sn_status get_state(sn_model *m, sn_dist_train **out) {
    if (!m->strategy) return sn_errorf(SN_ERR_STATE, "distributed training: no strategy attached");
    if (!m->train || !m->train->compiled)
        return sn_errorf(SN_ERR_STATE, "distributed training: model '%s' is not compiled",
                         m->name ? m->name : "");
    if (m->dist && (m->dist->train_seen != m->train || m->dist->s != m->strategy)) {
        sn_dist_train_free(m->dist);
        m->dist = NULL;
    }
    if (!m->dist) {
        sn_dist_train *d = sn_calloc(1, sizeof *d);
        if (!d) return SN_ERR_NOMEM;
        d->s = m->strategy;
        d->train_seen = m->train;
        m->dist = d;
        sn_status s = build_apply(m, d);
        if (s != SN_OK) {
            sn_dist_train_free(d);
            m->dist = NULL;
            return sn_error_context(s, "distributed training: building the update");
        }
    }
    *out = m->dist;
    return SN_OK;
}

sn_status sn_dist_train_plan(sn_model *m, int64_t batch, const sn_shape *y_shape, sn_dtype y_dtype,
                             sn_cached_plan **out) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->n_carried > 0)
            return sn_errorf(SN_ERR_UNSUPPORTED, "distributed training: layer '%s' is stateful, "
                             "and its carried state would be shared by every replica (train it "
                             "without a strategy)", m->layers[i]->name);
    sn_dist_train *d;
    SN_TRY(get_state(m, &d));
    const sn_strategy *s = d->s;
    for (entry *e = d->entries; e; e = e->next)
        if (e->cp.batch == batch && e->cp.y_dtype == y_dtype &&
            sn_shape_equal(&e->cp.y_shape, y_shape)) {
            *out = &e->cp;
            return SN_OK;
        }
    int R = sn_strategy_num_replicas(s);
    if (batch < R)
        return sn_errorf(SN_ERR_SHAPE, "distributed training: a global batch of %lld examples "
                         "cannot give each of the %d replicas one (use a batch of at least %d)",
                         (long long)batch, R, R);
    entry *e = sn_calloc(1, sizeof *e);
    if (!e) return SN_ERR_NOMEM;
    e->cp = (sn_cached_plan){.kind = SN_PLAN_TRAIN, .batch = batch, .y_shape = *y_shape,
                             .y_dtype = y_dtype, .x = SN_NONE, .y = SN_NONE, .out = SN_NONE};
    sn_graph *g = m->g;
    sn_status st = SN_OK;
    sn_shape xs = {.ndim = m->input_shape.ndim + 1};
    xs.dim[0] = batch;
    for (int i = 0; i < m->input_shape.ndim; i++) xs.dim[i + 1] = m->input_shape.dim[i];
    e->cp.x = sn_input(g, "global_x", SN_F32, &xs);
    e->cp.y = sn_input(g, "global_y", y_dtype, y_shape);
    e->cp.targets = sn_malloc(2 * sizeof *e->cp.targets);
    int n_local = sn_strategy_local_replicas(s);
    e->rep = sn_calloc((size_t)n_local, sizeof *e->rep);
    e->plans = sn_calloc((size_t)n_local, sizeof *e->plans);
    if (!e->cp.targets || !e->rep || !e->plans) st = SN_ERR_NOMEM;
    if (st == SN_OK) {
        e->cp.targets[0] = e->cp.x;
        e->cp.targets[1] = e->cp.y;
        e->cp.n_targets = 2;
        e->n_rep = n_local;
    }
    for (int r = 0; r < e->n_rep && st == SN_OK; r++) {
        int64_t lo, hi;
        sn_split_range(batch, sn_strategy_worker_rank(s) * n_local + r, R, &lo, &hi);
        e->rep[r].lo = lo;
        e->rep[r].rows = hi - lo;
        st = build_replica(m, d, e, &e->rep[r], batch);
    }
    if (st == SN_OK) {
        sn_node *tgs[SN_MAX_LOGICAL_DEVICES];
        for (int r = 0; r < e->n_rep; r++) tgs[r] = e->rep[r].tg;
        st = sn_step_runner_new(s, g, e->n_tg, tgs, &e->run);
    }
    /* Plans made earlier survive the nodes added here: sn_plan_run rebinds them. */
    if (st == SN_OK) {
        e->next = d->entries;
        d->entries = e;
        st = replan_entry(m, s, e);
        if (st == SN_OK) {
            *out = &e->cp;
            return SN_OK;
        }
        d->entries = e->next;
    }
    entry_free(e);
    return sn_error_context(st, "distributed training (%s, %d replicas)", sn_strategy_name(s), R);
}

/* ---- running -------------------------------------------------------------------------------- */

static sn_status one_step(sn_model *m, sn_dist_train *d, entry *e, int64_t step) {
    const sn_strategy *s = d->s;
    sn_train_state *t = m->train;
    sn_graph *g = m->g;
    int R = sn_strategy_num_replicas(s);
    /* The replicas' rows of the global batch. */
    const char *xg = sn_plan_buffer(e->cp.plan, e->cp.x), *yg = sn_plan_buffer(e->cp.plan, e->cp.y);
    if (!xg || !yg) return SN_ERR_INVALID;
    sn_shape xs = sn_node_shape(g, e->cp.x);
    size_t xrow = (size_t)(sn_shape_numel(&xs) / xs.dim[0]) * sizeof(float);
    size_t yrow = (size_t)(sn_shape_numel(&e->cp.y_shape) / e->cp.batch) *
                  sn_dtype_size(e->cp.y_dtype);
    for (int r = 0; r < e->n_rep; r++) {
        replica *rp = &e->rep[r];
        sn_plan *p = e->plans[r];
        SN_TRY(sn_plan_set_input(p, rp->x, xg + (size_t)rp->lo * xrow, (size_t)rp->rows * xrow));
        SN_TRY(sn_plan_set_input(p, rp->y, yg + (size_t)rp->lo * yrow, (size_t)rp->rows * yrow));
        /* Dropout masks are keyed by the plan step: distinct per replica, reproducible. */
        sn_plan_set_step(p, step * R + sn_strategy_worker_rank(s) * e->n_rep + r);
    }
    float count = 0;
    for (int r = 0; r < e->n_rep; r++) count += (float)e->rep[r].rows;
    SN_TRY(sn_step_runner_run(e->run, e->plans, count, step));

    /* One update of the mirrored variables. */
    int nv = t->n_vars, nm = t->opts.n_metrics;
    for (int i = 0; i < nv; i++) {
        sn_shape vs = sn_node_shape(g, t->vars[i]);
        SN_TRY(sn_plan_set_input(d->apply, d->gin[i], sn_step_runner_sum(e->run, i),
                                 (size_t)sn_shape_numel(&vs) * sizeof(float)));
    }
    if (d->apply) SN_TRY(sn_error_context(sn_plan_run(d->apply, 1, NULL, NULL), "optimizer update"));
    /* fit's accumulators: global sums (loss as a sum over examples, as fit keeps it). */
    const sn_node *acc = t->acc[0];
    for (int i = 0; i < nm + 1; i++)
        *(float *)sn_variable_data(g, acc[i]) += *sn_step_runner_sum(e->run, nv + i);
    *(float *)sn_variable_data(g, acc[nm + 1]) += sn_step_runner_count(e->run);
    /* Moving averages: the mean of the replicas' new values. */
    for (int i = 0; i < e->n_bn; i++) {
        float *v = sn_variable_data(g, e->bn_var[i]);
        const float *sum = sn_step_runner_sum(e->run, nv + 1 + nm + i);
        sn_shape vs = sn_node_shape(g, e->bn_var[i]);
        int64_t n = sn_shape_numel(&vs);
        for (int64_t j = 0; j < n; j++) {
            float mean = sum[j] / (float)R;
            v[j] = e->bn_op[i] == SN_OP_ASSIGN ? mean : v[j] + mean;
        }
    }
    return SN_OK;
}

sn_status sn_dist_plan_run(sn_model *m, sn_cached_plan *cp, int64_t steps,
                           sn_status (*feed)(void *ctx, sn_plan *p, int64_t step), void *ctx) {
    sn_dist_train *d;
    SN_TRY(get_state(m, &d));
    entry *e = d->entries;
    while (e && &e->cp != cp) e = e->next;
    if (!e) return sn_errorf(SN_ERR_INVALID, "dist_plan_run: the plan is not this model's "
                             "distributed training plan");
    const sn_strategy *s = d->s;
    if (!d->synced) {
        /* Every worker starts from rank 0's variables (optimizer state and counters too). */
        size_t bytes = 0;
        void *buf = sn_graph_variable_buffer(m->g, &bytes);
        SN_TRY(sn_error_context(sn_strategy_broadcast(s, buf, bytes),
                                "distributed training: broadcasting rank 0's variables"));
    }
    d->synced = true;
    SN_TRY(sn_step_runner_prepare(e->run, e->plans));
    int64_t base = sn_plan_step(e->cp.plan);
    for (int64_t i = 0; i < steps; i++) {
        if (feed) {
            sn_status fs = feed(ctx, e->cp.plan, i);
            if (fs != SN_OK) return fs;
        }
        SN_TRY(one_step(m, d, e, base + i));
        d->steps_run++;
        sn_plan_set_step(e->cp.plan, base + i + 1);
    }
    return SN_OK;
}
