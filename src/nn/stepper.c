/* sn_stepper: stateful stepping of a sequence model, and sampling from logits (generation).
 *
 * The stepper builds, in the model's graph, the inference forward pass of every layer with the
 * LSTM/GRU initial states as inputs and their final states as extra plan targets; after each
 * run the final states are copied (batch * units floats per state) into host arrays that feed
 * the next run. One plan per `steps` value: typically the prompt length once, then 1; plans
 * are built once and reused, so a step allocates nothing.
 *
 * An Embedding that feeds an LSTM/GRU directly is folded into it: embedding row v times the
 * recurrent layer's input kernel plus its input bias is the same for every step that reads
 * id v, so a separate plan computes that projection for all V ids once ([V, G*U], the
 * "table"), and the step plans gather row id from it instead of running the input GEMM
 * (for char_lstm at batch 1 that GEMM read the whole 256 x 4096 kernel, 4 MB, per
 * character). The table is recomputed on the first run after sn_stepper_new or
 * sn_stepper_reset, which is therefore what to call after changing the weights.
 *
 * Precision bf16 (sn_stepper_set_precision): for Embedding -> LSTM -> Dense(linear) at batch 1
 * the steps bypass the step plans and run backend/cpu/cpu_lstm_step.c, which reads a bf16
 * copy of the recurrent kernel packed once (again after a reset): the step is bound by
 * reading that kernel, so half the bytes is nearly half the time. The table (f32) and the
 * carried states (f32) are the same as in the f32 path. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_lstm_step.h"
#include "nn/nn_impl.h"

#define STEPPER_MAX_PLANS 4
#define STEPPER_MAX_STATES 16
#define STEPPER_MAX_TABLES 8

typedef struct stepper_plan {
    int64_t steps;
    sn_plan *plan;
    sn_node x, out;
    sn_node sin[STEPPER_MAX_STATES], sout[STEPPER_MAX_STATES];
    sn_node tin[STEPPER_MAX_TABLES]; /* the tables, [V, G*U] inputs */
    uint64_t table_version;          /* of the tables copied into tin (0: none yet) */
} stepper_plan;

/* One Embedding (layer emb) feeding a recurrent layer (emb + 1). */
typedef struct stepper_table {
    int emb;
    int64_t rows, cols;
    sn_node expr; /* every row's projection, [V, G*U]: a target of the table plan */
} stepper_table;

struct sn_stepper {
    sn_model *m;
    int64_t batch, classes;
    int n_states;
    int64_t state_units[STEPPER_MAX_STATES];
    float *state[STEPPER_MAX_STATES]; /* [batch, units] each, owned */
    stepper_plan plans[STEPPER_MAX_PLANS];
    int n_plans;
    stepper_table tables[STEPPER_MAX_TABLES];
    int n_tables;
    sn_plan *table_plan;
    uint64_t table_version; /* bumped each time the tables are computed */
    bool tables_stale;
    sn_dtype precision;    /* SN_F32 (the step plans) or SN_BF16 (cpu_lstm_step) */
    sn_lstm_step *packed;  /* bf16: the packed weights, NULL until the next run packs them */
    float *logits;         /* bf16: [classes], the last step's output */
};

void sn_stepper_free(sn_stepper *s) {
    if (!s) return;
    for (int i = 0; i < s->n_plans; i++) sn_plan_free(s->plans[i].plan);
    for (int i = 0; i < s->n_states; i++) free(s->state[i]);
    sn_plan_free(s->table_plan);
    sn_lstm_step_free(s->packed);
    free(s->logits);
    free(s);
}

void sn_stepper_reset(sn_stepper *s) {
    for (int i = 0; s && i < s->n_states; i++)
        memset(s->state[i], 0, sizeof(float) * (size_t)(s->batch * s->state_units[i]));
    if (!s) return;
    s->tables_stale = true;
    sn_lstm_step_free(s->packed); /* the weights may have changed: packed again at the next run */
    s->packed = NULL;
}

/* Finds the Embedding -> LSTM/GRU pairs and builds the plan of their tables. */
static sn_status add_tables(sn_stepper *s) {
    sn_model *m = s->m;
    sn_graph *g = m->g;
    sn_node targets[STEPPER_MAX_TABLES];
    for (int i = 0; i + 1 < m->n_layers && s->n_tables < STEPPER_MAX_TABLES; i++) {
        sn_layer *e = m->layers[i], *r = m->layers[i + 1];
        if (!sn_layer_is_embedding(e) || sn_layer_state_count(r) == 0) continue;
        sn_shape es = sn_node_shape(g, e->vars[0]);
        sn_node rows = sn_reshape(g, e->vars[0], &(sn_shape){.ndim = 3, .dim = {1, es.dim[0], es.dim[1]}});
        sn_node xw = sn_rnn_input_projection(r, g, rows);
        sn_shape xs = sn_node_shape(g, xw);
        stepper_table *t = &s->tables[s->n_tables];
        t->emb = i;
        t->rows = es.dim[0];
        t->cols = xs.dim[2];
        t->expr = sn_reshape(g, xw, &(sn_shape){.ndim = 2, .dim = {t->rows, t->cols}});
        targets[s->n_tables++] = t->expr;
        i++; /* the recurrent layer is taken */
    }
    if (s->n_tables == 0) return SN_OK;
    SN_TRY(sn_error_context(sn_graph_status(g), "stepper: model '%s'", m->name));
    sn_plan_opts po = sn_plan_opts_defaults();
    SN_TRY(sn_plan_new(&s->table_plan, g, s->n_tables, targets, &po));
    s->tables_stale = true;
    return SN_OK;
}

static const stepper_table *table_at(const sn_stepper *s, int layer, int *k) {
    for (int j = 0; j < s->n_tables; j++)
        if (s->tables[j].emb == layer) {
            *k = j;
            return &s->tables[j];
        }
    return NULL;
}

sn_status sn_stepper_new(sn_model *m, int64_t batch, sn_stepper **out) {
    if (!m || !out) return sn_errorf(SN_ERR_INVALID, "sn_stepper_new: NULL argument");
    *out = NULL;
    if (!m->built) return sn_errorf(SN_ERR_STATE, "stepper: model '%s' is not built", m->name);
    if (m->dtype != SN_F32 || m->input_shape.ndim != 1)
        return sn_errorf(SN_ERR_UNSUPPORTED, "stepper: model '%s' must be an f32 sequence model "
                         "with input shape (steps,), got rank %d", m->name, m->input_shape.ndim);
    if (batch < 1) return sn_errorf(SN_ERR_INVALID, "stepper: batch %lld, expected >= 1", (long long)batch);
    if (m->fn) /* the stepper walks layers[] as a chain */
        return sn_errorf(SN_ERR_UNSUPPORTED, "stepper: model '%s' is Functional; generation "
                         "steps Sequential models", m->name);
    sn_stepper *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    s->m = m;
    s->batch = batch;
    s->precision = SN_F32;
    for (int i = 0; i < m->n_layers; i++) {
        const sn_layer *l = m->layers[i];
        for (int k = 0; k < sn_layer_state_count(l); k++) {
            if (s->n_states == STEPPER_MAX_STATES) {
                sn_stepper_free(s);
                return sn_errorf(SN_ERR_UNSUPPORTED, "stepper: more than %d recurrent states",
                                 STEPPER_MAX_STATES);
            }
            s->state_units[s->n_states] = l->rnn.units;
            s->state[s->n_states] = sn_calloc((size_t)(batch * l->rnn.units), sizeof(float));
            if (!s->state[s->n_states++]) {
                sn_stepper_free(s);
                return SN_ERR_NOMEM;
            }
        }
    }
    sn_shape os = m->layers[m->n_layers - 1]->out_shape;
    s->classes = os.dim[os.ndim - 1];
    sn_status st = add_tables(s);
    if (st != SN_OK) {
        sn_stepper_free(s);
        return st;
    }
    *out = s;
    return SN_OK;
}

static sn_status build_plan(sn_stepper *s, int64_t steps, stepper_plan *sp) {
    sn_model *m = s->m;
    sn_graph *g = m->g;
    sp->steps = steps;
    sp->x = sn_input(g, "stepper_x", SN_F32, &(sn_shape){.ndim = 2, .dim = {s->batch, steps}});
    sn_node y = sp->x;
    int k = 0;
    for (int i = 0; i < m->n_layers && sn_graph_status(g) == SN_OK; i++) {
        sn_layer *l = m->layers[i];
        int tk = 0;
        const stepper_table *t = table_at(s, i, &tk);
        if (t) { /* Embedding + recurrent layer: gather the projected rows */
            sn_layer *r = m->layers[++i];
            int ns = sn_layer_state_count(r);
            for (int j = 0; j < ns; j++)
                sp->sin[k + j] = sn_input(g, "stepper_state", SN_F32,
                                          &(sn_shape){.ndim = 2, .dim = {s->batch, r->rnn.units}});
            sp->tin[tk] = sn_input(g, "stepper_table", SN_F32,
                                   &(sn_shape){.ndim = 2, .dim = {t->rows, t->cols}});
            sn_node ids = sn_node_dtype(g, y) == SN_I32 ? y : sn_cast(g, y, SN_I32);
            y = sn_rnn_forward_projected(r, g, sn_gather(g, sp->tin[tk], ids), sp->sin + k,
                                         sp->sout + k);
            k += ns;
            continue;
        }
        int ns = sn_layer_state_count(l);
        if (ns == 0) {
            y = l->vt->forward(l, g, y, false, NULL);
            continue;
        }
        for (int j = 0; j < ns; j++)
            sp->sin[k + j] = sn_input(g, "stepper_state", SN_F32,
                                      &(sn_shape){.ndim = 2, .dim = {s->batch, l->rnn.units}});
        y = sn_rnn_forward_states(l, g, y, sp->sin + k, sp->sout + k);
        k += ns;
    }
    SN_TRY(sn_error_context(sn_graph_status(g), "stepper: building model '%s'", m->name));
    sn_shape ys = sn_node_shape(g, y);
    if (ys.ndim == 3) { /* return_sequences: the last step */
        y = sn_slice(g, y, (int64_t[]){0, ys.dim[1] - 1, 0}, (int64_t[]){ys.dim[0], 1, ys.dim[2]});
        y = sn_reshape(g, y, &(sn_shape){.ndim = 2, .dim = {ys.dim[0], ys.dim[2]}});
    }
    sp->out = y;
    sn_node targets[1 + STEPPER_MAX_STATES] = {y};
    for (int j = 0; j < s->n_states; j++) targets[1 + j] = sp->sout[j];
    SN_TRY(sn_graph_status(g));
    sn_plan_opts po = sn_plan_opts_defaults();
    return sn_plan_new(&sp->plan, g, 1 + s->n_states, targets, &po);
}

/* Why the bf16 step cannot run model m at this batch (a message), or NULL when it can. */
static const char *bf16_refusal(const sn_stepper *s, char *buf, size_t n) {
    const sn_model *m = s->m;
    if (!sn_lstm_step_bf16_supported())
        return "this CPU has no AVX512-BF16 (or SN_CPU_ISA asks for less than avx512)";
    if (s->batch != 1) {
        snprintf(buf, n, "batch %lld, the bf16 step runs batch 1", (long long)s->batch);
        return buf;
    }
    const sn_layer *d = m->n_layers == 3 ? m->layers[2] : NULL;
    if (!d || s->n_tables != 1 || s->tables[0].emb != 0 ||
        strcmp(m->layers[1]->vt->class_name, "LSTM") != 0 ||
        strcmp(d->vt->class_name, "Dense") != 0 || d->dense.activation != SN_ACT_NONE ||
        d->in_shape.ndim < 1) {
        snprintf(buf, n, "model '%s' is not Embedding -> LSTM -> Dense(linear), the only model "
                 "the bf16 step runs", m->name);
        return buf;
    }
    return NULL;
}

sn_status sn_stepper_set_precision(sn_stepper *s, sn_dtype dtype) {
    if (!s) return sn_errorf(SN_ERR_INVALID, "sn_stepper_set_precision: stepper is NULL");
    if (dtype != SN_F32 && dtype != SN_BF16)
        return sn_errorf(SN_ERR_INVALID, "stepper precision %s, expected f32 or bf16",
                         sn_dtype_name(dtype));
    if (dtype == SN_BF16) {
        char b[200];
        const char *why = bf16_refusal(s, b, sizeof b);
        if (why) return sn_errorf(SN_ERR_UNSUPPORTED, "stepper precision bf16: %s", why);
        if (!s->logits && !(s->logits = sn_calloc((size_t)s->classes, sizeof(float))))
            return SN_ERR_NOMEM;
    }
    s->precision = dtype;
    return SN_OK;
}

sn_dtype sn_stepper_precision(const sn_stepper *s) { return s ? s->precision : SN_F32; }

static sn_status run_tables(sn_stepper *s) {
    if (s->n_tables && s->tables_stale) {
        SN_TRY(sn_error_context(sn_plan_run(s->table_plan, 1, NULL, NULL), "stepper: tables"));
        s->table_version++;
        s->tables_stale = false;
    }
    return SN_OK;
}

/* The bf16 steps: Embedding (folded into the table) -> LSTM -> Dense, batch 1. */
static sn_status run_bf16(sn_stepper *s, const float *x, int64_t steps, const float **out) {
    sn_model *m = s->m;
    SN_TRY(run_tables(s));
    const stepper_table *t = &s->tables[0];
    const float *table = sn_plan_buffer(s->table_plan, t->expr);
    if (!table) return sn_errorf(SN_ERR_STATE, "stepper: table 0 has no buffer");
    if (!s->packed) {
        const sn_layer *r = m->layers[1], *d = m->layers[2];
        sn_graph *g = m->g;
        SN_TRY(sn_error_context(
            sn_lstm_step_new(sn_variable_data(g, r->vars[1]), r->rnn.units,
                             sn_variable_data(g, d->vars[0]),
                             d->dense.use_bias ? sn_variable_data(g, d->vars[1]) : NULL,
                             s->classes, &s->packed),
            "stepper: model '%s'", m->name));
    }
    for (int64_t i = 0; i < steps; i++) {
        float v = x[i];
        if (!(v >= 0 && v < (float)t->rows) || v != floorf(v))
            return sn_errorf(SN_ERR_INVALID, "stepper: input id %g at step %lld is not an "
                             "integer in [0, %lld)", (double)v, (long long)i, (long long)t->rows);
        sn_lstm_step_run(s->packed, table + (int64_t)v * t->cols, s->state[0], s->state[1],
                         s->logits);
    }
    *out = s->logits;
    return SN_OK;
}

sn_status sn_stepper_run(sn_stepper *s, const float *x, int64_t steps, const float **out,
                         int64_t *classes) {
    if (!s || !x || !out) return sn_errorf(SN_ERR_INVALID, "sn_stepper_run: NULL argument");
    if (steps < 1) return sn_errorf(SN_ERR_INVALID, "stepper: steps %lld, expected >= 1", (long long)steps);
    if (s->precision == SN_BF16) {
        if (classes) *classes = s->classes;
        return run_bf16(s, x, steps, out);
    }
    stepper_plan *sp = NULL;
    for (int i = 0; i < s->n_plans; i++)
        if (s->plans[i].steps == steps) sp = &s->plans[i];
    if (!sp) {
        if (s->n_plans == STEPPER_MAX_PLANS) { /* keep the most recent: drop the oldest */
            sn_plan_free(s->plans[0].plan);
            memmove(s->plans, s->plans + 1, sizeof s->plans[0] * (STEPPER_MAX_PLANS - 1));
            s->n_plans--;
        }
        sp = &s->plans[s->n_plans];
        memset(sp, 0, sizeof *sp);
        sn_status st = build_plan(s, steps, sp);
        if (st != SN_OK) {
            sn_plan_free(sp->plan);
            return st;
        }
        s->n_plans++;
    }
    SN_TRY(run_tables(s));
    if (sp->table_version != s->table_version) {
        for (int j = 0; j < s->n_tables; j++) {
            const stepper_table *t = &s->tables[j];
            const float *f = sn_plan_buffer(s->table_plan, t->expr);
            if (!f) return sn_errorf(SN_ERR_STATE, "stepper: table %d has no buffer", j);
            SN_TRY(sn_plan_set_input(sp->plan, sp->tin[j], f,
                                     sizeof(float) * (size_t)(t->rows * t->cols)));
        }
        sp->table_version = s->table_version;
    }
    SN_TRY(sn_plan_set_input(sp->plan, sp->x, x, sizeof(float) * (size_t)(s->batch * steps)));
    for (int j = 0; j < s->n_states; j++)
        SN_TRY(sn_plan_set_input(sp->plan, sp->sin[j], s->state[j],
                                 sizeof(float) * (size_t)(s->batch * s->state_units[j])));
    SN_TRY(sn_error_context(sn_plan_run(sp->plan, 1, NULL, NULL), "stepper"));
    for (int j = 0; j < s->n_states; j++) {
        const float *f = sn_plan_buffer(sp->plan, sp->sout[j]);
        if (!f) return sn_errorf(SN_ERR_STATE, "stepper: state %d has no buffer", j);
        memcpy(s->state[j], f, sizeof(float) * (size_t)(s->batch * s->state_units[j]));
    }
    *out = sn_plan_buffer(sp->plan, sp->out);
    if (classes) *classes = s->classes;
    return *out ? SN_OK : sn_errorf(SN_ERR_STATE, "stepper: the output has no buffer");
}

sn_status sn_sample_logits(const float *logits, int64_t n, double temperature, uint64_t seed,
                           uint64_t index, int32_t *out) {
    if (!logits || n < 1 || !out)
        return sn_errorf(SN_ERR_INVALID, "sn_sample_logits: no logits");
    if (!(temperature > 0) || isinf(temperature))
        return sn_errorf(SN_ERR_INVALID, "temperature %g, expected a finite value > 0", temperature);
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, (double)logits[i] / temperature);
    for (int64_t i = 0; i < n; i++) sum += exp((double)logits[i] / temperature - mx);
    uint32_t r[4];
    sn_philox(seed, 0x5A4D504C45ull /* "sample" stream */, index, r);
    double u = ((double)(r[0] >> 5) * 67108864.0 + (double)(r[1] >> 6)) / 9007199254740992.0;
    double target = u * sum, acc = 0;
    int32_t pick = (int32_t)(n - 1);
    for (int64_t i = 0; i < n; i++) {
        acc += exp((double)logits[i] / temperature - mx);
        if (acc > target) {
            pick = (int32_t)i;
            break;
        }
    }
    *out = pick;
    return SN_OK;
}
