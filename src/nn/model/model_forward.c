/* The models' forward pass: a Sequential model's input x through every layer in order, a
 * Functional model's inputs through its calls in node order, adding nodes to the model's
 * graph. Its one home, below compile.c (fit's plans, one per replica under a strategy),
 * which builds on it; model.c, which frees their state with the
 * model, does not call it. */
#include <string.h>

#include "nn/layers/layers_attention.h"
#include "nn/layers/layers_impl.h"

sn_status sn_model_forward(sn_model *m, sn_node x, bool training, sn_updates *updates,
                           sn_node *out) {
    if (!m || !out) return sn_errorf(SN_ERR_INVALID, "sn_model_forward: NULL argument");
    if (!m->built) return sn_errorf(SN_ERR_STATE, "model '%s' is not built", m->name);
    if (m->fn) {
        /* fit, evaluate and predict feed one tensor and take one */
        if (m->fn->n_inputs != 1 || m->fn->n_outputs != 1)
            return sn_errorf(SN_ERR_UNSUPPORTED, "model '%s' has %d inputs and %d outputs; "
                             "sinter's fit, evaluate and predict take models of one input and "
                             "one output so far", m->name, m->fn->n_inputs, m->fn->n_outputs);
        return sn_model_forward_n(m, &x, training, updates, out);
    }
    sn_graph *g = m->g;
    SN_TRY(sn_graph_status(g));
    sn_shape xs = sn_node_shape(g, x);
    bool ok = xs.ndim == m->input_shape.ndim + 1;
    for (int i = 0; ok && i < m->input_shape.ndim; i++) ok = xs.dim[i + 1] == m->input_shape.dim[i];
    if (!ok) {
        char a[160], e[160];
        return sn_errorf(SN_ERR_SHAPE, "model '%s': input node has shape %s, expected [batch] + %s",
                         m->name, sn_shape_str(&xs, a, sizeof a),
                         sn_shape_str(&m->input_shape, e, sizeof e));
    }
    if (sn_node_dtype(g, x) != m->dtype)
        return sn_errorf(SN_ERR_SHAPE, "model '%s': input node has dtype %s, expected %s", m->name,
                         sn_dtype_name(sn_node_dtype(g, x)), sn_dtype_name(m->dtype));
    sn_node y = x, mask = SN_NONE; /* Embedding(mask_zero)'s, carried as Keras carries it */
    for (int i = 0; i < m->n_layers; i++) {
        sn_layer *l = m->layers[i];
        y = sn_layer_call_masked(l, g, y, &mask, training, updates);
        if (y == SN_NONE || sn_graph_status(g) != SN_OK) {
            sn_status st = sn_graph_status(g);
            return sn_error_context(st != SN_OK ? st : SN_ERR_STATE, "model '%s', layer '%s' (%s)",
                                    m->name, l->name, l->vt->class_name);
        }
    }
    *out = y;
    return SN_OK;
}

/* Keras's element-wise merges (Merge.compute_mask: the OR of their inputs' masks when every
 * input has one); not Concatenate, whose mask follows its axis. */
static bool merge_ors_masks(const sn_layer *l) {
    static const char *const cls[] = {"Add", "Subtract", "Multiply", "Average", "Maximum",
                                      "Minimum"};
    for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++)
        if (!strcmp(l->vt->class_name, cls[i])) return true;
    return false;
}

sn_status sn_model_forward_n(sn_model *m, const sn_node *x, bool training, sn_updates *updates,
                             sn_node *out) {
    if (!m || !x || !out) return sn_errorf(SN_ERR_INVALID, "sn_model_forward_n: NULL argument");
    if (!m->fn) return sn_model_forward(m, x[0], training, updates, out);
    if (!m->built) return sn_errorf(SN_ERR_STATE, "model '%s' is not built", m->name);
    sn_graph *g = m->g;
    SN_TRY(sn_graph_status(g));
    sn_fgraph *f = m->fn;
    sn_node *val = sn_calloc((size_t)f->n_nodes, sizeof *val);
    sn_node *args = sn_calloc((size_t)f->n_nodes + 1, sizeof *args);
    sn_node *mask = sn_calloc((size_t)f->n_nodes + 1, sizeof *mask); /* each node's output mask */
    sn_status st = val && args && mask ? SN_OK : SN_ERR_NOMEM;
    for (int i = 0; st == SN_OK && i < f->n_nodes; i++) mask[i] = SN_NONE;
    for (int k = 0; st == SN_OK && k < f->n_inputs; k++) {
        const sn_fnode *in = &f->nodes[f->inputs[k]];
        sn_shape xs = sn_node_shape(g, x[k]);
        bool ok = xs.ndim == in->shape.ndim + 1 && sn_node_dtype(g, x[k]) == m->dtype;
        for (int d = 0; ok && d < in->shape.ndim; d++) ok = xs.dim[d + 1] == in->shape.dim[d];
        if (!ok) {
            char a[160], e[160];
            st = sn_errorf(SN_ERR_SHAPE, "model '%s', input '%s': node has shape %s (%s), "
                           "expected [batch] + %s (%s)", m->name, in->input_name,
                           sn_shape_str(&xs, a, sizeof a), sn_dtype_name(sn_node_dtype(g, x[k])),
                           sn_shape_str(&in->shape, e, sizeof e), sn_dtype_name(m->dtype));
        }
        val[f->inputs[k]] = x[k];
    }
    for (int i = 0; st == SN_OK && i < f->n_nodes; i++) {
        const sn_fnode *nd = &f->nodes[i];
        sn_layer *l = nd->layer;
        if (!l) continue;
        bool masked = false;
        for (int k = 0; k < nd->n_in; k++) {
            args[k] = val[nd->in[k]];
            masked |= mask[nd->in[k]] != SN_NONE || nd->mask_arg;
        }
        const sn_layer_vtable_n *vn = sn_layer_vt_n(l);
        sn_node y;
        if (vn && masked && sn_layer_is_mha(l)) {
            sn_node im[8]; /* each input's mask; MultiHeadAttention takes at most 4 */
            for (int k = 0; k < nd->n_in && k < 8; k++) im[k] = mask[nd->in[k]];
            y = sn_layer_mha_forward_masked(l, g, nd->n_in, args, im, training);
            mask[i] = mask[nd->in[0]]; /* Keras: the output carries the query's mask */
        } else if (vn && masked && merge_ors_masks(l)) {
            y = vn->forward_n(l, g, nd->n_in, args, training, updates);
            /* Keras's Merge.compute_mask: none if an input has none, else their OR (of 0/1
             * masks: a + b - a b) */
            bool all = true;
            for (int k = 0; k < nd->n_in; k++) all = all && mask[nd->in[k]] != SN_NONE;
            for (int k = 0; all && k < nd->n_in; k++) {
                sn_node mk = mask[nd->in[k]];
                mask[i] = k == 0 ? mk : sn_sub(g, sn_add(g, mask[i], mk), sn_mul(g, mask[i], mk));
            }
        } else if (vn && masked)
            y = sn_graph_fail(g, SN_ERR_UNSUPPORTED, "layer '%s' (%s) receives a mask (from an "
                              "Embedding with mask_zero=True); sinter's element-wise merges and "
                              "MultiHeadAttention take one, this layer none",
                              l->name, l->vt->class_name);
        else if (vn)
            y = vn->forward_n(l, g, nd->n_in, args, training, updates);
        else {
            /* an explicit mask keyword argument (Keras's saved NotEqual) is the mask Keras
             * passes; otherwise the one carried from the argument */
            mask[i] = nd->mask_arg ? val[nd->in[nd->n_in - 1]] : mask[nd->in[0]];
            y = sn_layer_call_masked(l, g, args[0], &mask[i], training, updates);
        }
        if (y == SN_NONE || sn_graph_status(g) != SN_OK) {
            sn_status gs = sn_graph_status(g);
            st = sn_error_context(gs != SN_OK ? gs : SN_ERR_STATE, "model '%s', layer '%s' (%s)",
                                  m->name, l->name, l->vt->class_name);
        }
        val[i] = y;
    }
    for (int k = 0; st == SN_OK && k < f->n_outputs; k++) out[k] = val[f->outputs[k]];
    free(val);
    free(args);
    free(mask);
    return st;
}
