/* Matrix multiplication with transposes and batch dimensions. */
#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

static sn_status infer_matmul(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *a = IN(g, node, 0), *b = IN(g, node, 1);
    bool ta = node->attr.matmul.ta, tb = node->attr.matmul.tb;
    char s1[128], s2[128];
    if (a->dtype != b->dtype || !sn_dtype_is_float(a->dtype))
        return sn_errorf(SN_ERR_SHAPE, "matmul: needs two float inputs of one dtype, got %s and %s",
                         sn_dtype_name(a->dtype), sn_dtype_name(b->dtype));
    int na = a->shape.ndim, nb = b->shape.ndim;
    if (na < 2 || nb < 2)
        return sn_errorf(SN_ERR_SHAPE, "matmul: inputs must have rank >= 2, got %s and %s",
                         sn_shape_str(&a->shape, s1, sizeof s1), sn_shape_str(&b->shape, s2, sizeof s2));
    int64_t m = ta ? a->shape.dim[na - 1] : a->shape.dim[na - 2];
    int64_t ka = ta ? a->shape.dim[na - 2] : a->shape.dim[na - 1];
    int64_t kb = tb ? b->shape.dim[nb - 1] : b->shape.dim[nb - 2];
    int64_t n = tb ? b->shape.dim[nb - 2] : b->shape.dim[nb - 1];
    if (ka != kb)
        return sn_errorf(SN_ERR_SHAPE, "matmul: inner dimensions differ: %s%s x %s%s (%lld vs %lld)",
                         sn_shape_str(&a->shape, s1, sizeof s1), ta ? "^T" : "",
                         sn_shape_str(&b->shape, s2, sizeof s2), tb ? "^T" : "",
                         (long long)ka, (long long)kb);
    /* Batch dimensions: equal, or one side has none (broadcast). */
    const sn_node_t *batched = na >= nb ? a : b;
    if (na > 2 && nb > 2) {
        bool same = na == nb;
        for (int i = 0; same && i < na - 2; i++) same = a->shape.dim[i] == b->shape.dim[i];
        if (!same)
            return sn_errorf(SN_ERR_SHAPE, "matmul: batch dimensions of %s and %s differ",
                             sn_shape_str(&a->shape, s1, sizeof s1), sn_shape_str(&b->shape, s2, sizeof s2));
    }
    node->shape = batched->shape;
    node->shape.dim[node->shape.ndim - 2] = m;
    node->shape.dim[node->shape.ndim - 1] = n;
    node->dtype = a->dtype;
    return SN_OK;
}

sn_node sn_matmul(sn_graph *g, sn_node a, sn_node b, bool ta, bool tb) {
    sn_node in[2] = {a, b};
    sn_attrs at = {.matmul = {.ta = ta, .tb = tb}};
    return sn_graph_add(g, SN_OP_MATMUL, 2, in, &at);
}

static void grad_matmul(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node a = node.in[0], b = node.in[1];
    bool ta = node.attr.matmul.ta, tb = node.attr.matmul.tb;
    sn_node da, db;
    if (!ta && !tb) {        /* C = A B */
        da = sn_matmul(g, dy, b, false, true);
        db = sn_matmul(g, a, dy, true, false);
    } else if (ta && !tb) {  /* C = A^T B */
        da = sn_matmul(g, b, dy, false, true);
        db = sn_matmul(g, a, dy, false, false);
    } else if (!ta && tb) {  /* C = A B^T */
        da = sn_matmul(g, dy, b, false, false);
        db = sn_matmul(g, dy, a, true, false);
    } else {                 /* C = A^T B^T */
        da = sn_matmul(g, b, dy, true, true);
        db = sn_matmul(g, dy, a, true, true);
    }
    /* A side without batch dimensions collects its gradient over the batch. */
    sn_shape as = g->nodes[a].shape, bs = g->nodes[b].shape;
    dx[0] = sn_sum_to_shape(g, da, &as);
    dx[1] = sn_sum_to_shape(g, db, &bs);
}

const sn_op_def sn_def_matmul = {.name = "matmul", .n_in = 2, .infer = infer_matmul,
    .grad = grad_matmul};
