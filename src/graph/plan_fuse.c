/* The fusion pass of the planner (plan_impl.h, sn_plan_fuse).
 *
 * A relu whose input is a bias_add read by nothing else runs inside that bias_add (one pass
 * over the activation instead of two; relu's gradient reads relu's output, so the
 * pre-activation has no other reader). The relu becomes a view of the bias_add's buffer and
 * the bias_add's call carries sn_kcall.relu.
 *
 * Then the larger patterns of kernel.h (sn_fused_kind), each only where the backend has a
 * kernel that supports the fused call (so a backend without one, or SN_KERNELS=ref, plans
 * exactly as before). Autodiff never sees any of this: the graph keeps every node; the plan
 * computes several of them in one call and stores fewer buffers.
 *
 *   conv2d -> bias_add(+relu) [-> max_pool2d]: the conv call reads the bias too and writes
 *     the relu's output into its own buffer (the bias_add, and through it the relu, become
 *     views of it; the conv's own pre-bias value is never stored, so it must have no other
 *     reader); the pool's output is the call's second output, the pool's call is dropped.
 *     Where the pool is the relu output's only reader (inference), it is not stored.
 *   conv2d -> bias_add without a relu (SN_FUSED_CONV_BIAS: a convolution followed by
 *     BatchNormalization): the conv call adds the bias; the bias_add becomes a view of it.
 *   max_pool2d_grad -> relu_grad [-> reduce_sum over N, H, W]: the pool-gradient call masks
 *     by the relu output it already reads (relu_grad's y must be the pool's x) and writes the
 *     relu_grad's value (relu_grad becomes a view of it); the bias gradient is its second
 *     output. One pass over the activation instead of three. Where that gradient's only
 *     other reader is the conv2d_bwd_filter of a first layer (no gradient to the image), the
 *     filter gradient is a third output and the activation gradient is never stored; and
 *     when that layer's conv is fused with its pool and the relu output has no other reader,
 *     the backward call recomputes the relu output from the layer's input and weights, so
 *     the forward stores only the pool.
 *   bn_train -> relu | relu6, and its backward (fuse_bn_act): one call writes the
 *     activation's output; the two BatchNormalization gradients mask the incoming gradient
 *     themselves, so the activation gradient is never called or stored.
 *   bn_grad_x -> reduce_sum over all but the channels (fuse_bn_grad_sum): the bias gradient
 *     of the layer before a BatchNormalization is summed as dx is written.
 *   a data gradient plus the L2 penalty's gradient (fuse_add_l2): the sum's call forms the
 *     penalty's gradient itself from the weight; its four nodes are never stored.
 *
 * SN_FUSE=0 turns all fusion off, SN_FUSE=relu keeps only the bias_add + relu one (tests
 * compare the paths; benchmarks measure them). */
#include <string.h>

#include "graph/plan_impl.h"

void sn_plan_fused_call(const sn_plan *p, sn_kcall *k) {
    const sn_graph *g = p->g;
    const sn_fusion *f = &p->fusion[k->id];
    k->fused = f->kind;
    for (int j = 0; j < f->n_extra_in; j++) k->x[k->n_in++] = sn_plan_value_desc(p, f->extra_in[j]);
    k->n_out2 = f->n_out2;
    for (int j = 0; j < f->n_out2; j++) {
        k->y2[j] = sn_plan_value_desc(p, f->out2[j]);
        k->attr2[j] = &g->nodes[f->out2[j]].attr;
    }
}

void sn_plan_describe_call(const sn_plan *p, sn_node id, sn_kcall *k) {
    const sn_node_t *nd = &p->g->nodes[id];
    k->op = nd->op;
    k->attr = &nd->attr;
    k->id = id;
    k->y = sn_plan_value_desc(p, id);
    k->n_in = nd->n_in;
    for (int j = 0; j < nd->n_in; j++) k->x[j] = sn_plan_value_desc(p, nd->in[j]);
    sn_plan_fused_call(p, k);
}

/* Whether the backend has a kernel for node id's call with the fusion p->fusion[id]. */
static bool backend_takes(const sn_plan *p, sn_node id) {
    sn_kcall k = {0};
    sn_plan_describe_call(p, id, &k);
    return sn_backend_select(p->backend, &k) != NULL;
}

/* The only needed reader of node n (its op must be `op`), or SN_NONE. */
static sn_node sole_reader(const sn_plan *p, const int *readers, sn_node n, sn_op op) {
    if (readers[n] != 1 || p->is_target[n]) return SN_NONE;
    const sn_graph *g = p->g;
    for (int i = n + 1; i < p->n_nodes; i++)
        if (p->needed[i] && g->nodes[i].op == op)
            for (int j = 0; j < g->nodes[i].n_in; j++)
                if (g->nodes[i].in[j] == n) return i;
    return SN_NONE;
}

/* The first needed node of op `op` whose input `slot` is n, or SN_NONE. */
static sn_node reader_of(const sn_plan *p, sn_node n, sn_op op, int slot) {
    const sn_graph *g = p->g;
    for (int i = n + 1; i < p->n_nodes; i++)
        if (p->needed[i] && g->nodes[i].op == op && g->nodes[i].n_in > slot &&
            g->nodes[i].in[slot] == n)
            return i;
    return SN_NONE;
}

/* conv2d -> bias_add(+relu) [-> max_pool2d] at conv node cv; marks dropped calls in drop. */
static void fuse_conv(sn_plan *p, const int *readers, sn_node cv, unsigned char *drop) {
    const sn_graph *g = p->g;
    if (g->nodes[cv].dtype != SN_F32) return;
    sn_node ba = sole_reader(p, readers, cv, SN_OP_BIAS_ADD);
    if (ba == SN_NONE || g->nodes[ba].in[0] != cv) return;
    if (!p->fuse_relu[ba]) { /* no relu: the bias alone joins the convolution */
        p->fusion[cv] = (sn_fusion){.kind = SN_FUSED_CONV_BIAS, .n_extra_in = 1,
                                    .extra_in = {g->nodes[ba].in[1]}};
        if (!backend_takes(p, cv)) {
            p->fusion[cv] = (sn_fusion){0};
            return;
        }
        p->loc[ba] = (sn_loc){.kind = LOC_ALIAS, .alias = cv};
        drop[ba] = 1;
        return;
    }
    sn_node relu = reader_of(p, ba, SN_OP_RELU, 0); /* the view fuse_relu made */
    sn_node mp = relu == SN_NONE ? SN_NONE : reader_of(p, relu, SN_OP_MAX_POOL2D, 0);
    sn_fusion *f = &p->fusion[cv];
    *f = (sn_fusion){.kind = SN_FUSED_CONV_BIAS_RELU, .n_extra_in = 1,
                     .extra_in = {g->nodes[ba].in[1]}};
    if (mp != SN_NONE) {
        f->n_out2 = 1, f->out2[0] = mp;
        if (!backend_takes(p, cv)) f->n_out2 = 0; /* the kernel may still take conv alone */
    }
    if (!backend_takes(p, cv)) {
        *f = (sn_fusion){0};
        return;
    }
    p->loc[ba] = (sn_loc){.kind = LOC_ALIAS, .alias = cv};
    drop[ba] = 1;
    if (!f->n_out2) return;
    drop[mp] = 1;
    /* Inference (evaluate, predict): the pool is the relu output's only reader, so the relu
     * output need not be stored at all. */
    if (readers[relu] == 1 && !p->is_target[relu]) p->loc[cv] = (sn_loc){.kind = LOC_NONE};
}

/* max_pool2d_grad -> relu_grad [-> reduce_sum over N, H, W] at pool-gradient node pg. */
static void fuse_pool_grad(sn_plan *p, const int *readers, sn_node pg, unsigned char *drop) {
    const sn_graph *g = p->g;
    const sn_node_t *pn = &g->nodes[pg];
    if (pn->dtype != SN_F32 || pn->n_in != 2) return;
    sn_node rg = sole_reader(p, readers, pg, SN_OP_RELU_GRAD);
    /* relu_grad (y, dy): dy must be this gradient and y the activation the pool read. */
    if (rg == SN_NONE || g->nodes[rg].in[1] != pg ||
        sn_plan_root(p, g->nodes[rg].in[0]) != sn_plan_root(p, pn->in[0]))
        return;
    sn_node rs = reader_of(p, rg, SN_OP_REDUCE_SUM, 0);
    if (rs != SN_NONE && (pn->shape.ndim != 4 || g->nodes[rs].attr.reduce.mask != 7u))
        rs = SN_NONE;
    sn_fusion *f = &p->fusion[pg];
    *f = (sn_fusion){.kind = SN_FUSED_POOL_RELU_GRAD};
    if (rs != SN_NONE) {
        f->n_out2 = 1, f->out2[0] = rs;
        if (!backend_takes(p, pg)) f->n_out2 = 0;
    }
    if (!backend_takes(p, pg)) {
        *f = (sn_fusion){0};
        return;
    }
    p->loc[rg] = (sn_loc){.kind = LOC_ALIAS, .alias = pg};
    drop[rg] = 1;
    if (!f->n_out2) return;
    drop[rs] = 1;
    /* A first layer: the relu_grad's value read only by the bias gradient and the filter
     * gradient (no gradient flows to the image). Then the filter gradient joins the call and
     * the activation gradient is never stored. */
    sn_node bf = reader_of(p, rg, SN_OP_CONV2D_BWD_FILTER, 1);
    if (bf == SN_NONE || readers[rg] != 2 || p->is_target[rg] || g->nodes[bf].dtype != SN_F32)
        return;
    sn_fusion ff = {.kind = SN_FUSED_POOL_RELU_GRAD_FILTER, .n_extra_in = 1,
                    .extra_in = {g->nodes[bf].in[0]}, .n_out2 = 2, .out2 = {rs, bf}};
    sn_fusion keep = *f;
    *f = ff;
    if (!backend_takes(p, pg)) {
        *f = keep;
        return;
    }
    p->loc[pg] = (sn_loc){.kind = LOC_NONE};
    drop[bf] = 1;
    /* And where the relu output comes from a fused first-layer conv (with its pool) and is
     * read by nothing but that pool, this call and the relu_grad: recompute it here from the
     * layer's input, weights and bias, so that it is never stored. */
    sn_node y = pn->in[0], cv = sn_plan_root(p, y);
    const sn_fusion *fc = &p->fusion[cv];
    if (fc->kind != SN_FUSED_CONV_BIAS_RELU || fc->n_out2 != 1 || readers[y] != 3 ||
        p->is_target[y] || g->nodes[cv].in[0] != g->nodes[bf].in[0])
        return;
    keep = *f;
    f->n_extra_in = 3;
    f->extra_in[1] = g->nodes[cv].in[1], f->extra_in[2] = fc->extra_in[0];
    if (!backend_takes(p, pg)) {
        *f = keep;
        return;
    }
    p->loc[cv] = (sn_loc){.kind = LOC_NONE};
}

/* Whether node m is mul(b, w) or mul(w, b), f32, with exactly one needed reader. */
static bool is_bw_product(const sn_plan *p, const int *readers, sn_node m, sn_node b, sn_node w) {
    const sn_node_t *nd = &p->g->nodes[m];
    if (nd->op != SN_OP_MUL || nd->dtype != SN_F32 || readers[m] != 1 || p->is_target[m])
        return false;
    return (nd->in[0] == b && nd->in[1] == w) || (nd->in[0] == w && nd->in[1] == b);
}

/* add(G, add(mul(B, w), mul(B, w))) with B = broadcast_to(s), s one element, at the outer
 * add a: the L2 penalty's gradient (2 l2 w, as autodiff spells d sum(w * w)) summed with the
 * data gradient G. Five passes over w's size (broadcast, two products, their sum, + G), four
 * of them writing a buffer the size of w, become one (the 147456 x 256 Dense kernel of the
 * guide CNN: ~55 ms a step). Bit for bit the graph's value: both products are fl(s w), their
 * sum 2 fl(s w) exactly. (Fused into the optimizer's pass instead it saves one more pass, but
 * G then lives to the end of the step and the guide's arena grew by 88 MB.) */
static void fuse_add_l2(sn_plan *p, const int *readers, sn_node a, unsigned char *drop) {
    const sn_graph *g = p->g;
    const sn_node_t *an = &g->nodes[a];
    if (an->n_in != 2 || an->dtype != SN_F32) return;
    int64_t n = sn_shape_numel(&an->shape);
    for (int side = 0; side < 2; side++) {
        sn_node r = an->in[side], gd = an->in[1 - side];
        const sn_node_t *rn = &g->nodes[r];
        if (rn->op != SN_OP_ADD || rn->dtype != SN_F32 || readers[r] != 1 || p->is_target[r] ||
            r == gd || sn_shape_numel(&rn->shape) != n || sn_shape_numel(&g->nodes[gd].shape) != n ||
            g->nodes[gd].dtype != SN_F32)
            continue;
        sn_node m1 = rn->in[0], m2 = rn->in[1];
        if (m1 == m2 || g->nodes[m1].op != SN_OP_MUL) continue;
        /* B is the broadcast input of m1, w its other input */
        bool b0 = g->nodes[g->nodes[m1].in[0]].op == SN_OP_BROADCAST_TO;
        sn_node b = g->nodes[m1].in[b0 ? 0 : 1], w = g->nodes[m1].in[b0 ? 1 : 0];
        const sn_node_t *bn = &g->nodes[b];
        if (bn->op != SN_OP_BROADCAST_TO || bn->dtype != SN_F32 || readers[b] != 2 ||
            p->is_target[b] || sn_shape_numel(&bn->shape) != n || w == b ||
            g->nodes[w].dtype != SN_F32 || sn_shape_numel(&g->nodes[w].shape) != n)
            continue;
        sn_node s = bn->in[0];
        if (g->nodes[s].dtype != SN_F32 || sn_shape_numel(&g->nodes[s].shape) != 1) continue;
        if (!is_bw_product(p, readers, m1, b, w) || !is_bw_product(p, readers, m2, b, w)) continue;
        p->fusion[a] = (sn_fusion){.kind = SN_FUSED_ADD_L2, .n_extra_in = 3,
                                   .extra_in = {gd, w, s}};
        if (!backend_takes(p, a)) {
            p->fusion[a] = (sn_fusion){0};
            return;
        }
        sn_node gone[4] = {r, m1, m2, b};
        for (int j = 0; j < 4; j++) {
            p->loc[gone[j]] = (sn_loc){.kind = LOC_NONE};
            drop[gone[j]] = 1;
        }
        return;
    }
}

/* BatchNormalization -> relu | relu6 at bn_train node bn (SN_FUSED_BN_RELU/RELU6): the
 * bn_train call writes the activation's output (the activation becomes a view of it, its
 * call is dropped), and where the backward is autodiff's activation gradient read only by the
 * pair bn_grad_params, bn_grad_x of the same layer, those two read the gradient reaching the
 * activation instead and mask it themselves (the activation gradient is neither called nor
 * stored). Forward and backward fuse together or the backward not at all: the backward
 * recomputes the normalised value with the forward kernel's own arithmetic, so the mask is
 * the forward's bit for bit. relu6's gradient reads the normalised value itself, which is no
 * longer stored once fused: with relu6, a backward that does not fuse keeps the forward
 * unfused too. One to three passes over the activation fewer a layer (Xception's and
 * MobileNetV2's BatchNormalization-then-activation layers). */
static void fuse_bn_act(sn_plan *p, const int *readers, sn_node bn, unsigned char *drop) {
    const sn_graph *g = p->g;
    const sn_node_t *bd = &g->nodes[bn];
    if (bd->dtype != SN_F32 || p->is_target[bn]) return;
    sn_node act = reader_of(p, bn, SN_OP_RELU, 0);
    sn_op grad_op = SN_OP_RELU_GRAD;
    int kind = SN_FUSED_BN_RELU;
    if (act == SN_NONE) {
        act = reader_of(p, bn, SN_OP_RELU6, 0);
        grad_op = SN_OP_RELU6_GRAD, kind = SN_FUSED_BN_RELU6;
    }
    if (act == SN_NONE || drop[act]) return;
    /* The activation gradient: relu's reads the relu output, relu6's the normalised value. */
    sn_node ag = reader_of(p, kind == SN_FUSED_BN_RELU ? act : bn, grad_op, 0);
    sn_node gp = SN_NONE, gx = SN_NONE;
    if (ag != SN_NONE && readers[ag] == 2 && !p->is_target[ag]) {
        gp = reader_of(p, ag, SN_OP_BN_GRAD_PARAMS, 2);
        gx = reader_of(p, ag, SN_OP_BN_GRAD_X, 3);
    }
    bool back = gp != SN_NONE && gx != SN_NONE;
    if (back) {
        const sn_node_t *pd = &g->nodes[gp], *xd = &g->nodes[gx];
        back = pd->in[0] == bd->in[0] && pd->in[1] == bd->in[1] && xd->in[0] == bd->in[0] &&
               xd->in[1] == bd->in[1] && xd->in[2] == bd->in[2] && xd->in[4] == gp &&
               pd->attr.norm.epsilon == bd->attr.norm.epsilon &&
               xd->attr.norm.epsilon == bd->attr.norm.epsilon;
    }
    /* bn's readers: the activation, and relu6's gradient when that fuses away */
    int others = kind == SN_FUSED_BN_RELU6 && back ? 1 : 0;
    if (readers[bn] != 1 + others) return;
    p->fusion[bn] = (sn_fusion){.kind = kind};
    if (!backend_takes(p, bn)) {
        p->fusion[bn] = (sn_fusion){0};
        return;
    }
    if (back) {
        sn_node dy = g->nodes[ag].in[1], gamma = bd->in[2], beta = bd->in[3];
        p->fusion[gp] = (sn_fusion){.kind = kind, .n_extra_in = 3, .extra_in = {dy, gamma, beta}};
        p->fusion[gx] = (sn_fusion){.kind = kind, .n_extra_in = 2, .extra_in = {dy, beta}};
        if (backend_takes(p, gp) && backend_takes(p, gx)) {
            p->loc[ag] = (sn_loc){.kind = LOC_NONE};
            drop[ag] = 1;
        } else {
            p->fusion[gp] = p->fusion[gx] = (sn_fusion){0};
            if (others) { /* relu6's gradient still reads the normalised value */
                p->fusion[bn] = (sn_fusion){0};
                return;
            }
        }
    }
    p->loc[act] = (sn_loc){.kind = LOC_ALIAS, .alias = bn};
    drop[act] = 1;
}

/* bn_grad_x -> reduce_sum over every axis but the last, at bn_grad_x node gx
 * (SN_FUSED_BN_GRAD_SUM, or out2 on a BN_RELU/RELU6 call): the bias gradient of the layer
 * before the BatchNormalization (Conv2D's and Dense's default use_bias) becomes the call's
 * second output, summed as dx is written, so the reduce_sum's pass over dx goes (the small
 * Xception's twelve: ~15 ms of a ~590 ms mixed-bf16 step on Zen 4). dx itself is still
 * stored for its other readers. The sum is taken in another order than reduce_sum's: equal
 * to rounding (tests/test_fused.c bounds it). */
static void fuse_bn_grad_sum(sn_plan *p, sn_node gx, unsigned char *drop) {
    const sn_graph *g = p->g;
    const sn_node_t *xd = &g->nodes[gx];
    sn_fusion *f = &p->fusion[gx];
    if (xd->dtype != SN_F32 || xd->shape.ndim < 2 || f->n_out2 ||
        (f->kind && f->kind != SN_FUSED_BN_RELU && f->kind != SN_FUSED_BN_RELU6))
        return;
    const int nd = xd->shape.ndim;
    const int64_t C = xd->shape.dim[nd - 1];
    sn_node rs = reader_of(p, gx, SN_OP_REDUCE_SUM, 0);
    if (rs == SN_NONE || drop[rs] || g->nodes[rs].dtype != SN_F32 ||
        g->nodes[rs].attr.reduce.mask != (1u << (nd - 1)) - 1u ||
        sn_shape_numel(&g->nodes[rs].shape) != C)
        return;
    sn_fusion keep = *f;
    if (!f->kind) f->kind = SN_FUSED_BN_GRAD_SUM;
    f->n_out2 = 1, f->out2[0] = rs;
    if (!backend_takes(p, gx)) {
        *f = keep;
        return;
    }
    drop[rs] = 1;
}

sn_status sn_plan_fuse(sn_plan *p, int n, int *n_out) {
    const sn_graph *g = p->g;
    int nn = p->n_nodes;
    *n_out = n;
    unsigned char *fuse_relu = p->fuse_relu = sn_calloc((size_t)nn, 1);
    p->fusion = sn_calloc((size_t)nn, sizeof *p->fusion);
    if (!fuse_relu || !p->fusion) return SN_ERR_NOMEM;
    const char *fuse_env = sn_env(SN_ENV_FUSE);
    if (fuse_env && !strcmp(fuse_env, "0")) return SN_OK;
    int *readers = sn_calloc((size_t)nn, sizeof *readers);
    unsigned char *drop = sn_calloc((size_t)nn, 1);
    if (!readers || !drop) {
        free(readers);
        free(drop);
        return SN_ERR_NOMEM;
    }
    for (int i = 0; i < nn; i++)
        if (p->needed[i])
            for (int j = 0; j < g->nodes[i].n_in; j++) readers[g->nodes[i].in[j]]++;
    for (int c = 0; c < n; c++) {
        sn_node r = p->order[c];
        const sn_node_t *nd = &g->nodes[r];
        sn_node b = nd->n_in == 1 ? nd->in[0] : SN_NONE;
        if (nd->op == SN_OP_RELU && g->nodes[b].op == SN_OP_BIAS_ADD && readers[b] == 1 &&
            !p->is_target[b] && g->nodes[b].dtype == nd->dtype) {
            fuse_relu[b] = 1;
            p->loc[r] = (sn_loc){.kind = LOC_ALIAS, .alias = b};
            drop[r] = 1; /* no call of its own */
        }
    }
    if (!(fuse_env && !strcmp(fuse_env, "relu")))
        for (int c = 0; c < n; c++) {
            sn_node id = p->order[c];
            if (drop[id]) continue;
            if (g->nodes[id].op == SN_OP_CONV2D) fuse_conv(p, readers, id, drop);
            else if (g->nodes[id].op == SN_OP_MAX_POOL2D_GRAD) fuse_pool_grad(p, readers, id, drop);
            else if (g->nodes[id].op == SN_OP_ADD) fuse_add_l2(p, readers, id, drop);
            else if (g->nodes[id].op == SN_OP_BN_TRAIN) fuse_bn_act(p, readers, id, drop);
            else if (g->nodes[id].op == SN_OP_BN_GRAD_X) fuse_bn_grad_sum(p, id, drop);
        }
    int w = 0;
    for (int c = 0; c < n; c++)
        if (!drop[p->order[c]]) p->order[w++] = p->order[c];
    free(readers);
    free(drop);
    *n_out = w;
    return SN_OK;
}
