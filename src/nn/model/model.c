/* The Sequential model: layers in order, building (variables and Keras initialisers from one
 * seed), accessors and Keras 3's summary table. The forward chain is model_forward.c: compile
 * and fit build on it, and this file frees their state with the model, so it
 * lives apart (no two files of nn call each other).
 *
 * Determinism: layer i draws its initial values from sn_rng stream i of the model seed, and a
 * Dropout layer's mask seed is a hash of (seed, i); so the same seed gives bit-identical
 * weights and masks, and adding a layer at the end does not change the earlier ones. */
#include <string.h>

#include "nn/layers/layers_attention.h"
#include "nn/train/train_impl.h"

static void layer_free(sn_layer *l) {
    if (!l) return;
    if (l->vt && l->vt->destroy) l->vt->destroy(l);
    free(l->name);
    free(l);
}

void sn_layer_destroy(sn_layer *l) { layer_free(l); }

sn_model *sn_sequential_new(const char *name) {
    sn_model *m = sn_calloc(1, sizeof *m);
    if (!m) return NULL;
    m->name = sn_strdup(name && *name ? name : "sequential");
    if (!m->name) {
        free(m);
        return NULL;
    }
    m->dtype = SN_F32;
    return m;
}

void sn_model_free(sn_model *m) {
    if (!m) return;
    /* The training state holds plans over the graph: it goes first. */
    if (m->train) sn_train_state_free(m->train);
    for (int i = 0; i < m->n_layers; i++) layer_free(m->layers[i]);
    free(m->layers);
    sn_fgraph_free(m->fn);
    sn_graph_free(m->g);
    free(m->name);
    free(m);
}

bool sn_model_name_taken(const sn_model *m, const char *name) {
    for (int i = 0; i < m->n_layers; i++)
        if (strcmp(m->layers[i]->name, name) == 0) return true;
    for (int i = 0; m->fn && i < m->fn->n_inputs; i++)
        if (strcmp(m->fn->nodes[m->fn->inputs[i]].input_name, name) == 0) return true;
    return false;
}

sn_status sn_model_add(sn_model *m, sn_layer *layer) {
    sn_status st = SN_OK;
    if (!m || !layer) {
        st = sn_errorf(SN_ERR_INVALID, "sn_model_add: %s is NULL%s", !m ? "model" : "layer",
                       m ? " (its constructor failed: see the previous error)" : "");
        goto fail;
    }
    if (m->built) {
        st = sn_errorf(SN_ERR_STATE, "model '%s' is already built: add layers before "
                       "sn_model_build", m->name);
        goto fail;
    }
    if (m->fn && !m->fn->adding) {
        st = sn_errorf(SN_ERR_INVALID, "model '%s' is Functional: add layers by calling them "
                       "(sn_layer_call), not with sn_model_add", m->name);
        goto fail;
    }
    if (layer->name) {
        if (sn_model_name_taken(m, layer->name)) {
            st = sn_errorf(SN_ERR_INVALID, "model '%s': a layer named '%s' already exists; layer "
                           "names must be unique", m->name, layer->name);
            goto fail;
        }
    } else {
        /* Keras's automatic names: "dense", "dense_1", "dense_2", ... skipping taken ones. */
        char buf[128];
        snprintf(buf, sizeof buf, "%s", layer->vt->base_name);
        for (int k = 1; sn_model_name_taken(m, buf); k++)
            snprintf(buf, sizeof buf, "%s_%d", layer->vt->base_name, k);
        if (!(layer->name = sn_strdup(buf))) {
            st = SN_ERR_NOMEM;
            goto fail;
        }
    }
    if (m->n_layers == m->cap_layers) {
        int cap = m->cap_layers ? 2 * m->cap_layers : 8;
        sn_layer **p = sn_realloc(m->layers, sizeof *p * (size_t)cap);
        if (!p) {
            st = SN_ERR_NOMEM;
            goto fail;
        }
        m->layers = p;
        m->cap_layers = cap;
    }
    m->layers[m->n_layers++] = layer;
    return SN_OK;
fail:
    layer_free(layer);
    return st;
}

/* splitmix64: spreads (seed, layer index) into an unrelated 64-bit dropout seed. */
static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* A Functional model takes its input shapes from its inputs: input_shape may be NULL, or
 * must be the first input's. */
static sn_status build_functional(sn_model *m, const sn_shape *input_shape, uint64_t seed,
                                  bool init) {
    if (input_shape && m->fn->n_inputs > 0 &&
        !sn_shape_equal(input_shape, &m->fn->nodes[m->fn->inputs[0]].shape)) {
        char a[160], b[160];
        return sn_errorf(SN_ERR_SHAPE, "sn_model_build: model '%s' is Functional with input "
                         "shape %s, but %s was given (pass NULL)", m->name,
                         sn_shape_str(&m->fn->nodes[m->fn->inputs[0]].shape, a, sizeof a),
                         sn_shape_str(input_shape, b, sizeof b));
    }
    if (m->dtype != SN_F32 && m->dtype != SN_F64)
        return sn_errorf(SN_ERR_INVALID, "model '%s': variables of dtype %s are not supported",
                         m->name, sn_dtype_name(m->dtype));
    sn_graph *g = sn_graph_new();
    if (!g) return SN_ERR_NOMEM;
    sn_status st = sn_functional_build(m, g, seed, init);
    if (st != SN_OK) {
        for (int i = 0; i < m->n_layers; i++) m->layers[i]->n_vars = m->layers[i]->n_regs = 0;
        sn_graph_free(g);
        return sn_error_context(st, "building model '%s'", m->name);
    }
    m->g = g;
    m->seed = seed;
    m->built = true;
    return SN_OK;
}

/* init false: no initialiser runs (sn_model_build_for_loading); the RNG streams of a model
 * that is initialised are the same either way, as nothing else draws from them. */
static sn_status build(sn_model *m, const sn_shape *input_shape, uint64_t seed, bool init) {
    if (m && m->fn && !m->built) return build_functional(m, input_shape, seed, init);
    if (!m || !input_shape)
        return sn_errorf(SN_ERR_INVALID, "sn_model_build: %s is NULL", !m ? "model" : "input_shape");
    if (m->built)
        return sn_errorf(SN_ERR_STATE, "model '%s' is already built; build it once", m->name);
    if (m->n_layers == 0)
        return sn_errorf(SN_ERR_STATE, "model '%s' has no layers to build", m->name);
    char b[160];
    if (input_shape->ndim < 1 || input_shape->ndim >= SN_MAX_DIMS)
        return sn_errorf(SN_ERR_SHAPE, "model '%s': input shape has rank %d (without the batch), "
                         "expected 1 to %d", m->name, input_shape->ndim, SN_MAX_DIMS - 1);
    for (int i = 0; i < input_shape->ndim; i++)
        if (input_shape->dim[i] <= 0)
            return sn_errorf(SN_ERR_SHAPE, "model '%s': input shape %s has a dimension <= 0",
                             m->name, sn_shape_str(input_shape, b, sizeof b));
    if (m->dtype != SN_F32 && m->dtype != SN_F64)
        return sn_errorf(SN_ERR_INVALID, "model '%s': variables of dtype %s are not supported",
                         m->name, sn_dtype_name(m->dtype));
    sn_graph *g = sn_graph_new();
    if (!g) return SN_ERR_NOMEM;
    sn_shape cur = *input_shape;
    sn_status st = SN_OK;
    for (int i = 0; i < m->n_layers && st == SN_OK; i++) {
        sn_layer *l = m->layers[i];
        sn_rng rng;
        sn_rng_init(&rng, seed, (uint64_t)i);
        l->dtype = m->dtype;
        l->seed = mix64(seed ^ mix64((uint64_t)i + 1));
        l->n_vars = 0;
        l->n_regs = 0;
        l->in_shape = cur;
        if (sn_layer_vt_n(l)) {
            st = sn_errorf(SN_ERR_INVALID, "layer '%s' (%s) merges several tensors: use it in a "
                           "Functional model (sn_layer_call)", l->name, l->vt->class_name);
            break;
        }
        st = l->vt->build(l, g, &cur, init ? &rng : NULL);
        if (st == SN_OK && sn_graph_status(g) != SN_OK)
            st = sn_error_context(sn_graph_status(g), "layer '%s' (%s)", l->name, l->vt->class_name);
        if (st == SN_OK && sn_shape_numel(&l->out_shape) <= 0)
            st = sn_errorf(SN_ERR_SHAPE, "layer '%s' (%s): empty output shape", l->name,
                           l->vt->class_name);
        cur = l->out_shape;
    }
    if (st != SN_OK) {
        /* Leave the model as before: unbuilt, no graph, no variables. */
        for (int i = 0; i < m->n_layers; i++) m->layers[i]->n_vars = m->layers[i]->n_regs = 0;
        sn_graph_free(g);
        return sn_error_context(st, "building model '%s'", m->name);
    }
    m->g = g;
    m->input_shape = *input_shape;
    m->seed = seed;
    m->built = true;
    return SN_OK;
}

sn_status sn_model_build(sn_model *m, const sn_shape *input_shape, uint64_t seed) {
    return build(m, input_shape, seed, true);
}

sn_status sn_model_build_for_loading(sn_model *m, const sn_shape *input_shape) {
    return build(m, input_shape, 0, false);
}

/* ---- accessors -------------------------------------------------------------------------- */
sn_graph *sn_model_graph(sn_model *m) { return m ? m->g : NULL; }
int sn_model_layer_count(const sn_model *m) { return m ? m->n_layers : 0; }

static const sn_layer *layer_at(const sn_model *m, int i) {
    return m && i >= 0 && i < m->n_layers ? m->layers[i] : NULL;
}

const char *sn_model_layer_name(const sn_model *m, int i) {
    const sn_layer *l = layer_at(m, i);
    return l ? l->name : NULL;
}

const char *sn_model_layer_class(const sn_model *m, int i) {
    const sn_layer *l = layer_at(m, i);
    return l ? l->vt->class_name : NULL;
}

sn_shape sn_model_layer_output_shape(const sn_model *m, int i) {
    const sn_layer *l = layer_at(m, i);
    return l && m->built ? l->out_shape : (sn_shape){.ndim = -1};
}

int sn_model_layer_variables(const sn_model *m, int i, sn_node *vars, int cap) {
    const sn_layer *l = layer_at(m, i);
    if (!l || !m->built) return 0;
    for (int j = 0; vars && j < l->n_vars && j < cap; j++) vars[j] = l->vars[j];
    return l->n_vars;
}

static int64_t layer_params(const sn_model *m, const sn_layer *l, int which /* 0 all, 1 tr, 2 non */) {
    int64_t n = 0;
    for (int j = 0; m->built && j < l->n_vars; j++) {
        /* a frozen layer's weights count as non-trainable at once, as Keras's summary */
        bool tr = !l->frozen && ((sn_node_at(m->g, l->vars[j])->flags & SN_NODE_TRAINABLE) ||
                                 (l->thawed >> j & 1u));
        if (which == 0 || (which == 1) == tr) {
            sn_shape s = sn_node_shape(m->g, l->vars[j]);
            n += sn_shape_numel(&s);
        }
    }
    return n;
}

static int64_t model_params(const sn_model *m, int which) {
    int64_t n = 0;
    for (int i = 0; m && i < m->n_layers; i++) n += layer_params(m, m->layers[i], which);
    return n;
}

int64_t sn_model_param_count(const sn_model *m, bool trainable_only) {
    return model_params(m, trainable_only ? 1 : 0);
}

sn_status sn_model_set_trainable(sn_model *m, bool trainable) {
    if (!m) return sn_errorf(SN_ERR_INVALID, "sn_model_set_trainable: model is NULL");
    m->frozen = !trainable;
    for (int i = 0; i < m->n_layers; i++) SN_TRY(sn_layer_set_trainable(m->layers[i], trainable));
    /* a nested model is frozen with its outer one (Keras sets every sublayer) */
    for (int k = 0; m->fn && k < m->fn->n_subs; k++)
        m->fn->subs[k].model->frozen = !trainable;
    sn_model_sync_trainable(m); /* a compiled model's step keeps its set until recompiled */
    return SN_OK;
}

bool sn_model_layer_trainable(const sn_model *m, int i) {
    return m && i >= 0 && i < m->n_layers && !m->layers[i]->frozen;
}

sn_status sn_model_set_nested_trainable(sn_model *m, const char *name, bool trainable) {
    for (int k = 0; m && name && m->fn && k < m->fn->n_subs; k++) {
        sn_fsub *r = &m->fn->subs[k];
        if (strcmp(r->model->name, name)) continue;
        r->model->frozen = !trainable;
        for (int i = 0; i < r->n_layers; i++) SN_TRY(sn_layer_set_trainable(r->layers[i], trainable));
        sn_model_sync_trainable(m);
        return SN_OK;
    }
    return sn_errorf(SN_ERR_INVALID, "sn_model_set_nested_trainable: model '%s' has no nested "
                     "model '%s'", m ? m->name : "(NULL)", name ? name : "(NULL)");
}

sn_status sn_model_set_layer_trainable(sn_model *m, int i, bool trainable) {
    if (!m || i < 0 || i >= m->n_layers)
        return sn_errorf(SN_ERR_INVALID, "sn_model_set_layer_trainable: layer %d of a model of "
                         "%d layers", i, m ? m->n_layers : 0);
    SN_TRY(sn_layer_set_trainable(m->layers[i], trainable));
    sn_model_sync_trainable(m);
    return SN_OK;
}

/* ---- summary ---------------------------------------------------------------------------- */
/* 1234567 -> "1,234,567" (Python's f"{n:,}"). */
static char *thousands(int64_t v, char *buf, size_t cap) {
    char raw[32];
    int n = snprintf(raw, sizeof raw, "%lld", (long long)(v < 0 ? -v : v));
    size_t o = 0;
    if (v < 0 && o + 1 < cap) buf[o++] = '-';
    for (int i = 0; i < n && o + 1 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0 && o + 1 < cap) buf[o++] = ',';
        if (o + 1 < cap) buf[o++] = raw[i];
    }
    buf[o] = 0;
    return buf;
}

/* Keras's readable_memory_size: powers of 1024, two decimals. */
static char *mem_size(double bytes, char *buf, size_t cap) {
    static const char *units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    int u = 0;
    while (u < 5 && bytes / 1024.0 >= 1.0) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, cap, "%.2f %s", bytes, units[u]);
    return buf;
}

static void rule(FILE *out, const char *l, const char *fill, const char *mid, const char *r,
                 const int *w, int ncol) {
    fputs(l, out);
    for (int c = 0; c < ncol; c++) {
        for (int k = 0; k < w[c]; k++) fputs(fill, out);
        fputs(c < ncol - 1 ? mid : r, out);
    }
    fputc('\n', out);
}

/* Splits `text` into lines of at most `width` characters as rich does (a Column's overflow
 * "ellipsis"): words at spaces, a word longer than the width alone on its line and cut to
 * width - 1 characters and "…" (Keras's "(GlobalAveragePool…"). Returns the number of lines;
 * line k is text[start[k], start[k] + len[k]), followed by "…" when cut[k]. */
static int wrap(const char *text, int width, int *start, int *len, bool *cut, int cap) {
    int n = 0, pos = 0, total = (int)strlen(text);
    while (pos < total && n < cap) {
        while (text[pos] == ' ') pos++;
        if (pos >= total) break;
        int wend = pos;
        while (wend < total && text[wend] != ' ') wend++;
        if (wend - pos > width) { /* a long word: its own line, cut */
            start[n] = pos;
            len[n] = width - 1;
            cut[n++] = true;
            pos = wend;
            continue;
        }
        int end = wend; /* add the following words while they fit */
        while (end < total) {
            int s = end;
            while (s < total && text[s] == ' ') s++;
            int e = s;
            while (e < total && text[e] != ' ') e++;
            if (s >= total || e - pos > width) break;
            end = e;
        }
        start[n] = pos;
        len[n] = end - pos;
        cut[n++] = false;
        pos = end;
    }
    if (n == 0) {
        start[0] = len[0] = 0;
        cut[0] = false;
        n = 1;
    }
    return n;
}

/* One table row of ncol cells, wrapped; column `right` right-aligned. */
static void row(FILE *out, const char *bar, const int *w, int ncol, int right,
                const char *const *t) {
    enum { MAXL = 16, MAXCOL = 4 };
    int st[MAXCOL][MAXL], ln[MAXCOL][MAXL], nl[MAXCOL], lines = 0;
    bool cut[MAXCOL][MAXL];
    for (int k = 0; k < ncol; k++) {
        nl[k] = wrap(t[k], w[k] - 2, st[k], ln[k], cut[k], MAXL);
        if (nl[k] > lines) lines = nl[k];
    }
    for (int i = 0; i < lines; i++) {
        for (int k = 0; k < ncol; k++) {
            const char *p = i < nl[k] ? t[k] + st[k][i] : "";
            int n = i < nl[k] ? ln[k][i] : 0;
            bool c = i < nl[k] && cut[k][i];
            int pad = w[k] - 2 - n - c;
            fprintf(out, "%s ", bar);
            if (k == right) fprintf(out, "%*s%.*s%s ", pad, "", n, p, c ? "…" : "");
            else fprintf(out, "%.*s%s%*s ", n, p, c ? "…" : "", pad, "");
        }
        fprintf(out, "%s\n", bar);
    }
}

enum { CELL = 512 };
typedef char summary_row[4][CELL];

static void shape_cell(const sn_shape *s, char *buf) {
    size_t k = (size_t)snprintf(buf, CELL, "(None");
    for (int d = 0; d < s->ndim && k < CELL; d++)
        k += (size_t)snprintf(buf + k, CELL - k, ", %lld", (long long)s->dim[d]);
    if (k < CELL) snprintf(buf + k, CELL - k, ")");
}

/* The nested model (its record) whose layer l is, or NULL. (functional_nested.c has
 * sn_functional_sub_of; model.c is below it.) */
static const sn_fsub *sub_of(const sn_fgraph *f, const sn_layer *l) {
    for (int s = 0; f && s < f->n_subs; s++)
        for (int i = 0; i < f->subs[s].n_layers; i++)
            if (f->subs[s].layers[i] == l) return &f->subs[s];
    return NULL;
}

/* Node `id` as Keras names a tensor: producer[call][output]; a nested model's output is
 * "enc[call][k]". */
static size_t tensor_name(const sn_fgraph *f, int id, char *buf, size_t cap) {
    const sn_fnode *p = &f->nodes[id];
    const sn_fsub *s = p->layer ? sub_of(f, p->layer) : NULL;
    for (int c = 0; s && c < s->n_calls; c++)
        for (int k = 0; k < s->n_out; k++)
            if (s->call_out[c * s->n_out + k] == id)
                return (size_t)snprintf(buf, cap, "%s[%d][%d]", s->model->name, c, k);
    return (size_t)snprintf(buf, cap, "%s[%d][0]", p->layer ? p->layer->name : p->input_name,
                            p->call_index);
}

/* Keras's "Connected to": every call's arguments as producer[call][0], joined by ", ".
 * MultiHeadAttention as self-attention, mha(x), is called (query, value): its tensor twice. */
static void connections(const sn_fgraph *f, const sn_layer *l, char *buf) {
    size_t k = 0;
    buf[0] = 0;
    bool mha = !strcmp(l->vt->class_name, "MultiHeadAttention");
    const sn_fsub *s = sub_of(f, l);
    for (int c = 0; s && c < s->n_calls; c++) /* a nested model: its calls' arguments */
        for (int a = 0; a < s->n_in && k < CELL; a++) {
            if (k) k += (size_t)snprintf(buf + k, CELL - k, ", ");
            if (k < CELL) k += tensor_name(f, s->call_in[c * s->n_in + a], buf + k, CELL - k);
        }
    for (int i = 0; !s && i < f->n_nodes; i++) {
        if (f->nodes[i].layer != l) continue;
        int reps = mha && f->nodes[i].n_in == 1 ? 2 : 1;
        for (int a = 0; a < f->nodes[i].n_in * reps && k < CELL; a++) {
            if (k) k += (size_t)snprintf(buf + k, CELL - k, ", ");
            if (k < CELL)
                k += tensor_name(f, f->nodes[i].in[sn_layer_keras_arg(
                                         l, f->nodes[i].n_in, a % f->nodes[i].n_in)],
                                 buf + k, CELL - k);
        }
    }
    if (!k) snprintf(buf, CELL, "-");
}

/* Row cells of Keras's model.layers order (Functional: the InputLayers too). */
static int summary_rows(const sn_model *m, summary_row *rows) {
    const sn_fgraph *f = m->fn;
    int n = f ? f->n_ops : m->n_layers, w = 0;
    const sn_fsub *shown[64];
    int n_shown = 0;
    for (int q = 0; q < n; q++) {
        int op = f ? f->ops[q] : q, r = w++;
        if (op < 0) { /* an input */
            const sn_fnode *in = &f->nodes[-1 - op];
            snprintf(rows[r][0], CELL, "%s (InputLayer)", in->input_name);
            shape_cell(&in->shape, rows[r][1]);
            snprintf(rows[r][2], CELL, "0");
            snprintf(rows[r][3], CELL, "-");
            continue;
        }
        const sn_layer *l = m->layers[op];
        const sn_fsub *sub = sub_of(f, l);
        if (sub) { /* a nested model: one row, where its first layer comes */
            bool seen = false;
            for (int i = 0; i < n_shown; i++) seen |= shown[i] == sub;
            if (seen || n_shown == 64) {
                w--;
                continue;
            }
            shown[n_shown++] = sub;
            snprintf(rows[r][0], CELL, "%s (%s)", sub->model->name,
                     sub->model->fn->sequential ? "Sequential" : "Functional");
            size_t k = 0;
            int last = sub->n_calls - 1; /* Keras shows the last call's */
            for (int o = 0; m->built && last >= 0 && o < sub->n_out && k < CELL; o++) {
                char c[CELL];
                shape_cell(&f->nodes[sub->call_out[last * sub->n_out + o]].shape, c);
                k += (size_t)snprintf(rows[r][1] + k, CELL - k, "%s%s%s",
                                      o ? ", " : sub->n_out > 1 ? "[" : "", c,
                                      sub->n_out > 1 && o == sub->n_out - 1 ? "]" : "");
            }
            int64_t p = 0;
            for (int i = 0; i < sub->n_layers; i++) p += layer_params(m, sub->layers[i], 0);
            thousands(p, rows[r][2], CELL);
            connections(f, l, rows[r][3]);
            continue;
        }
        snprintf(rows[r][0], CELL, "%s (%s)", l->name, l->vt->class_name);
        if (m->built) {
            sn_shape s = l->out_shape; /* Keras shows the last call's */
            for (int i = 0; f && i < f->n_nodes; i++)
                if (f->nodes[i].layer == l) s = f->nodes[i].shape;
            shape_cell(&s, rows[r][1]);
            thousands(layer_params(m, l, 0), rows[r][2], CELL);
        } else {
            snprintf(rows[r][1], CELL, "?");
            snprintf(rows[r][2], CELL, "0 (unbuilt)");
        }
        if (f) connections(f, l, rows[r][3]);
    }
    return w;
}

/* Keras 3's table as rich draws it (show_lines) on an 80-column terminal: a Sequential model,
 * or a Functional chain, in columns of 33, 24 and 15 characters with their padding; any
 * other Functional graph in 21, 19, 12 and 19 with "Connected to". A cell too long for its
 * column wraps onto more lines, as "batch_normalization (BatchNormalization)" does in Keras. */
sn_status sn_model_summary(const sn_model *m, FILE *out) {
    if (!m || !out) return sn_errorf(SN_ERR_INVALID, "sn_model_summary: %s is NULL",
                                     !m ? "model" : "out");
    int n = m->fn ? m->fn->n_ops : m->n_layers;
    summary_row *rows = sn_calloc((size_t)(n ? n : 1), sizeof *rows);
    if (!rows) return SN_ERR_NOMEM;
    n = summary_rows(m, rows);
    const bool four = m->fn && !sn_functional_is_chain(m);
    static const int w3[3] = {33, 24, 15}, w4[4] = {21, 19, 12, 19};
    const int *w = four ? w4 : w3, ncol = four ? 4 : 3;
    fprintf(out, "Model: \"%s\"\n", m->name);
    rule(out, "┏", "━", "┳", "┓", w, ncol);
    row(out, "┃", w, ncol, 2,
        (const char *const[]){"Layer (type)", "Output Shape", "Param #", "Connected to"});
    rule(out, "┡", "━", "╇", "┩", w, ncol);
    for (int i = 0; i < n; i++) {
        if (i > 0) rule(out, "├", "─", "┼", "┤", w, ncol);
        row(out, "│", w, ncol, 2,
            (const char *const[]){rows[i][0], rows[i][1], rows[i][2], rows[i][3]});
    }
    rule(out, "└", "─", "┴", "┘", w, ncol);
    free(rows);
    double per = (double)sn_dtype_size(m->dtype);
    int64_t tr = model_params(m, 1), non = model_params(m, 2), opt = 0;
    /* Keras 3 counts the optimizer's variables too once it is built, at the first training
     * step: its slots per trainable weight, plus iterations and the learning rate. */
    const sn_train_state *t = m->train;
    /* Keras's iterations is an int64 (8 bytes; "Optimizer params: 2 (12.00 B)" for SGD) */
    double opt_wide = 0;
    if (t && t->compiled && t->step > 0) {
        opt = tr * sn_optimizer_slot_count(&t->opts.optimizer) + 2;
        opt_wide = 8 - per;
    }
    /* Keras's Normalization keeps its count (one non-trainable value) as int64: 8 bytes */
    double wide = 0;
    for (int i = 0; m->built && i < m->n_layers; i++)
        wide += sn_layer_is_normalization(m->layers[i]) ? 8 - per : 0;
    char c1[32], c2[32];
    fprintf(out, " Total params: %s (%s)\n", thousands(tr + non + opt, c1, sizeof c1),
            mem_size((double)(tr + non + opt) * per + wide + opt_wide, c2, sizeof c2));
    fprintf(out, " Trainable params: %s (%s)\n", thousands(tr, c1, sizeof c1),
            mem_size((double)tr * per, c2, sizeof c2));
    fprintf(out, " Non-trainable params: %s (%s)\n", thousands(non, c1, sizeof c1),
            mem_size((double)non * per + wide, c2, sizeof c2));
    if (opt > 0)
        fprintf(out, " Optimizer params: %s (%s)\n", thousands(opt, c1, sizeof c1),
                mem_size((double)opt * per + opt_wide, c2, sizeof c2));
    if (ferror(out)) return sn_errorf(SN_ERR_IO, "model summary: writing failed");
    return SN_OK;
}
