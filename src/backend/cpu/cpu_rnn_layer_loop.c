/* The whole-layer recurrent ops (graph ops lstm_layer, gru_layer and their gradients) on the
 * loop's kernels: the input projection x @ W as the CPU matmul kernel, the recurrence as the
 * lstm / gru kernels of cpu_rnn.c, and the weight gradients as three more matmul calls, all
 * called from here on buffers this kernel owns. Nothing is computed a second way: these are
 * the same kernels, in the same order, that the loop's graph ops used to run as separate
 * nodes.
 *
 * Why a kernel and not a graph decomposition: layers always build the whole-layer op (a
 * layer does not choose kernels), so a backend that has no primitive for the whole layer
 * still needs one. The gradient op is built by autodiff long before a plan picks a backend,
 * so decomposing the forward op at plan time would leave its gradient op without a partner;
 * a kernel variant keeps one graph for every backend and lets the kernel table choose, as it
 * does for every other op (oneDNN's primitives in cpu_rnn_layer.c, cuDNN's on a GPU, these
 * where neither is there: builds without oneDNN, and SN_RNN=loop for A/B runs, kernel_table.c).
 *
 * Like the oneDNN kernels, the forward call keeps what the backward reads as its state: the
 * loop's workspace ws [B, T, W*U] (W = 6 slots for the LSTM, 5 for the GRU; backend/op_desc.h
 * names them). The gradient's call reads it through the forward call the planner linked to it
 * (sn_kcall.fwd); without a partner it runs the forward itself first.
 *
 *   forward  (x [B,T,D], w [D,G], r [U,G], b [4U], h0 [B,U], c0 [B,U]) -> y [B, T (+1), U]
 *   gradient (the same, y, dy) -> dx | dw | dr | db, flat
 *
 * The GRU's bias is oneDNN's four parts (graph/op_rnn.h): the z and r parts of Keras's two
 * biases summed, the input h part, the recurrent h part. The loop's gru op takes the input
 * bias inside xw and a recurrent bias rb [3U]: xw gets parts 0-2 and rb = [0, 0, part 3],
 * which gives the same sums; the gradient maps back the same way. */
#include <stdlib.h>
#include <string.h>

#include "backend/kernel.h"

/* A kernel called from here: its own call description, chosen and prepared once. The struct
 * holds the attributes the call points at, so it never moves after sub_init. */
typedef struct sub {
    sn_kcall c;
    sn_attrs a;
    const sn_kernel *k;
    size_t scratch;
} sub;

static sn_status sub_init(sub *s, sn_op op, const sn_attrs *a, sn_tdesc y, int n_in,
                          const sn_tdesc *x, bool bf16, const char *who) {
    memset(s, 0, sizeof *s);
    if (a) s->a = *a;
    s->c = (sn_kcall){.op = op, .attr = &s->a, .id = -1, .y = y, .n_in = n_in, .bf16 = bf16};
    for (int i = 0; i < n_in; i++) s->c.x[i] = x[i];
    s->k = sn_kernel_select(sn_cpu_kernels(), &s->c);
    if (!s->k)
        return sn_errorf(SN_ERR_UNSUPPORTED, "%s: no CPU kernel for one of its steps (op %d)",
                         who, (int)op);
    return s->k->prepare ? s->k->prepare(&s->c, &s->scratch) : SN_OK;
}

static sn_status sub_run(sub *s, const void *in0, const void *in1, const void *in2,
                         const void *in3, void *out, void *scratch) {
    const void *in[4] = {in0, in1, in2, in3};
    for (int i = 0; i < s->c.n_in; i++) s->c.in[i] = in[i];
    s->c.out = out;
    s->c.scratch = scratch;
    s->c.scratch_bytes = s->scratch;
    return s->k->run(&s->c);
}

static void sub_release(sub *s) {
    if (s->k && s->k->release) s->k->release(&s->c);
    s->k = NULL;
}

static sn_tdesc f32(int ndim, int64_t d0, int64_t d1, int64_t d2) {
    sn_tdesc t = {.dtype = SN_F32, .shape = {.ndim = ndim, .dim = {d0, d1, d2}}};
    return t;
}

static sn_tdesc mat(int64_t rows, int64_t cols) { return f32(2, rows, cols, 0); }

static sn_attrs mm_attrs(bool ta, bool tb) {
    sn_attrs a;
    memset(&a, 0, sizeof a);
    a.matmul.ta = ta;
    a.matmul.tb = tb;
    return a;
}

/* Sizes of a call of either op or its gradient (the layer's inputs come first in both). */
typedef struct dims {
    int64_t B, T, D, U, G, W, TY; /* G = gates * U; W = workspace columns; TY = output rows */
    bool gru, keep_c;
} dims;

static bool is_gru_op(sn_op op) { return op == SN_OP_GRU_LAYER || op == SN_OP_GRU_LAYER_GRAD; }

static dims dims_of(const sn_kcall *c) {
    const sn_shape *x = &c->x[0].shape;
    dims d = {.B = x->dim[0], .T = x->dim[1], .D = x->dim[2], .U = c->x[2].shape.dim[0],
              .G = c->x[2].shape.dim[1], .gru = is_gru_op(c->op),
              .keep_c = c->attr->lstm.keep_c};
    d.W = (d.gru ? SN_GRU_WS : SN_LSTM_WS) * d.U;
    d.TY = d.T + (d.keep_c ? 1 : 0);
    return d;
}

static size_t fbytes(int64_t n) { return sizeof(float) * (size_t)n; }

/* Scratch offsets are rounded to 64 bytes (the kernels called may use aligned loads). */
static size_t up64(size_t n) { return (n + 63) & ~(size_t)63; }

/* ---- forward ------------------------------------------------------------------------------ */

/* What a forward keeps: its two calls, the workspace (read by the gradient) and the GRU's
 * recurrent bias. Scratch: xw [B*T, G], then the calls' own scratch. */
typedef struct fwd_state {
    dims d;
    sub mm, seq;
    float *ws, *rb;
    size_t scratch;
} fwd_state;

static void fwd_free(fwd_state *f) {
    if (!f) return;
    sub_release(&f->mm);
    sub_release(&f->seq);
    free(f->ws);
    free(f->rb);
    free(f);
}

static sn_status fwd_new(const sn_kcall *c, fwd_state **out) {
    fwd_state *f = calloc(1, sizeof *f);
    if (!f) return SN_ERR_NOMEM;
    *out = f;
    dims d = f->d = dims_of(c);
    const char *who = d.gru ? "gru_layer (loop)" : "lstm_layer (loop)";
    sn_attrs mm = mm_attrs(false, false);
    SN_TRY(sub_init(&f->mm, SN_OP_MATMUL, &mm, mat(d.B * d.T, d.G), 2,
                    (sn_tdesc[]){mat(d.B * d.T, d.D), mat(d.D, d.G)}, c->bf16, who));
    sn_tdesc xw = f32(3, d.B, d.T, d.G), r = mat(d.U, d.G), h = mat(d.B, d.U);
    if (d.gru)
        SN_TRY(sub_init(&f->seq, SN_OP_GRU, NULL, f32(3, d.B, d.T, d.W), 4,
                        (sn_tdesc[]){xw, r, f32(1, d.G, 0, 0), h}, false, who));
    else
        SN_TRY(sub_init(&f->seq, SN_OP_LSTM, NULL, f32(3, d.B, d.T, d.W), 4,
                        (sn_tdesc[]){xw, r, h, h}, false, who));
    f->ws = malloc(fbytes(d.B * d.T * d.W));
    f->rb = d.gru ? calloc((size_t)d.G, sizeof(float)) : NULL;
    if (!f->ws || (d.gru && !f->rb)) return SN_ERR_NOMEM;
    f->scratch = up64(fbytes(d.B * d.T * d.G)) + up64(f->mm.scratch) + up64(f->seq.scratch);
    return SN_OK;
}

/* Adds the input bias to rows [r0, r1) of xw [rows, G]. */
typedef struct bias_ctx {
    float *xw;
    const float *b;
    int64_t rows, G;
} bias_ctx;

static void bias_task(void *ctx, int ith, int nth) {
    const bias_ctx *x = ctx;
    int64_t r0, r1;
    sn_split_range(x->rows, ith, nth, &r0, &r1);
    for (int64_t i = r0; i < r1; i++) {
        float *row = x->xw + i * x->G;
        for (int64_t j = 0; j < x->G; j++) row[j] += x->b[j];
    }
}

/* in: x, w, r, b, h0, c0 (the layer's inputs); y NULL: the workspace only (a gradient call
 * without a partner). */
static sn_status fwd_run(fwd_state *f, const void *const *in, float *y, void *scratch) {
    const dims d = f->d;
    char *s = scratch;
    float *xw = (float *)s;
    void *mm_scratch = s + up64(fbytes(d.B * d.T * d.G));
    void *seq_scratch = (char *)mm_scratch + up64(f->mm.scratch);
    SN_TRY(sub_run(&f->mm, in[0], in[1], NULL, NULL, xw, mm_scratch));
    const float *b = in[3];
    /* the GRU's input bias is parts 0-2 of b: its first G = 3U values, as the LSTM's is all
     * of its 4U */
    bias_ctx bx = {.xw = xw, .b = b, .rows = d.B * d.T, .G = d.G};
    sn_parallel(bias_task, &bx, sn_num_threads());
    if (d.gru) {
        memcpy(f->rb + 2 * d.U, b + 3 * d.U, fbytes(d.U));
        SN_TRY(sub_run(&f->seq, xw, in[2], f->rb, in[4], f->ws, seq_scratch));
    } else {
        SN_TRY(sub_run(&f->seq, xw, in[2], in[4], in[5], f->ws, seq_scratch));
    }
    if (!y) return SN_OK;
    for (int64_t bi = 0; bi < d.B; bi++) {
        for (int64_t t = 0; t < d.T; t++)
            memcpy(y + (bi * d.TY + t) * d.U, f->ws + (bi * d.T + t) * d.W + SN_LSTM_H * d.U,
                   fbytes(d.U));
        if (d.keep_c)
            memcpy(y + (bi * d.TY + d.T) * d.U,
                   f->ws + (bi * d.T + d.T - 1) * d.W + SN_LSTM_C * d.U, fbytes(d.U));
    }
    return SN_OK;
}

static bool all_f32(const sn_kcall *c) {
    if (c->y.dtype != SN_F32) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    dims d = dims_of(c);
    /* the loop's kernels take BLAS int sizes and leading dimensions */
    return d.B * d.T * d.W < INT32_MAX && d.B * d.T * d.D < INT32_MAX;
}

static sn_status layer_prepare(sn_kcall *c, size_t *scratch) {
    fwd_state *f = NULL;
    sn_status s = fwd_new(c, &f);
    if (s != SN_OK) {
        fwd_free(f);
        return s;
    }
    c->state = f;
    *scratch = f->scratch;
    return SN_OK;
}

static sn_status layer_run(sn_kcall *c) { return fwd_run(c->state, c->in, c->out, c->scratch); }

static void layer_release(sn_kcall *c) {
    fwd_free(c->state);
    c->state = NULL;
}

static const sn_kernel k_layer = {.impl = "loop", .supports = all_f32, .prepare = layer_prepare,
                                  .run = layer_run, .release = layer_release};

/* ---- gradient ----------------------------------------------------------------------------- */

/* The gradient's calls: the recurrence's backward, then dx = dxw W^T, dW = x^T dxw and
 * dR = h_prev^T drec (the LSTM's drec is its dxw). own: a forward of its own when no partner
 * forward call keeps the workspace. Scratch: dws, the recurrence's output, h_prev, the GRU's
 * dxw and drec as contiguous copies, then the calls' own scratch. */
typedef struct grad_state {
    dims d;
    sub seqg, mm_dx, mm_dw, mm_dr;
    fwd_state *own;
    int64_t GO; /* columns of the recurrence's output: 4U (LSTM dxw), 6U (GRU dxw | drec) */
    size_t off_dws, off_go, off_hp, off_dxw, off_drec, off_sub, off_own, scratch;
} grad_state;

static void grad_free(grad_state *g) {
    if (!g) return;
    sub_release(&g->seqg);
    sub_release(&g->mm_dx);
    sub_release(&g->mm_dw);
    sub_release(&g->mm_dr);
    fwd_free(g->own);
    free(g);
}

static bool has_partner(const sn_kcall *c) {
    return c->fwd && c->fwd_kernel == &k_layer && c->fwd->state;
}

static size_t max3(size_t a, size_t b, size_t c) {
    size_t m = a > b ? a : b;
    return m > c ? m : c;
}

static sn_status grad_new(sn_kcall *c, grad_state **out) {
    grad_state *g = calloc(1, sizeof *g);
    if (!g) return SN_ERR_NOMEM;
    *out = g;
    dims d = g->d = dims_of(c);
    const char *who = d.gru ? "gru_layer_grad (loop)" : "lstm_layer_grad (loop)";
    int64_t rows = d.B * d.T;
    sn_tdesc ws = f32(3, d.B, d.T, d.W), r = mat(d.U, d.G), h = mat(d.B, d.U);
    g->GO = d.gru ? 2 * d.G : d.G;
    if (d.gru)
        SN_TRY(sub_init(&g->seqg, SN_OP_GRU_GRAD, NULL, f32(3, d.B, d.T, g->GO), 4,
                        (sn_tdesc[]){r, h, ws, ws}, false, who));
    else
        SN_TRY(sub_init(&g->seqg, SN_OP_LSTM_GRAD, NULL, f32(3, d.B, d.T, g->GO), 4,
                        (sn_tdesc[]){r, h, ws, ws}, false, who));
    sn_attrs dx = mm_attrs(false, true), dwr = mm_attrs(true, false);
    SN_TRY(sub_init(&g->mm_dx, SN_OP_MATMUL, &dx, mat(rows, d.D), 2,
                    (sn_tdesc[]){mat(rows, d.G), mat(d.D, d.G)}, c->bf16, who));
    SN_TRY(sub_init(&g->mm_dw, SN_OP_MATMUL, &dwr, mat(d.D, d.G), 2,
                    (sn_tdesc[]){mat(rows, d.D), mat(rows, d.G)}, c->bf16, who));
    SN_TRY(sub_init(&g->mm_dr, SN_OP_MATMUL, &dwr, mat(d.U, d.G), 2,
                    (sn_tdesc[]){mat(rows, d.U), mat(rows, d.G)}, c->bf16, who));
    size_t at = 0;
    g->off_dws = at, at += up64(fbytes(rows * d.W));
    g->off_go = at, at += up64(fbytes(rows * g->GO));
    g->off_hp = at, at += up64(fbytes(rows * d.U));
    g->off_dxw = at, at += d.gru ? up64(fbytes(rows * d.G)) : 0;
    g->off_drec = at, at += d.gru ? up64(fbytes(rows * d.G)) : 0;
    g->off_sub = at;
    at += up64(max3(g->seqg.scratch, max3(g->mm_dx.scratch, g->mm_dw.scratch, g->mm_dr.scratch),
                    0));
    g->off_own = at;
    if (!has_partner(c)) {
        SN_TRY(fwd_new(c, &g->own));
        at += g->own->scratch;
    }
    g->scratch = at;
    return SN_OK;
}

static sn_status grad_prepare(sn_kcall *c, size_t *scratch) {
    grad_state *g = NULL;
    sn_status s = grad_new(c, &g);
    if (s != SN_OK) {
        grad_free(g);
        return s;
    }
    c->state = g;
    *scratch = g->scratch;
    return SN_OK;
}

static void grad_release(sn_kcall *c) {
    grad_free(c->state);
    c->state = NULL;
}

/* Column sums of rows [0, rows) of src (leading dimension ld), columns [0, n), into dst:
 * each thread owns a range of columns and adds the rows in order, so the sums do not depend
 * on the thread count. */
typedef struct colsum_ctx {
    const float *src;
    float *dst;
    int64_t rows, ld, n;
} colsum_ctx;

static void colsum_task(void *ctx, int ith, int nth) {
    const colsum_ctx *x = ctx;
    int64_t j0, j1;
    sn_split_range(x->n, ith, nth, &j0, &j1);
    if (j1 <= j0) return;
    memset(x->dst + j0, 0, fbytes(j1 - j0));
    for (int64_t i = 0; i < x->rows; i++) {
        const float *row = x->src + i * x->ld;
        for (int64_t j = j0; j < j1; j++) x->dst[j] += row[j];
    }
}

static void colsum(const float *src, int64_t rows, int64_t ld, int64_t n, float *dst) {
    colsum_ctx x = {.src = src, .dst = dst, .rows = rows, .ld = ld, .n = n};
    sn_parallel(colsum_task, &x, sn_num_threads());
}

static sn_status grad_run(sn_kcall *c) {
    grad_state *g = c->state;
    const dims d = g->d;
    const int64_t rows = d.B * d.T;
    char *s = c->scratch;
    float *dws = (float *)(s + g->off_dws), *go = (float *)(s + g->off_go),
          *hp = (float *)(s + g->off_hp);
    void *sub_scratch = s + g->off_sub;
    const float *ws;
    if (g->own) {
        SN_TRY(fwd_run(g->own, c->in, NULL, s + g->off_own));
        ws = g->own->ws;
    } else {
        ws = ((const fwd_state *)c->fwd->state)->ws;
    }
    const float *dy = c->in[c->n_in - 1], *h0 = c->in[4];
    /* d ws: the h slot takes dy's rows, the LSTM's c slot of the last step the kept c's */
    memset(dws, 0, fbytes(rows * d.W));
    for (int64_t b = 0; b < d.B; b++) {
        for (int64_t t = 0; t < d.T; t++)
            memcpy(dws + (b * d.T + t) * d.W + SN_LSTM_H * d.U, dy + (b * d.TY + t) * d.U,
                   fbytes(d.U));
        if (d.keep_c)
            memcpy(dws + (b * d.T + d.T - 1) * d.W + SN_LSTM_C * d.U,
                   dy + (b * d.TY + d.T) * d.U, fbytes(d.U));
    }
    /* h_prev: h0, then h_1 .. h_{T-1} */
    for (int64_t b = 0; b < d.B; b++)
        for (int64_t t = 0; t < d.T; t++)
            memcpy(hp + (b * d.T + t) * d.U,
                   t ? ws + (b * d.T + t - 1) * d.W + SN_LSTM_H * d.U : h0 + b * d.U,
                   fbytes(d.U));
    const void *h_or_c0 = d.gru ? h0 : c->in[5]; /* lstm_grad takes c0, gru_grad h0 */
    SN_TRY(sub_run(&g->seqg, c->in[2], h_or_c0, ws, dws, go, sub_scratch));
    const float *dxw = go, *drec = go;
    if (d.gru) { /* go rows are [dxw (3U) | drec (3U)]: contiguous copies for the matmuls */
        float *a = (float *)(s + g->off_dxw), *r = (float *)(s + g->off_drec);
        for (int64_t i = 0; i < rows; i++) {
            memcpy(a + i * d.G, go + i * g->GO, fbytes(d.G));
            memcpy(r + i * d.G, go + i * g->GO + d.G, fbytes(d.G));
        }
        dxw = a, drec = r;
    }
    float *out = c->out, *dx = out, *dw = dx + rows * d.D, *dr = dw + d.D * d.G,
          *db = dr + d.U * d.G;
    SN_TRY(sub_run(&g->mm_dx, dxw, c->in[1], NULL, NULL, dx, sub_scratch));
    SN_TRY(sub_run(&g->mm_dw, c->in[0], dxw, NULL, NULL, dw, sub_scratch));
    SN_TRY(sub_run(&g->mm_dr, hp, drec, NULL, NULL, dr, sub_scratch));
    if (d.gru) { /* b's parts: z r (both biases), input h, recurrent h */
        colsum(dxw, rows, d.G, 3 * d.U, db);
        colsum(drec + 2 * d.U, rows, d.G, d.U, db + 3 * d.U);
    } else {
        colsum(dxw, rows, d.G, d.G, db);
    }
    return SN_OK;
}

static const sn_kernel k_layer_grad = {.impl = "loop", .supports = all_f32,
                                       .prepare = grad_prepare, .run = grad_run,
                                       .release = grad_release};

void sn_cpu_register_rnn_layer_loop(sn_kernel_table *t) {
    t->k[SN_OP_LSTM_LAYER] = &k_layer;
    t->k[SN_OP_LSTM_LAYER_GRAD] = &k_layer_grad;
    t->k[SN_OP_GRU_LAYER] = &k_layer;
    t->k[SN_OP_GRU_LAYER_GRAD] = &k_layer_grad;
}
