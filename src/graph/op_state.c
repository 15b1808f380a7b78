/* Side-effect ops: assignments to variables and the fused optimizer update. They run after
 * every node of a step that reads their variable (the planner orders them: assignments at the
 * step's end, an optimizer update as soon as its variable's last reader and its gradient have
 * run, plan.c's early_updates), so a step reads each variable's value from before the step. */
#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

static sn_status infer_assign(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *v = IN(g, node, 0), *x = IN(g, node, 1);
    const char *op = sn_ops[node->op]->name;
    char s1[128], s2[128];
    sn_shape r;
    if (v->op != SN_OP_VARIABLE)
        return sn_errorf(SN_ERR_INVALID, "%s: the first input must be a variable, got a %s node",
                         op, sn_ops[v->op]->name);
    if (v->dtype != x->dtype)
        return sn_errorf(SN_ERR_SHAPE, "%s: variable '%s' is %s but the value is %s", op,
                         v->name ? v->name : "", sn_dtype_name(v->dtype), sn_dtype_name(x->dtype));
    if (!sn_broadcast_shape(&v->shape, &x->shape, &r) || !sn_shape_equal(&r, &v->shape))
        return sn_errorf(SN_ERR_SHAPE, "%s: a value of shape %s does not fit variable '%s' of "
                         "shape %s", op, sn_shape_str(&x->shape, s1, sizeof s1),
                         v->name ? v->name : "", sn_shape_str(&v->shape, s2, sizeof s2));
    node->shape = v->shape;
    node->dtype = v->dtype;
    return SN_OK;
}

sn_node sn_assign(sn_graph *g, sn_node var, sn_node value) {
    sn_node in[2] = {var, value};
    return sn_graph_add(g, SN_OP_ASSIGN, 2, in, NULL);
}

sn_node sn_assign_add(sn_graph *g, sn_node var, sn_node value) {
    sn_node in[2] = {var, value};
    return sn_graph_add(g, SN_OP_ASSIGN_ADD, 2, in, NULL);
}

/* (var, grad, iterations, slots...) */
static sn_status infer_apply(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *v = IN(g, node, 0);
    char s1[128], s2[128];
    if (node->n_in < 3)
        return sn_errorf(SN_ERR_INVALID, "apply_optimizer: needs var, grad and iterations");
    if (v->op != SN_OP_VARIABLE)
        return sn_errorf(SN_ERR_INVALID, "apply_optimizer: input 0 must be a variable");
    if (IN(g, node, 2)->op != SN_OP_VARIABLE || IN(g, node, 2)->dtype != SN_I32)
        return sn_errorf(SN_ERR_INVALID, "apply_optimizer: input 2 must be the int32 iterations "
                         "variable");
    for (int i = 1; i < node->n_in; i++) {
        if (i == 2) continue;
        const sn_node_t *x = IN(g, node, i);
        if (x->dtype != v->dtype || !sn_shape_equal(&x->shape, &v->shape))
            return sn_errorf(SN_ERR_SHAPE, "apply_optimizer: input %d (%s %s) does not match "
                             "variable '%s' (%s %s)", i, sn_dtype_name(x->dtype),
                             sn_shape_str(&x->shape, s1, sizeof s1), v->name ? v->name : "",
                             sn_dtype_name(v->dtype), sn_shape_str(&v->shape, s2, sizeof s2));
        if (i > 2 && x->op != SN_OP_VARIABLE)
            return sn_errorf(SN_ERR_INVALID, "apply_optimizer: slot input %d must be a variable", i);
    }
    node->shape = v->shape;
    node->dtype = v->dtype;
    return SN_OK;
}

sn_node sn_apply_optimizer(sn_graph *g, int n_in, const sn_node *in, const sn_attrs *attr) {
    return sn_graph_add(g, SN_OP_APPLY_OPTIMIZER, n_in, in, attr);
}

const sn_op_def sn_def_assign = {.name = "assign", .n_in = 2, .infer = infer_assign,
    .side_effect = true};
const sn_op_def sn_def_assign_add = {.name = "assign_add", .n_in = 2, .infer = infer_assign,
    .side_effect = true};
const sn_op_def sn_def_apply_optimizer = {.name = "apply_optimizer", .n_in = -1,
    .infer = infer_apply, .side_effect = true};

/* all_reduce: the sum of x over every replica (attr.allreduce), so x's shape; f32 only, as
 * the collectives add floats. It sits between the gradients and the optimizer update, so
 * nothing differentiates through it: no gradient rule. */
static sn_status infer_all_reduce(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    if (x->dtype != SN_F32)
        return sn_errorf(SN_ERR_SHAPE, "all_reduce: the value is %s; the collectives sum f32",
                         sn_dtype_name(x->dtype));
    if (!node->attr.allreduce.comm)
        return sn_errorf(SN_ERR_INVALID, "all_reduce: no collective given");
    if (node->attr.allreduce.phase == SN_ALLREDUCE_WAIT && x->op != SN_OP_ALL_REDUCE)
        return sn_errorf(SN_ERR_INVALID, "all_reduce: a wait phase reads its start phase, got a "
                         "%s node", sn_ops[x->op]->name);
    node->shape = x->shape;
    node->dtype = SN_F32;
    return SN_OK;
}

sn_node sn_all_reduce(sn_graph *g, sn_node x, sn_allreduce_comm *comm, int replica, int phase,
                      bool hoist) {
    sn_attrs a = {.allreduce = {.comm = comm, .replica = replica, .phase = phase, .hoist = hoist}};
    return sn_graph_add(g, SN_OP_ALL_REDUCE, 1, &x, &a);
}

sn_node sn_all_reduce_to_first(sn_graph *g, sn_node x, sn_allreduce_comm *comm, int replica,
                               int phase, bool hoist) {
    sn_attrs a = {.allreduce = {.comm = comm, .replica = replica, .phase = phase, .hoist = hoist,
                                .to_first = true}};
    return sn_graph_add(g, SN_OP_ALL_REDUCE, 1, &x, &a);
}

sn_node sn_all_reduce_barrier(sn_graph *g, sn_node var, sn_allreduce_comm *comm, int replica) {
    if (var >= 0 && var < g->n_nodes && g->nodes[var].op != SN_OP_VARIABLE)
        return sn_graph_fail(g, SN_ERR_INVALID, "all_reduce barrier: node %d is a %s; it takes "
                             "a variable", (int)var, sn_ops[g->nodes[var].op]->name);
    sn_attrs a = {.allreduce = {.comm = comm, .replica = replica, .phase = SN_ALLREDUCE_BARRIER}};
    sn_node n = sn_graph_add(g, SN_OP_ALL_REDUCE, 1, &var, &a);
    /* A side effect: it runs with the updates at the end of the step, after them (creation
     * order), and its value is its variable's storage. */
    if (n != SN_NONE) g->nodes[n].flags |= SN_NODE_SIDE_EFFECT;
    return n;
}

const sn_op_def sn_def_all_reduce = {.name = "all_reduce", .n_in = 1, .infer = infer_all_reduce};
