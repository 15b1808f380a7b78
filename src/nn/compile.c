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

#include "nn/train_impl.h"

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

void sn_train_state_free(sn_train_state *t) {
    if (!t) return;
    for (int i = 0; i < t->n_plans; i++) {
        sn_plan_free(t->plans[i].plan);
        free(t->plans[i].targets);
    }
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
    sn_dist_train_free(m->dist); /* its plans hold the old optimizer's nodes */
    m->dist = NULL;
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
static sn_status plan_targets(sn_graph *g, sn_cached_plan *cp, bool bf16) {
    sn_plan_free(cp->plan);
    cp->plan = NULL;
    sn_plan_opts po = sn_plan_opts_defaults();
    po.bf16_compute = bf16;
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
        if (t->compiled && o->from_logits) {
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
    return plan_targets(g, cp, o->mixed_bfloat16);
}

sn_status sn_train_plan(sn_model *m, sn_plan_kind kind, int64_t batch, const sn_shape *y_shape,
                        sn_dtype y_dtype, sn_cached_plan **out) {
    /* Under a strategy the training "plan" is the strategy's replicas (src/distribute). */
    if (kind == SN_PLAN_TRAIN && m->strategy)
        return sn_dist_train_plan(m, batch, y_shape, y_dtype, out);
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
    sn_status s = build_plan(m, &c);
    if (s != SN_OK) {
        sn_plan_free(c.plan);
        free(c.targets);
        return s;
    }
    t->plans[t->n_plans] = c;
    *out = &t->plans[t->n_plans++];
    return SN_OK;
}
