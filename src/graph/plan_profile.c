/* Per-call timing of a plan (`sinter bench --profile`): with profiling on, the executor reads
 * the clock around every kernel call (exec.c, run_steps) and adds the time to the call's entry. */
#include "graph/plan_impl.h"

sn_status sn_plan_profile(sn_plan *p, bool on) {
    if (!p) return sn_errorf(SN_ERR_INVALID, "plan_profile: plan is NULL");
    free(p->prof);
    p->prof = NULL;
    if (on && !(p->prof = sn_calloc((size_t)(p->n_calls ? p->n_calls : 1), sizeof *p->prof)))
        return SN_ERR_NOMEM;
    return SN_OK;
}

bool sn_plan_profile_entry(const sn_plan *p, int c, sn_node *node, const char **impl,
                           double *seconds) {
    if (!p || c < 0 || c >= p->n_calls) return false;
    if (node) *node = p->calls[c].id;
    if (impl) *impl = p->kern[c]->impl;
    if (seconds) *seconds = p->prof ? p->prof[c] : 0.0;
    return true;
}
