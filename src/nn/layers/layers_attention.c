/* Attention layers: LayerNormalization and MultiHeadAttention (Keras's names, arguments,
 * defaults and weight layouts), and the two internal composites of the char_transformer
 * presets (layers_attention.h): keras_hub's TokenAndPositionEmbedding and a pre-LayerNorm
 * decoder block. Each composite emits exactly the nodes its Keras layers would, through the
 * same helpers as the standalone layers below, so their numerics are those layers'. */
#include <math.h>
#include <string.h>

#include "nn/layers/layers_attention.h"
#include "nn/layers/layers_impl.h"

static sn_attn_layer_ext *ext_new(sn_layer *l) {
    if (!l) return NULL;
    l->attn = sn_calloc(1, sizeof *l->attn);
    if (!l->attn) sn_errorf(SN_ERR_NOMEM, "attention layer: out of memory");
    return l->attn;
}

static void ext_free(sn_layer *l) {
    free(l->attn);
    l->attn = NULL;
}

/* A [C] constant of value v in x's dtype (LayerNormalization without center or scale). */
static sn_node fill_const(sn_graph *g, sn_dtype dt, int64_t C, double v) {
    double *d = sn_malloc(sizeof *d * (size_t)C);
    if (!d) return sn_graph_fail(g, SN_ERR_NOMEM, "layer_norm: out of memory");
    for (int64_t i = 0; i < C; i++) d[i] = v;
    sn_node c = sn_const(g, SN_F64, &(sn_shape){.ndim = 1, .dim = {C}}, d);
    free(d);
    return dt == SN_F64 ? c : sn_cast(g, c, dt);
}

static sn_node ln_apply(sn_graph *g, sn_node x, sn_node gamma, sn_node beta, double eps) {
    sn_shape s = sn_node_shape(g, x);
    sn_dtype dt = sn_node_dtype(g, x);
    int64_t C = s.dim[s.ndim - 1];
    if (gamma == SN_NONE) gamma = fill_const(g, dt, C, 1.0);
    if (beta == SN_NONE) beta = fill_const(g, dt, C, 0.0);
    return sn_layer_norm(g, x, gamma, beta, eps);
}

/* x [..., in] @ kernel (any shape [in, ...] flattened to [in, out]) + bias -> [..., out] as
 * one GEMM over the flattened leading rows. */
static sn_node proj(sn_graph *g, sn_node x, sn_node kernel, sn_node bias, int64_t in,
                    int64_t out) {
    sn_node x2 = sn_reshape(g, x, &(sn_shape){.ndim = 2, .dim = {-1, in}});
    sn_node k2 = sn_reshape(g, kernel, &(sn_shape){.ndim = 2, .dim = {in, out}});
    sn_node y = sn_matmul(g, x2, k2, false, false);
    if (bias != SN_NONE)
        y = sn_bias_add(g, y, sn_reshape(g, bias, &(sn_shape){.ndim = 1, .dim = {out}}));
    return y;
}

/* A mask's "visible" (nonzero) entries as exactly 0/1, as Keras's cast to bool: min(1, |m| *
 * 1e30) (the graph has no comparison op; |m| below 1e-30 reads as 0). */
static sn_node mask01(sn_graph *g, sn_node m) {
    sn_dtype dt = sn_node_dtype(g, m);
    sn_node one = sn_scalar(g, dt, 1.0);
    sn_node a = sn_add(g, sn_relu(g, m), sn_relu(g, sn_neg(g, m)));
    return sn_sub(g, one, sn_relu(g, sn_sub(g, one, sn_mul(g, a, sn_scalar(g, dt, 1e30)))));
}

/* Attention with the probabilities materialised, for what the fused kernel does not do: a
 * value head size Dv other than the key's D (with or without dropout on the probabilities). q [B, Tq, H, D], k [B, Tk, H, D], v [B, Tk, H, Dv], mask [B, Tq, Tk] or SN_NONE
 * -> [B, Tq, H, Dv]. Keras's _compute_attention: scores q k^T * scale, masked softmax, dropout,
 * P v. A hidden score becomes -1e9 exactly (s * m + (m - 1) * 1e9, Keras's large negative),
 * so a query that sees no key gets the plain mean of the values and no gradient, as the
 * fused kernel gives. The [B, H, Tq, Tk] scores cost Tq x Tk memory per head. */
static sn_node attend_materialised(sn_graph *g, sn_node q, sn_node k, sn_node v, sn_node mask,
                                   double scale, bool causal, double rate, uint64_t seed) {
    sn_shape qs = sn_node_shape(g, q), ks = sn_node_shape(g, k);
    int64_t B = qs.dim[0], Tq = qs.dim[1], Tk = ks.dim[1];
    sn_dtype dt = sn_node_dtype(g, q);
    const int perm[4] = {0, 2, 1, 3};
    sn_node s = sn_matmul(g, sn_transpose(g, q, perm), sn_transpose(g, k, perm), false, true);
    s = sn_mul(g, s, sn_scalar(g, dt, scale));
    sn_node m = SN_NONE;
    if (mask != SN_NONE)
        m = sn_reshape(g, mask01(g, mask), &(sn_shape){.ndim = 4, .dim = {B, 1, Tq, Tk}});
    if (causal) {
        double *c = sn_malloc(sizeof *c * (size_t)(Tq * Tk));
        if (!c) return sn_graph_fail(g, SN_ERR_NOMEM, "attention: out of memory");
        for (int64_t i = 0; i < Tq; i++)
            for (int64_t j = 0; j < Tk; j++) c[i * Tk + j] = j <= i;
        sn_node cm = sn_const(g, SN_F64, &(sn_shape){.ndim = 2, .dim = {Tq, Tk}}, c);
        free(c);
        if (dt != SN_F64) cm = sn_cast(g, cm, dt);
        m = m == SN_NONE ? cm : sn_mul(g, m, cm);
    }
    if (m != SN_NONE)
        s = sn_add(g, sn_mul(g, s, m),
                   sn_mul(g, sn_sub(g, m, sn_scalar(g, dt, 1.0)), sn_scalar(g, dt, 1e9)));
    sn_node p = sn_softmax(g, s, 3);
    if (rate > 0) {
        /* keyed by the layer's seed and the plan step, not the node (dropout_forward's why) */
        p = sn_dropout(g, p, rate, seed);
        if (p != SN_NONE) g->nodes[p].attr.dropout.mask_node = 0;
    }
    return sn_transpose(g, sn_matmul(g, p, sn_transpose(g, v, perm), false, false), perm);
}

/* Attention of the query xq [B, Tq, dq] over the value xv [B, Tk, dv] with keys from xk
 * [B, Tk, dk] (all three x for self-attention), w = query kernel, bias, key kernel, bias,
 * value kernel, bias, output kernel, bias (biases SN_NONE without use_bias), mask [B, Tq, Tk]
 * or SN_NONE. The projections are Keras's einsums abc,cde->abde and abcd,cde->abe as GEMMs:
 * [B*T, d] x [d, H*D] lands in [B, T, H, D], the attention op's layout, with no transpose.
 * The output is [B, Tq, o->output_dim], or the query's shape without output_dim. The fused
 * kernel (with dropout in training, seed: the layer's) unless value_dim differs from key_dim. */
static sn_node mha_apply_qkv(sn_graph *g, sn_node xq, sn_node xk, sn_node xv, sn_node mask,
                             const sn_node *w, const sn_mha_layer_opts *o, bool training,
                             uint64_t seed) {
    sn_shape s = sn_node_shape(g, xq), sk = sn_node_shape(g, xk), sv = sn_node_shape(g, xv);
    int H = o->num_heads;
    int64_t D = o->key_dim, Dv = o->value_dim ? o->value_dim : D;
    int64_t B = s.dim[0], Tq = s.dim[1], d = s.dim[2], Tk = sk.dim[1];
    int64_t out = o->output_dim ? o->output_dim : d;
    sn_shape hq = {.ndim = 4, .dim = {B, Tq, H, D}}, hk = {.ndim = 4, .dim = {B, Tk, H, D}},
             hv = {.ndim = 4, .dim = {B, Tk, H, Dv}};
    sn_node q = sn_reshape(g, proj(g, xq, w[0], w[1], d, H * D), &hq);
    sn_node k = sn_reshape(g, proj(g, xk, w[2], w[3], sk.dim[2], H * D), &hk);
    sn_node v = sn_reshape(g, proj(g, xv, w[4], w[5], sv.dim[2], H * Dv), &hv);
    double rate = training ? o->dropout : 0.0, scale = 1.0 / sqrt((double)D);
    sn_node a;
    if (Dv == D) {
        a = sn_attention_dropout(g, q, k, v, mask, scale, o->use_causal_mask, rate, seed);
        /* keyed by the layer's seed and the plan step, not the node, as attend_materialised's
         * dropout: both paths draw the same masks (op_desc.h, attn) */
        if (rate > 0 && a != SN_NONE) g->nodes[a].attr.attn.drop_node = 0;
    } else {
        a = attend_materialised(g, q, k, v, mask, scale, o->use_causal_mask, rate, seed);
    }
    sn_node y = proj(g, a, w[6], w[7], H * Dv, out);
    s.dim[2] = out;
    return sn_reshape(g, y, &s);
}

/* Self-attention of x [B, T, d]. */
static sn_node mha_apply(sn_graph *g, sn_node x, const sn_node *w, const sn_mha_layer_opts *o,
                         bool training, uint64_t seed) {
    return mha_apply_qkv(g, x, x, x, SN_NONE, w, o, training, seed);
}

/* ---- LayerNormalization ---------------------------------------------------------------- */
static sn_status ln_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_layer_norm_opts *o = &l->attn->ln;
    if (in->ndim < 1) return sn_layer_shape_error(l, in, "at least (None, features)");
    SN_TRY(sn_layer_add_scale_center(l, g, in->dim[in->ndim - 1], o->scale, o->center,
                                     &o->gamma_initializer, &o->beta_initializer,
                                     &o->gamma_regularizer, &o->beta_regularizer, rng));
    l->out_shape = *in;
    return SN_OK;
}

static sn_node ln_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    const sn_layer_norm_opts *o = &l->attn->ln;
    int i = 0;
    sn_node gamma = o->scale ? l->vars[i++] : SN_NONE;
    sn_node beta = o->center ? l->vars[i] : SN_NONE;
    return ln_apply(g, x, gamma, beta, o->epsilon);
}

static const sn_layer_vtable ln_vt = {"LayerNormalization", "layer_normalization", ln_build,
                                      ln_forward, ext_free};

sn_layer_norm_opts sn_layer_norm_defaults(void) {
    return (sn_layer_norm_opts){.epsilon = 1e-3, .center = true, .scale = true};
}

sn_layer *sn_layer_layer_norm_ex(const sn_layer_norm_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "LayerNormalization: options are NULL");
        return NULL;
    }
    if (!(o->epsilon >= 0) || !isfinite(o->epsilon))
        return sn_layer_bad_arg("LayerNormalization: %s is %g, expected finite and >= 0",
                                "epsilon", o->epsilon);
    if (sn_check_initializer("LayerNormalization", "beta_initializer", &o->beta_initializer) ||
        sn_check_initializer("LayerNormalization", "gamma_initializer", &o->gamma_initializer) ||
        sn_check_regularizer("LayerNormalization", "beta_regularizer", &o->beta_regularizer) ||
        sn_check_regularizer("LayerNormalization", "gamma_regularizer", &o->gamma_regularizer))
        return NULL;
    sn_layer *l = sn_layer_alloc(&ln_vt);
    if (l && !ext_new(l)) {
        free(l);
        return NULL;
    }
    if (l) l->attn->ln = *o;
    return l;
}

sn_layer *sn_layer_layer_norm(void) {
    sn_layer_norm_opts o = sn_layer_norm_defaults();
    return sn_layer_layer_norm_ex(&o);
}

/* ---- MultiHeadAttention ------------------------------------------------------------------ */
static const char *const mha_names[8] = {
    "query/kernel", "query/bias", "key/kernel", "key/bias",
    "value/kernel", "value/bias", "attention_output/kernel", "attention_output/bias"};

/* The 8 (or 4 without bias) variables of an attention of a query of dq features over keys
 * of dk and values of dv features, into w[8]. */
static sn_status mha_vars(sn_layer *l, sn_graph *g, const sn_mha_layer_opts *o, int64_t dq,
                          int64_t dk, int64_t dv, const char *const *names, sn_rng *rng,
                          sn_node *w) {
    int H = o->num_heads;
    int64_t D = o->key_dim, Dv = o->value_dim ? o->value_dim : D;
    int64_t out = o->output_dim ? o->output_dim : dq;
    sn_shape ks[3] = {{.ndim = 3, .dim = {dq, H, D}}, {.ndim = 3, .dim = {dk, H, D}},
                      {.ndim = 3, .dim = {dv, H, Dv}}},
             bs[3] = {{.ndim = 2, .dim = {H, D}}, {.ndim = 2, .dim = {H, D}},
                      {.ndim = 2, .dim = {H, Dv}}},
             oks = {.ndim = 3, .dim = {H, Dv, out}}, obs = {.ndim = 1, .dim = {out}};
    for (int i = 0; i < 4; i++) {
        SN_TRY(sn_layer_add_var(l, g, names[2 * i], i == 3 ? &oks : &ks[i], true,
                                &o->kernel_initializer, SN_INIT_GLOROT_UNIFORM, rng, &w[2 * i]));
        SN_TRY(sn_layer_add_regularizer(l, w[2 * i], &o->kernel_regularizer,
                                        "kernel_regularizer"));
        w[2 * i + 1] = SN_NONE;
        if (!o->use_bias) continue;
        SN_TRY(sn_layer_add_var(l, g, names[2 * i + 1], i == 3 ? &obs : &bs[i], true,
                                &o->bias_initializer, SN_INIT_ZEROS, rng, &w[2 * i + 1]));
        SN_TRY(sn_layer_add_regularizer(l, w[2 * i + 1], &o->bias_regularizer,
                                        "bias_regularizer"));
    }
    return SN_OK;
}

/* The variables of an attention starting at slot `first` of l->vars, into w[8]. */
static void mha_var_nodes(const sn_layer *l, int first, bool use_bias, sn_node *w) {
    int j = first;
    for (int i = 0; i < 4; i++) {
        w[2 * i] = l->vars[j++];
        w[2 * i + 1] = use_bias ? l->vars[j++] : SN_NONE;
    }
}

static sn_status mha_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim != 2) return sn_layer_shape_error(l, in, "(None, steps, features)");
    sn_node w[8];
    SN_TRY(mha_vars(l, g, &l->attn->mha, in->dim[1], in->dim[1], in->dim[1], mha_names, rng, w));
    l->out_shape = *in;
    if (l->attn->mha.output_dim) l->out_shape.dim[1] = l->attn->mha.output_dim;
    return SN_OK;
}

static sn_node mha_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    const sn_mha_layer_opts *o = &l->attn->mha;
    sn_node w[8];
    mha_var_nodes(l, 0, o->use_bias, w);
    return mha_apply(g, x, w, o, training, l->seed);
}

static const sn_layer_vtable mha_vt = {"MultiHeadAttention", "multi_head_attention", mha_build,
                                       mha_forward, ext_free};

/* The general call, mha(query, value[, key][, attention_mask]) (sn_layer_mha_set_call). */
static sn_status mha_build_n(sn_layer *l, sn_graph *g, int n, const sn_shape *in, sn_rng *rng) {
    const sn_attn_layer_ext *e = l->attn;
    if (n != 2 + e->mha_key + e->mha_mask)
        return sn_errorf(SN_ERR_INVALID, "layer '%s' (MultiHeadAttention) is called on %d "
                         "tensors, expected query, value%s%s", l->name, n,
                         e->mha_key ? ", key" : "", e->mha_mask ? ", attention_mask" : "");
    const sn_shape *q = &in[0], *v = &in[1], *k = e->mha_key ? &in[2] : &in[1];
    const char *what[3] = {"query", "value", "key"};
    const sn_shape *qvk[3] = {q, v, k};
    char b[128];
    for (int i = 0; i < 3; i++)
        if (qvk[i]->ndim != 2)
            return sn_errorf(SN_ERR_SHAPE, "layer '%s' (MultiHeadAttention): %s is %s, expected "
                             "(None, steps, features)", l->name, what[i],
                             sn_shape_str(qvk[i], b, sizeof b));
    if (k->dim[0] != v->dim[0])
        return sn_errorf(SN_ERR_SHAPE, "layer '%s' (MultiHeadAttention): key has %lld steps, "
                         "value %lld; they must match", l->name, (long long)k->dim[0],
                         (long long)v->dim[0]);
    if (e->mha_mask) {
        const sn_shape *m = &in[n - 1];
        int64_t Tq = q->dim[0], Tk = v->dim[0];
        bool ok = (m->ndim == 2 && (m->dim[0] == Tq || m->dim[0] == 1) && m->dim[1] == Tk) ||
                  (m->ndim == 1 && m->dim[0] == Tk);
        if (!ok)
            return sn_errorf(SN_ERR_SHAPE, "layer '%s' (MultiHeadAttention): attention_mask is "
                             "%s, expected (None, %lld, %lld), (None, 1, %lld) or (None, %lld)",
                             l->name, sn_shape_str(m, b, sizeof b), (long long)Tq,
                             (long long)Tk, (long long)Tk, (long long)Tk);
    }
    sn_node w[8];
    SN_TRY(mha_vars(l, g, &e->mha, q->dim[1], k->dim[1], v->dim[1], mha_names, rng, w));
    l->out_shape = *q;
    if (e->mha.output_dim) l->out_shape.dim[1] = e->mha.output_dim;
    return SN_OK;
}

/* The mask as [B, Tq, Tk] of the query's dtype: Keras casts it to bool (nonzero: visible)
 * and broadcasts [B, Tk] and [B, 1, Tk] over the queries. */
static sn_node mha_mask(sn_graph *g, sn_node m, sn_node xq, sn_node xv) {
    sn_shape ms = sn_node_shape(g, m), qs = sn_node_shape(g, xq), vs = sn_node_shape(g, xv);
    sn_shape full = {.ndim = 3, .dim = {qs.dim[0], qs.dim[1], vs.dim[1]}};
    if (sn_node_dtype(g, m) != sn_node_dtype(g, xq)) m = sn_cast(g, m, sn_node_dtype(g, xq));
    if (ms.ndim == 2)
        m = sn_reshape(g, m, &(sn_shape){.ndim = 3, .dim = {ms.dim[0], 1, ms.dim[1]}});
    sn_shape now = sn_node_shape(g, m);
    if (!sn_shape_equal(&now, &full)) m = sn_broadcast_to(g, m, &full);
    return m;
}

static sn_node mha_forward_n(sn_layer *l, sn_graph *g, int n, const sn_node *x, bool training,
                             sn_updates *u) {
    const sn_attn_layer_ext *e = l->attn;
    const sn_mha_layer_opts *o = &e->mha;
    sn_node w[8];
    mha_var_nodes(l, 0, o->use_bias, w);
    sn_node mask = e->mha_mask ? mha_mask(g, x[n - 1], x[0], x[1]) : SN_NONE;
    return mha_apply_qkv(g, x[0], e->mha_key ? x[2] : x[1], x[1], mask, w, o, training,
                         l->seed);
}

static const sn_layer_vtable_n mha_vt_n = {
    {"MultiHeadAttention", "multi_head_attention", NULL, NULL, ext_free}, mha_build_n,
    mha_forward_n};

/* keras mask m [B, T] as [B, Tq, Tk]: over the keys (axis 1 broadcast) or the queries. */
static sn_node mask_over(sn_graph *g, sn_node m, const sn_shape *full, bool keys) {
    sn_shape ms = sn_node_shape(g, m);
    sn_shape r = {.ndim = 3, .dim = {ms.dim[0], keys ? 1 : ms.dim[1], keys ? ms.dim[1] : 1}};
    return sn_broadcast_to(g, sn_reshape(g, m, &r), full);
}

sn_node sn_layer_mha_forward_masked(sn_layer *l, sn_graph *g, int n, const sn_node *x,
                                    const sn_node *masks, bool training) {
    const sn_attn_layer_ext *e = l->attn;
    const sn_mha_layer_opts *o = &e->mha;
    bool general = l->vt == &mha_vt_n.base;
    sn_node q = x[0], v = general ? x[1] : x[0], k = general && e->mha_key ? x[2] : v;
    sn_node qm = masks[0], vm = general ? masks[1] : masks[0];
    sn_node km = general && e->mha_key ? masks[2] : SN_NONE;
    sn_shape qs = sn_node_shape(g, q), vs = sn_node_shape(g, v);
    sn_shape full = {.ndim = 3, .dim = {qs.dim[0], qs.dim[1], vs.dim[1]}};
    sn_dtype dt = sn_node_dtype(g, q);
    /* Keras's _compute_attention_mask: query [B, T, 1] & value [B, 1, S] & key [B, 1, S] &
     * causal & attention_mask; a product of 0/1 masks is their AND */
    sn_node am = general && e->mha_mask ? mha_mask(g, x[n - 1], q, v) : SN_NONE;
    const sn_node parts[3] = {qm, vm, km};
    for (int i = 0; i < 3; i++) {
        if (parts[i] == SN_NONE) continue;
        sn_node p = parts[i];
        if (sn_node_dtype(g, p) != dt) p = sn_cast(g, p, dt);
        p = mask_over(g, p, &full, i > 0);
        am = am == SN_NONE ? p : sn_mul(g, am, p);
    }
    sn_node w[8];
    mha_var_nodes(l, 0, o->use_bias, w);
    return mha_apply_qkv(g, q, k, v, am, w, o, training, l->seed);
}

bool sn_layer_is_mha(const sn_layer *l) {
    return l && (l->vt == &mha_vt || l->vt == &mha_vt_n.base);
}

sn_status sn_layer_mha_set_call(sn_layer *l, bool key, bool mask) {
    if (!l || (l->vt != &mha_vt && l->vt != &mha_vt_n.base))
        return sn_errorf(SN_ERR_INVALID, "sn_layer_mha_set_call: layer '%s' is not a "
                         "MultiHeadAttention", l && l->name ? l->name : "?");
    bool general = l->vt == &mha_vt_n.base;
    if (general && (l->attn->mha_key != key || l->attn->mha_mask != mask))
        return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' (MultiHeadAttention) is called as "
                         "mha(query, value%s%s) after a call of another form; sinter's layer "
                         "holds one", l->name, key ? ", key" : "",
                         mask ? ", attention_mask" : "");
    l->vt = &mha_vt_n.base;
    l->attn->mha_key = key;
    l->attn->mha_mask = mask;
    return SN_OK;
}

void sn_layer_mha_set_kw_order(sn_layer *l, const char *order) {
    if (!sn_layer_is_mha(l)) return;
    snprintf(l->attn->mha_kw, sizeof l->attn->mha_kw, "%s", order);
}

const char *sn_layer_mha_kw_order(const sn_layer *l) {
    return sn_layer_is_mha(l) ? l->attn->mha_kw : "";
}

int sn_layer_keras_arg(const sn_layer *l, int n, int a) {
    if (!l || l->vt != &mha_vt_n.base || !l->attn->mha_kw[0]) return a;
    const sn_attn_layer_ext *e = l->attn;
    bool key_kw = e->mha_key && strchr(e->mha_kw, 'k');
    int order[4], k = 0;
    order[k++] = 0;
    order[k++] = 1;
    if (e->mha_key && !key_kw) order[k++] = 2;
    for (const char *o = e->mha_kw; *o && k < 4; o++) {
        if (*o == 'k' && key_kw) order[k++] = 2;
        if (*o == 'm' && e->mha_mask) order[k++] = n - 1;
    }
    return k == n && a < n ? order[a] : a;
}

bool sn_layer_mha_call_form(const sn_layer *l, bool *key, bool *mask) {
    if (!l || l->vt != &mha_vt_n.base) return false;
    *key = l->attn->mha_key;
    *mask = l->attn->mha_mask;
    return true;
}

sn_mha_layer_opts sn_mha_layer_defaults(int num_heads, int64_t key_dim) {
    return (sn_mha_layer_opts){.num_heads = num_heads, .key_dim = key_dim, .use_bias = true};
}

static sn_status check_mha(const char *cls, const sn_mha_layer_opts *o) {
    if (o->num_heads <= 0 || o->key_dim <= 0)
        return sn_errorf(SN_ERR_INVALID, "%s: num_heads %d and key_dim %lld must be > 0", cls,
                         o->num_heads, (long long)o->key_dim);
    if (o->value_dim < 0 || o->output_dim < 0)
        return sn_errorf(SN_ERR_INVALID, "%s: value_dim %lld and output_dim %lld must be > 0 "
                         "(or 0: key_dim, the query's features)", cls, (long long)o->value_dim,
                         (long long)o->output_dim);
    if (!(o->dropout >= 0 && o->dropout < 1))
        return sn_errorf(SN_ERR_INVALID, "%s: dropout %g is outside [0, 1)", cls, o->dropout);
    return sn_check_kernel_bias(cls, &o->kernel_initializer, &o->bias_initializer,
                                &o->kernel_regularizer, &o->bias_regularizer);
}

sn_layer *sn_layer_mha_ex(const sn_mha_layer_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "MultiHeadAttention: options are NULL");
        return NULL;
    }
    if (check_mha("MultiHeadAttention", o) != SN_OK) return NULL;
    sn_layer *l = sn_layer_alloc(&mha_vt);
    if (l && !ext_new(l)) {
        free(l);
        return NULL;
    }
    if (l) l->attn->mha = *o;
    return l;
}

/* ---- TokenAndPositionEmbedding (keras_hub) --------------------------------------------- */
static sn_status tpe_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_attn_layer_ext *e = l->attn;
    if (in->ndim != 1 || in->dim[0] > e->seq_len) {
        char want[96];
        snprintf(want, sizeof want, "(None, steps) with steps <= sequence_length %lld",
                 (long long)e->seq_len);
        return sn_layer_shape_error(l, in, want);
    }
    sn_initializer u = {.type = SN_INIT_RANDOM_UNIFORM, .minval = -0.05, .maxval = 0.05};
    sn_shape ts = {.ndim = 2, .dim = {e->vocab, e->dim}}, ps = {.ndim = 2,
                                                                .dim = {e->seq_len, e->dim}};
    SN_TRY(sn_layer_add_var(l, g, "token_embedding/embeddings", &ts, true, &u,
                            SN_INIT_RANDOM_UNIFORM, rng, NULL));
    SN_TRY(sn_layer_add_var(l, g, "position_embedding/embeddings", &ps, true, &u,
                            SN_INIT_RANDOM_UNIFORM, rng, NULL));
    l->out_shape = (sn_shape){.ndim = 2, .dim = {in->dim[0], e->dim}};
    return SN_OK;
}

static sn_node tpe_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    sn_node ids = sn_node_dtype(g, x) == SN_I32 ? x : sn_cast(g, x, SN_I32);
    int64_t T = sn_node_shape(g, x).dim[1];
    sn_node tok = sn_gather(g, l->vars[0], ids);
    sn_node pos = sn_slice(g, l->vars[1], (int64_t[]){0, 0}, (int64_t[]){T, l->attn->dim});
    return sn_add(g, tok, pos);
}

static const sn_layer_vtable tpe_vt = {"TokenAndPositionEmbedding",
                                       "token_and_position_embedding", tpe_build, tpe_forward,
                                       ext_free};

sn_layer *sn_layer_token_pos_embedding(int64_t vocab, int64_t seq_len, int64_t dim) {
    if (vocab < 1 || seq_len < 1 || dim < 1) {
        sn_errorf(SN_ERR_INVALID, "TokenAndPositionEmbedding: vocabulary_size %lld, "
                  "sequence_length %lld and embedding_dim %lld must be > 0", (long long)vocab,
                  (long long)seq_len, (long long)dim);
        return NULL;
    }
    sn_layer *l = sn_layer_alloc(&tpe_vt);
    if (l && !ext_new(l)) {
        free(l);
        return NULL;
    }
    if (!l) return NULL;
    l->attn->vocab = vocab;
    l->attn->seq_len = seq_len;
    l->attn->dim = dim;
    return l;
}

/* ---- the decoder block ------------------------------------------------------------------- */
static const char *const block_attn_names[8] = {
    "attention/query/kernel", "attention/query/bias", "attention/key/kernel",
    "attention/key/bias", "attention/value/kernel", "attention/value/bias",
    "attention/attention_output/kernel", "attention/attention_output/bias"};

static sn_status block_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_attn_layer_ext *e = l->attn;
    if (in->ndim != 2 || in->dim[1] != e->dim) {
        char want[96];
        snprintf(want, sizeof want, "(None, steps, %lld)", (long long)e->dim);
        return sn_layer_shape_error(l, in, want);
    }
    sn_shape cs = {.ndim = 1, .dim = {e->dim}}, f1 = {.ndim = 2, .dim = {e->dim, e->ff_dim}},
             b1 = {.ndim = 1, .dim = {e->ff_dim}}, f2 = {.ndim = 2, .dim = {e->ff_dim, e->dim}};
    sn_initializer def = {0};
    sn_node w[8];
    SN_TRY(sn_layer_add_var(l, g, "ln_1/gamma", &cs, true, &def, SN_INIT_ONES, rng, NULL));
    SN_TRY(sn_layer_add_var(l, g, "ln_1/beta", &cs, true, &def, SN_INIT_ZEROS, rng, NULL));
    SN_TRY(mha_vars(l, g, &e->mha, e->dim, e->dim, e->dim, block_attn_names, rng, w));
    SN_TRY(sn_layer_add_var(l, g, "ln_2/gamma", &cs, true, &def, SN_INIT_ONES, rng, NULL));
    SN_TRY(sn_layer_add_var(l, g, "ln_2/beta", &cs, true, &def, SN_INIT_ZEROS, rng, NULL));
    SN_TRY(sn_layer_add_var(l, g, "ffn_1/kernel", &f1, true, &def, SN_INIT_GLOROT_UNIFORM, rng,
                            NULL));
    SN_TRY(sn_layer_add_var(l, g, "ffn_1/bias", &b1, true, &def, SN_INIT_ZEROS, rng, NULL));
    SN_TRY(sn_layer_add_var(l, g, "ffn_2/kernel", &f2, true, &def, SN_INIT_GLOROT_UNIFORM, rng,
                            NULL));
    SN_TRY(sn_layer_add_var(l, g, "ffn_2/bias", &cs, true, &def, SN_INIT_ZEROS, rng, NULL));
    l->out_shape = *in;
    return SN_OK;
}

static sn_node block_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                             sn_updates *u) {
    const sn_attn_layer_ext *e = l->attn;
    sn_node w[8];
    mha_var_nodes(l, 2, true, w);
    const sn_node *v = l->vars;
    sn_node h = ln_apply(g, x, v[0], v[1], e->epsilon);
    x = sn_add(g, x, mha_apply(g, h, w, &e->mha, training, l->seed));
    h = ln_apply(g, x, v[10], v[11], e->epsilon);
    sn_shape s = sn_node_shape(g, x);
    h = sn_gelu(g, proj(g, h, v[12], v[13], e->dim, e->ff_dim));
    h = sn_reshape(g, proj(g, h, v[14], v[15], e->ff_dim, e->dim), &s);
    return sn_add(g, x, h);
}

static const sn_layer_vtable block_vt = {"sinter>TransformerBlock", "transformer_block",
                                         block_build, block_forward, ext_free};

bool sn_layer_needs_context(const sn_layer *l) {
    return l && (l->vt == &block_vt || l->vt == &tpe_vt || l->vt == &mha_vt ||
                 l->vt == &mha_vt_n.base);
}

sn_layer *sn_layer_transformer_block(int num_heads, int64_t dim, int64_t ff_dim, bool causal,
                                     double epsilon) {
    if (num_heads < 1 || dim % num_heads != 0 || ff_dim < 1 || !(epsilon >= 0)) {
        sn_errorf(SN_ERR_INVALID, "TransformerBlock: %d heads must divide the width %lld, "
                  "ff_dim %lld must be > 0 and epsilon %g >= 0", num_heads, (long long)dim,
                  (long long)ff_dim, epsilon);
        return NULL;
    }
    sn_layer *l = sn_layer_alloc(&block_vt);
    if (l && !ext_new(l)) {
        free(l);
        return NULL;
    }
    if (!l) return NULL;
    l->attn->mha = sn_mha_layer_defaults(num_heads, dim / num_heads);
    l->attn->mha.use_causal_mask = causal;
    l->attn->dim = dim;
    l->attn->ff_dim = ff_dim;
    l->attn->epsilon = epsilon;
    return l;
}

/* ---- generation -------------------------------------------------------------------------- */
bool sn_attn_layer_cache_dims(const sn_layer *l, int64_t *heads, int64_t *head_dim) {
    if (!l || l->vt != &block_vt) return false;
    *heads = l->attn->mha.num_heads;
    *head_dim = l->attn->mha.key_dim;
    return true;
}

int64_t sn_attn_layer_context(const sn_layer *l) {
    return l && l->vt == &tpe_vt ? l->attn->seq_len : 0;
}

/* The block's forward with attention over the cache then the new keys: the same nodes as
 * block_forward but for attention_cached, and the new k, v handed out for the cache. */
static sn_node block_step(sn_layer *l, sn_graph *g, sn_node x, sn_attn_step_io *io) {
    const sn_attn_layer_ext *e = l->attn;
    sn_node w[8];
    mha_var_nodes(l, 2, true, w);
    const sn_node *v = l->vars;
    sn_shape s = sn_node_shape(g, x);
    int H = e->mha.num_heads;
    int64_t D = e->mha.key_dim, d = e->dim;
    sn_shape hs = {.ndim = 4, .dim = {s.dim[0], s.dim[1], H, D}};
    sn_node h = ln_apply(g, x, v[0], v[1], e->epsilon);
    sn_node q = sn_reshape(g, proj(g, h, w[0], w[1], d, H * D), &hs);
    io->k_new = sn_reshape(g, proj(g, h, w[2], w[3], d, H * D), &hs);
    io->v_new = sn_reshape(g, proj(g, h, w[4], w[5], d, H * D), &hs);
    sn_node o = sn_attention_cached(g, q, io->k_new, io->v_new, io->k_cache, io->v_cache, io->pos,
                                    1.0 / sqrt((double)D));
    x = sn_add(g, x, sn_reshape(g, proj(g, o, w[6], w[7], H * D, d), &s));
    h = ln_apply(g, x, v[10], v[11], e->epsilon);
    h = sn_gelu(g, proj(g, h, v[12], v[13], e->dim, e->ff_dim));
    h = sn_reshape(g, proj(g, h, v[14], v[15], e->ff_dim, e->dim), &s);
    return sn_add(g, x, h);
}

sn_node sn_attn_layer_step(sn_layer *l, sn_graph *g, sn_node x, sn_attn_step_io *io) {
    if (l->vt == &tpe_vt) {
        sn_node ids = sn_node_dtype(g, x) == SN_I32 ? x : sn_cast(g, x, SN_I32);
        return sn_add(g, sn_gather(g, l->vars[0], ids), sn_gather(g, l->vars[1], io->pos_ids));
    }
    if (l->vt == &block_vt) {
        if (!l->attn->mha.use_causal_mask)
            return sn_graph_fail(g, SN_ERR_UNSUPPORTED, "layer '%s': a non-causal block sees "
                                 "later tokens and cannot generate step by step", l->name);
        return block_step(l, g, x, io);
    }
    if (l->vt == &mha_vt || l->vt == &mha_vt_n.base)
        return sn_graph_fail(g, SN_ERR_UNSUPPORTED, "layer '%s' (MultiHeadAttention): stepping "
                             "with a cache is implemented for the char_transformer blocks only",
                             l->name);
    return l->vt->forward(l, g, x, false, NULL);
}
