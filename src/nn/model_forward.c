/* The Sequential model's forward chain: input x through every layer in order, adding nodes to
 * the model's graph. Its one home, below compile.c (fit's plans, one per replica under a
 * strategy), which builds on it; model.c, which frees their state with the
 * model, does not call it. */
#include "nn/nn_impl.h"

sn_status sn_model_forward(sn_model *m, sn_node x, bool training, sn_updates *updates,
                           sn_node *out) {
    if (!m || !out) return sn_errorf(SN_ERR_INVALID, "sn_model_forward: NULL argument");
    if (!m->built) return sn_errorf(SN_ERR_STATE, "model '%s' is not built", m->name);
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
    sn_node y = x;
    for (int i = 0; i < m->n_layers; i++) {
        sn_layer *l = m->layers[i];
        y = l->vt->forward(l, g, y, training, updates);
        if (y == SN_NONE || sn_graph_status(g) != SN_OK) {
            sn_status st = sn_graph_status(g);
            return sn_error_context(st != SN_OK ? st : SN_ERR_STATE, "model '%s', layer '%s' (%s)",
                                    m->name, l->name, l->vt->class_name);
        }
    }
    *out = y;
    return SN_OK;
}
