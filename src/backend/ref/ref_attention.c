/* Reference kernels of the Transformer ops (graph/op_attention.c): layer_norm, gelu_tanh,
 * attention and their gradients. Any float dtype, computed in double; attention materialises
 * each head's Tq x Tk score matrix (what the CPU kernel avoids), so it is the plain textbook
 * formula the fast kernel is checked against. */
#include <stdlib.h>

#include "backend/ref/ref_common.h"

/* ---- layer_norm ------------------------------------------------------------------------ */
/* x [R, C] viewed from [..., C]: the row's mean and 1 / sqrt(var + eps) */
static void ln_stats(sn_dtype t, const void *x, int64_t r, int64_t C, double eps, double *mean,
                     double *rstd) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < C; j++) m += sn_load(t, x, r * C + j);
    m /= (double)C;
    for (int64_t j = 0; j < C; j++) {
        double d = sn_load(t, x, r * C + j) - m;
        v += d * d;
    }
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)C + eps);
}

/* (x [R, C], gamma [C], beta [C]) -> y [R, C] */
static sn_status ln_run(sn_kcall *c) {
    int64_t C = c->x[1].shape.dim[0], R = sn_shape_numel(&c->y.shape) / (C ? C : 1);
    sn_dtype t = c->x[0].dtype;
    for (int64_t r = 0; r < R; r++) {
        double m, s;
        ln_stats(t, c->in[0], r, C, c->attr->norm.epsilon, &m, &s);
        for (int64_t j = 0; j < C; j++)
            sn_store(c->y.dtype, c->out, r * C + j,
                     (sn_load(t, c->in[0], r * C + j) - m) * s * sn_load(t, c->in[1], j) +
                         sn_load(t, c->in[2], j));
    }
    return SN_OK;
}

/* (x [R, C], gamma [C], dy [R, C]) -> dx [R, C] | dgamma [C] | dbeta [C] */
static sn_status ln_grad_run(sn_kcall *c) {
    int64_t C = c->x[1].shape.dim[0], R = sn_shape_numel(&c->x[0].shape) / (C ? C : 1);
    sn_dtype t = c->x[0].dtype;
    double *acc = calloc((size_t)(3 * C + 1), sizeof *acc), *dg = acc + C, *db = acc + 2 * C;
    if (!acc) return sn_errorf(SN_ERR_NOMEM, "layer_norm_grad: no memory for %lld sums",
                               (long long)C);
    for (int64_t r = 0; r < R; r++) {
        double m, s, a = 0, b = 0;
        ln_stats(t, c->in[0], r, C, c->attr->norm.epsilon, &m, &s);
        for (int64_t j = 0; j < C; j++) { /* acc = dxhat; a = mean dxhat, b = mean dxhat xhat */
            double xh = (sn_load(t, c->in[0], r * C + j) - m) * s;
            double dy = sn_load(t, c->in[2], r * C + j);
            acc[j] = dy * sn_load(t, c->in[1], j);
            a += acc[j];
            b += acc[j] * xh;
            dg[j] += dy * xh;
            db[j] += dy;
        }
        a /= (double)C;
        b /= (double)C;
        for (int64_t j = 0; j < C; j++) {
            double xh = (sn_load(t, c->in[0], r * C + j) - m) * s;
            sn_store(c->y.dtype, c->out, r * C + j, s * (acc[j] - a - xh * b));
        }
    }
    for (int64_t j = 0; j < 2 * C; j++) sn_store(c->y.dtype, c->out, R * C + j, dg[j]);
    free(acc);
    return SN_OK;
}

/* ---- gelu_tanh ------------------------------------------------------------------------- */
#define GELU_C 0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_A 0.044715

/* x [any] -> same */
static sn_status gelu_tanh_run(sn_kcall *c) {
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int64_t i = 0; i < n; i++) {
        double x = sn_load(c->x[0].dtype, c->in[0], i);
        sn_store(c->y.dtype, c->out, i, 0.5 * x * (1.0 + tanh(GELU_C * (x + GELU_A * x * x * x))));
    }
    return SN_OK;
}

/* (x, dy) -> dx */
static sn_status gelu_tanh_grad_run(sn_kcall *c) {
    int64_t n = sn_shape_numel(&c->y.shape);
    for (int64_t i = 0; i < n; i++) {
        double x = sn_load(c->x[0].dtype, c->in[0], i), dy = sn_load(c->x[1].dtype, c->in[1], i);
        double th = tanh(GELU_C * (x + GELU_A * x * x * x));
        double d = 0.5 * (1.0 + th) +
                   0.5 * x * (1.0 - th * th) * GELU_C * (1.0 + 3.0 * GELU_A * x * x);
        sn_store(c->y.dtype, c->out, i, dy * d);
    }
    return SN_OK;
}

/* ---- attention ------------------------------------------------------------------------- */
typedef struct attn_dims {
    int64_t B, Tq, Tk, H, D;
} attn_dims;

static attn_dims attn_dims_of(const sn_kcall *c) {
    const sn_shape *q = &c->x[0].shape, *k = &c->x[1].shape;
    return (attn_dims){q->dim[0], q->dim[1], k->dim[1], q->dim[2], q->dim[3]};
}

/* Element (b, t, h, d) of a [B, T, H, D] tensor. */
static int64_t at(const attn_dims *a, int64_t T, int64_t b, int64_t t, int64_t h, int64_t d) {
    return ((b * T + t) * a->H + h) * a->D + d;
}

/* The mask [B, Tq, Tk] (input `mi` of the call, or NULL without one). */
static const void *mask_of(const sn_kcall *c, int mi) { return c->n_in > mi ? c->in[mi] : NULL; }

static bool visible(const sn_kcall *c, const void *mask, const attn_dims *a, int64_t b,
                    int64_t i, int64_t j) {
    if (c->attr->attn.causal && j > i + c->attr->attn.q_offset) return false;
    return !mask || sn_load(c->x[0].dtype, mask, (b * a->Tq + i) * a->Tk + j) != 0;
}

/* Dropout's factor for probability (b, h, i, j): 1 / (1 - rate) kept, 0 dropped, 1 without
 * dropout; the mask is sn_dropout's over a [B, H, Tq, Tk] tensor (op_desc.h, attn). */
static double drop_z(const sn_kcall *c, const attn_dims *a, int64_t b, int64_t h, int64_t i,
                     int64_t j) {
    double r = c->attr->attn.drop_rate;
    if (r <= 0) return 1.0;
    int64_t idx = ((b * a->H + h) * a->Tq + i) * a->Tk + j;
    return sn_dropout_keep(c->attr->attn.drop_seed, c->attr->attn.drop_node, c->step, idx, r)
               ? 1.0 / (1.0 - r) : 0.0;
}

/* P [Tq, Tk] = softmax(scale q k^T, masked) of head (b, h). A row that sees no key is
 * uniform over all Tk keys, as Keras gives (its masked scores are all one large negative
 * number); dead[i] says so (its scores get no gradient: Keras's where() passes none). */
static void attn_probs(const sn_kcall *c, const void *mask, const attn_dims *a, int64_t b,
                       int64_t h, double *P, bool *dead) {
    sn_dtype t = c->x[0].dtype;
    for (int64_t i = 0; i < a->Tq; i++) {
        double *p = P + i * a->Tk, mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < a->Tk; j++) {
            p[j] = -INFINITY;
            if (!visible(c, mask, a, b, i, j)) continue;
            double s = 0;
            for (int64_t d = 0; d < a->D; d++)
                s += sn_load(t, c->in[0], at(a, a->Tq, b, i, h, d)) *
                     sn_load(t, c->in[1], at(a, a->Tk, b, j, h, d));
            p[j] = s * c->attr->attn.scale;
            if (p[j] > mx) mx = p[j];
        }
        dead[i] = mx == -INFINITY;
        for (int64_t j = 0; j < a->Tk; j++) {
            p[j] = dead[i] ? 1.0 : exp(p[j] - mx);
            sum += p[j];
        }
        for (int64_t j = 0; j < a->Tk; j++) p[j] = sum > 0 ? p[j] / sum : 0;
    }
}

/* (q [B,Tq,H,D], k [B,Tk,H,D], v [B,Tk,H,D]) -> o [B,Tq,H,D] */
static sn_status attn_run(sn_kcall *c) {
    attn_dims a = attn_dims_of(c);
    double *P = malloc(sizeof *P * (size_t)(a.Tq * a.Tk + 1));
    bool *dead = malloc(sizeof *dead * (size_t)(a.Tq + 1));
    if (!P || !dead) {
        free(P);
        free(dead);
        return sn_errorf(SN_ERR_NOMEM, "attention (ref): no memory for a %lld x %lld score "
                         "matrix", (long long)a.Tq, (long long)a.Tk);
    }
    sn_dtype t = c->x[2].dtype;
    for (int64_t b = 0; b < a.B; b++)
        for (int64_t h = 0; h < a.H; h++) {
            attn_probs(c, mask_of(c, 3), &a, b, h, P, dead);
            for (int64_t i = 0; i < a.Tq; i++)
                for (int64_t d = 0; d < a.D; d++) {
                    double s = 0;
                    for (int64_t j = 0; j < a.Tk; j++)
                        s += P[i * a.Tk + j] * drop_z(c, &a, b, h, i, j) *
                             sn_load(t, c->in[2], at(&a, a.Tk, b, j, h, d));
                    sn_store(c->y.dtype, c->out, at(&a, a.Tq, b, i, h, d), s);
                }
        }
    free(P);
    free(dead);
    return SN_OK;
}

/* (q, k, v, o, dy[, mask]) -> dq [B,Tq,H,D] | dk [B,Tk,H,D] | dv [B,Tk,H,D]. With S = scale q k^T and
 * P = softmax(S), dropout's factors Z (all 1 without): dv = (P Z)^T dy, dP = Z dy v^T,
 * dS = P (dP - rowsum(P dP)), dq = scale dS k, dk = scale dS^T q. */
static sn_status attn_grad_run(sn_kcall *c) {
    attn_dims a = attn_dims_of(c);
    int64_t nq = a.B * a.Tq * a.H * a.D, nk = a.B * a.Tk * a.H * a.D;
    double *P = malloc(sizeof *P * (size_t)(2 * a.Tq * a.Tk + 1)), *dS = P ? P + a.Tq * a.Tk : NULL;
    bool *dead = malloc(sizeof *dead * (size_t)(a.Tq + 1));
    if (!P || !dead) {
        free(P);
        free(dead);
        return sn_errorf(SN_ERR_NOMEM, "attention_grad (ref): no memory for a %lld x %lld "
                         "score matrix", (long long)a.Tq, (long long)a.Tk);
    }
    sn_dtype t = c->x[0].dtype, to = c->y.dtype;
    const void *q = c->in[0], *k = c->in[1], *v = c->in[2], *dy = c->in[4];
    double sc = c->attr->attn.scale;
    for (int64_t b = 0; b < a.B; b++)
        for (int64_t h = 0; h < a.H; h++) {
            attn_probs(c, mask_of(c, 5), &a, b, h, P, dead);
            for (int64_t i = 0; i < a.Tq; i++) {
                double rs = 0;
                for (int64_t j = 0; j < a.Tk; j++) {
                    double dp = 0;
                    for (int64_t d = 0; d < a.D; d++)
                        dp += sn_load(t, dy, at(&a, a.Tq, b, i, h, d)) *
                              sn_load(t, v, at(&a, a.Tk, b, j, h, d));
                    dS[i * a.Tk + j] = dp * drop_z(c, &a, b, h, i, j);
                    rs += dS[i * a.Tk + j] * P[i * a.Tk + j];
                }
                for (int64_t j = 0; j < a.Tk; j++)
                    dS[i * a.Tk + j] = dead[i] ? 0 : P[i * a.Tk + j] * (dS[i * a.Tk + j] - rs);
            }
            for (int64_t d = 0; d < a.D; d++) {
                for (int64_t i = 0; i < a.Tq; i++) {
                    double s = 0;
                    for (int64_t j = 0; j < a.Tk; j++)
                        s += dS[i * a.Tk + j] * sn_load(t, k, at(&a, a.Tk, b, j, h, d));
                    sn_store(to, c->out, at(&a, a.Tq, b, i, h, d), sc * s);
                }
                for (int64_t j = 0; j < a.Tk; j++) {
                    double sk = 0, sv = 0;
                    for (int64_t i = 0; i < a.Tq; i++) {
                        sk += dS[i * a.Tk + j] * sn_load(t, q, at(&a, a.Tq, b, i, h, d));
                        sv += P[i * a.Tk + j] * drop_z(c, &a, b, h, i, j) *
                              sn_load(t, dy, at(&a, a.Tq, b, i, h, d));
                    }
                    sn_store(to, c->out, nq + at(&a, a.Tk, b, j, h, d), sc * sk);
                    sn_store(to, c->out, nq + nk + at(&a, a.Tk, b, j, h, d), sv);
                }
            }
        }
    free(P);
    free(dead);
    return SN_OK;
}

/* (q, k, v [B,s,H,D], kc, vc [B,C,H,D], pos [1]) -> o [B,s,H,D]: key j < pos from the
 * caches, j >= pos the new row j - pos; query i sees j <= pos + i. */
static sn_status attn_cached_run(sn_kcall *c) {
    const sn_shape *qs = &c->x[0].shape, *cs = &c->x[3].shape;
    int64_t B = qs->dim[0], S = qs->dim[1], H = qs->dim[2], D = qs->dim[3], C = cs->dim[1];
    int64_t pos = ((const int32_t *)c->in[5])[0];
    if (pos < 0 || pos + S > C)
        return sn_errorf(SN_ERR_INVALID, "attention_cached: position %lld with %lld new keys "
                         "does not fit a cache of %lld", (long long)pos, (long long)S,
                         (long long)C);
    sn_dtype t = c->x[0].dtype;
    double *p = malloc(sizeof *p * (size_t)(pos + S));
    if (!p) return SN_ERR_NOMEM;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < S; i++) {
                int64_t n = pos + i + 1;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < n; j++) {
                    const void *kx = j < pos ? c->in[3] : c->in[1];
                    int64_t ko = j < pos ? ((b * C + j) * H + h) * D : ((b * S + j - pos) * H + h) * D;
                    double s = 0;
                    for (int64_t d = 0; d < D; d++)
                        s += sn_load(t, c->in[0], ((b * S + i) * H + h) * D + d) *
                             sn_load(t, kx, ko + d);
                    p[j] = s * c->attr->attn.scale;
                    if (p[j] > mx) mx = p[j];
                }
                for (int64_t j = 0; j < n; j++) sum += (p[j] = exp(p[j] - mx));
                for (int64_t d = 0; d < D; d++) {
                    double o = 0;
                    for (int64_t j = 0; j < n; j++) {
                        const void *vx = j < pos ? c->in[4] : c->in[2];
                        int64_t vo = j < pos ? ((b * C + j) * H + h) * D
                                             : ((b * S + j - pos) * H + h) * D;
                        o += p[j] / sum * sn_load(t, vx, vo + d);
                    }
                    sn_store(c->y.dtype, c->out, ((b * S + i) * H + h) * D + d, o);
                }
            }
    free(p);
    return SN_OK;
}

static const sn_kernel k_attn_cached = REF_KERNEL(attn_cached_run);
static const sn_kernel k_ln = REF_KERNEL(ln_run), k_ln_grad = REF_KERNEL(ln_grad_run),
                       k_gt = REF_KERNEL(gelu_tanh_run),
                       k_gt_grad = REF_KERNEL(gelu_tanh_grad_run),
                       k_attn = REF_KERNEL(attn_run), k_attn_grad = REF_KERNEL(attn_grad_run);

void sn_ref_register_attention(sn_kernel_table *t) {
    t->k[SN_OP_LAYER_NORM] = &k_ln;
    t->k[SN_OP_LAYER_NORM_GRAD] = &k_ln_grad;
    t->k[SN_OP_GELU_TANH] = &k_gt;
    t->k[SN_OP_GELU_TANH_GRAD] = &k_gt_grad;
    t->k[SN_OP_ATTENTION] = &k_attn;
    t->k[SN_OP_ATTENTION_GRAD] = &k_attn_grad;
    t->k[SN_OP_ATTENTION_CACHED] = &k_attn_cached;
}
