/* Fast f32 kernels of the recurrent ops (graph/op_rnn.h; the reference is
 * backend/ref/ref_rnn.c). The input projection x @ W for all steps is one big GEMM before the
 * op (a matmul node); here each step is one sgemm h_{t-1} @ R accumulated onto that step's
 * projection, then one fused pass over the gates (vectorised sigmoid/tanh from cpu_vec.h,
 * compiled for AVX-512 / AVX2 / baseline and picked at registration).
 *
 * Threads: batch rows are independent through the whole recurrence, so with B >= threads each
 * thread runs its slice of rows through all T steps (and all T steps of the backward pass)
 * inside one sn_parallel call: no barrier per step, sgemm single-threaded per slice (OpenBLAS's
 * OpenMP build runs one thread inside a parallel region). With fewer rows than threads
 * (generation: batch 1) the LSTM forward splits each step's units over the threads instead.
 * docs/kernels.md records the measurements (and oneDNN's RNN primitive, not used). */
#include <string.h>

#include "backend/cpu/cpu_rnn_impl.h"
#include "backend/cpu/cpu_vec.h"

/* ---- fused gate passes ------------------------------------------------------------------- */

/* One LSTM row: w = ws row [h | c | i | f | g | o] whose gate slots hold the pre-activations;
 * cp = c_{t-1}. Units [j0, j1). */
INL void sigmoid_inplace(float *restrict x, int64_t n) {
    for (int64_t j = 0; j < n; j++) x[j] = vsigmoid(x[j]);
}
INL void tanh_inplace(float *restrict x, int64_t n) {
    for (int64_t j = 0; j < n; j++) x[j] = vtanh(x[j]);
}

/* Short loops, one function each: GCC vectorises each of them, but not one loop holding all
 * five transcendental functions ("no vectype", measured with -fopt-info-vec). */
INL void lstm_cell_body(float *w, const float *restrict cp_, int64_t U, int64_t j0, int64_t j1) {
    int64_t n = j1 - j0;
    sigmoid_inplace(w + 2 * U + j0, n); /* i */
    sigmoid_inplace(w + 3 * U + j0, n); /* f */
    tanh_inplace(w + 4 * U + j0, n);    /* g */
    sigmoid_inplace(w + 5 * U + j0, n); /* o */
    float *restrict h = w + j0, *restrict c = w + U + j0;
    const float *restrict gi = w + 2 * U + j0, *restrict gf = w + 3 * U + j0,
                          *restrict gg = w + 4 * U + j0, *restrict cp = cp_ + j0;
    for (int64_t j = 0; j < n; j++) c[j] = gf[j] * cp[j] + gi[j] * gg[j];
    for (int64_t j = 0; j < n; j++) h[j] = vtanh(c[j]);
    const float *restrict go = w + 5 * U + j0;
    for (int64_t j = 0; j < n; j++) h[j] *= go[j];
}

/* One LSTM row backward: w = ws row, dw = its gradient, cp = c_{t-1}, dh = dh carried in
 * (from h_t @ R), dc = dc carried in (replaced by the carry for step t-1), dg = output row. */
INL void lstm_cell_bwd_body(const float *restrict w, const float *restrict dw,
                            const float *restrict cp, const float *restrict dh,
                            float *restrict dc, float *restrict dg, int64_t U) {
    const float *c = w + U, *gi = w + 2 * U, *gf = w + 3 * U, *gg = w + 4 * U, *go = w + 5 * U;
    for (int64_t j = 0; j < U; j++) {
        float tc = vtanh(c[j]), i = gi[j], f = gf[j], g = gg[j], o = go[j];
        float h = dw[j] + dh[j];
        float d = dw[U + j] + dc[j] + h * o * (1.0f - tc * tc);
        dg[j] = d * g * i * (1.0f - i);
        dg[U + j] = d * cp[j] * f * (1.0f - f);
        dg[2 * U + j] = d * i * (1.0f - g * g);
        dg[3 * U + j] = h * tc * o * (1.0f - o);
        dc[j] = d * f;
    }
}

/* acc[j] += sum_k a[k] * Bm[k * ldb + j] for j < n, k < K: the recurrent product of one state
 * row with a column block of R, reading R row by row (four rows per pass over acc, which
 * stays in L1). Used when a step has too few rows for a GEMM to pay (generation: batch 1),
 * where the step is bound by reading R (16 MB for 1024 units) and a library sgemm's
 * packing and calls cost more than the product. The sum over k runs in the same order
 * for every column split, so the result does not depend on the thread count. */
INL void gemv_rows_body(const float *restrict a, int64_t K, const float *restrict Bm, int64_t ldb,
                        float *restrict acc, int64_t n) {
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        const float a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
        const float *restrict b0 = Bm + k * ldb, *restrict b1 = b0 + ldb, *restrict b2 = b1 + ldb,
                              *restrict b3 = b2 + ldb;
        for (int64_t j = 0; j < n; j++) acc[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
    }
    for (; k < K; k++) {
        const float a0 = a[k];
        const float *restrict b0 = Bm + k * ldb;
        for (int64_t j = 0; j < n; j++) acc[j] += a0 * b0[j];
    }
}

/* One GRU row: x = xw row (z, r, h), rec = h_prev @ R + rb, hp = h_prev, w = ws row
 * [h | z | r | hh | rh]. */
INL void gru_cell_body(const float *restrict x, const float *restrict rec,
                       const float *restrict hp, float *w, int64_t U) {
    float *restrict zr = w + U, *restrict hh = w + 3 * U, *restrict rh = w + 4 * U,
                    *restrict h = w;
    for (int64_t j = 0; j < 2 * U; j++) zr[j] = x[j] + rec[j];
    sigmoid_inplace(zr, 2 * U); /* z, r */
    const float *restrict z = w + U, *restrict r = w + 2 * U;
    for (int64_t j = 0; j < U; j++) {
        rh[j] = rec[2 * U + j];
        hh[j] = x[2 * U + j] + r[j] * rh[j];
    }
    tanh_inplace(hh, U);
    for (int64_t j = 0; j < U; j++) h[j] = z[j] * hp[j] + (1.0f - z[j]) * hh[j];
}

/* One GRU row backward: dhc = dh carried (in: from the later steps; out: dh * z for step
 * t-1, before the GEMM term is added), o = output row [dx (3U) | drec (3U)]. */
INL void gru_cell_bwd_body(const float *restrict w, const float *restrict dw,
                           const float *restrict hp, float *restrict dhc, float *restrict o,
                           int64_t U) {
    const float *restrict zz = w + U, *restrict rr = w + 2 * U, *restrict hhh = w + 3 * U,
                          *restrict rhh = w + 4 * U;
    float *restrict dx = o, *restrict drec = o + 3 * U;
    for (int64_t j = 0; j < U; j++) {
        float z = zz[j], r = rr[j], hh = hhh[j], rh = rhh[j];
        float dh = dw[j] + dhc[j];
        float dz = dh * (hp[j] - hh) * z * (1.0f - z);
        float dhh = dh * (1.0f - z) * (1.0f - hh * hh);
        float dr = dhh * rh * r * (1.0f - r);
        dx[j] = dz;
        dx[U + j] = dr;
        dx[2 * U + j] = dhh;
        drec[j] = dz;
        drec[U + j] = dr;
        drec[2 * U + j] = dhh * r;
        dhc[j] = dh * z;
    }
}

typedef struct rnn_cells {
    void (*lstm)(float *w, const float *cp, int64_t U, int64_t j0, int64_t j1);
    void (*lstm_bwd)(const float *w, const float *dw, const float *cp, const float *dh,
                     float *dc, float *dg, int64_t U);
    void (*gru)(const float *x, const float *rec, const float *hp, float *w, int64_t U);
    void (*gru_bwd)(const float *w, const float *dw, const float *hp, float *dhc, float *o,
                    int64_t U);
    void (*gemv)(const float *a, int64_t K, const float *Bm, int64_t ldb, float *acc, int64_t n);
} rnn_cells;

#define CELL_VARIANT(TGT, sfx)                                                                 \
    TGT static void lstm_##sfx(float *w, const float *cp, int64_t U, int64_t j0, int64_t j1) { \
        lstm_cell_body(w, cp, U, j0, j1);                                                      \
    }                                                                                          \
    TGT static void lstm_bwd_##sfx(const float *w, const float *dw, const float *cp,           \
                                   const float *dh, float *dc, float *dg, int64_t U) {         \
        lstm_cell_bwd_body(w, dw, cp, dh, dc, dg, U);                                          \
    }                                                                                          \
    TGT static void gru_##sfx(const float *x, const float *rec, const float *hp, float *w,     \
                              int64_t U) {                                                     \
        gru_cell_body(x, rec, hp, w, U);                                                       \
    }                                                                                          \
    TGT static void gru_bwd_##sfx(const float *w, const float *dw, const float *hp,            \
                                  float *dhc, float *o, int64_t U) {                           \
        gru_cell_bwd_body(w, dw, hp, dhc, o, U);                                               \
    }                                                                                          \
    TGT static void gemv_##sfx(const float *a, int64_t K, const float *Bm, int64_t ldb,        \
                               float *acc, int64_t n) {                                        \
        gemv_rows_body(a, K, Bm, ldb, acc, n);                                                 \
    }                                                                                          \
    static const rnn_cells cells_##sfx = {lstm_##sfx, lstm_bwd_##sfx, gru_##sfx, gru_bwd_##sfx, \
                                          gemv_##sfx};

CELL_VARIANT(, generic)
#ifdef SN_CPU_X86
CELL_VARIANT(TGT_AVX2, avx2)
CELL_VARIANT(TGT_AVX512, avx512)
#endif

static const rnn_cells *cells = &cells_generic;

/* Up to this many rows a step's recurrent product is our GEMV (gemv_rows_body), above it an
 * sgemm. */
#define GEMV_ROWS 2

/* ---- the recurrences ---------------------------------------------------------------------- */

typedef sn_rnn_ctx rnn_ctx; /* cpu_rnn_impl.h */

static bool all_f32(const sn_kcall *c) {
    if (c->y.dtype != SN_F32) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    int64_t U = c->x[c->op == SN_OP_LSTM || c->op == SN_OP_GRU ? 1 : 0].shape.dim[0];
    int64_t B = c->y.shape.dim[0], T = c->y.shape.dim[1];
    /* BLAS takes int dimensions and leading dimensions (T * 6U). */
    return U > 0 && B > 0 && T > 0 && T * 6 * U < INT32_MAX && B * T < INT32_MAX;
}

static void split_rows(const rnn_ctx *x, int ith, int nth, int64_t *b0, int64_t *b1) {
    sn_split_range(x->B, ith, nth, b0, b1);
}

/* LSTM forward over rows [b0, b1), all steps. */
static void lstm_rows_task(void *ctx, int ith, int nth) {
    const rnn_ctx *x = ctx;
    const sn_kcall *c = x->c;
    int64_t b0, b1, B = x->B, T = x->T, U = x->U, W = SN_LSTM_WS * U, G = 4 * U;
    split_rows(x, ith, nth, &b0, &b1);
    int nb = (int)(b1 - b0);
    if (nb <= 0) return;
    const float *xw = c->in[0], *R = c->in[1], *h0 = c->in[2], *c0 = c->in[3];
    float *ws = c->out;
    (void)B;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t b = b0; b < b1; b++)
            memcpy(ws + (b * T + t) * W + 2 * U, xw + (b * T + t) * G, sizeof(float) * (size_t)G);
        const float *A = t == 0 ? h0 + b0 * U : ws + (b0 * T + t - 1) * W;
        int lda = t == 0 ? (int)U : (int)(T * W);
        if (nb <= GEMV_ROWS) {
            for (int64_t b = 0; b < nb; b++)
                cells->gemv(A + b * lda, U, R, G, ws + ((b0 + b) * T + t) * W + 2 * U, G);
        } else if (!sn_rnn_gemm(false, nb, G, U, A, lda, R, G, 1.0f,
                                ws + (b0 * T + t) * W + 2 * U, T * W)) {
            sn_rnn_fail(ctx);
        }
        for (int64_t b = b0; b < b1; b++) {
            const float *cp = t == 0 ? c0 + b * U : ws + (b * T + t - 1) * W + U;
            cells->lstm(ws + (b * T + t) * W, cp, U, 0, U);
        }
    }
}

/* LSTM forward, step x->t, units [u0, u1) of every row (few rows, e.g. generation). */
static void lstm_units_task(void *ctx, int ith, int nth) {
    const rnn_ctx *x = ctx;
    const sn_kcall *c = x->c;
    int64_t u0, u1, B = x->B, T = x->T, U = x->U, W = SN_LSTM_WS * U, G = 4 * U, t = x->t;
    sn_split_range(U, ith, nth, &u0, &u1);
    int nu = (int)(u1 - u0);
    if (nu <= 0) return;
    const float *xw = c->in[0], *R = c->in[1], *h0 = c->in[2], *c0 = c->in[3];
    float *ws = c->out;
    const float *A = t == 0 ? h0 : ws + (t - 1) * W;
    int lda = t == 0 ? (int)U : (int)(T * W);
    for (int k = 0; k < 4; k++) {
        for (int64_t b = 0; b < B; b++)
            memcpy(ws + (b * T + t) * W + (2 + k) * U + u0, xw + (b * T + t) * G + k * U + u0,
                   sizeof(float) * (size_t)nu);
        if (B <= GEMV_ROWS) {
            for (int64_t b = 0; b < B; b++)
                cells->gemv(A + b * lda, U, R + k * U + u0, G,
                            ws + (b * T + t) * W + (2 + k) * U + u0, nu);
        } else if (!sn_rnn_gemm(false, B, nu, U, A, lda, R + k * U + u0, G, 1.0f,
                                ws + t * W + (2 + k) * U + u0, T * W)) {
            sn_rnn_fail(ctx);
        }
    }
    for (int64_t b = 0; b < B; b++) {
        const float *cp = t == 0 ? c0 + b * U : ws + (b * T + t - 1) * W + U;
        cells->lstm(ws + (b * T + t) * W, cp, U, u0, u1);
    }
}

static sn_status lstm_run(sn_kcall *c) {
    const sn_shape *s = &c->y.shape;
    rnn_ctx x = {.c = c, .B = s->dim[0], .T = s->dim[1], .U = c->x[1].shape.dim[0]};
    int nth = sn_num_threads();
    if (x.B >= nth || x.U < 64 * nth) {
        sn_parallel(lstm_rows_task, &x, (int)(x.B < nth ? x.B : nth));
    } else {
        for (x.t = 0; x.t < x.T; x.t++) sn_parallel(lstm_units_task, &x, nth);
    }
    return sn_rnn_status(&x, "lstm");
}

/* LSTM backward over rows [b0, b1): scratch holds dh and dc, [B, U] each. */
static void lstm_grad_task(void *ctx, int ith, int nth) {
    const rnn_ctx *x = ctx;
    const sn_kcall *c = x->c;
    int64_t b0, b1, B = x->B, T = x->T, U = x->U, W = SN_LSTM_WS * U, G = 4 * U;
    split_rows(x, ith, nth, &b0, &b1);
    int nb = (int)(b1 - b0);
    if (nb <= 0) return;
    const float *c0 = c->in[1], *ws = c->in[2], *dws = c->in[3];
    const float *RT = (const float *)c->scratch + 2 * B * U; /* R^T [4U, U], lstm_grad_run's */
    float *dg = c->out, *dh = (float *)c->scratch + b0 * U,
          *dc = (float *)c->scratch + (B + b0) * U;
    memset(dh, 0, sizeof(float) * (size_t)(nb * U));
    memset(dc, 0, sizeof(float) * (size_t)(nb * U));
    for (int64_t t = T - 1; t >= 0; t--) {
        if (t < T - 1)
            if (!sn_rnn_gemm(false, nb, U, G, dg + (b0 * T + t + 1) * G, T * G, RT, U, 0.0f, dh,
                             U))
                sn_rnn_fail(ctx);
        for (int64_t b = b0; b < b1; b++) {
            int64_t row = b * T + t;
            const float *cp = t == 0 ? c0 + b * U : ws + (row - 1) * W + U;
            cells->lstm_bwd(ws + row * W, dws + row * W, cp, dh + (b - b0) * U,
                            dc + (b - b0) * U, dg + row * G, U);
        }
    }
}

static sn_status rnn_grad_prepare(sn_kcall *c, size_t *scratch) {
    const sn_shape *s = &c->y.shape;
    *scratch = sizeof(float) * (size_t)(2 * s->dim[0] * c->x[0].shape.dim[0]);
    return SN_OK;
}

/* LSTM backward's scratch: dh and dc [B, U] each, then R^T [4U, U]. */
static sn_status lstm_grad_prepare(sn_kcall *c, size_t *scratch) {
    int64_t U = c->x[0].shape.dim[0];
    *scratch = sizeof(float) * (size_t)(2 * c->y.shape.dim[0] * U + 4 * U * U);
    return SN_OK;
}

/* Rows [j0, j1) of R^T: R [U, 4U] -> RT [4U, U]. */
typedef struct transpose_ctx {
    const float *r;
    float *rt;
    int64_t U;
} transpose_ctx;

static void transpose_task(void *ctx, int ith, int nth) {
    const transpose_ctx *x = ctx;
    int64_t j0, j1, U = x->U, G = 4 * x->U;
    sn_split_range(G, ith, nth, &j0, &j1);
    for (int64_t jb = j0; jb < j1; jb += 16)
        for (int64_t k = 0; k < U; k++)
            for (int64_t j = jb; j < j1 && j < jb + 16; j++) x->rt[j * U + k] = x->r[k * G + j];
}

/* The step's product dh = dgates_{t+1} @ R^T runs on a transposed copy made once per call:
 * with R itself (transb) the backward ran at 44 % of the fp32 peak against the forward's 70 %
 * on the same shapes (char_lstm_small, AMD Zen 4); docs/kernels.md has the A/B. */
static sn_status lstm_grad_run(sn_kcall *c) {
    int64_t B = c->y.shape.dim[0], U = c->x[0].shape.dim[0];
    transpose_ctx tx = {.r = c->in[0], .rt = (float *)c->scratch + 2 * B * U, .U = U};
    sn_parallel(transpose_task, &tx, sn_num_threads());
    return sn_rnn_run_rows(c, 0, lstm_grad_task, "lstm_grad");
}

/* GRU forward over rows [b0, b1): scratch holds h_prev @ R + rb, [B, 3U]. */
static void gru_rows_task(void *ctx, int ith, int nth) {
    const rnn_ctx *x = ctx;
    const sn_kcall *c = x->c;
    int64_t b0, b1, T = x->T, U = x->U, W = SN_GRU_WS * U, G = 3 * U;
    split_rows(x, ith, nth, &b0, &b1);
    int nb = (int)(b1 - b0);
    if (nb <= 0) return;
    const float *xw = c->in[0], *R = c->in[1], *rb = c->in[2], *h0 = c->in[3];
    float *ws = c->out, *rec = (float *)c->scratch + b0 * G;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t b = 0; b < nb; b++) memcpy(rec + b * G, rb, sizeof(float) * (size_t)G);
        const float *A = t == 0 ? h0 + b0 * U : ws + (b0 * T + t - 1) * W;
        int lda = t == 0 ? (int)U : (int)(T * W);
        if (nb <= GEMV_ROWS) {
            for (int64_t b = 0; b < nb; b++) cells->gemv(A + b * lda, U, R, G, rec + b * G, G);
        } else if (!sn_rnn_gemm(false, nb, G, U, A, lda, R, G, 1.0f, rec, G)) {
            sn_rnn_fail(ctx);
        }
        for (int64_t b = b0; b < b1; b++) {
            int64_t row = b * T + t;
            const float *hp = t == 0 ? h0 + b * U : ws + (row - 1) * W;
            cells->gru(xw + row * G, rec + (b - b0) * G, hp, ws + row * W, U);
        }
    }
}

static sn_status gru_prepare(sn_kcall *c, size_t *scratch) {
    *scratch = sizeof(float) * (size_t)(c->y.shape.dim[0] * c->x[2].shape.dim[0]);
    return SN_OK;
}

static sn_status gru_run(sn_kcall *c) { return sn_rnn_run_rows(c, 1, gru_rows_task, "gru"); }

/* GRU backward over rows [b0, b1): scratch holds the carried dh, [B, U]. */
static void gru_grad_task(void *ctx, int ith, int nth) {
    const rnn_ctx *x = ctx;
    const sn_kcall *c = x->c;
    int64_t b0, b1, T = x->T, U = x->U, W = SN_GRU_WS * U, G = 3 * U;
    split_rows(x, ith, nth, &b0, &b1);
    int nb = (int)(b1 - b0);
    if (nb <= 0) return;
    const float *R = c->in[0], *h0 = c->in[1], *ws = c->in[2], *dws = c->in[3];
    float *out = c->out, *dh = (float *)c->scratch + b0 * U;
    memset(dh, 0, sizeof(float) * (size_t)(nb * U));
    for (int64_t t = T - 1; t >= 0; t--) {
        if (t < T - 1)
            if (!sn_rnn_gemm(true, nb, U, G, out + (b0 * T + t + 1) * 2 * G + G, T * 2 * G, R, G,
                             1.0f, dh, U))
                sn_rnn_fail(ctx);
        for (int64_t b = b0; b < b1; b++) {
            int64_t row = b * T + t;
            const float *hp = t == 0 ? h0 + b * U : ws + (row - 1) * W;
            cells->gru_bwd(ws + row * W, dws + row * W, hp, dh + (b - b0) * U, out + row * 2 * G,
                           U);
        }
    }
}

static sn_status gru_grad_run(sn_kcall *c) {
    return sn_rnn_run_rows(c, 0, gru_grad_task, "gru_grad");
}

#define RNN_IMPL SN_RNN_IMPL

static const sn_kernel k_lstm = {.impl = RNN_IMPL, .supports = all_f32, .run = lstm_run},
                       k_lstm_grad = {.impl = RNN_IMPL, .supports = all_f32,
                                      .prepare = lstm_grad_prepare, .run = lstm_grad_run},
                       k_gru = {.impl = RNN_IMPL, .supports = all_f32, .prepare = gru_prepare,
                                .run = gru_run},
                       k_gru_grad = {.impl = RNN_IMPL, .supports = all_f32,
                                     .prepare = rnn_grad_prepare, .run = gru_grad_run};

void sn_cpu_register_rnn(sn_kernel_table *t) {
#ifdef SN_CPU_X86
    cells = pick_variant(&cells_generic, &cells_avx2, &cells_avx512);
#endif
    t->k[SN_OP_LSTM] = &k_lstm;
    t->k[SN_OP_LSTM_GRAD] = &k_lstm_grad;
    t->k[SN_OP_GRU] = &k_gru;
    t->k[SN_OP_GRU_GRAD] = &k_gru_grad;
}
