/* The Keras twin of a char_transformer preset (model_config.h: sn_model_keras_twin).
 *
 * The presets are Sequential models of two sinter-internal composites (keras_hub's
 * TokenAndPositionEmbedding, and a pre-LayerNorm decoder block: nn/layers/layers_attention.h),
 * which sinter's training and its generation stepper are built around. Keras has neither
 * class built in, so a .keras file of the preset as it is would not open in Keras. What is
 * saved instead is the Functional model of Keras's own layers that computes the same thing
 * with the same weights:
 *
 *     tokens, positions (int32 [T] each)
 *     x = Add(Embedding(vocab, d)(tokens), Embedding(T, d)(positions))
 *     per block: h = LayerNormalization(x); x = Add(x, MultiHeadAttention(h, h, causal))
 *                h = LayerNormalization(x); x = Add(x, Dense(d)(Dense(4d, gelu)(h)))
 *     then the preset's own final layers (LayerNormalization, Dense to the vocabulary).
 *
 * Keras has no layer that makes positions, so they are a second input (0 .. T-1, the same
 * for every row) into an Embedding, as issue 26 allows; keras_hub's class would need
 * keras_hub installed wherever the file is opened. The other layers are copied through their
 * Keras config (written, then read back), so nothing here knows their fields. */
#include <string.h>

#include "nn/keras/model_config.h"
#include "nn/layers/layers_attention.h"
#include "nn/train/train_impl.h"

/* A twin layer and where its variables come from: src's variables first .. first + n - 1. */
typedef struct twin_map {
    sn_layer *dst;
    const sn_layer *src;
    int first;
} twin_map;

typedef struct twin {
    sn_model *f;
    twin_map map[256];
    int n_map;
} twin;

/* Calls `l` (NULL: the constructor failed, its error is set) on in[0..n-1]; records that its
 * variables are src's from `first` on (src NULL: it has none). */
static sn_status call(twin *t, sn_layer *l, const sn_ftensor *in, int n, const sn_layer *src,
                      int first, sn_ftensor *out) {
    if (!l) return SN_ERR_INVALID;
    if (t->n_map == (int)(sizeof t->map / sizeof t->map[0]))
        return sn_errorf(SN_ERR_UNSUPPORTED, "model '%s': over %d layers in its Keras twin",
                         t->f->name, (int)(sizeof t->map / sizeof t->map[0]));
    SN_TRY(sn_layer_call(t->f, l, in, n, out));
    if (src) t->map[t->n_map++] = (twin_map){l, src, first};
    return SN_OK;
}

static sn_status add2(twin *t, sn_ftensor a, sn_ftensor b, sn_ftensor *out) {
    return call(t, sn_layer_merge(SN_MERGE_ADD), (sn_ftensor[]){a, b}, 2, NULL, 0, out);
}

/* The block's layers on x (the order of block_build's variables: ln_1, attention, ln_2,
 * ffn_1, ffn_2). */
static sn_status block(twin *t, const sn_layer *b, sn_ftensor *x) {
    const sn_attn_layer_ext *e = b->attn;
    sn_layer_norm_opts lo = sn_layer_norm_defaults();
    lo.epsilon = e->epsilon;
    sn_ftensor h, a;
    SN_TRY(call(t, sn_layer_layer_norm_ex(&lo), x, 1, b, 0, &h));
    SN_TRY(call(t, sn_layer_mha_ex(&e->mha), &h, 1, b, 2, &a));
    SN_TRY(add2(t, *x, a, x));
    SN_TRY(call(t, sn_layer_layer_norm_ex(&lo), x, 1, b, 10, &h));
    SN_TRY(call(t, sn_layer_dense(e->ff_dim, SN_ACT_GELU), &h, 1, b, 12, &h));
    SN_TRY(call(t, sn_layer_dense(e->dim, SN_ACT_NONE), &h, 1, b, 14, &h));
    return add2(t, *x, h, x);
}

/* Any other layer: a new one from its Keras config. */
static sn_status copy_layer(twin *t, const sn_layer *l, sn_ftensor *x) {
    json_t *c = sn_cfg_write_layer(l, false);
    if (!c) return SN_ERR_UNSUPPORTED;
    /* named in the twin's own order, as the layers made here are */
    json_object_del(c, "name");
    sn_cfg_state cs = {0};
    sn_layer *n = NULL;
    sn_status st = sn_cfg_read_layer(l->vt->class_name, c, &cs, &n);
    json_decref(c);
    SN_TRY(st);
    return call(t, n, x, 1, l, 0, x);
}

static sn_status build(twin *t, sn_model *m) {
    const sn_layer *tpe = m->layers[0];
    int64_t T = m->input_shape.dim[0], d = tpe->attn->dim;
    sn_functional_input_opts io = sn_functional_input_defaults(&m->input_shape);
    io.int_ids = true;
    sn_ftensor tok, pos, a, b, x;
    io.name = "tokens";
    SN_TRY(sn_functional_input(t->f, &io, &tok));
    io.name = "positions";
    SN_TRY(sn_functional_input(t->f, &io, &pos));
    SN_TRY(call(t, sn_layer_embedding(tpe->attn->vocab, d), &tok, 1, tpe, 0, &a));
    /* The positions table of T rows, the preset's first T of sequence_length. */
    SN_TRY(call(t, sn_layer_embedding(T, d), &pos, 1, tpe, 1, &b));
    SN_TRY(add2(t, a, b, &x));
    for (int i = 1; i < m->n_layers; i++) {
        const sn_layer *l = m->layers[i];
        int64_t heads, hd;
        if (sn_attn_layer_cache_dims(l, &heads, &hd))
            SN_TRY(block(t, l, &x));
        else if (sn_layer_needs_context(l) && sn_attn_layer_context(l) > 0)
            return sn_errorf(SN_ERR_UNSUPPORTED, "layer %d '%s' is a second "
                             "TokenAndPositionEmbedding; the twin takes one, first", i, l->name);
        else
            SN_TRY(copy_layer(t, l, &x));
    }
    SN_TRY(sn_functional_set_outputs(t->f, &x, 1));
    SN_TRY(sn_model_build_for_loading(t->f, NULL));
    /* The weights: each twin layer's variables from its source's, element for element (the
     * position table's first T rows). */
    for (int k = 0; k < t->n_map; k++) {
        const twin_map *p = &t->map[k];
        for (int j = 0; j < p->dst->n_vars; j++) {
            sn_node dv = p->dst->vars[j], sv = p->src->vars[p->first + j];
            sn_shape ds = sn_node_shape(t->f->g, dv), ss = sn_node_shape(m->g, sv);
            sn_dtype dt = sn_node_dtype(t->f->g, dv);
            if (dt != sn_node_dtype(m->g, sv) || ds.ndim != ss.ndim ||
                sn_shape_numel(&ds) > sn_shape_numel(&ss))
                return sn_errorf(SN_ERR_STATE, "model '%s': twin variable '%s' does not match "
                                 "layer '%s' variable %d", m->name, p->dst->var_names[j],
                                 p->src->name, p->first + j);
            memcpy(sn_variable_data(t->f->g, dv), sn_variable_data(m->g, sv),
                   (size_t)sn_shape_numel(&ds) * sn_dtype_size(dt));
        }
    }
    if (m->train && m->train->compiled) SN_TRY(sn_model_compile(t->f, &m->train->opts));
    return SN_OK;
}

sn_status sn_model_keras_twin(sn_model *m, sn_model **out) {
    *out = NULL;
    if (!m || m->fn || m->n_layers == 0) return SN_OK;
    bool composite = false;
    for (int i = 0; i < m->n_layers; i++) {
        int64_t h, d;
        composite |= sn_attn_layer_cache_dims(m->layers[i], &h, &d) ||
                     sn_attn_layer_context(m->layers[i]) > 0;
    }
    if (!composite) return SN_OK;
    if (!m->built)
        return sn_errorf(SN_ERR_STATE, "model '%s' is not built", m->name);
    if (sn_attn_layer_context(m->layers[0]) <= 0 || m->input_shape.ndim != 1)
        return sn_errorf(SN_ERR_UNSUPPORTED, "model '%s': its first layer is %s; a model of "
                         "sinter's attention composites is written for Keras only when a "
                         "TokenAndPositionEmbedding on ids [T] comes first", m->name,
                         m->layers[0]->vt->class_name);
    twin *t = sn_calloc(1, sizeof *t);
    if (!t) return SN_ERR_NOMEM;
    t->f = sn_functional_new(m->name);
    sn_status st = t->f ? build(t, m) : SN_ERR_NOMEM;
    if (st != SN_OK) {
        sn_model_free(t->f);
        free(t);
        return sn_error_context(st, "writing model '%s' as Keras layers", m->name);
    }
    *out = t->f;
    free(t);
    return SN_OK;
}
