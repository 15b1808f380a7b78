/* Weight penalties (Keras's kernel_regularizer, bias_regularizer, ...): the layers register
 * them at build (sn_layer_add_regularizer, layers_common.c); compile sums them into the
 * training loss. Keras 3 (keras/src/regularizers/regularizers.py): L1 is
 * l1 * sum(abs(w)), L2 is l2 * sum(square(w)), L1L2 both. */
#include "nn/nn_impl.h"

/* |w| as relu(w) + relu(-w): its gradient is sign(w), 0 at 0 (as TensorFlow's abs). */
static sn_node abs_node(sn_graph *g, sn_node w) {
    return sn_add(g, sn_relu(g, w), sn_relu(g, sn_neg(g, w)));
}

sn_status sn_model_regularization(sn_model *m, sn_node *penalty, bool *none) {
    *penalty = SN_NONE;
    *none = true;
    if (!m->built) return sn_errorf(SN_ERR_STATE, "model '%s' is not built", m->name);
    sn_graph *g = m->g;
    sn_node total = SN_NONE;
    for (int i = 0; i < m->n_layers; i++) {
        const sn_layer *l = m->layers[i];
        for (int j = 0; j < l->n_regs; j++) {
            sn_node w = l->regs[j].var;
            sn_dtype dt = sn_node_dtype(g, w);
            const sn_regularizer *r = &l->regs[j].r;
            sn_node p = SN_NONE;
            if (r->l1 != 0.0)
                p = sn_mul(g, sn_scalar(g, dt, r->l1), sn_reduce_sum(g, abs_node(g, w), 0, NULL,
                                                                     false));
            if (r->l2 != 0.0) {
                sn_node q = sn_mul(g, sn_scalar(g, dt, r->l2),
                                   sn_reduce_sum(g, sn_mul(g, w, w), 0, NULL, false));
                p = p == SN_NONE ? q : sn_add(g, p, q);
            }
            if (p == SN_NONE) continue;
            total = total == SN_NONE ? p : sn_add(g, total, p);
        }
    }
    SN_TRY(sn_graph_status(g));
    *penalty = total;
    *none = total == SN_NONE;
    return SN_OK;
}
