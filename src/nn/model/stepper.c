/* sn_stepper: stateful stepping of a sequence model, and sampling from logits (generation).
 *
 * The stepper builds, in the model's graph, the inference forward pass of every layer with the
 * LSTM/GRU initial states as inputs and their final states as extra plan targets. One plan
 * per `steps` value: typically the prompt length once, then 1; plans are built once and
 * reused, so a step allocates nothing. The carried states live in the input buffers of the
 * plan that ran last (the "owner"): after a run its final states are copied straight into its
 * own state inputs (batch * units floats per state, one copy), and the host arrays state[]
 * are filled only when another plan (another `steps`, the other precision) takes them over,
 * so a generated character costs no input copies and no per-step size checks.
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
 * the steps run a plan of their own, built once with bf16_compute: the table row gathered by
 * id, then one lstm_dense_step op (graph/op_rnn.h), for which the CPU kernel table picks the
 * bf16 step (backend/cpu/cpu_lstm_step.c). That kernel reads a bf16 copy of the recurrent
 * kernel, packed at its first run and again whenever the weights change: the step is bound
 * by reading that kernel, so half the bytes is nearly half the time. Where the table has no
 * such kernel (no AVX512-BF16, SN_CPU_ISA or SN_KERNELS asking for less) the plan would run
 * the op's f32 reference, so bf16 is refused instead. The table (f32) and the carried states
 * (f32) are the same as in the f32 path.
 *
 * Models with attention (the char_transformer presets: TokenAndPositionEmbedding and decoder
 * blocks, nn/layers/layers_attention.h) carry the context instead: per block a cache of keys and
 * values [batch, context, H, D] on the host, and the position. A run of s tokens computes only
 * those s positions (attention_cached reads the cache below the position, which is a plan
 * input read at run time, so one plan serves every position), then appends their keys and
 * values to the cache and to the plan's own input buffers (each plan remembers how many cache
 * rows it holds, so a step copies only the new rows). When the context is full, the newest
 * half of it is run again from position 0 (learned positions are absolute, so old keys cannot
 * be shifted): every context/2 steps one prefill of context/2 tokens, a flat cost per token on
 * average. */
#include <math.h>
#include <string.h>

#include "graph/op_rnn.h"
#include "nn/layers/layers_attention.h"
#include "nn/nn_impl.h"
#include "nn/train/train_impl.h"

#define STEPPER_MAX_PLANS 4
#define STEPPER_MAX_STATES 16
#define STEPPER_MAX_TABLES 8
#define STEPPER_MAX_CTX_STEPS 256

typedef struct stepper_plan {
    int64_t steps;
    sn_node pos, pos_ids;      /* context models: the inputs of the position */
    int64_t synced;            /* context models: cache rows already in this plan's inputs */
    uint64_t epoch;            /* ... valid while it equals the stepper's epoch */
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
    sn_dtype precision;    /* SN_F32 (the step plans) or SN_BF16 (bf16_plan) */
    /* bf16: the one-step plan (built by the first sn_stepper_set_precision(bf16)): inputs the
     * id, the table and the states; target lstm_dense_step's h' | c' | logits */
    sn_plan *bf16_plan;
    bool bf16_built; /* the nodes below exist (built once, even when a plan is refused) */
    sn_node bx, btab, bh, bc, bout;
    uint64_t bf16_table_version; /* of the table copied into btab (0: none yet) */
    /* context models (attention): state[2k], state[2k+1] are block k's key and value caches
     * [batch, ctx, row] (row = H * D), not copied whole per run */
    bool ctx_mode;
    int64_t ctx, pos, cache_row[STEPPER_MAX_STATES];
    int32_t *hist;   /* [batch, ctx]: the ids at positions 0 .. pos - 1 */
    float *window;   /* [batch, ctx]: scratch for a re-run of the newest half */
    uint64_t epoch;  /* bumped when the caches restart */
    /* Recurrent models: the plan whose state inputs hold the carried states (NULL: state[]
     * holds them), and those inputs (owner_n of them) */
    sn_plan *owner;
    sn_node owner_in[STEPPER_MAX_STATES];
    int owner_n;
};

void sn_stepper_free(sn_stepper *s) {
    if (!s) return;
    for (int i = 0; i < s->n_plans; i++) sn_plan_free(s->plans[i].plan);
    for (int i = 0; i < s->n_states; i++) free(s->state[i]);
    sn_plan_free(s->table_plan);
    sn_plan_free(s->bf16_plan);
    free(s->hist);
    free(s->window);
    free(s);
}

void sn_stepper_reset(sn_stepper *s) {
    if (s) s->owner = NULL; /* state[] holds the states again: zeros */
    for (int i = 0; s && i < s->n_states; i++)
        memset(s->state[i], 0, sizeof(float) * (size_t)(s->batch * s->state_units[i]));
    if (!s) return;
    s->pos = 0;
    s->epoch++;
    s->tables_stale = true; /* the bf16 kernel repacks by itself when the weights change */
}

/* The stepper's plans go where the model was compiled to run (sn_compile_opts.device). */
static sn_plan_opts stepper_plan_opts(const sn_model *m) {
    sn_plan_opts po = sn_plan_opts_defaults();
    if (m->train && m->train->compiled && m->train->opts.device[0]) {
        po.device = m->train->opts.device;
        po.fp32_strict = m->train->opts.fp32_strict;
    }
    return po;
}

static size_t state_bytes(const sn_stepper *s, int j) {
    return sizeof(float) * (size_t)(s->batch * s->state_units[j]);
}

/* The carried states back into state[] from the plan that holds them, if one does. */
static sn_status states_home(sn_stepper *s) {
    if (!s->owner) return SN_OK;
    for (int j = 0; j < s->owner_n; j++) {
        const float *b = sn_plan_buffer(s->owner, s->owner_in[j]);
        if (!b) return sn_errorf(SN_ERR_STATE, "stepper: state %d has no buffer", j);
        memcpy(s->state[j], b, state_bytes(s, j));
    }
    s->owner = NULL;
    return SN_OK;
}

/* Plan p (state inputs in[0..n)) takes the carried states over, unless it holds them. */
static sn_status states_to(sn_stepper *s, sn_plan *p, const sn_node *in, int n) {
    if (s->owner == p) return SN_OK;
    SN_TRY(states_home(s));
    for (int j = 0; j < n; j++) {
        float *b = sn_plan_buffer(p, in[j]);
        if (!b) return sn_errorf(SN_ERR_STATE, "stepper: state %d has no buffer", j);
        memcpy(b, s->state[j], state_bytes(s, j));
        s->owner_in[j] = in[j];
    }
    s->owner = p;
    s->owner_n = n;
    return SN_OK;
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
    sn_plan_opts po = stepper_plan_opts(m);
    SN_TRY(sn_plan_new(&s->table_plan, g, s->n_tables, targets, &po));
    s->tables_stale = true;
    return SN_OK;
}

/* Context models: the context (the position embedding's length, layer 0) and one key and
 * one value cache per block. */
static sn_status ctx_setup(sn_stepper *s) {
    sn_model *m = s->m;
    s->ctx = sn_attn_layer_context(m->layers[0]);
    if (s->ctx < 2)
        return sn_errorf(SN_ERR_UNSUPPORTED, "stepper: model '%s' has attention; stepping it "
                         "needs a TokenAndPositionEmbedding first (the char_transformer "
                         "presets), got %s", m->name, m->layers[0]->vt->class_name);
    for (int i = 0; i < m->n_layers; i++) {
        int64_t heads, hd;
        if (sn_layer_state_count(m->layers[i]) > 0)
            return sn_errorf(SN_ERR_UNSUPPORTED, "stepper: model '%s' mixes attention with a "
                             "recurrent layer ('%s'); stepping such a model is not implemented",
                             m->name, m->layers[i]->name);
        if (!sn_attn_layer_cache_dims(m->layers[i], &heads, &hd)) continue;
        if (s->n_states + 2 > STEPPER_MAX_STATES)
            return sn_errorf(SN_ERR_UNSUPPORTED, "stepper: more than %d attention blocks",
                             STEPPER_MAX_STATES / 2);
        for (int k = 0; k < 2; k++) {
            s->cache_row[s->n_states] = heads * hd;
            s->state[s->n_states] = sn_calloc((size_t)(s->batch * s->ctx * heads * hd),
                                              sizeof(float));
            if (!s->state[s->n_states++]) return SN_ERR_NOMEM;
        }
    }
    s->hist = sn_calloc((size_t)(s->batch * s->ctx), sizeof *s->hist);
    s->window = sn_calloc((size_t)(s->batch * s->ctx), sizeof *s->window);
    return s->hist && s->window ? SN_OK : SN_ERR_NOMEM;
}

/* The step plan of a context model: inputs x, pos, pos_ids and the caches; targets the
 * output and every block's new keys and values. */
static sn_status build_ctx_plan(sn_stepper *s, int64_t steps, stepper_plan *sp) {
    sn_model *m = s->m;
    sn_graph *g = m->g;
    sp->steps = steps;
    sp->x = sn_input(g, "stepper_x", SN_F32, &(sn_shape){.ndim = 2, .dim = {s->batch, steps}});
    sp->pos = sn_input(g, "stepper_pos", SN_I32, &(sn_shape){.ndim = 1, .dim = {1}});
    sp->pos_ids = sn_input(g, "stepper_pos_ids", SN_I32, &(sn_shape){.ndim = 1, .dim = {steps}});
    sn_node y = sp->x;
    int k = 0;
    for (int i = 0; i < m->n_layers && sn_graph_status(g) == SN_OK; i++) {
        sn_layer *l = m->layers[i];
        sn_attn_step_io io = {.pos = sp->pos, .pos_ids = sp->pos_ids};
        int64_t heads, hd;
        bool block = sn_attn_layer_cache_dims(l, &heads, &hd);
        if (block) {
            sn_shape cs = {.ndim = 4, .dim = {s->batch, s->ctx, heads, hd}};
            io.k_cache = sp->sin[k] = sn_input(g, "stepper_k_cache", SN_F32, &cs);
            io.v_cache = sp->sin[k + 1] = sn_input(g, "stepper_v_cache", SN_F32, &cs);
        }
        y = sn_attn_layer_step(l, g, y, &io);
        if (block) {
            sp->sout[k] = io.k_new;
            sp->sout[k + 1] = io.v_new;
            k += 2;
        }
    }
    SN_TRY(sn_error_context(sn_graph_status(g), "stepper: building model '%s'", m->name));
    sn_shape ys = sn_node_shape(g, y);
    y = sn_slice(g, y, (int64_t[]){0, ys.dim[1] - 1, 0}, (int64_t[]){ys.dim[0], 1, ys.dim[2]});
    sp->out = sn_reshape(g, y, &(sn_shape){.ndim = 2, .dim = {ys.dim[0], ys.dim[2]}});
    sn_node targets[1 + STEPPER_MAX_STATES] = {sp->out};
    for (int j = 0; j < s->n_states; j++) targets[1 + j] = sp->sout[j];
    SN_TRY(sn_graph_status(g));
    sn_plan_opts po = stepper_plan_opts(m);
    return sn_plan_new(&sp->plan, g, 1 + s->n_states, targets, &po);
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
    s->epoch = 1;
    for (int i = 0; i < m->n_layers; i++)
        if (sn_layer_needs_context(m->layers[i])) s->ctx_mode = true;
    if (s->ctx_mode) {
        sn_status st = ctx_setup(s);
        if (st != SN_OK) {
            sn_stepper_free(s);
            return st;
        }
    }
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
    if (s->ctx_mode) return build_ctx_plan(s, steps, sp);
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
    sn_plan_opts po = stepper_plan_opts(m);
    return sn_plan_new(&sp->plan, g, 1 + s->n_states, targets, &po);
}

/* Why the bf16 step cannot run model m at this batch (a message), or NULL when its plan can be
 * built (whether the kernel table has the bf16 kernel is asked of the plan, build_bf16). */
static const char *bf16_refusal(const sn_stepper *s, char *buf, size_t n) {
    const sn_model *m = s->m;
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

/* The bf16 step's nodes, once per stepper (a refused plan does not add them again): id -> the
 * table's row (Embedding and the LSTM's input projection) -> lstm_dense_step with the LSTM's
 * recurrent kernel and the Dense's kernel and bias. */
static sn_status build_bf16_nodes(sn_stepper *s) {
    sn_model *m = s->m;
    sn_graph *g = m->g;
    const sn_layer *r = m->layers[1], *d = m->layers[2];
    const stepper_table *t = &s->tables[0];
    int64_t U = r->rnn.units, V = s->classes;
    s->bx = sn_input(g, "stepper_bf16_x", SN_F32, &(sn_shape){.ndim = 2, .dim = {1, 1}});
    s->btab = sn_input(g, "stepper_bf16_table", SN_F32,
                       &(sn_shape){.ndim = 2, .dim = {t->rows, t->cols}});
    s->bh = sn_input(g, "stepper_bf16_h", SN_F32, &(sn_shape){.ndim = 2, .dim = {1, U}});
    s->bc = sn_input(g, "stepper_bf16_c", SN_F32, &(sn_shape){.ndim = 2, .dim = {1, U}});
    sn_node xw = sn_reshape(g, sn_gather(g, s->btab, sn_cast(g, s->bx, SN_I32)),
                            &(sn_shape){.ndim = 2, .dim = {1, t->cols}});
    sn_node bd = d->vars[1];
    if (!d->dense.use_bias) { /* zeros: the kernel adds them exactly */
        float *z = sn_calloc((size_t)V, sizeof *z);
        if (!z) return SN_ERR_NOMEM;
        bd = sn_const(g, SN_F32, &(sn_shape){.ndim = 1, .dim = {V}}, z);
        free(z);
    }
    s->bout = sn_lstm_dense_step(g, xw, r->vars[1], s->bh, s->bc, d->vars[0], bd);
    SN_TRY(sn_error_context(sn_graph_status(g), "stepper: building the bf16 step of model '%s'",
                            m->name));
    s->bf16_built = true;
    return SN_OK;
}

/* The bf16 step plan, under bf16_compute. Refused (and not kept) unless the plan's kernel for
 * lstm_dense_step is the bf16 one: the CPU table's choice, which nn does not make itself. */
static sn_status build_bf16(sn_stepper *s) {
    if (!s->bf16_built) SN_TRY(build_bf16_nodes(s));
    sn_plan_opts po = sn_plan_opts_defaults();
    po.bf16_compute = true;
    sn_plan *p = NULL;
    SN_TRY(sn_plan_new(&p, s->m->g, 1, &s->bout, &po));
    const char *impl = NULL;
    sn_plan_profile_entry(p, sn_plan_call_of(p, s->bout), NULL, &impl, NULL);
    if (!impl || strcmp(impl, "avx512_bf16") != 0) {
        sn_plan_free(p);
        return sn_errorf(SN_ERR_UNSUPPORTED, "stepper precision bf16: the kernel table has no "
                         "bf16 LSTM step here (kernel '%s'): this CPU has no AVX512-BF16, or "
                         "SN_CPU_ISA or SN_KERNELS ask for less", impl ? impl : "none");
    }
    s->bf16_plan = p;
    s->bf16_table_version = 0;
    return SN_OK;
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
        if (!s->bf16_plan) SN_TRY(build_bf16(s));
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

/* The bf16 steps: Embedding (folded into the table) -> LSTM -> Dense, batch 1, one plan run
 * per id. */
static sn_status run_bf16(sn_stepper *s, const float *x, int64_t steps, const float **out) {
    SN_TRY(run_tables(s));
    const stepper_table *t = &s->tables[0];
    sn_plan *p = s->bf16_plan;
    if (s->bf16_table_version != s->table_version) {
        const float *table = sn_plan_buffer(s->table_plan, t->expr);
        if (!table) return sn_errorf(SN_ERR_STATE, "stepper: table 0 has no buffer");
        SN_TRY(sn_plan_set_input(p, s->btab, table, sizeof(float) * (size_t)(t->rows * t->cols)));
        s->bf16_table_version = s->table_version;
    }
    int64_t U = s->state_units[0];
    size_t sb = sizeof(float) * (size_t)U;
    /* The plan's own buffers, written and read in place: the id, and h and c, which hold the
     * carried states while this plan owns them (states_to). */
    SN_TRY(states_to(s, p, (sn_node[]){s->bh, s->bc}, 2));
    const float *y = sn_plan_buffer(p, s->bout);
    float *xb = sn_plan_buffer(p, s->bx), *hb = sn_plan_buffer(p, s->bh),
          *cb = sn_plan_buffer(p, s->bc);
    if (!y || !xb || !hb || !cb)
        return sn_errorf(SN_ERR_STATE, "stepper: the bf16 step has no %s buffer",
                         y ? "input" : "output");
    for (int64_t i = 0; i < steps; i++) {
        float v = x[i];
        if (!(v >= 0 && v < (float)t->rows) || v != floorf(v))
            return sn_errorf(SN_ERR_INVALID, "stepper: input id %g at step %lld is not an "
                             "integer in [0, %lld)", (double)v, (long long)i, (long long)t->rows);
        *xb = v;
        SN_TRY(sn_error_context(sn_plan_run(p, 1, NULL, NULL), "stepper: bf16 step"));
        memcpy(hb, y, sb); /* h' | c' | logits: the next step's states */
        memcpy(cb, y + U, sb);
    }
    *out = y + 2 * U;
    return SN_OK;
}

/* The plan for `steps` tokens, built on first use (the oldest dropped past the limit). */
static sn_status plan_for(sn_stepper *s, int64_t steps, stepper_plan **out) {
    for (int i = 0; i < s->n_plans; i++)
        if (s->plans[i].steps == steps) {
            *out = &s->plans[i];
            return SN_OK;
        }
    if (s->n_plans == STEPPER_MAX_PLANS) { /* keep the most recent: drop the oldest */
        if (s->owner == s->plans[0].plan) SN_TRY(states_home(s));
        sn_plan_free(s->plans[0].plan);
        memmove(s->plans, s->plans + 1, sizeof s->plans[0] * (STEPPER_MAX_PLANS - 1));
        s->n_plans--;
    }
    stepper_plan *sp = &s->plans[s->n_plans];
    memset(sp, 0, sizeof *sp);
    sn_status st = build_plan(s, steps, sp);
    if (st != SN_OK) {
        sn_plan_free(sp->plan);
        return st;
    }
    s->n_plans++;
    *out = sp;
    return SN_OK;
}

/* Context models: `steps` tokens per batch row (x [batch, steps]) at the current position,
 * which fit the context (run_ctx makes room first). */
static sn_status run_ctx_fit(sn_stepper *s, const float *x, int64_t steps, const float **out) {
    stepper_plan *sp = NULL;
    SN_TRY(plan_for(s, steps, &sp));
    if (sp->epoch != s->epoch) {
        sp->epoch = s->epoch;
        sp->synced = 0;
    }
    int64_t B = s->batch, C = s->ctx, pos = s->pos;
    for (int j = 0; j < s->n_states; j++) { /* the rows this plan has not seen yet */
        float *buf = sn_plan_buffer(sp->plan, sp->sin[j]);
        if (!buf) return sn_errorf(SN_ERR_STATE, "stepper: cache %d has no buffer", j);
        int64_t r = s->cache_row[j];
        for (int64_t b = 0; pos > sp->synced && b < B; b++)
            memcpy(buf + (b * C + sp->synced) * r, s->state[j] + (b * C + sp->synced) * r,
                   sizeof(float) * (size_t)((pos - sp->synced) * r));
    }
    int32_t p32 = (int32_t)pos, ids[STEPPER_MAX_CTX_STEPS];
    int32_t *pid = steps <= STEPPER_MAX_CTX_STEPS ? ids : sn_malloc(sizeof *pid * (size_t)steps);
    if (!pid) return SN_ERR_NOMEM;
    for (int64_t i = 0; i < steps; i++) pid[i] = (int32_t)(pos + i);
    sn_status st = sn_plan_set_input(sp->plan, sp->pos_ids, pid, sizeof *pid * (size_t)steps);
    if (pid != ids) free(pid);
    SN_TRY(st);
    SN_TRY(sn_plan_set_input(sp->plan, sp->pos, &p32, sizeof p32));
    SN_TRY(sn_plan_set_input(sp->plan, sp->x, x, sizeof(float) * (size_t)(B * steps)));
    SN_TRY(sn_error_context(sn_plan_run(sp->plan, 1, NULL, NULL), "stepper"));
    for (int j = 0; j < s->n_states; j++) { /* append the new keys and values */
        const float *f = sn_plan_buffer(sp->plan, sp->sout[j]);
        float *buf = sn_plan_buffer(sp->plan, sp->sin[j]);
        if (!f || !buf) return sn_errorf(SN_ERR_STATE, "stepper: cache %d has no buffer", j);
        int64_t r = s->cache_row[j];
        for (int64_t b = 0; b < B; b++) {
            size_t n = sizeof(float) * (size_t)(steps * r);
            memcpy(s->state[j] + (b * C + pos) * r, f + b * steps * r, n);
            memcpy(buf + (b * C + pos) * r, f + b * steps * r, n);
        }
    }
    sp->synced = pos + steps;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < steps; i++) s->hist[b * C + pos + i] = (int32_t)x[b * steps + i];
    s->pos = pos + steps;
    *out = sn_plan_buffer(sp->plan, sp->out);
    return *out ? SN_OK : sn_errorf(SN_ERR_STATE, "stepper: the output has no buffer");
}

static sn_status run_ctx(sn_stepper *s, const float *x, int64_t steps, const float **out,
                         int64_t *classes) {
    int64_t B = s->batch, C = s->ctx;
    if (classes) *classes = s->classes;
    if (steps > C) { /* only the last C tokens can be seen: the rest are dropped */
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < C; i++) s->window[b * C + i] = x[b * steps + steps - C + i];
        sn_stepper_reset(s);
        return run_ctx_fit(s, s->window, C, out);
    }
    if (s->pos + steps > C) { /* full: start over from the newest half, then these */
        int64_t keep = C / 2 < C - steps ? C / 2 : C - steps;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < keep; i++)
                s->window[b * keep + i] = (float)s->hist[b * C + s->pos - keep + i];
        sn_stepper_reset(s);
        if (keep > 0) SN_TRY(run_ctx_fit(s, s->window, keep, out));
    }
    return run_ctx_fit(s, x, steps, out);
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
    if (s->ctx_mode) return run_ctx(s, x, steps, out, classes);
    SN_TRY(plan_for(s, steps, &sp));
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
    /* x [batch, steps] (the plan's shape) and the states straight into the plan's buffers */
    float *xb = sn_plan_buffer(sp->plan, sp->x);
    if (!xb) return sn_errorf(SN_ERR_STATE, "stepper: the input has no buffer");
    memcpy(xb, x, sizeof(float) * (size_t)(s->batch * steps));
    SN_TRY(states_to(s, sp->plan, sp->sin, s->n_states));
    SN_TRY(sn_error_context(sn_plan_run(sp->plan, 1, NULL, NULL), "stepper"));
    for (int j = 0; j < s->n_states; j++) { /* the final states feed this plan's next run */
        const float *f = sn_plan_buffer(sp->plan, sp->sout[j]);
        float *b = sn_plan_buffer(sp->plan, sp->sin[j]);
        if (!f || !b) return sn_errorf(SN_ERR_STATE, "stepper: state %d has no buffer", j);
        memcpy(b, f, state_bytes(s, j));
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
