/* Fast f32 kernels of the GRU with Keras's reset_after=False (SN_OP_GRU_RB and its gradient;
 * graph/op_rnn.h says what they hold, backend/ref/ref_rnn.c is the reference). Built like
 * cpu_rnn.c's GRU: batch rows are independent through the whole recurrence, so each thread
 * runs its slice of rows through all T steps inside one sn_parallel call. What differs is that
 * a step has two dependent recurrent products: h_prev @ R[:, z r], then, once the reset gate
 * is known, (r * h_prev) @ R[:, h]; the backward pass likewise needs dhh @ R_h^T before the
 * reset gate's gradient. Each product is one sgemm over the thread's rows (a row-by-row GEMV
 * for one or two rows: generation), followed by a gate pass compiled for AVX-512 / AVX2 /
 * baseline and picked at registration (cpu_vec.h). */
#include <string.h>

#include "backend/cpu/cpu_rnn_impl.h"
#include "backend/cpu/cpu_vec.h"

/* ---- gate passes (one ws row [h | z | r | hh | rh], hp = h_prev) ---------------------------- */

/* z, r from their pre-activations (in place), then rh = r * hp. */
INL void gates_zr_body(float *restrict w, const float *restrict hp, int64_t U) {
    float *restrict zr = w + U, *restrict rh = w + 4 * U;
    for (int64_t j = 0; j < 2 * U; j++) zr[j] = vsigmoid(zr[j]);
    const float *restrict r = w + 2 * U;
    for (int64_t j = 0; j < U; j++) rh[j] = r[j] * hp[j];
}

/* hh from its pre-activation (in place), then h = z * hp + (1 - z) * hh. */
INL void gates_h_body(float *restrict w, const float *restrict hp, int64_t U) {
    float *restrict hh = w + 3 * U, *restrict h = w;
    const float *restrict z = w + U;
    for (int64_t j = 0; j < U; j++) hh[j] = vtanh(hh[j]);
    for (int64_t j = 0; j < U; j++) h[j] = z[j] * hp[j] + (1.0f - z[j]) * hh[j];
}

/* Backward, first half: dh = dw_h + carry; dz, dhh into the output row o (z, r, h); the carry
 * becomes dh * z. */
INL void bwd_zh_body(const float *restrict w, const float *restrict dw,
                     const float *restrict hp, float *restrict carry, float *restrict o,
                     int64_t U) {
    const float *restrict z = w + U, *restrict hh = w + 3 * U;
    for (int64_t j = 0; j < U; j++) {
        float dh = dw[j] + carry[j];
        o[j] = dh * (hp[j] - hh[j]) * z[j] * (1.0f - z[j]);
        o[2 * U + j] = dh * (1.0f - z[j]) * (1.0f - hh[j] * hh[j]);
        carry[j] = dh * z[j];
    }
}

/* Backward, second half, from a = dhh @ R_h^T (the gradient reaching r * hp): dr, and the
 * carry gains a * r. */
INL void bwd_r_body(const float *restrict w, const float *restrict hp, const float *restrict a,
                    float *restrict carry, float *restrict o, int64_t U) {
    const float *restrict r = w + 2 * U;
    for (int64_t j = 0; j < U; j++) {
        o[U + j] = a[j] * hp[j] * r[j] * (1.0f - r[j]);
        carry[j] += a[j] * r[j];
    }
}

/* acc[j] += sum_k a[k] * Bm[k * ldb + j], j < n: one state row times a column block of R,
 * read row by row (see cpu_rnn.c's gemv_rows_body, which this mirrors in a simpler form). */
INL void gemv_body(const float *restrict a, int64_t K, const float *restrict Bm, int64_t ldb,
                   float *restrict acc, int64_t n) {
    for (int64_t k = 0; k < K; k++) {
        const float ak = a[k];
        const float *restrict b = Bm + k * ldb;
        for (int64_t j = 0; j < n; j++) acc[j] += ak * b[j];
    }
}

typedef struct gru_rb_cells {
    void (*zr)(float *w, const float *hp, int64_t U);
    void (*h)(float *w, const float *hp, int64_t U);
    void (*bwd_zh)(const float *w, const float *dw, const float *hp, float *carry, float *o,
                   int64_t U);
    void (*bwd_r)(const float *w, const float *hp, const float *a, float *carry, float *o,
                  int64_t U);
    void (*gemv)(const float *a, int64_t K, const float *Bm, int64_t ldb, float *acc, int64_t n);
} gru_rb_cells;

#define GRU_RB_VARIANT(TGT, sfx)                                                               \
    TGT static void zr_##sfx(float *w, const float *hp, int64_t U) { gates_zr_body(w, hp, U); } \
    TGT static void h_##sfx(float *w, const float *hp, int64_t U) { gates_h_body(w, hp, U); }   \
    TGT static void bwd_zh_##sfx(const float *w, const float *dw, const float *hp,             \
                                 float *carry, float *o, int64_t U) {                          \
        bwd_zh_body(w, dw, hp, carry, o, U);                                                   \
    }                                                                                          \
    TGT static void bwd_r_##sfx(const float *w, const float *hp, const float *a, float *carry, \
                                float *o, int64_t U) {                                         \
        bwd_r_body(w, hp, a, carry, o, U);                                                     \
    }                                                                                          \
    TGT static void gemv_##sfx(const float *a, int64_t K, const float *Bm, int64_t ldb,        \
                               float *acc, int64_t n) {                                        \
        gemv_body(a, K, Bm, ldb, acc, n);                                                      \
    }                                                                                          \
    static const gru_rb_cells cells_##sfx = {zr_##sfx, h_##sfx, bwd_zh_##sfx, bwd_r_##sfx,     \
                                             gemv_##sfx};

GRU_RB_VARIANT(, generic)
#ifdef SN_CPU_X86
GRU_RB_VARIANT(TGT_AVX2, avx2)
GRU_RB_VARIANT(TGT_AVX512, avx512)
#endif

static const gru_rb_cells *cells = &cells_generic;

/* Up to this many rows a step's products are GEMVs, above it sgemm calls (as cpu_rnn.c). */
#define GEMV_ROWS 2

/* C[nb, n] += A[nb, U] @ R[:, k0 : k0 + n] (R is [U, 3U]). */
static void product(sn_rnn_ctx *x, int64_t nb, const float *A, int64_t lda, int64_t k0,
                    int64_t n, float *C, int64_t ldc) {
    const float *R = x->c->in[1];
    int64_t U = x->U;
    if (nb <= GEMV_ROWS) {
        for (int64_t b = 0; b < nb; b++) cells->gemv(A + b * lda, U, R + k0, 3 * U, C + b * ldc, n);
    } else if (!sn_rnn_gemm(false, nb, n, U, A, lda, R + k0, 3 * U, 1.0f, C, ldc)) {
        sn_rnn_fail(x);
    }
}

/* xw [B,T,3U], r [U,3U], h0 [B,U] -> ws [B,T,5U]; rows [b0, b1) of the batch, all steps. */
static void fwd_task(void *ctx, int ith, int nth) {
    sn_rnn_ctx *x = ctx;
    const sn_kcall *c = x->c;
    int64_t b0, b1, T = x->T, U = x->U, W = SN_GRU_WS * U, G = 3 * U;
    sn_split_range(x->B, ith, nth, &b0, &b1);
    int64_t nb = b1 - b0;
    if (nb <= 0) return;
    const float *xw = c->in[0], *h0 = c->in[2];
    float *ws = c->out;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t b = b0; b < b1; b++) {
            float *w = ws + (b * T + t) * W;
            const float *xr = xw + (b * T + t) * G;
            memcpy(w + U, xr, sizeof(float) * (size_t)(2 * U));   /* z, r */
            memcpy(w + 3 * U, xr + 2 * U, sizeof(float) * (size_t)U); /* hh */
        }
        const float *A = t == 0 ? h0 + b0 * U : ws + (b0 * T + t - 1) * W;
        int64_t lda = t == 0 ? U : T * W;
        float *w0 = ws + (b0 * T + t) * W;
        product(x, nb, A, lda, 0, 2 * U, w0 + U, T * W);
        for (int64_t b = b0; b < b1; b++)
            cells->zr(ws + (b * T + t) * W, A + (b - b0) * lda, U);
        product(x, nb, w0 + 4 * U, T * W, 2 * U, U, w0 + 3 * U, T * W);
        for (int64_t b = b0; b < b1; b++) cells->h(ws + (b * T + t) * W, A + (b - b0) * lda, U);
    }
}

/* r [U,3U], h0 [B,U], ws, dws [B,T,5U] -> dxw [B,T,3U]; scratch: the carried dh and
 * a = dhh @ R_h^T, [B, U] each. */
static void bwd_task(void *ctx, int ith, int nth) {
    sn_rnn_ctx *x = ctx;
    const sn_kcall *c = x->c;
    int64_t b0, b1, B = x->B, T = x->T, U = x->U, W = SN_GRU_WS * U, G = 3 * U;
    sn_split_range(B, ith, nth, &b0, &b1);
    int64_t nb = b1 - b0;
    if (nb <= 0) return;
    const float *R = c->in[0], *h0 = c->in[1], *ws = c->in[2], *dws = c->in[3];
    float *out = c->out, *carry = (float *)c->scratch + b0 * U,
          *a = (float *)c->scratch + (B + b0) * U;
    memset(carry, 0, sizeof(float) * (size_t)(nb * U));
    for (int64_t t = T - 1; t >= 0; t--) {
        /* the carry from step t + 1 gains [dz, dr]_{t+1} @ R[:, z r]^T */
        if (t < T - 1 &&
            !sn_rnn_gemm(true, nb, U, 2 * U, out + (b0 * T + t + 1) * G, T * G, R, G, 1.0f,
                         carry, U))
            sn_rnn_fail(x);
        for (int64_t b = b0; b < b1; b++) {
            int64_t row = b * T + t;
            const float *hp = t == 0 ? h0 + b * U : ws + (row - 1) * W;
            cells->bwd_zh(ws + row * W, dws + row * W, hp, carry + (b - b0) * U, out + row * G, U);
        }
        if (!sn_rnn_gemm(true, nb, U, U, out + (b0 * T + t) * G + 2 * U, T * G, R + 2 * U, G,
                         0.0f, a, U))
            sn_rnn_fail(x);
        for (int64_t b = b0; b < b1; b++) {
            int64_t row = b * T + t;
            const float *hp = t == 0 ? h0 + b * U : ws + (row - 1) * W;
            cells->bwd_r(ws + row * W, hp, a + (b - b0) * U, carry + (b - b0) * U, out + row * G,
                         U);
        }
    }
}

static bool supports(const sn_kcall *c) {
    if (c->y.dtype != SN_F32) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    int64_t U = c->x[c->op == SN_OP_GRU_RB ? 1 : 0].shape.dim[0];
    int64_t B = c->y.shape.dim[0], T = c->y.shape.dim[1];
    /* BLAS takes int dimensions and leading dimensions (T * 5U) */
    return U > 0 && B > 0 && T > 0 && T * 5 * U < INT32_MAX && B * T < INT32_MAX;
}

static sn_status fwd_run(sn_kcall *c) {
    return sn_rnn_run_rows(c, 1, fwd_task, "gru_reset_before");
}

static sn_status bwd_prepare(sn_kcall *c, size_t *scratch) {
    *scratch = sizeof(float) * (size_t)(2 * c->y.shape.dim[0] * c->x[0].shape.dim[0]);
    return SN_OK;
}

static sn_status bwd_run(sn_kcall *c) {
    return sn_rnn_run_rows(c, 0, bwd_task, "gru_reset_before_grad");
}

static const sn_kernel k_fwd = {.impl = SN_RNN_IMPL, .supports = supports, .run = fwd_run},
                       k_bwd = {.impl = SN_RNN_IMPL, .supports = supports, .prepare = bwd_prepare,
                                .run = bwd_run};

void sn_cpu_register_gru_rb(sn_kernel_table *t) {
#ifdef SN_CPU_X86
    cells = pick_variant(&cells_generic, &cells_avx2, &cells_avx512);
#endif
    t->k[SN_OP_GRU_RB] = &k_fwd;
    t->k[SN_OP_GRU_RB_GRAD] = &k_bwd;
}
