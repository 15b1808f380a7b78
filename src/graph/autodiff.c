/* Symbolic reverse-mode autodiff: the GradientTape of sinter. Gradients are new nodes of the
 * same graph, so one plan runs forward, backward and the update, and the planner sees all of
 * it (buffer reuse across the whole step, no per-step tape). */
#include <string.h>

#include "graph/graph_impl.h"

sn_status sn_gradients(sn_graph *g, sn_node loss, int n, const sn_node *wrt, sn_node *grads) {
    if (!g) return sn_errorf(SN_ERR_INVALID, "gradients: graph is NULL");
    SN_TRY(g->status);
    if (n < 0 || (n > 0 && (!wrt || !grads)))
        return sn_errorf(SN_ERR_INVALID, "gradients: wrt and grads must hold %d nodes", n);
    if (loss < 0 || loss >= g->n_nodes)
        return sn_errorf(SN_ERR_INVALID, "gradients: loss %d is not a node of this graph", (int)loss);
    const sn_node_t *L = &g->nodes[loss];
    char b[128];
    if (!sn_dtype_is_float(L->dtype) || sn_shape_numel(&L->shape) != 1)
        return sn_errorf(SN_ERR_SHAPE, "gradients: the loss must be a float scalar, got %s %s",
                         sn_dtype_name(L->dtype), sn_shape_str(&L->shape, b, sizeof b));
    for (int i = 0; i < n; i++)
        if (wrt[i] < 0 || wrt[i] >= g->n_nodes)
            return sn_errorf(SN_ERR_INVALID, "gradients: wrt[%d] = %d is not a node of this graph",
                             i, (int)wrt[i]);

    int count = loss + 1; /* nodes after the loss cannot influence it */
    unsigned char *reach = sn_calloc((size_t)count, 1);
    sn_node *grad = sn_malloc(sizeof *grad * (size_t)count);
    if (!reach || !grad) {
        free(reach);
        free(grad);
        return SN_ERR_NOMEM;
    }
    /* reach[i]: node i depends on some wrt node (creation order is topological). */
    for (int i = 0; i < n; i++)
        if (wrt[i] < count) reach[wrt[i]] = 1;
    for (int i = 0; i < count; i++) {
        grad[i] = SN_NONE;
        const sn_node_t *nd = &g->nodes[i];
        for (int j = 0; j < nd->n_in && !reach[i]; j++) reach[i] = reach[nd->in[j]];
    }

    sn_shape ls = L->shape;
    double one = 1.0;
    sn_node seed = sn_scalar(g, L->dtype, one);
    grad[loss] = sn_reshape(g, seed, &ls);

    for (int i = loss; i >= 0 && g->status == SN_OK; i--) {
        if (grad[i] == SN_NONE || !reach[i]) continue;
        const sn_op_def *def = sn_ops[g->nodes[i].op];
        if (!def->grad) continue; /* leaves, and ops that stop gradients (argmax, accuracy) */
        sn_node dx[SN_MAX_INPUTS];
        for (int j = 0; j < SN_MAX_INPUTS; j++) dx[j] = SN_NONE;
        def->grad(g, i, grad[i], dx);
        /* A copy: sn_add below grows (and may move) the node array. */
        const sn_node_t nd = g->nodes[i];
        for (int j = 0; j < nd.n_in; j++) {
            sn_node in = nd.in[j];
            if (dx[j] == SN_NONE || !reach[in] || !sn_dtype_is_float(g->nodes[in].dtype))
                continue;
            grad[in] = grad[in] == SN_NONE ? dx[j] : sn_add(g, grad[in], dx[j]);
        }
    }

    for (int i = 0; i < n && g->status == SN_OK; i++) {
        sn_node w = wrt[i];
        if (w < count && grad[w] != SN_NONE) {
            grads[i] = grad[w];
        } else {
            sn_shape ws = g->nodes[w].shape;
            grads[i] = sn_broadcast_to(g, sn_reshape(g, sn_scalar(g, g->nodes[w].dtype, 0.0),
                                                     &(sn_shape){.ndim = 0}), &ws);
        }
    }
    free(reach);
    free(grad);
    if (g->status != SN_OK) return sn_error_context(g->status, "gradients");
    return SN_OK;
}
