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
#include <math.h>
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
    o.huber_delta = 1.0;
    o.accuracy_threshold = 0.5;
    return o;
}

sn_output_loss sn_output_loss_defaults(sn_loss_type loss) {
    sn_output_loss o;
    memset(&o, 0, sizeof o);
    o.loss = loss;
    o.loss_weight = 1.0;
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

static sn_shape out_shape_at(const sn_model *m, int k) {
    return m->fn ? m->fn->nodes[m->fn->outputs[k]].shape : sn_model_out_shape(m);
}

/* Keras's name of output k: its layer's name. */
static const char *out_name(const sn_model *m, int k) {
    const sn_fnode *nd = m->fn ? &m->fn->nodes[m->fn->outputs[k]] : NULL;
    return !nd ? "output" : nd->layer ? nd->layer->name : nd->input_name;
}

const char *sn_train_log_name(const sn_train_state *t, int i) {
    if (i == 0) return "loss";
    if (i <= t->n_out_losses) return t->out_loss_names[i - 1];
    return i - 1 - t->n_out_losses < t->n_met ? t->met[i - 1 - t->n_out_losses].name : "?";
}

static sn_status check_loss(const sn_model *m, int k, sn_loss_type loss, int nm,
                            const sn_metric_type *metrics) {
    if (loss < SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY || loss > SN_LOSS_HUBER)
        return sn_errorf(SN_ERR_INVALID, "compile: unknown loss %d (expected one of the "
                         "sn_loss_type values)", (int)loss);
    if (nm < 0 || nm > SN_MAX_METRICS)
        return sn_errorf(SN_ERR_INVALID, "compile: n_metrics %d must be in [0, %d]", nm,
                         SN_MAX_METRICS);
    for (int i = 0; i < nm; i++) SN_TRY(sn_metric_check(metrics[i], loss));
    sn_shape out = out_shape_at(m, k);
    if (loss <= SN_LOSS_CATEGORICAL_CROSSENTROPY && (out.ndim < 1 || out.dim[out.ndim - 1] < 2))
        return sn_errorf(SN_ERR_SHAPE, "compile: %s needs a model output with a class axis of "
                         "at least 2 (output '%s' has %d dims, last %lld)", sn_loss_name(loss),
                         out_name(m, k), out.ndim, out.ndim ? (long long)out.dim[out.ndim - 1] : 0LL);
    return SN_OK;
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
    if (!memchr(o->device, 0, sizeof o->device))
        return sn_errorf(SN_ERR_INVALID, "compile: the device name is not NUL-terminated within "
                         "%zu bytes", sizeof o->device);
    if (o->device[0]) { /* an unknown or absent device fails here, not at the first step */
        int idx;
        SN_TRY(sn_error_context(sn_device_find(o->device, &idx), "compile"));
    }
    if (!(o->huber_delta > 0) || !isfinite(o->huber_delta))
        return sn_errorf(SN_ERR_INVALID, "compile: huber_delta %g must be a finite number > 0",
                         o->huber_delta);
    if (!isfinite(o->accuracy_threshold))
        return sn_errorf(SN_ERR_INVALID, "compile: accuracy_threshold %g must be finite",
                         o->accuracy_threshold);
    int n_out = sn_train_n_outputs(m);
    if (n_out > SN_MAX_OUTPUTS || sn_train_n_inputs(m) + n_out > SN_FIT_MAX_IO)
        return sn_errorf(SN_ERR_UNSUPPORTED, "compile: model '%s' has %d inputs and %d outputs; "
                         "sinter trains models of at most %d outputs and %d inputs and outputs "
                         "together", m->name, sn_train_n_inputs(m), n_out, SN_MAX_OUTPUTS,
                         SN_FIT_MAX_IO);
    if (o->n_outputs < 0 || (o->n_outputs > 0 && o->n_outputs != n_out))
        return sn_errorf(SN_ERR_INVALID, "compile: n_outputs %d, but model '%s' has %d outputs "
                         "(0 takes the one loss for every output)", o->n_outputs, m->name, n_out);
    if (o->n_outputs == 0) {
        if (n_out > 1 && o->n_metrics > 0)
            return sn_errorf(SN_ERR_INVALID, "compile: model '%s' has %d outputs; give its "
                             "metrics per output (n_outputs and outputs[k].metrics), as Keras "
                             "asks for a list or dict of them", m->name, n_out);
        for (int k = 0; k < n_out; k++)
            SN_TRY(check_loss(m, k, o->loss, k == 0 ? o->n_metrics : 0, o->metrics));
        return SN_OK;
    }
    for (int k = 0; k < n_out; k++) {
        const sn_output_loss *ol = &o->outputs[k];
        if (!isfinite(ol->loss_weight))
            return sn_errorf(SN_ERR_INVALID, "compile: output %d ('%s'): loss_weight %g must be "
                             "finite", k, out_name(m, k), ol->loss_weight);
        SN_TRY(sn_error_context(check_loss(m, k, ol->loss, ol->n_metrics, ol->metrics),
                                "output %d ('%s')", k, out_name(m, k)));
    }
    return SN_OK;
}

/* The per-output losses and the flat metric list from o (checked). */
static void resolve_losses(const sn_model *m, const sn_compile_opts *o, sn_train_state *t) {
    int n_out = sn_train_n_outputs(m);
    t->n_out = n_out;
    t->n_out_losses = n_out > 1 ? n_out : 0;
    t->n_met = 0;
    for (int k = 0; k < n_out; k++) {
        const sn_output_loss *ol = o->n_outputs ? &o->outputs[k] : NULL;
        t->loss[k] = (sn_loss_spec){.type = ol ? ol->loss : o->loss,
                                    .from_logits = ol ? ol->from_logits : o->from_logits,
                                    .weight = ol ? ol->loss_weight : 1.0, .delta = o->huber_delta};
        snprintf(t->out_loss_names[k], sizeof t->out_loss_names[k], "%s_loss", out_name(m, k));
        snprintf(t->val_out_loss_names[k], sizeof t->val_out_loss_names[k], "val_%s",
                 t->out_loss_names[k]);
        int nm = ol ? ol->n_metrics : k == 0 ? o->n_metrics : 0;
        const sn_metric_type *ms = ol ? ol->metrics : o->metrics;
        for (int i = 0; i < nm; i++) {
            sn_metric_spec *s = &t->met[t->n_met++];
            *s = (sn_metric_spec){.type = ms[i], .out = k, .threshold = o->accuracy_threshold};
            if (n_out > 1)
                snprintf(s->name, sizeof s->name, "%s_%s", out_name(m, k), sn_metric_name(ms[i]));
            else
                snprintf(s->name, sizeof s->name, "%s", sn_metric_name(ms[i]));
        }
    }
    t->n_acc = 1 + t->n_out_losses + t->n_met;
}

/* Freezing clears a variable's SN_NODE_TRAINABLE flag (so compile leaves it out of the
 * gradients and the optimizer) and remembers it in l->thawed, so that thawing restores exactly
 * the variables that were trainable (BatchNormalization's moving statistics never are). */
void sn_model_sync_trainable(sn_model *m) {
    for (int i = 0; m && m->built && i < m->n_layers; i++) {
        sn_layer *l = m->layers[i];
        for (int j = 0; j < l->n_vars; j++) {
            uint32_t *flags = &sn_node_at(m->g, l->vars[j])->flags;
            if (l->frozen && (*flags & SN_NODE_TRAINABLE)) {
                *flags &= ~(uint32_t)SN_NODE_TRAINABLE;
                l->thawed |= 1u << j;
            } else if (!l->frozen && (l->thawed >> j & 1u)) {
                *flags |= SN_NODE_TRAINABLE;
                l->thawed &= ~(1u << j);
            }
        }
    }
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
    resolve_losses(m, o, t);
    sn_graph *g = m->g;
    sn_model_sync_trainable(m); /* frozen layers' weights leave the trainable set */
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
        for (int i = 0; i < t->n_acc + 1; i++) {
            char name[160];
            snprintf(name, sizeof name, "%s/%s", prefix[k],
                     i == 0 ? "loss_sum" : i < t->n_acc ? sn_train_log_name(t, i) : "count");
            t->acc[k][i] = sn_variable(g, name, SN_F32, &s0, false);
        }
    }
    for (int i = 0; i < t->n_acc; i++)
        snprintf(t->val_names[i], sizeof t->val_names[i], "val_%s", sn_train_log_name(t, i));
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

/* The shape of model input i without the batch. */
static sn_shape in_shape_at(const sn_model *m, int i) {
    return m->fn ? m->fn->nodes[m->fn->inputs[i]].shape : m->input_shape;
}

static sn_shape batched(const sn_shape *s, int64_t b) {
    sn_shape r = {.ndim = s->ndim + 1};
    r.dim[0] = b;
    for (int i = 0; i < s->ndim; i++) r.dim[i + 1] = s->dim[i];
    return r;
}

/* Labels [B] for a [B, 1] output (binary / regression with one unit). */
static sn_node fit_labels(sn_graph *g, const sn_loss_spec *l, sn_node out, sn_node y) {
    sn_shape os = sn_node_shape(g, out), ys = sn_node_shape(g, y);
    if (sn_loss_dense_labels(l->type) && l->type != SN_LOSS_CATEGORICAL_CROSSENTROPY &&
        ys.ndim + 1 == os.ndim)
        return sn_reshape(g, y, &os);
    return y;
}

/* A graph input for each model input with a batch of `rows`: NAME, NAME1, NAME2, ... */
static void model_inputs(sn_model *m, int64_t rows, const char *name, sn_node *xs) {
    for (int i = 0; i < sn_train_n_inputs(m); i++) {
        sn_shape s = in_shape_at(m, i);
        s = batched(&s, rows);
        char nm[32];
        if (i) snprintf(nm, sizeof nm, "%s%d", name, i);
        else snprintf(nm, sizeof nm, "%s", name);
        xs[i] = sn_input(m->g, nm, SN_F32, &s);
    }
}

static sn_status build_plan(sn_model *m, sn_cached_plan *cp) {
    sn_train_state *t = m->train;
    sn_graph *g = m->g;
    const sn_compile_opts *o = &t->opts;
    int n_in = sn_train_n_inputs(m), n_out = sn_train_n_outputs(m);
    cp->n_x = n_in;
    cp->n_out = n_out;
    model_inputs(m, cp->batch, "x", cp->xs);
    cp->x = cp->xs[0];
    cp->y = SN_NONE;
    bool training = cp->kind == SN_PLAN_TRAIN;
    sn_updates upd = {0};
    sn_node outs[SN_FIT_MAX_IO];
    /* updates in every kind of plan: a stateful LSTM/GRU carries its states through evaluate
     * and predict too (Keras 3); BatchNormalization pushes its only when training */
    sn_status s = sn_model_forward_n(m, cp->xs, training, &upd, outs);
    if (s != SN_OK) {
        sn_updates_free(&upd);
        return s;
    }

    sn_node *targets = NULL;
    int nt = 0;
    if (cp->kind == SN_PLAN_PREDICT) {
        /* Keras models in the guide end in logits; predict returns probabilities. */
        for (int k = 0; k < n_out; k++) {
            const sn_loss_spec *l = &t->loss[k];
            if (t->compiled && l->from_logits && !o->predict_raw) {
                if (l->type <= SN_LOSS_CATEGORICAL_CROSSENTROPY) outs[k] = sn_softmax(g, outs[k], -1);
                else if (l->type == SN_LOSS_BINARY_CROSSENTROPY) outs[k] = sn_sigmoid(g, outs[k]);
            }
            cp->outs[k] = outs[k];
        }
        cp->out = outs[0];
        targets = sn_malloc((size_t)(n_out + upd.n) * sizeof *targets);
        if (!targets) {
            sn_updates_free(&upd);
            return SN_ERR_NOMEM;
        }
        for (int k = 0; k < n_out; k++) targets[nt++] = outs[k];
        for (int i = 0; i < upd.n; i++) targets[nt++] = upd.nodes[i];
        sn_updates_free(&upd);
    } else {
        if (cp->n_y != n_out) {
            sn_updates_free(&upd);
            return sn_errorf(SN_ERR_INVALID, "model '%s' has %d outputs but %d labels were given",
                             m->name, n_out, cp->n_y);
        }
        sn_node y[SN_FIT_MAX_IO], per_out[SN_FIT_MAX_IO];
        sn_node loss = SN_NONE;
        cp->w = SN_NONE;
        if (cp->weighted) {
            sn_shape ws = {.ndim = 1, .dim = {cp->batch}};
            cp->w = sn_input(g, "sample_weight", SN_F32, &ws);
        }
        for (int k = 0; k < n_out; k++) {
            char name[32];
            snprintf(name, sizeof name, k ? "y%d" : "y", k);
            cp->ys[k] = sn_input(g, name, cp->y_dtypes[k], &cp->y_shapes[k]);
            y[k] = fit_labels(g, &t->loss[k], outs[k], cp->ys[k]);
            sn_node per = sn_loss_per_example(g, &t->loss[k], outs[k], y[k]);
            /* Keras 3's sum_over_batch_size: sum(w * loss) / B, not / sum(w); the same
             * weights for every output, and the logged per-output losses are weighted too */
            if (cp->weighted) per = sn_mul(g, per, cp->w);
            per_out[k] = sn_reduce_mean(g, per, 0, NULL, false);
            /* Keras's CompileLoss: the sum of each output's mean times its weight */
            sn_node w = t->loss[k].weight == 1.0
                            ? per_out[k] : sn_mul(g, per_out[k], sn_scalar(g, SN_F32, t->loss[k].weight));
            loss = k == 0 ? w : sn_add(g, loss, w);
        }
        cp->y = cp->ys[0];
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
        sn_node b = sn_scalar(g, SN_F32, (double)cp->batch);
        targets[nt++] = sn_assign_add(g, acc[0], sn_mul(g, loss, b));
        for (int k = 0; k < t->n_out_losses; k++)
            targets[nt++] = sn_assign_add(g, acc[1 + k], sn_mul(g, per_out[k], b));
        for (int i = 0; i < t->n_met; i++) {
            const sn_metric_spec *ms = &t->met[i];
            targets[nt++] = sn_assign_add(
                g, acc[1 + t->n_out_losses + i],
                sn_metric_batch_sum(g, ms, &t->loss[ms->out], outs[ms->out], y[ms->out]));
        }
        targets[nt++] = sn_assign_add(g, acc[t->n_acc], b);
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
 * penalty / R, as Keras's TensorFlow trainer). Replicas on CPU devices share the graph's
 * variables (sn_strategy_shares_variables): only replica 0 receives the sums and applies the
 * update, the statistics and the accumulators, and a barrier after them ends every replica's
 * step, so no replica holds a copy of the weights and optimizer slots. Replicas on GPUs apply
 * the same update to their own copy (replica 0's is the graph's buffer, the others' plans have
 * private copies); the all-reduced gradients are bitwise the same on every replica, so the
 * copies stay bitwise the same. */

typedef struct red_item {
    sn_node x;   /* the value to all-reduce */
    int64_t key; /* when it exists: the largest node it needs (creation order) */
    sn_node *res; /* where its all-reduced value goes */
} red_item;

/* The all-reduces of one replica, created in the order their values come to exist, so that
 * the planner's hoisting (plan.c) starts them in that order on every replica and worker; with
 * several workers (and overlap) every start comes before the first wait. */
static void all_reduce_items(sn_graph *g, red_item *it, int n, sn_allreduce_comm *comm, int rep,
                             bool split, bool hoist, bool to_first) {
    for (int i = 1; i < n; i++) /* insertion sort: a few dozen items */
        for (int j = i; j > 0 && it[j - 1].key > it[j].key; j--) {
            red_item t = it[j];
            it[j] = it[j - 1];
            it[j - 1] = t;
        }
    sn_node (*reduce)(sn_graph *, sn_node, sn_allreduce_comm *, int, int, bool) =
        to_first ? sn_all_reduce_to_first : sn_all_reduce;
    for (int i = 0; i < n; i++)
        *it[i].res = reduce(g, it[i].x, comm, rep, split ? SN_ALLREDUCE_START : SN_ALLREDUCE_WHOLE,
                            hoist);
    if (split)
        for (int i = 0; i < n; i++)
            *it[i].res = reduce(g, *it[i].res, comm, rep, SN_ALLREDUCE_WAIT, false);
}

static sn_status build_replica(sn_model *m, sn_cached_plan *cp, int r, sn_allreduce_comm *comm,
                               bool share, sn_node **targets_out, int *nt_out) {
    sn_train_state *t = m->train;
    const sn_compile_opts *o = &t->opts;
    sn_graph *g = m->g;
    sn_strategy *s = m->strategy;
    sn_replica_plan *rp = &cp->rep[r];
    int R = sn_strategy_num_replicas(s);
    int64_t B = cp->batch;
    int n_out = sn_train_n_outputs(m);
    sn_node penalty = SN_NONE;
    bool no_penalty = true;
    SN_TRY(sn_model_regularization(m, &penalty, &no_penalty));
    /* its rows of every input and label */
    model_inputs(m, rp->rows, "replica_x", rp->xs);
    for (int k = 0; k < n_out; k++) {
        sn_shape ys = cp->y_shapes[k];
        ys.dim[0] = rp->rows;
        char name[32];
        snprintf(name, sizeof name, k ? "replica_y%d" : "replica_y", k);
        rp->ys[k] = sn_input(g, name, cp->y_dtypes[k], &ys);
    }
    rp->x = rp->xs[0];
    rp->y = rp->ys[0];
    rp->w = SN_NONE;
    if (cp->weighted) {
        sn_shape ws = {.ndim = 1, .dim = {rp->rows}};
        rp->w = sn_input(g, "replica_sample_weight", SN_F32, &ws);
    }
    sn_updates upd = {0};
    sn_node outs[SN_FIT_MAX_IO], y[SN_FIT_MAX_IO], out_sum[SN_FIT_MAX_IO];
    sn_status st = sn_model_forward_n(m, rp->xs, true, &upd, outs);
    if (st != SN_OK) {
        sn_updates_free(&upd);
        return st;
    }
    /* Each output's loss summed over its rows (weighted by theirs); the step's loss is
     * Keras's CompileLoss, the weighted sum of the outputs' means over the global batch. */
    sn_node lsum = SN_NONE;
    for (int k = 0; k < n_out; k++) {
        y[k] = fit_labels(g, &t->loss[k], outs[k], rp->ys[k]);
        sn_node per = sn_loss_per_example(g, &t->loss[k], outs[k], y[k]);
        if (cp->weighted) per = sn_mul(g, per, rp->w); /* its rows' weights; still / B below */
        out_sum[k] = sn_reduce_sum(g, per, 0, NULL, false);
        sn_node w = t->loss[k].weight == 1.0
                        ? out_sum[k] : sn_mul(g, out_sum[k], sn_scalar(g, SN_F32, t->loss[k].weight));
        lsum = k == 0 ? w : sn_add(g, lsum, w);
    }
    sn_node loss = sn_mul(g, lsum, sn_scalar(g, SN_F32, 1.0 / (double)B));
    /* The logged loss is each replica's unscaled loss weighted by its rows: lsum + penalty *
     * rows, summed over the replicas. */
    if (!no_penalty) {
        loss = sn_add(g, loss, sn_mul(g, penalty, sn_scalar(g, SN_F32, 1.0 / (double)R)));
        lsum = sn_add(g, lsum, sn_mul(g, penalty, sn_scalar(g, SN_F32, (double)rp->rows)));
    }
    int nv = t->n_vars, nm = t->n_met, nb = upd.n, L = t->n_out_losses;
    sn_node ms[SN_TRAIN_MAX_METRICS];
    for (int i = 0; i < nm; i++) {
        const sn_metric_spec *mt = &t->met[i];
        ms[i] = sn_metric_batch_sum(g, mt, &t->loss[mt->out], outs[mt->out], y[mt->out]);
        if (ms[i] != SN_NONE && sn_node_dtype(g, ms[i]) != SN_F32) ms[i] = sn_cast(g, ms[i], SN_F32);
    }
    /* Batch normalization's moving statistics: the values it would assign, reduced to their
     * mean over the replicas (TensorFlow's sync on write, aggregation MEAN). */
    sn_node *bv = sn_calloc((size_t)(2 * nb + nv) + 1, sizeof *bv);
    sn_node *grads = bv + nb, *bn_res = grads + nv;
    red_item *items = sn_calloc((size_t)(nv + nb + 2), sizeof *items);
    int cap = nv + 1 + nb + SN_ACC_MAX + 1;
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
    /* Loss, each output's loss (several outputs) and metric sums: one all-reduce of them
     * packed ([1 + L + metrics]), in the accumulators' order. */
    sn_node scal[SN_ACC_MAX], scal_res = SN_NONE, scal_red[SN_ACC_MAX];
    int ns = 0;
    scal[ns++] = lsum;
    for (int k = 0; k < L; k++) scal[ns++] = out_sum[k];
    for (int i = 0; i < nm; i++) scal[ns++] = ms[i];
    if (st == SN_OK) {
        int64_t key = 0;
        sn_shape one = {.ndim = 1, .dim = {1}};
        sn_node col[SN_ACC_MAX];
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
                             sn_strategy_overlaps(s), share);
        } else {
            for (int i = 0; i < n_it; i++) *items[i].res = items[i].x;
        }
        /* Sharing the variables, a replica but the first gives its values to replica 0's
         * all-reduces and waits for replica 0's update at the barrier. */
        if (share && r > 0) {
            for (int i = 0; i < n_it; i++) targets[nt++] = *items[i].res;
            targets[nt++] = sn_all_reduce_barrier(g, t->acc[0][t->n_acc], comm, r);
            st = sn_graph_status(g);
            goto done;
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
        targets[nt++] = sn_assign_add(g, acc[t->n_acc], sn_scalar(g, SN_F32, (double)B));
        /* the last side effect: nobody starts the next step before the update is written */
        if (share) targets[nt++] = sn_all_reduce_barrier(g, acc[t->n_acc], comm, r);
        st = sn_error_context(sn_graph_status(g), "building replica %d's graph for a global batch "
                              "of %lld", r, (long long)B);
    }
done:
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
    if (cp->n_y != sn_train_n_outputs(m))
        return sn_errorf(SN_ERR_INVALID, "model '%s' has %d outputs but %d labels were given",
                         m->name, sn_train_n_outputs(m), cp->n_y);
    cp->n_x = sn_train_n_inputs(m);
    cp->n_out = sn_train_n_outputs(m);
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
        cp->rep[r].x = cp->rep[r].y = cp->rep[r].w = SN_NONE;
    }
    sn_status st = SN_OK;
    bool share = sn_strategy_shares_variables(s);
    for (int r = 0; r < nl && st == SN_OK; r++) {
        sn_node *tg = NULL;
        int nt = 0;
        st = build_replica(m, cp, r, comm, share, &tg, &nt);
        if (st != SN_OK) break;
        sn_plan_opts po = sn_plan_opts_defaults();
        po.device = sn_strategy_replica_device(s, r);
        po.bf16_compute = m->train->opts.mixed_bfloat16;
        po.fp32_strict = m->train->opts.fp32_strict;
        po.private_vars = r > 0 && !share;
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
    return sn_train_plan_n(m, kind, batch, y_shape ? 1 : 0, y_shape, &y_dtype, out);
}

sn_status sn_train_plan_n(sn_model *m, sn_plan_kind kind, int64_t batch, int n_y,
                          const sn_shape *y_shapes, const sn_dtype *y_dtypes,
                          sn_cached_plan **out) {
    return sn_train_plan_w(m, kind, batch, n_y, y_shapes, y_dtypes, false, out);
}

sn_status sn_train_plan_w(sn_model *m, sn_plan_kind kind, int64_t batch, int n_y,
                          const sn_shape *y_shapes, const sn_dtype *y_dtypes, bool weighted,
                          sn_cached_plan **out) {
    sn_train_state *t = sn_train_state_get(m);
    if (!t) return SN_ERR_NOMEM;
    if (kind == SN_PLAN_PREDICT) n_y = 0, weighted = false;
    if (n_y < 0 || n_y > SN_FIT_MAX_IO)
        return sn_errorf(SN_ERR_INVALID, "%d labels; at most %d", n_y, SN_FIT_MAX_IO);
    for (int i = 0; i < t->n_plans; i++) {
        sn_cached_plan *c = &t->plans[i];
        bool same = c->kind == kind && c->batch == batch && c->n_y == n_y &&
                    c->weighted == weighted;
        for (int k = 0; same && k < n_y; k++)
            same = c->y_dtypes[k] == y_dtypes[k] && sn_shape_equal(&c->y_shapes[k], &y_shapes[k]);
        if (same) {
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
    sn_cached_plan c = {.kind = kind, .batch = batch, .y_dtype = n_y ? y_dtypes[0] : SN_F32,
                        .x = SN_NONE, .y = SN_NONE, .out = SN_NONE, .n_y = n_y,
                        .weighted = weighted, .w = SN_NONE};
    if (n_y) c.y_shape = y_shapes[0];
    for (int k = 0; k < n_y; k++) {
        c.y_shapes[k] = y_shapes[k];
        c.y_dtypes[k] = y_dtypes[k];
    }
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
