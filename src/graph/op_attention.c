/* The Transformer ops: layer_norm, gelu with tanh (Keras's approximate=True), and fused
 * scaled-dot-product attention. Shape inference, builders and gradient rules; kernels in
 * backend/ref/ref_attention.c (double, the score matrix materialised) and
 * backend/cpu/cpu_attention.c (blocked, flash-attention style).
 *
 * Layout of attention: q [B, Tq, H, D], k and v [B, Tk, H, D], out [B, Tq, H, D]. It is the
 * layout Keras's MultiHeadAttention computes in: its projections are the einsums
 * "abc,cde->abde" (x [B, T, d] times kernel [d, H, D]) and its output projection
 * "abcd,cde->abe" (kernel [H, D, d]), so with this layout each projection is one plain
 * [B*T, d] x [d, H*D] matmul and no transpose is ever made; the kernel walks each head's rows
 * with a stride of H*D.
 *
 * The gradients are one op each with a flat result (dx | dgamma | dbeta, dq | dk | dv) sliced
 * and reshaped here, as the whole-layer RNN ops do. attention_grad reads the forward's
 * per-row log-sum-exp from the forward call's kernel state when the planner linked them
 * (op_def.fwd_state_input), and recomputes it otherwise. */
#include <math.h>

#include "graph/graph_impl.h"

#define IN(g, node, i) (&(g)->nodes[(node)->in[i]])

static sn_status need_float(const sn_node_t *node, const sn_node_t *x, const char *what) {
    if (!sn_dtype_is_float(x->dtype))
        return sn_errorf(SN_ERR_SHAPE, "%s: %s must be float, got %s", sn_ops[node->op]->name,
                         what, sn_dtype_name(x->dtype));
    return SN_OK;
}

/* ---- layer_norm ------------------------------------------------------------------------ */
/* x [..., C], gamma [C], beta [C] */
static sn_status infer_layer_norm(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0), *ga = IN(g, node, 1), *be = IN(g, node, 2);
    SN_TRY(need_float(node, x, "x"));
    char s1[128], s2[128], s3[128];
    int64_t C = x->shape.ndim ? x->shape.dim[x->shape.ndim - 1] : 0;
    if (x->shape.ndim < 1 || ga->shape.ndim != 1 || be->shape.ndim != 1 || ga->shape.dim[0] != C ||
        be->shape.dim[0] != C || ga->dtype != x->dtype || be->dtype != x->dtype)
        return sn_errorf(SN_ERR_SHAPE, "layer_norm: x %s %s needs gamma and beta [%lld] of its "
                         "dtype, got %s %s and %s %s", sn_dtype_name(x->dtype),
                         sn_shape_str(&x->shape, s1, sizeof s1), (long long)C,
                         sn_dtype_name(ga->dtype), sn_shape_str(&ga->shape, s2, sizeof s2),
                         sn_dtype_name(be->dtype), sn_shape_str(&be->shape, s3, sizeof s3));
    node->dtype = x->dtype;
    node->shape = x->shape;
    return SN_OK;
}

/* (x, gamma, dy) -> flat [numel(x) + 2 C] */
static sn_status infer_layer_norm_grad(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0), *ga = IN(g, node, 1), *dy = IN(g, node, 2);
    if (!sn_shape_equal(&x->shape, &dy->shape) || x->dtype != dy->dtype)
        return sn_errorf(SN_ERR_SHAPE, "layer_norm_grad: dy must match x");
    node->dtype = x->dtype;
    node->shape = (sn_shape){.ndim = 1,
                             .dim = {sn_shape_numel(&x->shape) + 2 * ga->shape.dim[0]}};
    return SN_OK;
}

sn_node sn_layer_norm(sn_graph *g, sn_node x, sn_node gamma, sn_node beta, double epsilon) {
    if (!(epsilon >= 0) || !isfinite(epsilon))
        return sn_graph_fail(g, SN_ERR_INVALID, "layer_norm: epsilon %g must be finite and >= 0",
                             epsilon);
    sn_attrs a = {.norm = {.epsilon = epsilon}};
    return sn_graph_add(g, SN_OP_LAYER_NORM, 3, (sn_node[]){x, gamma, beta}, &a);
}

/* Slices a flat gradient into n pieces shaped like shapes[i]. */
static void split_flat(sn_graph *g, sn_node flat, int n, const sn_shape *shapes, sn_node *dx) {
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        int64_t k = sn_shape_numel(&shapes[i]);
        dx[i] = sn_reshape(g, sn_slice(g, flat, (int64_t[]){off}, (int64_t[]){k}), &shapes[i]);
        off += k;
    }
}

static void grad_layer_norm(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node flat = sn_graph_add(g, SN_OP_LAYER_NORM_GRAD, 3,
                                (sn_node[]){node.in[0], node.in[1], dy}, &node.attr);
    if (flat == SN_NONE) return;
    sn_shape s[3] = {g->nodes[node.in[0]].shape, g->nodes[node.in[1]].shape,
                     g->nodes[node.in[2]].shape};
    split_flat(g, flat, 3, s, dx);
}

/* ---- gelu, tanh form --------------------------------------------------------------------- */
static sn_status infer_unary(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *x = IN(g, node, 0);
    SN_TRY(need_float(node, x, "x"));
    if (node->n_in == 2 && (!sn_shape_equal(&x->shape, &IN(g, node, 1)->shape) ||
                            IN(g, node, 1)->dtype != x->dtype))
        return sn_errorf(SN_ERR_SHAPE, "%s: dy must match x", sn_ops[node->op]->name);
    node->dtype = x->dtype;
    node->shape = x->shape;
    return SN_OK;
}

sn_node sn_gelu_tanh(sn_graph *g, sn_node x) {
    return sn_graph_add(g, SN_OP_GELU_TANH, 1, &x, NULL);
}

static void grad_gelu_tanh(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    dx[0] = sn_graph_add(g, SN_OP_GELU_TANH_GRAD, 2, (sn_node[]){g->nodes[n].in[0], dy}, NULL);
}

/* ---- attention ------------------------------------------------------------------------- */
/* The optional mask m [B, Tq, Tk] of q's dtype: key j is visible to query i of batch row b
 * when m[b, i, j] != 0 (and, if causal, j <= i + q_offset). */
static sn_status check_mask(const sn_node_t *node, const sn_node_t *q, const sn_node_t *k,
                            const sn_node_t *m) {
    char s1[128];
    if (m->shape.ndim == 3 && m->shape.dim[0] == q->shape.dim[0] &&
        m->shape.dim[1] == q->shape.dim[1] && m->shape.dim[2] == k->shape.dim[1] &&
        m->dtype == q->dtype)
        return SN_OK;
    return sn_errorf(SN_ERR_SHAPE, "%s: the mask must be [B, Tq, Tk] = [%lld, %lld, %lld] of "
                     "q's dtype %s, got %s %s", sn_ops[node->op]->name,
                     (long long)q->shape.dim[0], (long long)q->shape.dim[1],
                     (long long)k->shape.dim[1], sn_dtype_name(q->dtype),
                     sn_dtype_name(m->dtype), sn_shape_str(&m->shape, s1, sizeof s1));
}

static sn_status infer_attention(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *q = IN(g, node, 0), *k = IN(g, node, 1), *v = IN(g, node, 2);
    if (node->op == SN_OP_ATTENTION && node->n_in != 3 && node->n_in != 4)
        return sn_errorf(SN_ERR_SHAPE, "attention: %d inputs, expected q, k, v and an optional "
                         "mask", node->n_in);
    SN_TRY(need_float(node, q, "q"));
    char s1[128], s2[128], s3[128];
    bool ok = q->shape.ndim == 4 && sn_shape_equal(&k->shape, &v->shape) && k->shape.ndim == 4 &&
              k->shape.dim[0] == q->shape.dim[0] && k->shape.dim[2] == q->shape.dim[2] &&
              k->shape.dim[3] == q->shape.dim[3] && k->dtype == q->dtype && v->dtype == q->dtype;
    if (!ok)
        return sn_errorf(SN_ERR_SHAPE, "attention: needs q [B, Tq, H, D] and k, v [B, Tk, H, D] "
                         "of one dtype, got q %s %s, k %s %s, v %s %s", sn_dtype_name(q->dtype),
                         sn_shape_str(&q->shape, s1, sizeof s1), sn_dtype_name(k->dtype),
                         sn_shape_str(&k->shape, s2, sizeof s2), sn_dtype_name(v->dtype),
                         sn_shape_str(&v->shape, s3, sizeof s3));
    if (node->op == SN_OP_ATTENTION && node->n_in == 4)
        SN_TRY(check_mask(node, q, k, IN(g, node, 3)));
    node->dtype = q->dtype;
    node->shape = q->shape;
    return SN_OK;
}

/* (q, k, v, o, dy[, mask]) -> flat [numel(q) + numel(k) + numel(v)] */
static sn_status infer_attention_grad(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *q = IN(g, node, 0), *k = IN(g, node, 1), *o = IN(g, node, 3),
                    *dy = IN(g, node, 4);
    if (node->n_in != 5 && node->n_in != 6)
        return sn_errorf(SN_ERR_SHAPE, "attention_grad: %d inputs, expected q, k, v, o, dy and "
                         "an optional mask", node->n_in);
    if (node->n_in == 6) SN_TRY(check_mask(node, q, k, IN(g, node, 5)));
    if (!sn_shape_equal(&q->shape, &o->shape) || !sn_shape_equal(&q->shape, &dy->shape) ||
        dy->dtype != q->dtype)
        return sn_errorf(SN_ERR_SHAPE, "attention_grad: o and dy must match q");
    node->dtype = q->dtype;
    node->shape = (sn_shape){.ndim = 1, .dim = {sn_shape_numel(&q->shape) +
                                                2 * sn_shape_numel(&k->shape)}};
    return SN_OK;
}

sn_node sn_attention(sn_graph *g, sn_node q, sn_node k, sn_node v, double scale, bool causal,
                     int64_t q_offset) {
    if (!isfinite(scale) || q_offset < 0)
        return sn_graph_fail(g, SN_ERR_INVALID, "attention: scale %g must be finite and "
                             "q_offset %lld >= 0", scale, (long long)q_offset);
    sn_attrs a = {.attn = {.scale = scale, .causal = causal, .q_offset = q_offset}};
    return sn_graph_add(g, SN_OP_ATTENTION, 3, (sn_node[]){q, k, v}, &a);
}

sn_node sn_attention_masked(sn_graph *g, sn_node q, sn_node k, sn_node v, sn_node mask,
                            double scale, bool causal) {
    if (!isfinite(scale))
        return sn_graph_fail(g, SN_ERR_INVALID, "attention: scale %g must be finite", scale);
    if (mask == SN_NONE) return sn_attention(g, q, k, v, scale, causal, 0);
    sn_attrs a = {.attn = {.scale = scale, .causal = causal}};
    return sn_graph_add(g, SN_OP_ATTENTION, 4, (sn_node[]){q, k, v, mask}, &a);
}

sn_node sn_attention_dropout(sn_graph *g, sn_node q, sn_node k, sn_node v, sn_node mask,
                             double scale, bool causal, double rate, uint64_t seed) {
    if (!isfinite(scale) || !(rate >= 0.0 && rate < 1.0))
        return sn_graph_fail(g, SN_ERR_INVALID, "attention: scale %g must be finite and the "
                             "dropout rate %g in [0, 1)", scale, rate);
    if (rate == 0.0) return sn_attention_masked(g, q, k, v, mask, scale, causal);
    sn_attrs a = {.attn = {.scale = scale, .causal = causal, .drop_rate = rate,
                           .drop_seed = seed}};
    sn_node id = sn_graph_add(g, SN_OP_ATTENTION, mask == SN_NONE ? 3 : 4,
                              (sn_node[]){q, k, v, mask}, &a);
    if (id != SN_NONE) g->nodes[id].attr.attn.drop_node = id; /* keys the mask, as sn_dropout */
    return id;
}

/* The mask gets no gradient (dx[3] stays SN_NONE): it only selects. The gradient call copies
 * the attributes, dropout's seed and node included: it redraws the forward's masks. */
static void grad_attention(sn_graph *g, sn_node n, sn_node dy, sn_node *dx) {
    sn_node_t node = g->nodes[n];
    sn_node flat = sn_graph_add(g, SN_OP_ATTENTION_GRAD, node.n_in + 2,
                                (sn_node[]){node.in[0], node.in[1], node.in[2], n, dy,
                                            node.n_in == 4 ? node.in[3] : SN_NONE},
                                &node.attr);
    if (flat == SN_NONE) return;
    sn_shape s[3] = {g->nodes[node.in[0]].shape, g->nodes[node.in[1]].shape,
                     g->nodes[node.in[2]].shape};
    split_flat(g, flat, 3, s, dx);
}

/* (q, k, v [B, s, H, D], kc, vc [B, C, H, D], pos int32 [1]) -> [B, s, H, D] */
static sn_status infer_attention_cached(const sn_graph *g, sn_node_t *node) {
    const sn_node_t *q = IN(g, node, 0), *kc = IN(g, node, 3), *vc = IN(g, node, 4),
                    *pos = IN(g, node, 5);
    SN_TRY(infer_attention(g, node)); /* q, k, v */
    char s1[128], s2[128];
    bool ok = kc->shape.ndim == 4 && sn_shape_equal(&kc->shape, &vc->shape) &&
              kc->shape.dim[0] == q->shape.dim[0] && kc->shape.dim[2] == q->shape.dim[2] &&
              kc->shape.dim[3] == q->shape.dim[3] && kc->dtype == q->dtype &&
              vc->dtype == q->dtype && pos->dtype == SN_I32 && sn_shape_numel(&pos->shape) == 1;
    if (!ok)
        return sn_errorf(SN_ERR_SHAPE, "attention_cached: needs caches [B, C, H, D] matching q "
                         "%s and an int32 position [1], got cache %s, position %s",
                         sn_shape_str(&q->shape, s1, sizeof s1),
                         sn_shape_str(&kc->shape, s2, sizeof s2), sn_dtype_name(pos->dtype));
    return SN_OK;
}

sn_node sn_attention_cached(sn_graph *g, sn_node q, sn_node k, sn_node v, sn_node k_cache,
                            sn_node v_cache, sn_node pos, double scale) {
    if (!isfinite(scale))
        return sn_graph_fail(g, SN_ERR_INVALID, "attention_cached: scale %g is not finite", scale);
    sn_attrs a = {.attn = {.scale = scale, .causal = true}};
    return sn_graph_add(g, SN_OP_ATTENTION_CACHED, 6,
                        (sn_node[]){q, k, v, k_cache, v_cache, pos}, &a);
}

const sn_op_def sn_def_attention_cached = {.name = "attention_cached", .n_in = 6,
                                           .infer = infer_attention_cached};
const sn_op_def sn_def_layer_norm = {.name = "layer_norm", .n_in = 3,
                                     .infer = infer_layer_norm, .grad = grad_layer_norm};
const sn_op_def sn_def_layer_norm_grad = {.name = "layer_norm_grad", .n_in = 3,
                                          .infer = infer_layer_norm_grad};
const sn_op_def sn_def_gelu_tanh = {.name = "gelu_tanh", .n_in = 1, .infer = infer_unary,
                                    .grad = grad_gelu_tanh};
const sn_op_def sn_def_gelu_tanh_grad = {.name = "gelu_tanh_grad", .n_in = 2,
                                         .infer = infer_unary};
const sn_op_def sn_def_attention = {.name = "attention", .n_in = -1, .infer = infer_attention,
                                    .grad = grad_attention};
const sn_op_def sn_def_attention_grad = {.name = "attention_grad", .n_in = -1,
                                         .infer = infer_attention_grad,
                                         .fwd_state_input = 1 + 3};
