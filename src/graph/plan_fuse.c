/* The fusion pass of the planner (plan_impl.h, sn_plan_fuse).
 *
 * A relu whose input is a bias_add read by nothing else runs inside that bias_add (one pass
 * over the activation instead of two; relu's gradient reads relu's output, so the
 * pre-activation has no other reader). The relu becomes a view of the bias_add's buffer and
 * the bias_add's call carries sn_kcall.relu. SN_FUSE=0 turns this off (debugging, tests). */
#include <string.h>

#include "graph/plan_impl.h"

sn_status sn_plan_fuse(sn_plan *p, int n, int *n_out) {
    const sn_graph *g = p->g;
    int nn = p->n_nodes;
    *n_out = n;
    unsigned char *fuse_relu = p->fuse_relu = sn_calloc((size_t)nn, 1);
    if (!fuse_relu) return SN_ERR_NOMEM;
    const char *fuse_env = getenv("SN_FUSE");
    if (fuse_env && !strcmp(fuse_env, "0")) return SN_OK;
    int *readers = sn_calloc((size_t)nn, sizeof *readers);
    if (!readers) return SN_ERR_NOMEM;
    for (int i = 0; i < nn; i++)
        if (p->needed[i])
            for (int j = 0; j < g->nodes[i].n_in; j++) readers[g->nodes[i].in[j]]++;
    int w = 0;
    for (int c = 0; c < n; c++) {
        sn_node r = p->order[c];
        const sn_node_t *nd = &g->nodes[r];
        sn_node b = nd->n_in == 1 ? nd->in[0] : SN_NONE;
        if (nd->op == SN_OP_RELU && g->nodes[b].op == SN_OP_BIAS_ADD && readers[b] == 1 &&
            !p->is_target[b] && g->nodes[b].dtype == nd->dtype) {
            fuse_relu[b] = 1;
            p->loc[r] = (sn_loc){.kind = LOC_ALIAS, .alias = b};
            continue; /* no call of its own */
        }
        p->order[w++] = r;
    }
    free(readers);
    *n_out = w;
    return SN_OK;
}
