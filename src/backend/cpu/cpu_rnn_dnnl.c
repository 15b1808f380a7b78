/* oneDNN's LSTM primitives on our buffers (cpu_rnn_dnnl.h says what and why). Each operand is
 * a "port": our f32 buffer in Keras's layout (the user memory, data handle set per call) and,
 * where the primitive wants another layout or data type, its own memory plus a reorder between
 * the two. Inputs are reordered before the primitive, outputs after it. The forward's
 * activations, states and workspace live in the handle until the backward pass. */
#include "backend/cpu/cpu_rnn_dnnl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#ifndef SN_HAVE_DNNL

sn_status sn_dnnl_rnn_new(sn_dnnl_rnn **out, sn_dnnl_cell cell, int64_t B, int64_t T, int64_t D,
                          int64_t U, bool bf16, int64_t y_ld, int64_t c_ld) {
    (void)cell, (void)B, (void)T, (void)D, (void)U, (void)bf16, (void)y_ld, (void)c_ld;
    if (out) *out = NULL;
    return sn_errorf(SN_ERR_UNSUPPORTED, "oneDNN RNN: this build has no oneDNN "
                                         "(configured with -DSN_WITH_DNNL=OFF)");
}
sn_status sn_dnnl_lstm_new(sn_dnnl_rnn **out, int64_t B, int64_t T, int64_t D, int64_t U,
                           bool bf16) {
    return sn_dnnl_rnn_new(out, SN_DNNL_LSTM, B, T, D, U, bf16, T * U, U);
}
void sn_dnnl_rnn_free(sn_dnnl_rnn *l) { (void)l; }
const char *sn_dnnl_rnn_impl(const sn_dnnl_rnn *l) {
    (void)l;
    return "none";
}
sn_status sn_dnnl_rnn_forward(sn_dnnl_rnn *l, const sn_dnnl_rnn_fwd *a) {
    (void)l, (void)a;
    return sn_errorf(SN_ERR_UNSUPPORTED, "oneDNN RNN: this build has no oneDNN");
}
sn_status sn_dnnl_rnn_backward(sn_dnnl_rnn *l, const sn_dnnl_rnn_fwd *f,
                                const sn_dnnl_rnn_bwd *a) {
    (void)l, (void)f, (void)a;
    return sn_errorf(SN_ERR_UNSUPPORTED, "oneDNN RNN: this build has no oneDNN");
}

#else

#include "backend/cpu/dnnl_util.h"

typedef struct port {
    dnnl_memory_t user;   /* our buffer (handle set per call) */
    dnnl_memory_t prim;   /* what the primitive reads or writes; == user when no reorder */
    dnnl_primitive_t reo; /* user -> prim (input) or prim -> user (output); NULL if none */
} port;

/* Forward ports */
enum { F_X, F_H0, F_C0, F_W, F_R, F_B, F_Y, F_HT, F_CT, F_N };
/* Backward ports: the weights again in the backward primitive's layout, the gradients */
enum { G_W, G_R, G_DY, G_DHT, G_DCT, G_DX, G_DH0, G_DC0, G_DW, G_DR, G_DB, G_N };

struct sn_dnnl_rnn {
    bool gru;       /* SN_DNNL_GRU_LBR: 3 gates, 4 biases, no c (its ports stay empty) */
    int64_t B, T, D, U;
    int64_t y_ld, c_ld; /* batch-row strides of y / dy and of cT / dcT, in floats */
    dnnl_engine_t eng;
    dnnl_stream_t st;
    dnnl_primitive_t fwd, bwd;
    port f[F_N], g[G_N];
    dnnl_memory_t ws;
    float *zeros, *junk; /* [B, c_ld]: the state a caller did not give, one it does not want */
    char impl[160];
};

/* What messages call the handle: "oneDNN LSTM" or "oneDNN GRU". */
static const char *name_of(bool gru) { return gru ? "oneDNN GRU" : "oneDNN LSTM"; }

static sn_status mem_new(dnnl_memory_t *m, const dnnl_memory_desc_t *md, dnnl_engine_t e) {
    SN_DNNL_CHECK(dnnl_memory_create(m, md, e, DNNL_MEMORY_ALLOCATE));
    return SN_OK;
}

/* own: the primitive's memory is separate even when the layouts match, so that what the
 * forward saved does not depend on the caller keeping its buffer. */
static sn_status port_init(port *p, const dnnl_memory_desc_t *user_md,
                           const dnnl_memory_desc_t *prim_md, bool input, bool own,
                           dnnl_engine_t e) {
    SN_DNNL_CHECK(dnnl_memory_create(&p->user, user_md, e, DNNL_MEMORY_NONE));
    if (!own && dnnl_memory_desc_equal(user_md, prim_md)) {
        p->prim = p->user;
        return SN_OK;
    }
    SN_TRY(mem_new(&p->prim, prim_md, e));
    dnnl_primitive_desc_t pd;
    if (input) SN_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, user_md, e, prim_md, e, NULL));
    else SN_DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, prim_md, e, user_md, e, NULL));
    dnnl_status_t s = dnnl_primitive_create(&p->reo, pd);
    dnnl_primitive_desc_destroy(pd);
    SN_DNNL_CHECK(s);
    return SN_OK;
}

static void port_destroy(port *p) {
    if (p->reo) dnnl_primitive_destroy(p->reo);
    if (p->prim && p->prim != p->user) dnnl_memory_destroy(p->prim);
    if (p->user) dnnl_memory_destroy(p->user);
    memset(p, 0, sizeof *p);
}

static sn_status port_bind(port *p, const void *buf) {
    SN_DNNL_CHECK(dnnl_memory_set_data_handle(p->user, (void *)buf));
    return SN_OK;
}

/* Input: bind our buffer and convert it into the primitive's memory. */
static sn_status port_in(sn_dnnl_rnn *l, port *p, const void *buf) {
    SN_TRY(port_bind(p, buf));
    if (!p->reo) return SN_OK;
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, p->user}, {DNNL_ARG_TO, p->prim}};
    SN_DNNL_CHECK(dnnl_primitive_execute(p->reo, l->st, 2, a));
    return SN_OK;
}

/* Output (after the primitive ran, buffer bound before): convert into our buffer. */
static sn_status port_out(sn_dnnl_rnn *l, port *p) {
    if (!p->reo) return SN_OK;
    dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, p->prim}, {DNNL_ARG_TO, p->user}};
    SN_DNNL_CHECK(dnnl_primitive_execute(p->reo, l->st, 2, a));
    return SN_OK;
}

/* Zeroes the primitive's side of a port (a weight gradient the primitive adds into). Its
 * layouts are plain (possibly padded), so zero bytes are zeros in f32 and bf16. */
static sn_status port_zero(port *p) {
    void *h = NULL;
    const dnnl_memory_desc_t *md;
    SN_DNNL_CHECK(dnnl_memory_get_data_handle(p->prim, &h));
    SN_DNNL_CHECK(dnnl_memory_get_memory_desc(p->prim, &md));
    if (!h) return sn_errorf(SN_ERR_BACKEND, "oneDNN RNN: gradient memory has no buffer");
    memset(h, 0, dnnl_memory_desc_get_size(md));
    return SN_OK;
}

static sn_status md(dnnl_memory_desc_t *m, int n, const dnnl_dims_t d, dnnl_data_type_t t,
                    dnnl_format_tag_t tag) {
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(m, n, d, t, tag));
    return SN_OK;
}

/* An f32 descriptor of our own with explicit strides (a y inside a larger buffer). */
static sn_status strided(dnnl_memory_desc_t *m, int n, const dnnl_dims_t d, const dnnl_dims_t st) {
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_strides(m, n, d, dnnl_f32, st));
    return SN_OK;
}

/* The descriptors of one configuration: data type of the activations and h states (dd),
 * of the cell state (dc), of the weights (dw); the backward's data gradients (gd), cell-state
 * gradient (gc) and weight gradients (gw). */
typedef struct lstm_types {
    dnnl_data_type_t dd, dc, dw, gd, gc, gw;
} lstm_types;

typedef struct lstm_mds {
    dnnl_memory_desc_t x, h, c, wl, wi, b, y, gx, gh, gc, gwl, gwi, gy;
} lstm_mds;

static sn_status mds_init(lstm_mds *m, const sn_dnnl_rnn *l, lstm_types t) {
    int64_t B = l->B, T = l->T, D = l->D, U = l->U, NG = l->gru ? 3 : 4;
    SN_TRY(md(&m->x, 3, (dnnl_dims_t){T, B, D}, t.dd, dnnl_tnc));
    SN_TRY(md(&m->y, 3, (dnnl_dims_t){T, B, U}, t.dd, dnnl_tnc));
    SN_TRY(md(&m->h, 4, (dnnl_dims_t){1, 1, B, U}, t.dd, dnnl_ldnc));
    SN_TRY(md(&m->c, 4, (dnnl_dims_t){1, 1, B, U}, t.dc, dnnl_ldnc));
    SN_TRY(md(&m->wl, 5, (dnnl_dims_t){1, 1, D, NG, U}, t.dw, dnnl_format_tag_any));
    SN_TRY(md(&m->wi, 5, (dnnl_dims_t){1, 1, U, NG, U}, t.dw, dnnl_format_tag_any));
    SN_TRY(md(&m->b, 4, (dnnl_dims_t){1, 1, 4, U}, dnnl_f32, dnnl_ldgo));
    SN_TRY(md(&m->gx, 3, (dnnl_dims_t){T, B, D}, t.gd, dnnl_tnc));
    SN_TRY(md(&m->gy, 3, (dnnl_dims_t){T, B, U}, t.gd, dnnl_tnc));
    SN_TRY(md(&m->gh, 4, (dnnl_dims_t){1, 1, B, U}, t.gd, dnnl_ldnc));
    SN_TRY(md(&m->gc, 4, (dnnl_dims_t){1, 1, B, U}, t.gc, dnnl_ldnc));
    SN_TRY(md(&m->gwl, 5, (dnnl_dims_t){1, 1, D, NG, U}, t.gw, dnnl_format_tag_any));
    SN_TRY(md(&m->gwi, 5, (dnnl_dims_t){1, 1, U, NG, U}, t.gw, dnnl_format_tag_any));
    return SN_OK;
}

/* Forward and backward descriptors of one configuration; SN_ERR_UNSUPPORTED (no message
 * kept) when oneDNN has no implementation of it. */
static sn_status try_pds(sn_dnnl_rnn *l, lstm_types t, dnnl_primitive_desc_t *fpd,
                         dnnl_primitive_desc_t *bpd) {
    lstm_mds m;
    SN_TRY(mds_init(&m, l, t));
    dnnl_rnn_desc_t fd, bd;
    const dnnl_rnn_direction_t dir = dnnl_unidirectional_left2right;
    *fpd = *bpd = NULL;
    dnnl_status_t sf = l->gru
        ? dnnl_lbr_gru_forward_desc_init(&fd, dnnl_forward_training, dir, &m.x, &m.h, &m.wl,
                                         &m.wi, &m.b, &m.y, &m.h, 0)
        : dnnl_lstm_forward_desc_init(&fd, dnnl_forward_training, dir, &m.x, &m.h, &m.c, &m.wl,
                                      &m.wi, &m.b, &m.y, &m.h, &m.c, 0);
    if (sf != dnnl_success ||
        dnnl_primitive_desc_create(fpd, &fd, NULL, l->eng, NULL) != dnnl_success)
        return SN_ERR_UNSUPPORTED;
    dnnl_status_t sb = l->gru
        ? dnnl_lbr_gru_backward_desc_init(&bd, dnnl_backward, dir, &m.x, &m.h, &m.wl, &m.wi,
                                          &m.b, &m.y, &m.h, &m.gx, &m.gh, &m.gwl, &m.gwi, &m.b,
                                          &m.gy, &m.gh, 0)
        : dnnl_lstm_backward_desc_init(&bd, dnnl_backward, dir, &m.x, &m.h, &m.c, &m.wl, &m.wi,
                                       &m.b, &m.y, &m.h, &m.c, &m.gx, &m.gh, &m.gc, &m.gwl,
                                       &m.gwi, &m.b, &m.gy, &m.gh, &m.gc, 0);
    if (sb != dnnl_success ||
        dnnl_primitive_desc_create(bpd, &bd, NULL, l->eng, *fpd) != dnnl_success) {
        dnnl_primitive_desc_destroy(*fpd);
        *fpd = *bpd = NULL;
        return SN_ERR_UNSUPPORTED;
    }
    return SN_OK;
}

static sn_status build(sn_dnnl_rnn *l, bool bf16) {
    SN_TRY(sn_dnnl_engine(&l->eng));
    SN_TRY(sn_dnnl_stream(&l->st));
    const dnnl_data_type_t f = dnnl_f32, h = dnnl_bf16;
    /* f32; bf16 in the configurations oneDNN documents (cell state f32 or bf16, gradients
     * of the data in either, weight gradients f32 or bf16), the first it accepts */
    static const lstm_types f32[1] = {{dnnl_f32, dnnl_f32, dnnl_f32, dnnl_f32, dnnl_f32, dnnl_f32}};
    const lstm_types b16[6] = {{h, f, h, h, f, f}, {h, f, h, f, f, f}, {h, f, h, h, f, h},
                               {h, h, h, h, h, f}, {h, h, h, h, h, h}, {h, h, h, f, f, f}};
    const lstm_types *cand = bf16 ? b16 : f32;
    int n = bf16 ? 6 : 1;
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    for (int i = 0; i < n && !fpd; i++) try_pds(l, cand[i], &fpd, &bpd);
    if (!fpd)
        return sn_errorf(SN_ERR_UNSUPPORTED, "%s: no %s training implementation for "
                         "B=%lld T=%lld D=%lld U=%lld on this CPU", name_of(l->gru),
                         bf16 ? "bf16" : "f32",
                         (long long)l->B, (long long)l->T, (long long)l->D, (long long)l->U);
    snprintf(l->impl, sizeof l->impl, "%s / %s", sn_dnnl_impl_name(fpd), sn_dnnl_impl_name(bpd));
    sn_status s = SN_OK;
    int64_t B = l->B, T = l->T, D = l->D, U = l->U, NG = l->gru ? 3 : 4;
    dnnl_memory_desc_t ux, uy, uh, uwl, uwi, ub;
    dnnl_memory_desc_t uc; /* the final c and its gradient: rows c_ld apart */
    if ((s = md(&ux, 3, (dnnl_dims_t){T, B, D}, dnnl_f32, dnnl_ntc)) ||
        (s = strided(&uy, 3, (dnnl_dims_t){T, B, U}, (dnnl_dims_t){U, l->y_ld, 1})) ||
        (s = strided(&uc, 4, (dnnl_dims_t){1, 1, B, U},
                     (dnnl_dims_t){B * l->c_ld, B * l->c_ld, l->c_ld, 1})) ||
        (s = md(&uh, 4, (dnnl_dims_t){1, 1, B, U}, dnnl_f32, dnnl_ldnc)) ||
        (s = md(&uwl, 5, (dnnl_dims_t){1, 1, D, NG, U}, dnnl_f32, dnnl_ldigo)) ||
        (s = md(&uwi, 5, (dnnl_dims_t){1, 1, U, NG, U}, dnnl_f32, dnnl_ldigo)) ||
        (s = md(&ub, 4, (dnnl_dims_t){1, 1, 4, U}, dnnl_f32, dnnl_ldgo)))
        goto done;
#define Q(pd, what, i) dnnl_primitive_desc_query_md(pd, what, i)
    /* forward: src/dst layer, iter, iter_c are indices 0, 1, 2 of the src and dst queries */
    const dnnl_memory_desc_t *fu[F_N] = {&ux, &uh, &uh, &uwl, &uwi, &ub, &uy, &uh, &uc};
    const dnnl_memory_desc_t *fp[F_N] = {
        Q(fpd, dnnl_query_src_md, 0),     Q(fpd, dnnl_query_src_md, 1),
        Q(fpd, dnnl_query_src_md, 2),     Q(fpd, dnnl_query_weights_md, 0),
        Q(fpd, dnnl_query_weights_md, 1), Q(fpd, dnnl_query_weights_md, 2),
        Q(fpd, dnnl_query_dst_md, 0),     Q(fpd, dnnl_query_dst_md, 1),
        Q(fpd, dnnl_query_dst_md, 2)};
    const bool fin[F_N] = {1, 1, 1, 1, 1, 1, 0, 0, 0};
    for (int i = 0; i < F_N && !s; i++)
        if (!l->gru || (i != F_C0 && i != F_CT))
            s = port_init(&l->f[i], fu[i], fp[i], fin[i], i != F_W && i != F_R && i != F_B, l->eng);
    const dnnl_memory_desc_t *gu[G_N] = {&uwl, &uwi, &uy, &uh, &uc, &ux, &uh, &uh, &uwl, &uwi, &ub};
    const dnnl_memory_desc_t *gp[G_N] = {
        Q(bpd, dnnl_query_weights_md, 0),      Q(bpd, dnnl_query_weights_md, 1),
        Q(bpd, dnnl_query_diff_dst_md, 0),     Q(bpd, dnnl_query_diff_dst_md, 1),
        Q(bpd, dnnl_query_diff_dst_md, 2),     Q(bpd, dnnl_query_diff_src_md, 0),
        Q(bpd, dnnl_query_diff_src_md, 1),     Q(bpd, dnnl_query_diff_src_md, 2),
        Q(bpd, dnnl_query_diff_weights_md, 0), Q(bpd, dnnl_query_diff_weights_md, 1),
        Q(bpd, dnnl_query_diff_weights_md, 2)};
    const bool gin[G_N] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < G_N && !s; i++)
        if (!l->gru || (i != G_DCT && i != G_DC0))
            s = port_init(&l->g[i], gu[i], gp[i], gin[i], false, l->eng);
    if (!s) s = mem_new(&l->ws, Q(fpd, dnnl_query_workspace_md, 0), l->eng);
#undef Q
    if (s) goto done;
    dnnl_status_t ds = dnnl_primitive_create(&l->fwd, fpd);
    if (ds == dnnl_success) ds = dnnl_primitive_create(&l->bwd, bpd);
    if (ds != dnnl_success)
        s = sn_dnnl_error(ds, "dnnl_primitive_create(rnn)", __FILE__, __LINE__);
done:
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(bpd);
    return s;
}

sn_status sn_dnnl_rnn_new(sn_dnnl_rnn **out, sn_dnnl_cell cell, int64_t B, int64_t T, int64_t D,
                          int64_t U, bool bf16, int64_t y_ld, int64_t c_ld) {
    const char *name = name_of(cell == SN_DNNL_GRU_LBR);
    if (!out) return sn_errorf(SN_ERR_INVALID, "%s: out is NULL", name);
    *out = NULL;
    if (B < 1 || T < 1 || D < 1 || U < 1)
        return sn_errorf(SN_ERR_INVALID, "%s: B=%lld T=%lld D=%lld U=%lld, expected "
                         "all >= 1", name, (long long)B, (long long)T, (long long)D, (long long)U);
    if (y_ld < T * U || c_ld < U)
        return sn_errorf(SN_ERR_INVALID, "%s: row strides y_ld=%lld c_ld=%lld, "
                         "expected >= T*U=%lld and >= U=%lld", name, (long long)y_ld,
                         (long long)c_ld, (long long)(T * U), (long long)U);
    sn_dnnl_rnn *l = calloc(1, sizeof *l);
    if (!l) return sn_errorf(SN_ERR_NOMEM, "%s: out of memory", name);
    *l = (sn_dnnl_rnn){.gru = cell == SN_DNNL_GRU_LBR, .B = B, .T = T, .D = D, .U = U,
                       .y_ld = y_ld, .c_ld = c_ld};
    /* zeros and junk stand in for any state buffer, the strided final c's included */
    l->zeros = calloc((size_t)(B * c_ld), sizeof(float));
    l->junk = malloc(sizeof(float) * (size_t)(B * c_ld));
    sn_status s = l->zeros && l->junk ? build(l, bf16)
                                      : sn_errorf(SN_ERR_NOMEM, "%s: out of memory", name);
    if (s) {
        sn_dnnl_rnn_free(l);
        return s;
    }
    *out = l;
    return SN_OK;
}

sn_status sn_dnnl_lstm_new(sn_dnnl_rnn **out, int64_t B, int64_t T, int64_t D, int64_t U,
                           bool bf16) {
    return sn_dnnl_rnn_new(out, SN_DNNL_LSTM, B, T, D, U, bf16, T * U, U);
}

void sn_dnnl_rnn_free(sn_dnnl_rnn *l) {
    if (!l) return;
    for (int i = 0; i < F_N; i++) port_destroy(&l->f[i]);
    for (int i = 0; i < G_N; i++) port_destroy(&l->g[i]);
    if (l->ws) dnnl_memory_destroy(l->ws);
    if (l->fwd) dnnl_primitive_destroy(l->fwd);
    if (l->bwd) dnnl_primitive_destroy(l->bwd);
    free(l->zeros);
    free(l->junk);
    free(l);
}

const char *sn_dnnl_rnn_impl(const sn_dnnl_rnn *l) { return l ? l->impl : "none"; }

sn_status sn_dnnl_rnn_forward(sn_dnnl_rnn *l, const sn_dnnl_rnn_fwd *a) {
    if (!l || !a || !a->x || !a->w || !a->r || !a->b || !a->y)
        return sn_errorf(SN_ERR_INVALID, "oneDNN RNN forward: a handle, x, w, r, b and y "
                                         "are required");
    port *p = l->f;
    /* the initial states always go in, zeros when the caller has none: see the header */
    SN_TRY(port_in(l, &p[F_X], a->x));
    SN_TRY(port_in(l, &p[F_H0], a->h0 ? a->h0 : l->zeros));
    if (!l->gru) SN_TRY(port_in(l, &p[F_C0], a->c0 ? a->c0 : l->zeros));
    SN_TRY(port_in(l, &p[F_W], a->w));
    SN_TRY(port_in(l, &p[F_R], a->r));
    SN_TRY(port_in(l, &p[F_B], a->b));
    SN_TRY(port_bind(&p[F_Y], a->y));
    SN_TRY(port_bind(&p[F_HT], a->hT ? a->hT : l->junk));
    if (!l->gru) SN_TRY(port_bind(&p[F_CT], a->cT ? a->cT : l->junk));
    /* the c arguments last, so that a GRU passes all but them */
    dnnl_exec_arg_t args[] = {
        {DNNL_ARG_SRC_LAYER, p[F_X].prim},     {DNNL_ARG_SRC_ITER, p[F_H0].prim},
        {DNNL_ARG_WEIGHTS_LAYER, p[F_W].prim}, {DNNL_ARG_WEIGHTS_ITER, p[F_R].prim},
        {DNNL_ARG_BIAS, p[F_B].prim},          {DNNL_ARG_DST_LAYER, p[F_Y].prim},
        {DNNL_ARG_DST_ITER, p[F_HT].prim},     {DNNL_ARG_WORKSPACE, l->ws},
        {DNNL_ARG_SRC_ITER_C, p[F_C0].prim},   {DNNL_ARG_DST_ITER_C, p[F_CT].prim}};
    int n = (int)(sizeof args / sizeof *args) - (l->gru ? 2 : 0);
    SN_DNNL_CHECK(dnnl_primitive_execute(l->fwd, l->st, n, args));
    if (a->hT) SN_TRY(port_out(l, &p[F_HT]));
    if (a->cT && !l->gru) SN_TRY(port_out(l, &p[F_CT]));
    SN_TRY(port_out(l, &p[F_Y]));
    SN_DNNL_CHECK(dnnl_stream_wait(l->st));
    return SN_OK;
}

sn_status sn_dnnl_rnn_backward(sn_dnnl_rnn *l, const sn_dnnl_rnn_fwd *f,
                                const sn_dnnl_rnn_bwd *a) {
    if (!l || !f || !a || !f->w || !f->r || !f->b || !a->dy || !a->dx || !a->dw || !a->dr ||
        !a->db)
        return sn_errorf(SN_ERR_INVALID, "oneDNN RNN backward: a handle, the forward's w, r "
                                         "and b, dy, dx, dw, dr and db are required");
    port *p = l->f, *g = l->g;
    SN_TRY(port_in(l, &g[G_W], f->w));
    SN_TRY(port_in(l, &g[G_R], f->r));
    SN_TRY(port_bind(&p[F_B], f->b));
    SN_TRY(port_in(l, &g[G_DY], a->dy));
    SN_TRY(port_in(l, &g[G_DHT], a->dhT ? a->dhT : l->zeros));
    if (!l->gru) SN_TRY(port_in(l, &g[G_DCT], a->dcT ? a->dcT : l->zeros));
    SN_TRY(port_bind(&g[G_DX], a->dx));
    SN_TRY(port_bind(&g[G_DH0], a->dh0 ? a->dh0 : l->junk));
    if (!l->gru) SN_TRY(port_bind(&g[G_DC0], a->dc0 ? a->dc0 : l->junk));
    SN_TRY(port_bind(&g[G_DW], a->dw));
    SN_TRY(port_bind(&g[G_DR], a->dr));
    SN_TRY(port_bind(&g[G_DB], a->db));
    /* the primitive adds into the weight gradients: zero them where it writes */
    SN_TRY(port_zero(&g[G_DW]));
    SN_TRY(port_zero(&g[G_DR]));
    SN_TRY(port_zero(&g[G_DB]));
    dnnl_exec_arg_t args[] = {
        {DNNL_ARG_SRC_LAYER, p[F_X].prim},           {DNNL_ARG_SRC_ITER, p[F_H0].prim},
        {DNNL_ARG_WEIGHTS_LAYER, g[G_W].prim},       {DNNL_ARG_WEIGHTS_ITER, g[G_R].prim},
        {DNNL_ARG_BIAS, p[F_B].prim},                {DNNL_ARG_DST_LAYER, p[F_Y].prim},
        {DNNL_ARG_DST_ITER, p[F_HT].prim},           {DNNL_ARG_WORKSPACE, l->ws},
        {DNNL_ARG_DIFF_DST_LAYER, g[G_DY].prim},     {DNNL_ARG_DIFF_DST_ITER, g[G_DHT].prim},
        {DNNL_ARG_DIFF_SRC_LAYER, g[G_DX].prim},     {DNNL_ARG_DIFF_SRC_ITER, g[G_DH0].prim},
        {DNNL_ARG_DIFF_WEIGHTS_LAYER, g[G_DW].prim}, {DNNL_ARG_DIFF_WEIGHTS_ITER, g[G_DR].prim},
        {DNNL_ARG_DIFF_BIAS, g[G_DB].prim},
        /* the c arguments last (a GRU passes all but them) */
        {DNNL_ARG_SRC_ITER_C, p[F_C0].prim},         {DNNL_ARG_DST_ITER_C, p[F_CT].prim},
        {DNNL_ARG_DIFF_DST_ITER_C, g[G_DCT].prim},   {DNNL_ARG_DIFF_SRC_ITER_C, g[G_DC0].prim}};
    int n = (int)(sizeof args / sizeof *args) - (l->gru ? 4 : 0);
    SN_DNNL_CHECK(dnnl_primitive_execute(l->bwd, l->st, n, args));
    for (int i = G_DX; i < G_N; i++)
        if ((i != G_DH0 || a->dh0) && (i != G_DC0 || (a->dc0 && !l->gru)))
            SN_TRY(port_out(l, &g[i]));
    SN_DNNL_CHECK(dnnl_stream_wait(l->st));
    return SN_OK;
}

#endif /* SN_HAVE_DNNL */
