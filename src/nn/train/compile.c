/* compile: options, optimizer slots, metric accumulators, and the plans built from them.
 *
 * compile only validates and creates variables (optimizer slots, the iteration counter, the
 * metric accumulators), so the variable buffer is settled before any plan exists. The
 * training graph itself is built lazily, once per batch shape, in the model's one graph:
 *
 *   x, y inputs -> forward(training) -> per-example loss -> mean (+ the layers'
 *   regularization penalties) -> gradients
 *   -> one apply_optimizer per variable -> iterations += 1
 *   -> loss_sum += loss * B, metric_sum += hits, count += B   (accumulated on the device)
 *
 * so fit can run steps_per_execution steps per sn_plan_run and read three scalars once. */
#include <string.h>

#include "distribute/replicas.h"
#include "nn/train/train_impl.h"

sn_compile_opts sn_compile_defaults(void) {
    sn_compile_opts o;
    memset(&o, 0, sizeof o);
    o.optimizer = sn_optimizer_defaults(SN_ADAM);
    o.loss = SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
    o.from_logits = true;
    o.n_metrics = 1;
    o.metrics[0] = SN_METRIC_SPARSE_CATEGORICAL_ACCURACY;
    o.steps_per_execution = 1;
    return o;
}

static void cached_plan_free(sn_cached_plan *c) {
    sn_plan_free(c->plan);
    for (int r = 1; r < c->n_rep; r++) sn_plan_free(c->rep[r].plan);
    free(c->rep);
    free(c->targets);
}

void sn_train_state_free(sn_train_state *t) {
    if (!t) return;
    for (int i = 0; i < t->n_plans; i++) cached_plan_free(&t->plans[i]);
    free(t->plans);
    free(t->vars);
    free(t->slots);
    free(t);
}

sn_train_state *sn_train_state_get(sn_model *m) {
    if (!m->train) {
        m->train = sn_calloc(1, sizeof *m->train);
        if (m->train) m->train->iterations = SN_NONE;
    }
    return m->train;
}

sn_shape sn_model_out_shape(const sn_model *m) {
    if (m->fn) return m->fn->n_outputs > 0 ? m->fn->nodes[m->fn->outputs[0]].shape : m->input_shape;
    return m->n_layers > 0 ? m->layers[m->n_layers - 1]->out_shape : m->input_shape;
}

static sn_status check_opts(const sn_model *m, const sn_compile_opts *o) {
    if (!m->built)
        return sn_errorf(SN_ERR_STATE, "compile: model '%s' is not built; call sn_model_build "
                         "with the input shape first", m->name ? m->name : "");
    if (m->dtype != SN_F32)
        return sn_errorf(SN_ERR_UNSUPPORTED, "compile: model '%s' has %s variables; training "
                         "takes f32 models", m->name ? m->name : "", sn_dtype_name(m->dtype));
    if (o->steps_per_execution < 1)
        return sn_errorf(SN_ERR_INVALID, "compile: steps_per_execution %d must be >= 1",
                         o->steps_per_execution);
    SN_TRY(sn_error_context(sn_optimizer_validate(&o->optimizer), "compile"));
    if (o->loss < SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY || o->loss > SN_LOSS_MEAN_SQUARED_ERROR)
        return sn_errorf(SN_ERR_INVALID, "compile: unknown loss %d (expected one of the "
                         "sn_loss_type values)", (int)o->loss);
    if (o->n_metrics < 0 || o->n_metrics > SN_MAX_METRICS)
        return sn_errorf(SN_ERR_INVALID, "compile: n_metrics %d must be in [0, %d]", o->n_metrics,
                         SN_MAX_METRICS);
    for (int i = 0; i < o->n_metrics; i++) SN_TRY(sn_metric_check(o->metrics[i], o->loss));
    if (!memchr(o->device, 0, sizeof o->device))
        return sn_errorf(SN_ERR_INVALID, "compile: the device name is not NUL-terminated within "
                         "%zu bytes", sizeof o->device);
    if (o->device[0]) { /* an unknown or absent device fails here, not at the first step */
        int idx;
        SN_TRY(sn_error_context(sn_device_find(o->device, &idx), "compile"));
    }
    sn_shape out = sn_model_out_shape(m);
    if (o->loss <= SN_LOSS_CATEGORICAL_CROSSENTROPY && (out.ndim < 1 || out.dim[out.ndim - 1] < 2))
        return sn_errorf(SN_ERR_SHAPE, "compile: %s needs a model output with a class axis of "
                         "at least 2 (the output has %d dims, last %lld)", sn_loss_name(o->loss),
                         out.ndim, out.ndim ? (long long)out.dim[out.ndim - 1] : 0LL);
    return SN_OK;
}

sn_status sn_model_compile(sn_model *m, const sn_compile_opts *o) {
    if (!m || !o) return sn_errorf(SN_ERR_INVALID, "compile: NULL %s", m ? "options" : "model");
    SN_TRY(check_opts(m, o));
    SN_TRY(sn_graph_status(m->g));

    /* A new compile starts a new optimizer (as Keras): the old state's plans go; its
     * variables stay in the graph, unused. */
    m->dist_steps = 0;
    m->dist_synced = false;
    sn_train_state_free(m->train);
    m->train = NULL;
    sn_train_state *t = sn_train_state_get(m);
    if (!t) return SN_ERR_NOMEM;
    t->compiled = true;
    t->opts = *o;
    sn_graph *g = m->g;
    int n = sn_graph_variables(g, true, NULL, 0);
    t->n_vars = n;
    t->vars = sn_calloc((size_t)(n ? n : 1), sizeof *t->vars);
    t->slots = sn_calloc((size_t)(n ? n : 1) * SN_OPTIM_MAX_SLOTS, sizeof *t->slots);
    if (!t->vars || !t->slots) return SN_ERR_NOMEM;
    sn_graph_variables(g, true, t->vars, n);
    SN_TRY(sn_error_context(sn_optimizer_create_slots(g, &o->optimizer, n, t->vars, t->slots),
                            "compile"));
    sn_shape s0 = {.ndim = 0};
    t->iterations = sn_variable(g, "iterations", SN_I32, &s0, false);
    static const char *prefix[2] = {"train", "eval"};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < o->n_metrics + 2; i++) {
            char name[96];
            snprintf(name, sizeof name, "%s/%s", prefix[k],
                     i == 0 ? "loss_sum" : i <= o->n_metrics ? sn_metric_name(o->metrics[i - 1])
                                                              : "count");
            t->acc[k][i] = sn_variable(g, name, SN_F32, &s0, false);
        }
    }
    snprintf(t->val_names[0], sizeof t->val_names[0], "val_loss");
    for (int i = 0; i < o->n_metrics; i++)
        snprintf(t->val_names[i + 1], sizeof t->val_names[i + 1], "val_%s",
                 sn_metric_name(o->metrics[i]));
    if (sn_graph_status(g) != SN_OK)
        return sn_error_context(sn_graph_status(g), "compile: creating the training variables");
    return SN_OK;
}

/* ---- plans -------------------------------------------------------------------------------- */

/* Plans cp from its targets. Later plans (another batch size, evaluation) add nodes to the
 * graph; the plans made before stay valid (sn_plan_run rebinds them to the moved node array). */
static sn_status plan_targets(sn_graph *g, sn_cached_plan *cp, const sn_compile_opts *o) {
    sn_plan_free(cp->plan);
    cp->plan = NULL;
    sn_plan_opts po = sn_plan_opts_defaults();
    po.bf16_compute = o->mixed_bfloat16;
    po.fp32_strict = o->fp32_strict;
    po.device = o->device[0] ? o->device : NULL;
    SN_TRY(sn_plan_new(&cp->plan, g, cp->n_targets, cp->targets, &po));
    return SN_OK;
}

static sn_status build_plan(sn_model *m, sn_cached_plan *cp) {
    sn_train_state *t = m->train;
    sn_graph *g = m->g;
    const sn_compile_opts *o = &t->opts;
    sn_shape xs = m->input_shape;
    xs.ndim = m->input_shape.ndim + 1;
    xs.dim[0] = cp->batch;
    for (int i = 0; i < m->input_shape.ndim; i++) xs.dim[i + 1] = m->input_shape.dim[i];
    cp->x = sn_input(g, "x", SN_F32, &xs);
    cp->y = SN_NONE;
    bool training = cp->kind == SN_PLAN_TRAIN;
    sn_updates upd = {0};
    sn_node out = SN_NONE;
    /* updates in every kind of plan: a stateful LSTM/GRU carries its states through evaluate
     * and predict too (Keras 3); BatchNormalization pushes its only when training */
    sn_status s = sn_model_forward(m, cp->x, training, &upd, &out);
    if (s != SN_OK) {
        sn_updates_free(&upd);
        return s;
    }

    sn_node *targets = NULL;
    int nt = 0;
    if (cp->kind == SN_PLAN_PREDICT) {
        /* Keras models in the guide end in logits; predict returns probabilities. */
        if (t->compiled && o->from_logits && !o->predict_raw) {
            if (o->loss <= SN_LOSS_CATEGORICAL_CROSSENTROPY) out = sn_softmax(g, out, -1);
            else if (o->loss == SN_LOSS_BINARY_CROSSENTROPY) out = sn_sigmoid(g, out);
        }
        cp->out = out;
        targets = sn_malloc((size_t)(1 + upd.n) * sizeof *targets);
        if (!targets) {
            sn_updates_free(&upd);
            return SN_ERR_NOMEM;
        }
        targets[nt++] = out;
        for (int i = 0; i < upd.n; i++) targets[nt++] = upd.nodes[i];
        sn_updates_free(&upd);
    } else {
        cp->y = sn_input(g, "y", cp->y_dtype, &cp->y_shape);
        sn_node y = cp->y;
        sn_shape os = sn_node_shape(g, out);
        /* Labels [B] for a [B, 1] output (binary / regression with one unit). */
        if (o->loss >= SN_LOSS_BINARY_CROSSENTROPY && cp->y_shape.ndim + 1 == os.ndim)
            y = sn_reshape(g, y, &os);
        sn_node per = sn_loss_per_example(g, o->loss, o->from_logits, out, y);
        sn_node loss = sn_reduce_mean(g, per, 0, NULL, false);
        /* Keras 3's compute_loss: the compiled loss plus every regularization penalty
         * (Layer.losses), in train_step and in test_step alike, so both fit's loss and
         * evaluate's include the penalties (keras/src/trainers/trainer.py compute_loss). */
        sn_node penalty = SN_NONE;
        bool none = true;
        s = sn_model_regularization(m, &penalty, &none);
        if (s != SN_OK) {
            sn_updates_free(&upd);
            return s;
        }
        if (!none) loss = sn_add(g, loss, penalty);
        int cap = t->n_vars + 1 + upd.n + SN_ACC_MAX;
        targets = sn_malloc((size_t)cap * sizeof *targets);
        sn_node *grads = sn_calloc((size_t)(t->n_vars ? t->n_vars : 1), sizeof *grads);
        if (!targets || !grads) {
            free(targets);
            free(grads);
            sn_updates_free(&upd);
            return SN_ERR_NOMEM;
        }
        for (int i = 0; i < upd.n; i++) targets[nt++] = upd.nodes[i];
        if (training) {
            if (t->n_vars > 0) {
                s = sn_gradients(g, loss, t->n_vars, t->vars, grads);
                if (s == SN_OK)
                    s = sn_optimizer_apply(g, &o->optimizer, t->n_vars, t->vars, grads, t->slots,
                                           t->iterations, targets + nt);
                nt += t->n_vars + 1;
            }
        }
        free(grads);
        sn_updates_free(&upd);
        if (s != SN_OK) {
            free(targets);
            return s;
        }
        /* Accumulated on the device; Keras weights the loss mean by the batch size. */
        const sn_node *acc = t->acc[training ? 0 : 1];
        double b = (double)cp->batch;
        targets[nt++] = sn_assign_add(g, acc[0], sn_mul(g, loss, sn_scalar(g, SN_F32, b)));
        for (int i = 0; i < o->n_metrics; i++)
            targets[nt++] = sn_assign_add(
                g, acc[i + 1],
                sn_metric_batch_sum(g, o->metrics[i], o->loss, o->from_logits, out, y));
        targets[nt++] = sn_assign_add(g, acc[o->n_metrics + 1], sn_scalar(g, SN_F32, b));
    }
    s = sn_graph_status(g);
    if (s != SN_OK) {
        free(targets);
        return sn_error_context(s, "building the %s graph for batch %lld",
                                cp->kind == SN_PLAN_TRAIN ? "training"
                                : cp->kind == SN_PLAN_EVAL ? "evaluation" : "prediction",
                                (long long)cp->batch);
    }
    cp->targets = targets;
    cp->n_targets = nt;
    return plan_targets(g, cp, o);
}

/* ---- training under a strategy: one plan per local replica --------------------------------
 *
 * Replica r of R (over all workers) trains on its rows of the global batch B (sn_split_range)
 * with the one-device step's pieces, plus the all-reduce:
 *
 *   x_r, y_r -> forward(training) -> per-example loss -> loss_r = sum / B (+ penalty / R)
 *   -> gradients -> all_reduce (one per gradient, and one for the packed loss and metric sums
 *   and one per batch-normalization statistic) -> one apply_optimizer per variable,
 *   iterations += 1 -> loss_sum += sum, metric sums += sums, count += B, moving statistics =
 *   (the replicas' mean of the values each would assign)
 *
 * so the sum of the replicas' gradients is the gradient of the global mean loss
 * (compute_average_loss), and a penalty is counted once per step (each replica adds
 * penalty / R, as Keras's TensorFlow trainer). Every replica applies the same update to its own
 * copy of the variables (mirrored variables: replica 0's is the graph's buffer, the others'
 * plans have private copies); the all-reduced gradients are bitwise the same on every replica,
 * so the copies stay bitwise the same. */

typedef struct red_item {
    sn_node x;   /* the value to all-reduce */
    int64_t key; /* when it exists: the largest node it needs (creation order) */
    sn_node *res; /* where its all-reduced value goes */
} red_item;

/* The all-reduces of one replica, created in the order their values come to exist, so that
 * the planner's hoisting (plan.c) starts them in that order on every replica and worker; with
 * several workers (and overlap) every start comes before the first wait. */
static void all_reduce_items(sn_graph *g, red_item *it, int n, sn_allreduce_comm *comm, int rep,
                             bool split, bool hoist) {
    for (int i = 1; i < n; i++) /* insertion sort: a few dozen items */
        for (int j = i; j > 0 && it[j - 1].key > it[j].key; j--) {
            red_item t = it[j];
            it[j] = it[j - 1];
            it[j - 1] = t;
        }
    for (int i = 0; i < n; i++)
        *it[i].res = sn_all_reduce(g, it[i].x, comm, rep,
                                   split ? SN_ALLREDUCE_START : SN_ALLREDUCE_WHOLE, hoist);
    if (split)
        for (int i = 0; i < n; i++)
            *it[i].res = sn_all_reduce(g, *it[i].res, comm, rep, SN_ALLREDUCE_WAIT, false);
}

static sn_status build_replica(sn_model *m, sn_cached_plan *cp, int r, sn_allreduce_comm *comm,
                               sn_node **targets_out, int *nt_out) {
    sn_train_state *t = m->train;
    const sn_compile_opts *o = &t->opts;
    sn_graph *g = m->g;
    sn_strategy *s = m->strategy;
    sn_replica_plan *rp = &cp->rep[r];
    int R = sn_strategy_num_replicas(s);
    int64_t B = cp->batch;
    sn_shape xs = {.ndim = m->input_shape.ndim + 1};
    xs.dim[0] = rp->rows;
    for (int i = 0; i < m->input_shape.ndim; i++) xs.dim[i + 1] = m->input_shape.dim[i];
    sn_shape ys = cp->y_shape;
    ys.dim[0] = rp->rows;
    sn_node penalty = SN_NONE;
    bool no_penalty = true;
    SN_TRY(sn_model_regularization(m, &penalty, &no_penalty));
    rp->x = sn_input(g, "replica_x", SN_F32, &xs);
    rp->y = sn_input(g, "replica_y", cp->y_dtype, &ys);
    sn_updates upd = {0};
    sn_node out = SN_NONE;
    sn_status st = sn_model_forward(m, rp->x, true, &upd, &out);
    if (st != SN_OK) {
        sn_updates_free(&upd);
        return st;
    }
    sn_node y = rp->y;
    sn_shape os = sn_node_shape(g, out);
    if (o->loss >= SN_LOSS_BINARY_CROSSENTROPY && ys.ndim + 1 == os.ndim) y = sn_reshape(g, y, &os);
    sn_node per = sn_loss_per_example(g, o->loss, o->from_logits, out, y);
    sn_node lsum = sn_reduce_sum(g, per, 0, NULL, false);
    sn_node loss = sn_mul(g, lsum, sn_scalar(g, SN_F32, 1.0 / (double)B));
    /* The logged loss is each replica's unscaled loss weighted by its rows: lsum + penalty *
     * rows, summed over the replicas. */
    if (!no_penalty) {
        loss = sn_add(g, loss, sn_mul(g, penalty, sn_scalar(g, SN_F32, 1.0 / (double)R)));
        lsum = sn_add(g, lsum, sn_mul(g, penalty, sn_scalar(g, SN_F32, (double)rp->rows)));
    }
    int nv = t->n_vars, nm = o->n_metrics, nb = upd.n;
    sn_node ms[SN_MAX_METRICS];
    for (int i = 0; i < nm; i++) {
        ms[i] = sn_metric_batch_sum(g, o->metrics[i], o->loss, o->from_logits, out, y);
        if (ms[i] != SN_NONE && sn_node_dtype(g, ms[i]) != SN_F32) ms[i] = sn_cast(g, ms[i], SN_F32);
    }
    /* Batch normalization's moving statistics: the values it would assign, reduced to their
     * mean over the replicas (TensorFlow's sync on write, aggregation MEAN). */
    sn_node *bv = sn_calloc((size_t)(2 * nb + nv) + 1, sizeof *bv);
    sn_node *grads = bv + nb, *bn_res = grads + nv;
    red_item *items = sn_calloc((size_t)(nv + nb + SN_MAX_METRICS + 2), sizeof *items);
    int cap = nv + 1 + nb + SN_ACC_MAX;
    sn_node *targets = sn_malloc((size_t)cap * sizeof *targets);
    if (!bv || !items || !targets) st = SN_ERR_NOMEM;
    for (int i = 0; i < nb && st == SN_OK; i++) {
        const sn_node_t *un = &g->nodes[upd.nodes[i]];
        if ((un->op != SN_OP_ASSIGN && un->op != SN_OP_ASSIGN_ADD) ||
            g->nodes[un->in[1]].dtype != SN_F32)
            st = sn_errorf(SN_ERR_UNSUPPORTED, "distributed training: layer side effect %s (node "
                           "%d) is not an f32 assign", sn_node_op_name(g, upd.nodes[i]),
                           (int)upd.nodes[i]);
        else bv[i] = un->in[1];
    }
    if (st == SN_OK && nv > 0) st = sn_gradients(g, loss, nv, t->vars, grads);
    if (st == SN_OK) st = sn_graph_status(g);
    int n_it = 0, nt = 0;
    /* Loss and metric sums: one all-reduce of them packed ([1 + metrics]). */
    sn_node scal[SN_MAX_METRICS + 1], scal_res = SN_NONE, scal_red[SN_MAX_METRICS + 1];
    int ns = 0;
    scal[ns++] = lsum;
    for (int i = 0; i < nm; i++) scal[ns++] = ms[i];
    if (st == SN_OK) {
        int64_t key = 0;
        sn_shape one = {.ndim = 1, .dim = {1}};
        sn_node col[SN_MAX_METRICS + 1];
        for (int i = 0; i < ns; i++) {
            if (scal[i] > key) key = scal[i];
            col[i] = sn_reshape(g, scal[i], &one);
        }
        items[n_it++] = (red_item){ns > 1 ? sn_concat(g, ns, col, 0) : col[0], key, &scal_res};
        for (int i = 0; i < nb; i++) items[n_it++] = (red_item){bv[i], bv[i], &bn_res[i]};
        for (int i = 0; i < nv; i++) items[n_it++] = (red_item){grads[i], grads[i], &grads[i]};
        if (R > 1) {
            /* Hoisted into the backward pass only to overlap MPI: in process the replicas
             * meet at every all-reduce, and meeting once after the backward pass waits for
             * the slower replica once. */
            all_reduce_items(g, items, n_it, comm, r, sn_strategy_overlaps(s),
                             sn_strategy_overlaps(s));
        } else {
            for (int i = 0; i < n_it; i++) *items[i].res = items[i].x;
        }
        sn_shape s0 = {.ndim = 0};
        for (int i = 0; i < ns; i++) {
            int64_t b0 = i, one1 = 1;
            scal_red[i] = sn_reshape(g, ns > 1 ? sn_slice(g, scal_res, &b0, &one1) : scal_res, &s0);
        }
        /* The update, then the statistics and the accumulators (side effects: in creation
         * order at the end of the step). */
        if (nv > 0) {
            st = sn_optimizer_apply(g, &o->optimizer, nv, t->vars, grads, t->slots, t->iterations,
                                    targets + nt);
            nt += nv + 1;
        }
    }
    if (st == SN_OK) {
        for (int i = 0; i < nb; i++) {
            const sn_node_t *un = &g->nodes[upd.nodes[i]];
            sn_node var = un->in[0];
            int op = un->op;
            sn_node mean = R > 1 ? sn_div(g, bn_res[i], sn_scalar(g, SN_F32, (double)R)) : bn_res[i];
            targets[nt++] = op == SN_OP_ASSIGN ? sn_assign(g, var, mean) : sn_assign_add(g, var, mean);
        }
        const sn_node *acc = t->acc[0];
        for (int i = 0; i < ns; i++) targets[nt++] = sn_assign_add(g, acc[i], scal_red[i]);
        targets[nt++] = sn_assign_add(g, acc[nm + 1], sn_scalar(g, SN_F32, (double)B));
        st = sn_error_context(sn_graph_status(g), "building replica %d's graph for a global batch "
                              "of %lld", r, (long long)B);
    }
    sn_updates_free(&upd);
    free(bv);
    free(items);
    if (st != SN_OK) {
        free(targets);
        return st;
    }
    *targets_out = targets;
    *nt_out = nt;
    return SN_OK;
}

/* cp's replicas under m's strategy: graphs and plans, each on its replica's device. */
static sn_status build_replicas(sn_model *m, sn_cached_plan *cp) {
    sn_strategy *s = m->strategy;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->n_carried > 0)
            return sn_errorf(SN_ERR_UNSUPPORTED, "distributed training: layer '%s' is stateful, "
                             "and its carried state would be shared by every replica (train it "
                             "without a strategy)", m->layers[i]->name);
    int R = sn_strategy_num_replicas(s), nl = sn_strategy_local_replicas(s);
    if (cp->batch < R)
        return sn_errorf(SN_ERR_SHAPE, "distributed training: a global batch of %lld examples "
                         "cannot give each of the %d replicas one (use a batch of at least %d)",
                         (long long)cp->batch, R, R);
    sn_allreduce_comm *comm = NULL;
    if (R > 1) SN_TRY(sn_strategy_allreduce(s, &comm));
    cp->rep = sn_calloc((size_t)nl, sizeof *cp->rep);
    if (!cp->rep) return SN_ERR_NOMEM;
    cp->n_rep = nl;
    for (int r = 0; r < nl; r++) {
        int64_t lo, hi;
        sn_split_range(cp->batch, sn_strategy_worker_rank(s) * nl + r, R, &lo, &hi);
        cp->rep[r].lo = lo;
        cp->rep[r].rows = hi - lo;
        cp->rep[r].x = cp->rep[r].y = SN_NONE;
    }
    sn_status st = SN_OK;
    for (int r = 0; r < nl && st == SN_OK; r++) {
        sn_node *tg = NULL;
        int nt = 0;
        st = build_replica(m, cp, r, comm, &tg, &nt);
        if (st != SN_OK) break;
        sn_plan_opts po = sn_plan_opts_defaults();
        po.device = sn_strategy_replica_device(s, r);
        po.bf16_compute = m->train->opts.mixed_bfloat16;
        po.fp32_strict = m->train->opts.fp32_strict;
        po.private_vars = r > 0;
        st = sn_error_context(sn_plan_new(&cp->rep[r].plan, m->g, nt, tg, &po), "planning replica %d", r);
        /* Dropout masks differ per replica and stay reproducible: step * R + global replica id. */
        if (st == SN_OK)
            sn_plan_set_step_key(cp->rep[r].plan, R, sn_strategy_worker_rank(s) * nl + r);
        if (r == 0) {
            cp->targets = tg;
            cp->n_targets = nt;
        } else {
            free(tg);
        }
    }
    cp->plan = cp->rep[0].plan;
    if (st != SN_OK)
        return sn_error_context(st, "distributed training (%s, %d replicas)", sn_strategy_name(s), R);
    return SN_OK;
}

sn_status sn_train_plan(sn_model *m, sn_plan_kind kind, int64_t batch, const sn_shape *y_shape,
                        sn_dtype y_dtype, sn_cached_plan **out) {
    sn_train_state *t = sn_train_state_get(m);
    if (!t) return SN_ERR_NOMEM;
    for (int i = 0; i < t->n_plans; i++) {
        sn_cached_plan *c = &t->plans[i];
        if (c->kind == kind && c->batch == batch &&
            (kind == SN_PLAN_PREDICT ||
             (c->y_dtype == y_dtype && sn_shape_equal(&c->y_shape, y_shape)))) {
            *out = c;
            return SN_OK;
        }
    }
    if (t->n_plans == t->cap_plans) {
        int cap = t->cap_plans ? 2 * t->cap_plans : 4;
        sn_cached_plan *p = sn_realloc(t->plans, (size_t)cap * sizeof *p);
        if (!p) return SN_ERR_NOMEM;
        t->plans = p;
        t->cap_plans = cap;
    }
    sn_cached_plan c = {.kind = kind, .batch = batch, .y_dtype = y_dtype, .x = SN_NONE,
                        .y = SN_NONE, .out = SN_NONE};
    if (y_shape) c.y_shape = *y_shape;
    sn_status s = kind == SN_PLAN_TRAIN && m->strategy ? build_replicas(m, &c) : build_plan(m, &c);
    if (s != SN_OK) {
        cached_plan_free(&c);
        return s;
    }
    t->plans[t->n_plans] = c;
    *out = &t->plans[t->n_plans++];
    return SN_OK;
}

/* ---- the strategy a model trains under ------------------------------------------------------- */

sn_status sn_model_set_strategy(sn_model *m, sn_strategy *s) {
    if (!m) return sn_errorf(SN_ERR_INVALID, "set_strategy: model is NULL");
    /* The training plans were made for the old strategy's replicas. */
    sn_train_state *t = m->train;
    int w = 0;
    for (int i = 0; t && i < t->n_plans; i++) {
        if (t->plans[i].kind == SN_PLAN_TRAIN) cached_plan_free(&t->plans[i]);
        else t->plans[w++] = t->plans[i];
    }
    if (t) t->n_plans = w;
    m->strategy = s;
    m->dist_steps = 0;
    m->dist_synced = false;
    return SN_OK;
}

sn_strategy *sn_model_get_strategy(const sn_model *m) { return m ? m->strategy : NULL; }

int64_t sn_model_distributed_steps(const sn_model *m) { return m ? m->dist_steps : 0; }
