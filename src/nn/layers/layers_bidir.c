/* Keras's Bidirectional over an LSTM or GRU: the wrapped layer reads forwards, its copy with
 * go_backwards reads backwards, and with return_sequences the backward outputs are flipped
 * back into time order before the merge (keras/src/layers/rnn/bidirectional.py). With a mask,
 * both halves skip masked steps (layers_seq.c); returning sequences, masked steps output zero
 * (Keras forces zero_output_for_mask = return_sequences on both halves).
 *
 * The two halves are ordinary LSTM/GRU layers owned by this one (inner[0], inner[1]); their
 * variables are this layer's, forward first, as Keras's weights list and its weights file
 * (layers/<name>/forward_layer/cell/vars, .../backward_layer/cell/vars: src/io/weights_h5.c).
 *
 * Also here, at the end: sn_layer_call_masked, how a model's forward pass carries a mask
 * from layer to layer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers/layers_attention.h"
#include "nn/layers/layers_impl.h"

static sn_status bidir_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim != 2) return sn_layer_shape_error(l, in, "(None, steps, features)");
    for (int k = 0; k < 2; k++) {
        sn_layer *h = l->inner[k];
        h->dtype = l->dtype;
        /* Variables named "<this>/<half>/kernel": unique in the graph whatever the halves are
         * called; the half keeps its Keras name ("forward_lstm") for configs. */
        char *keras_name = h->name, full[512];
        snprintf(full, sizeof full, "%s/%s", l->name, keras_name);
        h->name = full;
        h->in_shape = *in;
        sn_status st = h->vt->build(h, g, in, rng);
        h->name = keras_name;
        if (st != SN_OK) return sn_error_context(st, "layer '%s' (Bidirectional)", l->name);
        if (h->n_vars + l->n_vars > SN_LAYER_MAX_VARS)
            return sn_errorf(SN_ERR_STATE, "layer '%s' (Bidirectional): too many variables",
                             l->name);
        /* Keras's names for them, "forward_lstm/lstm_cell/kernel": its legacy weight names,
         * and how the weights file writer learns the halves' names (src/io/weights_h5.c) */
        char cell[64];
        snprintf(cell, sizeof cell, "%s_cell", h->vt->base_name);
        for (int j = 0; j < h->n_vars; j++) {
            char nm[600];
            snprintf(nm, sizeof nm, "%s/%s/%s", keras_name, cell, h->var_names[j]);
            char *c = sn_strdup(nm);
            if (!c) return SN_ERR_NOMEM;
            l->vars[l->n_vars] = h->vars[j];
            l->var_names[l->n_vars++] = c;
        }
        for (int j = 0; j < h->n_regs && l->n_regs < SN_LAYER_MAX_VARS; j++)
            l->regs[l->n_regs++] = h->regs[j];
    }
    sn_shape o = l->inner[0]->out_shape;
    if (l->merge_mode == SN_BIDIR_CONCAT) o.dim[o.ndim - 1] *= 2;
    l->out_shape = o;
    return SN_OK;
}

static sn_node bidir_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                             sn_updates *u) {
    sn_node m = l->has_mask ? l->mask : SN_NONE, y[2];
    bool seq = l->inner[0]->rnn.return_sequences;
    for (int k = 0; k < 2; k++) {
        sn_layer *h = l->inner[k];
        y[k] = sn_rnn_forward_masked(h, g, x, m, h->rnn.go_backwards, false, seq);
    }
    switch (l->merge_mode) {
    case SN_BIDIR_CONCAT: return sn_concat(g, 2, y, -1);
    case SN_BIDIR_SUM: return sn_add(g, y[0], y[1]);
    case SN_BIDIR_MUL: return sn_mul(g, y[0], y[1]);
    default: /* ave: Keras's (y + y_rev) / 2 */
        return sn_div(g, sn_add(g, y[0], y[1]), sn_scalar(g, l->dtype, 2.0));
    }
}

/* A half, or a layer given to a failed constructor (an LSTM/GRU: no destroy of its own);
 * freed here, as model.c frees layers, which this file may not call (layers sit below it). */
static void free_half(sn_layer *h) {
    if (!h) return;
    if (h->vt->destroy) h->vt->destroy(h);
    free(h->name);
    free(h);
}

static void bidir_destroy(sn_layer *l) {
    for (int j = 0; j < l->n_vars; j++) free((char *)(uintptr_t)l->var_names[j]);
    free_half(l->inner[0]);
    free_half(l->inner[1]);
}

static const sn_layer_vtable bidir_vt = {"Bidirectional", "bidirectional", bidir_build,
                                         bidir_forward, bidir_destroy};

bool sn_layer_is_bidirectional(const sn_layer *l) { return l && l->vt == &bidir_vt; }

/* "forward_lstm" / "backward_lstm" from the wrapped layer's name (its class's base name when
 * it has none yet), as Keras names the halves. */
static sn_status name_half(sn_layer *h, const char *prefix, const char *base) {
    /* base is at most 299 characters (sn_layer_bidirectional's copy) */
    char nm[320];
    snprintf(nm, sizeof nm, "%s_%s", prefix, base);
    return sn_layer_set_name(h, nm);
}

sn_layer *sn_layer_bidirectional_ex(sn_layer *fwd, sn_layer *bwd, sn_bidir_merge merge) {
    const char *why = NULL;
    if (!fwd || !bwd) why = "a layer is NULL";
    else if (!sn_layer_is_rnn(fwd) || !sn_layer_is_rnn(bwd)) why = "sinter wraps LSTM and GRU";
    else if (fwd->vt != bwd->vt) why = "the forward and backward layers are of different classes";
    else if (fwd->rnn.go_backwards == bwd->rnn.go_backwards)
        why = "the forward and backward layers must differ in go_backwards";
    else if (fwd->rnn.return_sequences != bwd->rnn.return_sequences)
        why = "the forward and backward layers must agree in return_sequences";
    else if (fwd->rnn.stateful || bwd->rnn.stateful) why = "stateful=True is not implemented";
    else if ((int)merge < SN_BIDIR_CONCAT || merge > SN_BIDIR_AVE)
        why = "merge_mode must be concat, sum, mul or ave";
    sn_layer *l = why ? NULL : sn_layer_alloc(&bidir_vt);
    if (!l) {
        if (why) sn_errorf(SN_ERR_INVALID, "Bidirectional: %s", why);
        free_half(fwd);
        free_half(bwd);
        return NULL;
    }
    l->inner[0] = fwd;
    l->inner[1] = bwd;
    l->merge_mode = merge;
    return l;
}

sn_layer *sn_layer_bidirectional(sn_layer *layer, sn_bidir_merge merge) {
    if (!layer || !sn_layer_is_rnn(layer)) {
        sn_errorf(SN_ERR_INVALID, "Bidirectional: the layer is %s; sinter wraps LSTM and GRU",
                  layer ? layer->vt->class_name : "NULL");
        free_half(layer);
        return NULL;
    }
    sn_rnn_layer_opts o = layer->rnn;
    o.go_backwards = !o.go_backwards;
    bool gru = !strcmp(layer->vt->class_name, "GRU");
    sn_layer *bwd = gru ? sn_layer_gru_ex(&o) : sn_layer_lstm_ex(&o);
    const char *base = layer->name ? layer->name : layer->vt->base_name;
    char own[300];
    snprintf(own, sizeof own, "%s", base);
    if (!bwd || name_half(layer, "forward", own) != SN_OK ||
        name_half(bwd, "backward", own) != SN_OK) {
        free_half(layer);
        free_half(bwd);
        return NULL;
    }
    return sn_layer_bidirectional_ex(layer, bwd, merge);
}

/* ---- carrying masks (Embedding(mask_zero) -> ... -> LSTM/GRU/Bidirectional) ------------- */
/* Layers Keras passes a mask through unchanged (supports_masking, compute_mask the input's). */
static bool passes_mask(const sn_layer *l) {
    const char *c = l->vt->class_name;
    return !strcmp(c, "Dense") || !strcmp(c, "Dropout") || !strcmp(c, "Activation") ||
           !strcmp(c, "ELU") || !strcmp(c, "LayerNormalization");
}

/* NotEqual(ids, 0): the mask of an Embedding(mask_zero=True), as Keras 3 records it. Ids are
 * whole numbers >= 0 (the Embedding's gather fails on others), so min(id, 1) is the mask. */
static sn_status not_equal_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    l->out_shape = *in;
    return SN_OK;
}

static sn_node nonzero(sn_graph *g, sn_node x, sn_dtype dt) {
    sn_node ids = sn_node_dtype(g, x) == dt ? x : sn_cast(g, x, dt);
    sn_node one = sn_scalar(g, dt, 1.0);
    return sn_sub(g, one, sn_relu(g, sn_sub(g, one, ids)));
}

static sn_node not_equal_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                                 sn_updates *u) {
    return nonzero(g, x, l->dtype);
}

static const sn_layer_vtable not_equal_vt = {"NotEqual", "not_equal", not_equal_build,
                                             not_equal_forward, NULL};

sn_layer *sn_layer_not_equal_zero(void) { return sn_layer_alloc(&not_equal_vt); }

bool sn_layer_is_not_equal(const sn_layer *l) { return l && l->vt == &not_equal_vt; }

sn_node sn_layer_call_masked(sn_layer *l, sn_graph *g, sn_node x, sn_node *mask, bool training,
                             sn_updates *updates) {
    if (sn_layer_is_embedding(l) && l->embedding.mask_zero) {
        sn_node y = l->vt->forward(l, g, x, training, updates);
        /* ids are whole numbers >= 0 (gather fails on others): min(id, 1) = 1 - relu(1 - id) */
        *mask = nonzero(g, x, l->dtype);
        return y;
    }
    bool rnn = sn_layer_is_rnn(l), bidir = sn_layer_is_bidirectional(l);
    if (sn_layer_is_global_avg_pool1d(l)) { /* averages the unmasked steps; passes none on */
        l->has_mask = *mask != SN_NONE;
        l->mask = *mask;
        sn_node y = l->vt->forward(l, g, x, training, updates);
        l->has_mask = false;
        *mask = SN_NONE;
        return y;
    }
    if (rnn || bidir) {
        l->has_mask = *mask != SN_NONE;
        l->mask = *mask;
        sn_node y = l->vt->forward(l, g, x, training, updates);
        l->has_mask = false;
        l->mask = SN_NONE;
        bool seq = rnn ? l->rnn.return_sequences : l->inner[0]->rnn.return_sequences;
        if (!seq) *mask = SN_NONE;
        return y;
    }
    if (*mask != SN_NONE && sn_layer_is_mha(l)) /* self-attention mha(x): x's mask both ways */
        return sn_layer_mha_forward_masked(l, g, 1, &x, mask, training);
    if (*mask != SN_NONE && !passes_mask(l))
        return sn_graph_fail(g, SN_ERR_UNSUPPORTED, "layer '%s' (%s) receives a mask (from an "
                             "Embedding with mask_zero=True); sinter carries masks into LSTM, GRU, "
                             "Bidirectional, GlobalAveragePooling1D and MultiHeadAttention layers "
                             "and through Dense, Dropout, Activation, ELU, LayerNormalization "
                             "and the element-wise merges only", l->name, l->vt->class_name);
    return l->vt->forward(l, g, x, training, updates);
}
