/* The learning rate between executions: setting it, and the Keras callbacks and schedules
 * that change it (ReduceLROnPlateau, LearningRateScheduler, keras.optimizers.schedules).
 *
 * Each apply_optimizer node carries the rate in its attributes, and the update kernels read
 * the attributes of their node at every run (sn_kcall.node points into the graph), so a new
 * rate set here is used from the next execution on, without re-planning. */
#include <math.h>
#include <string.h>

#include "nn/train_impl.h"

void sn_train_set_lr(sn_model *m, double lr) {
    m->train->opts.optimizer.learning_rate = lr;
    sn_graph *g = m->g;
    /* Every update node of the graph: fit's plans (one per batch shape) and a strategy's
     * apply plan each have their own. Nodes of an earlier compile are unused either way. */
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == SN_OP_APPLY_OPTIMIZER) g->nodes[i].attr.optim.lr = lr;
}

sn_status sn_model_set_learning_rate(sn_model *m, double lr) {
    if (!m) return sn_errorf(SN_ERR_INVALID, "set_learning_rate: model is NULL");
    if (!m->train || !m->train->compiled)
        return sn_errorf(SN_ERR_STATE, "set_learning_rate: model '%s' is not compiled",
                         m->name ? m->name : "");
    if (!(lr > 0) || !isfinite(lr))
        return sn_errorf(SN_ERR_INVALID, "set_learning_rate: %g must be a finite number > 0", lr);
    sn_train_set_lr(m, lr);
    return SN_OK;
}

double sn_model_get_learning_rate(const sn_model *m) {
    return m && m->train && m->train->compiled ? m->train->opts.optimizer.learning_rate : NAN;
}
