/* A caller's graph run as one plan per replica (sinter/dist.h): the all-reduce and barrier
 * nodes over the strategy's collective, and the replica threads that fit uses
 * (sn_replicas_run), fed from one callback on the calling thread. This is how the Python
 * package runs strategy.run inside a traced function the way fit runs its step. */
#include "distribute/distribute_impl.h"
#include "distribute/replicas.h"
#include "graph/graph_impl.h"

static sn_status check_replica(const sn_strategy *s, const sn_graph *g, int replica,
                               const char *what) {
    if (!s || !g) return sn_errorf(SN_ERR_INVALID, "%s: %s is NULL", what, s ? "graph" : "strategy");
    int nl = sn_strategy_local_replicas(s);
    if (replica < 0 || replica >= nl)
        return sn_errorf(SN_ERR_INVALID, "%s: replica %d; the strategy has local replicas 0..%d",
                         what, replica, nl - 1);
    return SN_OK;
}

sn_status sn_strategy_all_reduce_node(sn_strategy *s, sn_graph *g, sn_node x, int replica,
                                      sn_node *out) {
    SN_TRY(check_replica(s, g, replica, "strategy_all_reduce_node"));
    if (!out) return sn_errorf(SN_ERR_INVALID, "strategy_all_reduce_node: out is NULL");
    if (sn_strategy_num_replicas(s) == 1) { /* nothing to sum: the value itself */
        *out = x;
        return SN_OK;
    }
    sn_allreduce_comm *comm;
    SN_TRY(sn_strategy_allreduce(s, &comm));
    /* WHOLE and not hoisted: the replicas meet once per all-reduce where it was created, in
     * the order the caller created them (the same on every replica). */
    *out = sn_strategy_shares_variables(s)
               ? sn_all_reduce_to_first(g, x, comm, replica, SN_ALLREDUCE_WHOLE, false)
               : sn_all_reduce(g, x, comm, replica, SN_ALLREDUCE_WHOLE, false);
    return *out == SN_NONE ? sn_error_context(sn_graph_status(g), "replica %d's all-reduce", replica)
                           : SN_OK;
}

sn_status sn_strategy_barrier_node(sn_strategy *s, sn_graph *g, sn_node var, int replica,
                                   sn_node *out) {
    SN_TRY(check_replica(s, g, replica, "strategy_barrier_node"));
    if (!out) return sn_errorf(SN_ERR_INVALID, "strategy_barrier_node: out is NULL");
    sn_allreduce_comm *comm;
    SN_TRY(sn_strategy_allreduce(s, &comm));
    *out = sn_all_reduce_barrier(g, var, comm, replica);
    return *out == SN_NONE ? sn_error_context(sn_graph_status(g), "replica %d's barrier", replica)
                           : SN_OK;
}

typedef struct run_feed {
    sn_replica_next_fn next;
    void *ctx;
    const sn_replica_input *in;
    int n;
} run_feed;

static sn_status feed_next(void *ctx, int64_t step) {
    run_feed *f = ctx;
    f->in = NULL;
    f->n = 0;
    SN_TRY(f->next(f->ctx, step, &f->in, &f->n));
    if (f->n < 0 || (f->n > 0 && !f->in))
        return sn_errorf(SN_ERR_INVALID, "strategy_run_plans: the feed gave %d inputs at %p for "
                         "step %lld", f->n, (const void *)f->in, (long long)step);
    return SN_OK;
}

static sn_status feed_fill(void *ctx, int replica, sn_plan *p, int64_t step) {
    const run_feed *f = ctx;
    for (int i = 0; i < f->n; i++) {
        const sn_replica_input *x = &f->in[i];
        if (x->replica != replica) continue;
        SN_TRY(sn_error_context(sn_plan_set_input(p, x->node, x->data, x->bytes),
                                "replica %d's input node %d at step %lld", replica, x->node,
                                (long long)step));
    }
    return SN_OK;
}

sn_status sn_strategy_run_plans(sn_strategy *s, sn_plan *const *plans, int64_t steps,
                                sn_replica_next_fn next, void *ctx) {
    if (!s || !plans)
        return sn_errorf(SN_ERR_INVALID, "strategy_run_plans: %s is NULL", s ? "plans" : "strategy");
    if (steps < 0)
        return sn_errorf(SN_ERR_INVALID, "strategy_run_plans: steps %lld; expected >= 0",
                         (long long)steps);
    int nl = sn_strategy_local_replicas(s);
    for (int r = 0; r < nl; r++)
        if (!plans[r])
            return sn_errorf(SN_ERR_INVALID, "strategy_run_plans: replica %d's plan is NULL", r);
    if (steps == 0) return SN_OK;
    run_feed f = {.next = next, .ctx = ctx};
    sn_replica_feed feed = {.next = feed_next, .fill = feed_fill, .ctx = &f};
    return sn_replicas_run(s, plans, steps, next ? &feed : NULL);
}
