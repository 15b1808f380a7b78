/* Shape ops: reshape, flatten, transpose, slice (and zero padding, its gradient op), concat,
 * gather. */
#include <string.h>

#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

static sn_status infer_reshape(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    sn_shape t = node->attr.target.shape;
    char s1[128], s2[128];
    if (t.ndim < 0 || t.ndim > SN_MAX_DIMS)
        return sn_errorf(SN_ERR_SHAPE, "reshape: rank %d is outside [0, %d]", t.ndim, SN_MAX_DIMS);
    int infer_at = -1;
    int64_t known = 1;
    for (int i = 0; i < t.ndim; i++) {
        if (t.dim[i] == -1 && infer_at < 0) infer_at = i;
        else if (t.dim[i] <= 0)
            return sn_errorf(SN_ERR_SHAPE, "reshape: target %s: dimension %d must be positive "
                             "(or a single -1)", sn_shape_str(&t, s1, sizeof s1), i);
        else known *= t.dim[i];
    }
    int64_t n = sn_shape_numel(&x->shape);
    if (infer_at >= 0) {
        if (known == 0 || n % known)
            return sn_errorf(SN_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) to %s",
                             sn_shape_str(&x->shape, s1, sizeof s1), (long long)n,
                             sn_shape_str(&t, s2, sizeof s2));
        t.dim[infer_at] = n / known;
        known *= t.dim[infer_at];
    }
    if (known != n)
        return sn_errorf(SN_ERR_SHAPE, "reshape: cannot reshape %s (%lld elements) to %s "
                         "(%lld elements)", sn_shape_str(&x->shape, s1, sizeof s1), (long long)n,
                         sn_shape_str(&t, s2, sizeof s2), (long long)known);
    node->shape = t;
    node->attr.target.shape = t;
    node->dtype = x->dtype;
    return SN_OK;
}

sn_node sn_reshape(sn_graph *g, sn_node x, const sn_shape *shape) {
    if (g && g->status == SN_OK && !shape)
        return sn_graph_fail(g, SN_ERR_INVALID, "reshape: shape is NULL");
    if (g && g->status == SN_OK && x >= 0 && x < g->n_nodes &&
        sn_shape_equal(&g->nodes[x].shape, shape))
        return x;
    sn_attrs a = {.target = {.shape = shape ? *shape : (sn_shape){0}}};
    return sn_graph_add(g, SN_OP_RESHAPE, 1, &x, &a);
}

sn_node sn_flatten(sn_graph *g, sn_node x) {
    if (!g || g->status != SN_OK) return SN_NONE;
    if (x < 0 || x >= g->n_nodes)
        return sn_graph_fail(g, SN_ERR_INVALID, "flatten: input is not a node of this graph");
    sn_shape s = g->nodes[x].shape;
    if (s.ndim < 1)
        return sn_graph_fail(g, SN_ERR_SHAPE, "flatten: needs a batch dimension, got a scalar");
    sn_shape t = {.ndim = 2, .dim = {s.dim[0], sn_shape_numel(&s) / s.dim[0]}};
    return sn_reshape(g, x, &t);
}

static void grad_reshape(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_shape s = g->nodes[g->nodes[n].in[0]].shape;
    dx[0] = sn_reshape(g, dy, &s);
}

static sn_status infer_transpose(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    int seen = 0;
    for (int i = 0; i < x->shape.ndim; i++) {
        int p = node->attr.transpose.perm[i];
        if (p < 0 || p >= x->shape.ndim || (seen & (1 << p)))
            return sn_errorf(SN_ERR_INVALID, "transpose: perm is not a permutation of 0..%d "
                             "(entry %d is %d)", x->shape.ndim - 1, i, p);
        seen |= 1 << p;
        node->shape.dim[i] = x->shape.dim[p];
    }
    node->shape.ndim = x->shape.ndim;
    node->dtype = x->dtype;
    return SN_OK;
}

sn_node sn_transpose(sn_graph *g, sn_node x, const int *perm) {
    if (g && g->status == SN_OK && !perm)
        return sn_graph_fail(g, SN_ERR_INVALID, "transpose: perm is NULL");
    sn_attrs a = {0};
    int nd = (g && x >= 0 && x < g->n_nodes) ? g->nodes[x].shape.ndim : 0;
    for (int i = 0; i < nd && perm; i++) a.transpose.perm[i] = perm[i];
    return sn_graph_add(g, SN_OP_TRANSPOSE, 1, &x, &a);
}

static void grad_transpose(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    int inv[SN_MAX_DIMS];
    for (int i = 0; i < node.shape.ndim; i++) inv[node.attr.transpose.perm[i]] = i;
    dx[0] = sn_transpose(g, dy, inv);
}

static sn_status infer_slice(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    char s1[128];
    /* The builder passes the requested sizes in attr.slice.in_shape; inference then stores the
     * input's shape there, which the gradient (slice_grad) needs. */
    node->shape = node->attr.slice.in_shape;
    for (int i = 0; i < x->shape.ndim; i++) {
        int64_t b = node->attr.slice.begin[i], sz = node->shape.dim[i];
        if (b < 0 || sz < 1 || b + sz > x->shape.dim[i])
            return sn_errorf(SN_ERR_SHAPE, "slice: dimension %d: begin %lld size %lld is outside "
                             "[0, %lld) of input %s", i, (long long)b, (long long)sz,
                             (long long)x->shape.dim[i], sn_shape_str(&x->shape, s1, sizeof s1));
    }
    node->shape.ndim = x->shape.ndim;
    node->attr.slice.in_shape = x->shape;
    node->dtype = x->dtype;
    return SN_OK;
}

sn_node sn_slice(sn_graph *g, sn_node x, const int64_t *begin, const int64_t *size) {
    if (!g || g->status != SN_OK) return SN_NONE;
    if (x < 0 || x >= g->n_nodes || !begin || !size)
        return sn_graph_fail(g, SN_ERR_INVALID, "slice: invalid input node or NULL begin/size");
    sn_shape xs = g->nodes[x].shape;
    sn_attrs a = {0};
    for (int i = 0; i < xs.ndim; i++) {
        a.slice.begin[i] = begin[i];
        a.slice.in_shape.dim[i] = size[i] == -1 ? xs.dim[i] - begin[i] : size[i];
    }
    a.slice.in_shape.ndim = xs.ndim;
    return sn_graph_add(g, SN_OP_SLICE, 1, &x, &a);
}

static void grad_slice(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_attrs a = g->nodes[n].attr;
    dx[0] = sn_graph_add(g, SN_OP_SLICE_GRAD, 1, &dy, &a);
}

/* slice_grad: x placed at attr.slice.begin in zeros of attr.slice.in_shape. Made by the slice's
 * gradient and, as a forward op, by sn_zero_pad. */
static sn_status infer_slice_grad(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    const sn_shape *os = &node->attr.slice.in_shape;
    char s1[128], s2[128];
    bool ok = os->ndim == x->shape.ndim;
    for (int i = 0; ok && i < os->ndim; i++)
        ok = node->attr.slice.begin[i] >= 0 &&
             node->attr.slice.begin[i] + x->shape.dim[i] <= os->dim[i];
    if (!ok)
        return sn_errorf(SN_ERR_SHAPE, "zero padding (slice_grad): input %s does not fit in %s "
                         "at its offsets", sn_shape_str(&x->shape, s1, sizeof s1),
                         sn_shape_str(os, s2, sizeof s2));
    node->shape = *os;
    node->dtype = x->dtype;
    return SN_OK;
}

/* The gradient of a zero padding takes dy's window back out. */
static void grad_slice_grad(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_attrs a = g->nodes[n].attr;
    sn_shape xs = g->nodes[g->nodes[n].in[0]].shape;
    dx[0] = sn_slice(g, dy, a.slice.begin, xs.dim);
}

sn_node sn_zero_pad(sn_graph *g, sn_node x, const int64_t *before, const int64_t *after) {
    if (!g || g->status != SN_OK) return SN_NONE;
    if (x < 0 || x >= g->n_nodes || !before || !after)
        return sn_graph_fail(g, SN_ERR_INVALID, "zero_pad: invalid input node or NULL "
                             "before/after");
    sn_shape xs = g->nodes[x].shape;
    sn_attrs a = {0};
    a.slice.in_shape = xs;
    for (int i = 0; i < xs.ndim; i++) {
        if (before[i] < 0 || after[i] < 0)
            return sn_graph_fail(g, SN_ERR_INVALID, "zero_pad: dimension %d: padding %lld "
                                 "before and %lld after; expected >= 0", i, (long long)before[i],
                                 (long long)after[i]);
        a.slice.begin[i] = before[i];
        a.slice.in_shape.dim[i] += before[i] + after[i];
    }
    return sn_graph_add(g, SN_OP_SLICE_GRAD, 1, &x, &a);
}

static sn_status infer_concat(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x0 = IN(g, node, 0);
    char s1[128], s2[128];
    int axis;
    if (node->n_in < 1)
        return sn_errorf(SN_ERR_INVALID, "concat: needs at least one input");
    if (!sn_norm_axis(node->attr.axis.axis, x0->shape.ndim, &axis))
        return sn_errorf(SN_ERR_INVALID, "concat: axis %d is out of range for rank %d",
                         node->attr.axis.axis, x0->shape.ndim);
    node->attr.axis.axis = axis;
    node->shape = x0->shape;
    node->dtype = x0->dtype;
    for (int i = 1; i < node->n_in; i++) {
        const sn_node_t *xi = IN(g, node, i);
        bool ok = xi->dtype == x0->dtype && xi->shape.ndim == x0->shape.ndim;
        for (int d = 0; ok && d < x0->shape.ndim; d++)
            if (d != axis && xi->shape.dim[d] != x0->shape.dim[d]) ok = false;
        if (!ok)
            return sn_errorf(SN_ERR_SHAPE, "concat: input %d (%s %s) does not match input 0 (%s "
                             "%s) outside axis %d", i, sn_dtype_name(xi->dtype),
                             sn_shape_str(&xi->shape, s1, sizeof s1), sn_dtype_name(x0->dtype),
                             sn_shape_str(&x0->shape, s2, sizeof s2), axis);
        node->shape.dim[axis] += xi->shape.dim[axis];
    }
    return SN_OK;
}

sn_node sn_concat(sn_graph *g, int n, const sn_node *xs, int axis) {
    if (g && g->status == SN_OK && (n < 1 || n > SN_MAX_INPUTS || !xs))
        return sn_graph_fail(g, SN_ERR_INVALID, "concat: takes 1 to %d inputs, got %d",
                             SN_MAX_INPUTS, n);
    sn_attrs a = {.axis = {.axis = axis}};
    return sn_graph_add(g, SN_OP_CONCAT, n, xs, &a);
}

static void grad_concat(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    int axis = node.attr.axis.axis;
    int64_t begin[SN_MAX_DIMS] = {0}, size[SN_MAX_DIMS];
    for (int i = 0; i < node.n_in; i++) {
        sn_shape s = g->nodes[node.in[i]].shape;
        for (int d = 0; d < s.ndim; d++) size[d] = s.dim[d];
        dx[i] = sn_slice(g, dy, begin, size);
        begin[axis] += s.dim[axis];
    }
}

static sn_status infer_gather(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *t = IN(g, node, 0), *ix = IN(g, node, 1);
    char s1[128];
    if (t->shape.ndim != 2)
        return sn_errorf(SN_ERR_SHAPE, "gather: table must be [V, D], got %s",
                         sn_shape_str(&t->shape, s1, sizeof s1));
    if (ix->dtype != SN_I32 || ix->shape.ndim + 1 > SN_MAX_DIMS)
        return sn_errorf(SN_ERR_SHAPE, "gather: indices must be int32 of rank < %d, got %s",
                         SN_MAX_DIMS, sn_dtype_name(ix->dtype));
    node->shape = ix->shape;
    node->shape.dim[node->shape.ndim++] = t->shape.dim[1];
    node->dtype = t->dtype;
    node->attr.gather.vocab = t->shape.dim[0];
    return SN_OK;
}

sn_node sn_gather(sn_graph *g, sn_node table, sn_node indices) {
    sn_node in[2] = {table, indices};
    return sn_graph_add(g, SN_OP_GATHER, 2, in, NULL);
}

static sn_status infer_gather_grad(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *dy = IN(g, node, 1);
    node->shape = (sn_shape){.ndim = 2,
                             .dim = {node->attr.gather.vocab, dy->shape.dim[dy->shape.ndim - 1]}};
    node->dtype = dy->dtype;
    return SN_OK;
}

static void grad_gather(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node in[2] = {node.in[1], dy};
    dx[0] = sn_graph_add(g, SN_OP_GATHER_GRAD, 2, in, &node.attr);
    dx[1] = SN_NONE;
}

const sn_op_def sn_def_reshape = {.name = "reshape", .n_in = 1, .infer = infer_reshape,
    .grad = grad_reshape};
const sn_op_def sn_def_transpose = {.name = "transpose", .n_in = 1, .infer = infer_transpose,
    .grad = grad_transpose};
const sn_op_def sn_def_slice = {.name = "slice", .n_in = 1, .infer = infer_slice,
    .grad = grad_slice};
const sn_op_def sn_def_slice_grad = {.name = "slice_grad", .n_in = 1, .infer = infer_slice_grad,
    .grad = grad_slice_grad};
const sn_op_def sn_def_concat = {.name = "concat", .n_in = -1, .infer = infer_concat,
    .grad = grad_concat};
const sn_op_def sn_def_gather = {.name = "gather", .n_in = 2, .infer = infer_gather,
    .grad = grad_gather};
const sn_op_def sn_def_gather_grad = {.name = "gather_grad", .n_in = 2, .infer = infer_gather_grad};
