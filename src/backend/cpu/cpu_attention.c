/* Fast f32 kernels of the Transformer ops (graph/op_attention.c): layer_norm, gelu_tanh and
 * attention with their gradients. Loops are written as cpu_activation.c's are (plain C the
 * compiler vectorises, explicit lanes for sums since ISO C forbids reassociating them),
 * compiled for AVX-512, AVX2 and baseline, picked once at registration.
 *
 * attention is blocked in the manner of FlashAttention-2 (Dao, 2023): the forward walks, for
 * each batch row, head and block of BR queries, the blocks of BC keys, keeping per query row
 * the running maximum m and sum l of the exponentials and rescaling its output accumulator
 * when m grows; it stores only the output and each row's log-sum-exp m + log l (in the
 * forward call's state, B*H*Tq floats). The backward recomputes each block's probabilities
 * from that log-sum-exp, so neither pass holds more than a BR x BC tile of scores: memory is
 * linear in the context. Causal masking stops each query block at its last visible key block
 * and each row at its last visible key, so masked blocks cost nothing.
 *
 * Work split: the forward's tasks are (b, h, query block), the backward's (b, h) so that one
 * thread owns all of a head's dq, dk and dv and no two threads write one element (same bits
 * at any thread count). */
#include <stdlib.h>

#include "backend/cpu/cpu_vec.h"

enum { BR = 64, BC = 64, RG = 4, LN_ROWS = 32, GRAIN_ROWS = 8, LANES = 16 };
_Static_assert(BC % 32 == 0, "the forward pads rows to a multiple of 32 columns within BC");

/* sum of x[0..n) over LANES lanes folded pairwise (cpu_vec.h): same bits in every variant */
INL float lane_sum(const float *x, int64_t n) { return vec_lanes_sum(x, n, LANES); }

INL float lane_dot(const float *x, const float *y, int64_t n) {
    float l[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) l[j] += x[i + j] * y[i + j];
    for (int j = 0; i + j < n; j++) l[j] += x[i + j] * y[i + j];
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) l[j] += l[j + w];
    return l[0];
}

/* ---- layer_norm ------------------------------------------------------------------------ */
/* x, y [C]: one row */
INL void ln_row(float *restrict y, const float *restrict x, const float *restrict g,
                const float *restrict b, int64_t C, float eps, float *restrict tmp) {
    float mean = lane_sum(x, C) / (float)C;
    for (int64_t j = 0; j < C; j++) tmp[j] = (x[j] - mean) * (x[j] - mean);
    float rstd = 1.0f / sqrtf(lane_sum(tmp, C) / (float)C + eps);
    for (int64_t j = 0; j < C; j++) y[j] = (x[j] - mean) * rstd * g[j] + b[j];
}

/* x, dy, dx [C]; dg, db [C] accumulate. tmp [2C]. No two alias: without restrict GCC kept
 * the per-column loop scalar (3/4 of the op's time on the char Transformer). */
INL void ln_grad_row(float *restrict dx, float *restrict dg, float *restrict db,
                     const float *restrict x, const float *restrict g,
                     const float *restrict dy, int64_t C, float eps, float *restrict tmp) {
    float *xh = tmp, *gd = tmp + C;
    float mean = lane_sum(x, C) / (float)C;
    for (int64_t j = 0; j < C; j++) xh[j] = (x[j] - mean) * (x[j] - mean);
    float rstd = 1.0f / sqrtf(lane_sum(xh, C) / (float)C + eps);
    for (int64_t j = 0; j < C; j++) {
        xh[j] = (x[j] - mean) * rstd;
        gd[j] = dy[j] * g[j];
        dg[j] += dy[j] * xh[j];
        db[j] += dy[j];
    }
    float a = lane_sum(gd, C) / (float)C, bb = lane_dot(gd, xh, C) / (float)C;
    for (int64_t j = 0; j < C; j++) dx[j] = rstd * (gd[j] - a - xh[j] * bb);
}

/* ---- gelu_tanh ------------------------------------------------------------------------- */
#define GELU_C 0.79788456080286535588f
#define GELU_A 0.044715f
INL void gelu_tanh_loop(float *o, const float *x, const float *dy, int64_t n) {
    if (!dy) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            o[i] = 0.5f * x[i] * (1.0f + vtanh(GELU_C * (x[i] + GELU_A * x[i] * x[i] * x[i])));
        return;
    }
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float t = vtanh(GELU_C * (x[i] + GELU_A * x[i] * x[i] * x[i]));
        o[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * x[i] * (1.0f - t * t) * GELU_C *
                                               (1.0f + 3.0f * GELU_A * x[i] * x[i]));
    }
}

/* ---- attention ------------------------------------------------------------------------- */
/* Tiles of RG query rows against BC keys. Three products cover both passes:
 *   scores:   S [RG][:ncols] = A [RG][D] (row stride lda) . BT [D][BC]     (q k^T, dO v^T)
 *   rows_acc: O [RG][D] (stride ldo) += P [RG][BC] . X [n][D]              (p v, dS k)
 *   cols_acc: Y [n][D] += P [RG][BC]^T . R [RG][D] (stride ldr)            (P^T dO, dS^T q)
 * over the first n keys. Padding rows and columns hold zeros, so they add nothing. ncols (a
 * multiple of 16, >= every row's visible keys) lets causal tiles skip masked columns. */
typedef struct attn_tiles {
    void (*scores)(float *S, const float *A, int64_t lda, const float *BT, int64_t D,
                   int64_t ncols);
    void (*rows_acc)(float *O, int64_t ldo, const float *P, const float *X, int64_t n,
                     int64_t D);
    void (*cols_acc)(float *Y, const float *P, const float *R, int64_t ldr, int64_t n,
                     int64_t D);
} attn_tiles;

INL void scores_c(float *restrict S, const float *restrict A, int64_t lda,
                  const float *restrict BT, int64_t D, int64_t ncols) {
    float acc[RG][BC];
    for (int r = 0; r < RG; r++)
        for (int j = 0; j < BC; j++) acc[r][j] = 0;
    for (int64_t d = 0; d < D; d++)
        for (int r = 0; r < RG; r++) {
            float a = A[r * lda + d];
            for (int64_t j = 0; j < ncols; j++) acc[r][j] += a * BT[d * BC + j];
        }
    memcpy(S, acc, sizeof acc);
}

INL void rows_acc_c(float *restrict O, int64_t ldo, const float *restrict P,
                    const float *restrict X, int64_t n, int64_t D) {
    for (int r = 0; r < RG; r++)
        for (int64_t j = 0; j < n; j++) {
            float p = P[r * BC + j];
            for (int64_t d = 0; d < D; d++) O[r * ldo + d] += p * X[j * D + d];
        }
}

INL void cols_acc_c(float *restrict Y, const float *restrict P, const float *restrict R,
                    int64_t ldr, int64_t n, int64_t D) {
    for (int64_t j = 0; j < n; j++)
        for (int r = 0; r < RG; r++) {
            float p = P[r * BC + j];
            for (int64_t d = 0; d < D; d++) Y[j * D + d] += p * R[r * ldr + d];
        }
}

#ifdef SN_CPU_X86
/* AVX-512 tiles for D a multiple of 16: all RG x BC scores in 16 registers; the
 * accumulations keep 2 x 16 columns of RG rows (or of the key row) in registers. */
TGT_AVX512 static inline __attribute__((always_inline)) void
scores_512_k(float *S, const float *A, int64_t lda, const float *BT, int64_t D, const int nck) {
    __m512 acc[RG][4];
    for (int r = 0; r < RG; r++)
        for (int c = 0; c < nck; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
        const float *b = BT + d * BC;
        __m512 bb[4];
        for (int c = 0; c < nck; c++) bb[c] = _mm512_loadu_ps(b + 16 * c);
        for (int r = 0; r < RG; r++) {
            __m512 a = _mm512_set1_ps(A[r * lda + d]);
            for (int c = 0; c < nck; c++) acc[r][c] = _mm512_fmadd_ps(a, bb[c], acc[r][c]);
        }
    }
    for (int r = 0; r < RG; r++)
        for (int c = 0; c < nck; c++) _mm512_storeu_ps(S + r * BC + 16 * c, acc[r][c]);
}

/* One instance per column count, so that the accumulators stay in registers. */
TGT_AVX512 static void scores_512(float *S, const float *A, int64_t lda, const float *BT,
                                  int64_t D, int64_t ncols) {
    switch ((ncols + 15) / 16) {
    case 1: scores_512_k(S, A, lda, BT, D, 1); break;
    case 2: scores_512_k(S, A, lda, BT, D, 2); break;
    case 3: scores_512_k(S, A, lda, BT, D, 3); break;
    default: scores_512_k(S, A, lda, BT, D, 4); break;
    }
}

TGT_AVX512 static void rows_acc_512(float *O, int64_t ldo, const float *P, const float *X,
                                    int64_t n, int64_t D) {
    int64_t dc = 0;
    for (; dc + 32 <= D; dc += 32) {
        __m512 o[RG][2];
        for (int r = 0; r < RG; r++) {
            o[r][0] = _mm512_loadu_ps(O + r * ldo + dc);
            o[r][1] = _mm512_loadu_ps(O + r * ldo + dc + 16);
        }
        for (int64_t j = 0; j < n; j++) {
            __m512 x0 = _mm512_loadu_ps(X + j * D + dc), x1 = _mm512_loadu_ps(X + j * D + dc + 16);
            for (int r = 0; r < RG; r++) {
                __m512 p = _mm512_set1_ps(P[r * BC + j]);
                o[r][0] = _mm512_fmadd_ps(p, x0, o[r][0]);
                o[r][1] = _mm512_fmadd_ps(p, x1, o[r][1]);
            }
        }
        for (int r = 0; r < RG; r++) {
            _mm512_storeu_ps(O + r * ldo + dc, o[r][0]);
            _mm512_storeu_ps(O + r * ldo + dc + 16, o[r][1]);
        }
    }
    if (dc < D) { /* one 16-wide column block left */
        __m512 o[RG];
        for (int r = 0; r < RG; r++) o[r] = _mm512_loadu_ps(O + r * ldo + dc);
        for (int64_t j = 0; j < n; j++) {
            __m512 x0 = _mm512_loadu_ps(X + j * D + dc);
            for (int r = 0; r < RG; r++)
                o[r] = _mm512_fmadd_ps(_mm512_set1_ps(P[r * BC + j]), x0, o[r]);
        }
        for (int r = 0; r < RG; r++) _mm512_storeu_ps(O + r * ldo + dc, o[r]);
    }
}

TGT_AVX512 static void cols_acc_512(float *Y, const float *P, const float *R, int64_t ldr,
                                    int64_t n, int64_t D) {
    for (int64_t dc = 0; dc < D; dc += 16) {
        __m512 rr[RG];
        for (int r = 0; r < RG; r++) rr[r] = _mm512_loadu_ps(R + r * ldr + dc);
        for (int64_t j = 0; j < n; j++) {
            __m512 y = _mm512_loadu_ps(Y + j * D + dc);
            for (int r = 0; r < RG; r++)
                y = _mm512_fmadd_ps(_mm512_set1_ps(P[r * BC + j]), rr[r], y);
            _mm512_storeu_ps(Y + j * D + dc, y);
        }
    }
}
static const attn_tiles tiles_512 = {scores_512, rows_acc_512, cols_acc_512};

/* AVX2 tiles for D a multiple of 8 (Zen 3 and other CPUs without AVX-512). Sixteen ymm
 * registers cannot hold the AVX-512 tiles' accumulators, so each product walks 16-column
 * chunks: RG x 2 accumulators, two loads and RG broadcasts per step. Each element is summed
 * in the AVX-512 tiles' order with fused multiply-adds as they are (no test compares the two
 * bit for bit: no machine here has both). */
TGT_AVX2 static void scores_256(float *S, const float *A, int64_t lda, const float *BT,
                                int64_t D, int64_t ncols) {
    for (int64_t c0 = 0; c0 < ncols; c0 += 16) {
        __m256 acc[RG][2];
        for (int r = 0; r < RG; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
        for (int64_t d = 0; d < D; d++) {
            const float *b = BT + d * BC + c0;
            __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
            for (int r = 0; r < RG; r++) {
                __m256 a = _mm256_broadcast_ss(A + r * lda + d);
                acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
            }
        }
        for (int r = 0; r < RG; r++) {
            _mm256_storeu_ps(S + r * BC + c0, acc[r][0]);
            _mm256_storeu_ps(S + r * BC + c0 + 8, acc[r][1]);
        }
    }
}

TGT_AVX2 static void rows_acc_256(float *O, int64_t ldo, const float *P, const float *X,
                                  int64_t n, int64_t D) {
    int64_t dc = 0;
    for (; dc + 16 <= D; dc += 16) {
        __m256 o[RG][2];
        for (int r = 0; r < RG; r++) {
            o[r][0] = _mm256_loadu_ps(O + r * ldo + dc);
            o[r][1] = _mm256_loadu_ps(O + r * ldo + dc + 8);
        }
        for (int64_t j = 0; j < n; j++) {
            __m256 x0 = _mm256_loadu_ps(X + j * D + dc), x1 = _mm256_loadu_ps(X + j * D + dc + 8);
            for (int r = 0; r < RG; r++) {
                __m256 p = _mm256_broadcast_ss(P + r * BC + j);
                o[r][0] = _mm256_fmadd_ps(p, x0, o[r][0]);
                o[r][1] = _mm256_fmadd_ps(p, x1, o[r][1]);
            }
        }
        for (int r = 0; r < RG; r++) {
            _mm256_storeu_ps(O + r * ldo + dc, o[r][0]);
            _mm256_storeu_ps(O + r * ldo + dc + 8, o[r][1]);
        }
    }
    if (dc < D) { /* one 8-wide column block left */
        __m256 o[RG];
        for (int r = 0; r < RG; r++) o[r] = _mm256_loadu_ps(O + r * ldo + dc);
        for (int64_t j = 0; j < n; j++) {
            __m256 x0 = _mm256_loadu_ps(X + j * D + dc);
            for (int r = 0; r < RG; r++)
                o[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(P + r * BC + j), x0, o[r]);
        }
        for (int r = 0; r < RG; r++) _mm256_storeu_ps(O + r * ldo + dc, o[r]);
    }
}

TGT_AVX2 static void cols_acc_256(float *Y, const float *P, const float *R, int64_t ldr,
                                  int64_t n, int64_t D) {
    int64_t dc = 0;
    for (; dc + 16 <= D; dc += 16) {
        __m256 rr[RG][2];
        for (int r = 0; r < RG; r++) {
            rr[r][0] = _mm256_loadu_ps(R + r * ldr + dc);
            rr[r][1] = _mm256_loadu_ps(R + r * ldr + dc + 8);
        }
        for (int64_t j = 0; j < n; j++) {
            __m256 y0 = _mm256_loadu_ps(Y + j * D + dc), y1 = _mm256_loadu_ps(Y + j * D + dc + 8);
            for (int r = 0; r < RG; r++) {
                __m256 p = _mm256_broadcast_ss(P + r * BC + j);
                y0 = _mm256_fmadd_ps(p, rr[r][0], y0);
                y1 = _mm256_fmadd_ps(p, rr[r][1], y1);
            }
            _mm256_storeu_ps(Y + j * D + dc, y0);
            _mm256_storeu_ps(Y + j * D + dc + 8, y1);
        }
    }
    if (dc < D) {
        __m256 rr[RG];
        for (int r = 0; r < RG; r++) rr[r] = _mm256_loadu_ps(R + r * ldr + dc);
        for (int64_t j = 0; j < n; j++) {
            __m256 y = _mm256_loadu_ps(Y + j * D + dc);
            for (int r = 0; r < RG; r++)
                y = _mm256_fmadd_ps(_mm256_broadcast_ss(P + r * BC + j), rr[r], y);
            _mm256_storeu_ps(Y + j * D + dc, y);
        }
    }
}
static const attn_tiles tiles_256 = {scores_256, rows_acc_256, cols_acc_256};

/* bf16 tiles (the forward under --precision bf16, on CPUs with AVX512-BF16, D a multiple of
 * 16): q k^T and p v as bf16 products summed in f32 (vdpbf16ps), the softmax statistics in
 * f32. Keys arrive as bf16 pairs (load_keys_bf16): BT is KT2 [D/2][BC] (keys j's elements
 * d, d+1 in one 32-bit word) and X is V2 [BC/2][D] (keys j, j+1's element d), in the f32
 * tiles' storage. A and P are rounded to bf16 here. */
#define TGT_BF16                                                                               \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,"                     \
                          "prefer-vector-width=512")))

INL uint32_t bf16_pair(float lo, float hi) {
    return (uint32_t)sn_f32_to_bf16(lo) | (uint32_t)sn_f32_to_bf16(hi) << 16;
}

TGT_BF16 static inline __attribute__((always_inline)) void
scores_bf16_k(float *S, const float *A, int64_t lda, const uint32_t *K2, int64_t D,
              const int nck) {
    __m512 acc[RG][4];
    for (int r = 0; r < RG; r++)
        for (int c = 0; c < nck; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t dp = 0; dp < D / 2; dp++) {
        const uint32_t *b = K2 + dp * BC;
        __m512bh bb[4];
        for (int c = 0; c < nck; c++) bb[c] = (__m512bh)_mm512_loadu_si512(b + 16 * c);
        for (int r = 0; r < RG; r++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32(
                (int)bf16_pair(A[r * lda + 2 * dp], A[r * lda + 2 * dp + 1]));
            for (int c = 0; c < nck; c++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], a, bb[c]);
        }
    }
    for (int r = 0; r < RG; r++)
        for (int c = 0; c < nck; c++) _mm512_storeu_ps(S + r * BC + 16 * c, acc[r][c]);
}

TGT_BF16 static void scores_bf16(float *S, const float *A, int64_t lda, const float *BT,
                                 int64_t D, int64_t ncols) {
    const uint32_t *K2 = (const uint32_t *)(const void *)BT;
    switch ((ncols + 15) / 16) {
    case 1: scores_bf16_k(S, A, lda, K2, D, 1); break;
    case 2: scores_bf16_k(S, A, lda, K2, D, 2); break;
    case 3: scores_bf16_k(S, A, lda, K2, D, 3); break;
    default: scores_bf16_k(S, A, lda, K2, D, 4); break;
    }
}

TGT_BF16 static void rows_acc_bf16(float *O, int64_t ldo, const float *P, const float *X,
                                   int64_t n, int64_t D) {
    const uint32_t *V2 = (const uint32_t *)(const void *)X;
    uint32_t pp[RG][BC / 2];
    int64_t np = (n + 1) / 2; /* P and V2 are zero past n */
    for (int r = 0; r < RG; r++)
        for (int64_t jp = 0; jp < np; jp++)
            pp[r][jp] = bf16_pair(P[r * BC + 2 * jp], P[r * BC + 2 * jp + 1]);
    for (int64_t dc = 0; dc < D; dc += 16) {
        __m512 o[RG];
        for (int r = 0; r < RG; r++) o[r] = _mm512_loadu_ps(O + r * ldo + dc);
        for (int64_t jp = 0; jp < np; jp++) {
            __m512bh x = (__m512bh)_mm512_loadu_si512(V2 + jp * D + dc);
            for (int r = 0; r < RG; r++)
                o[r] = _mm512_dpbf16_ps(o[r], (__m512bh)_mm512_set1_epi32((int)pp[r][jp]), x);
        }
        for (int r = 0; r < RG; r++) _mm512_storeu_ps(O + r * ldo + dc, o[r]);
    }
}
static const attn_tiles tiles_bf16 = {scores_bf16, rows_acc_bf16, NULL};
#endif

typedef struct attn_job {
    /* keys j < split come from kc, vc [B, Tc, H, D] (a generation cache), the rest from k,
     * v: row j - split of [B, Tk - split, H, D]. split 0: k and v alone. */
    const float *kc, *vc;
    int64_t split, Tc;
    const float *q, *k, *v, *o, *dy;
    float *out, *lse;      /* forward: out = o; backward: out = dq | dk | dv */
    const float *lse_in;   /* backward: the forward's log-sum-exp, or NULL (recompute) */
    /* mask [B, Tq, Tk] or NULL: key j visible to query i when nonzero. A row that sees no key
     * (its log-sum-exp stored as +inf) is the mean of all the values, as Keras's large
     * negative scores give, and passes no gradient to q or k (Keras's where() passes none). */
    const float *mask;
    int64_t B, Tq, Tk, H, D, nqb, off;
    float scale;
    bool causal, stats_only;
    bool bf16; /* the forward's products in bf16 (tiles_bf16, load_keys_bf16) */
    /* dropout on the probabilities (drop): kept when the Philox word of (drop_seed, drop_hi,
     * index) reaches drop_thresh, scaled by drop_inv; index ((b H + h) Tq + i) Tk + j, so the
     * masks are sn_dropout_keep's over [B, H, Tq, Tk], redrawn by the backward, never stored */
    bool drop;
    float drop_thresh, drop_inv;
    uint64_t drop_seed, drop_hi;
    const attn_tiles *tiles; /* NULL: the variant's portable tiles */
    float *scratch;
    size_t per_thread; /* floats */
} attn_job;

/* Dropout's factors z[0..n) (n <= BC) for row i of head (b, h), keys j0..: drop_inv kept, 0
 * dropped. The words of sn_philox(seed, hi, g) for the NGRP aligned groups of four indices
 * from the first one, computed lane-parallel (core/philox.h's arithmetic, written so that the
 * compiler vectorises across the groups, as cpu_elementwise.c's dropout does), then each
 * index's word as sn_dropout_keep reads it: the same bits (tests check against it). */
enum { NGRP = BC / 4 + 1 };
INL void drop_factors(const attn_job *a, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n,
                      float *z) {
    uint64_t base = (uint64_t)(((b * a->H + h) * a->Tq + i) * a->Tk + j0), g0 = base >> 2;
    uint32_t c0[NGRP], c1[NGRP], c2[NGRP], c3[NGRP];
    for (int g = 0; g < NGRP; g++) {
        uint64_t lo = g0 + (uint64_t)g;
        c0[g] = (uint32_t)lo;
        c1[g] = (uint32_t)(lo >> 32);
        c2[g] = (uint32_t)a->drop_hi;
        c3[g] = (uint32_t)(a->drop_hi >> 32);
    }
    uint32_t k0 = (uint32_t)a->drop_seed, k1 = (uint32_t)(a->drop_seed >> 32);
    for (int round = 0; round < 10; round++) {
        for (int g = 0; g < NGRP; g++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0[g];
            uint64_t p1 = (uint64_t)0xCD9E8D57u * c2[g];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[g] ^ k0;
            uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[g] ^ k1;
            c1[g] = (uint32_t)p1;
            c3[g] = (uint32_t)p0;
            c0[g] = n0;
            c2[g] = n2;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    for (int64_t j = 0; j < n; j++) {
        uint64_t idx = base + (uint64_t)j, g = (idx >> 2) - g0;
        uint32_t w = (idx & 3) == 0 ? c0[g] : (idx & 3) == 1 ? c1[g] : (idx & 3) == 2 ? c2[g] : c3[g];
        z[j] = sn_u32_to_unit(w) >= a->drop_thresh ? a->drop_inv : 0.0f;
    }
}

/* Keys [0, end) are visible to some row of the query block starting at i0 (nr rows). */
INL int64_t key_end(const attn_job *a, int64_t i0, int64_t nr) {
    if (!a->causal) return a->Tk;
    int64_t e = i0 + nr - 1 + a->off + 1;
    return e < a->Tk ? e : a->Tk;
}

/* Keys [0, jl) of block j0 (nc keys) are visible to row i. */
INL int64_t row_limit(const attn_job *a, int64_t i, int64_t j0, int64_t nc) {
    if (!a->causal) return nc;
    int64_t e = i + a->off + 1 - j0;
    return e < 0 ? 0 : e < nc ? e : nc;
}

/* Some query of rows [i0, i0 + nr) sees some key of [j0, j0 + nc) through the mask (the
 * causal limit aside): a tile where none does is skipped. */
INL bool tile_live(const attn_job *a, int64_t b, int64_t i0, int64_t nr, int64_t j0, int64_t nc) {
    if (!a->mask) return true;
    for (int64_t i = i0; i < i0 + nr; i++) {
        const float *mr = a->mask + (b * a->Tq + i) * a->Tk + j0;
        for (int64_t j = 0; j < nc; j++)
            if (mr[j] != 0) return true;
    }
    return false;
}

/* Keys j0.. (nc of them) of head (b, h), from the cache xc below split, else x: KT [D][BC] transposed (if not NULL) and
 * X [BC][D] plain (if not NULL), both zero past nc. */
INL void load_keys(const attn_job *a, const float *x, const float *xc, int64_t b, int64_t h,
                   int64_t j0, int64_t nc, float *KT, float *X) {
    int64_t HD = a->H * a->D, D = a->D, Tn = a->Tk - a->split;
    const float *rows[BC];
    for (int64_t j = 0; j < nc; j++) {
        int64_t jj = j0 + j;
        rows[j] = jj < a->split ? xc + (b * a->Tc + jj) * HD + h * D
                                : x + (b * Tn + jj - a->split) * HD + h * D;
    }
    /* KT a row (d) at a time: its stores contiguous. Column by column (each key's D values
     * stored BC floats apart) these loads took a quarter of the backward's samples. */
    for (int64_t d = 0; KT && d < D; d++) {
        float *kt = KT + d * BC;
        for (int64_t j = 0; j < nc; j++) kt[j] = rows[j][d];
        for (int64_t j = nc; j < BC; j++) kt[j] = 0;
    }
    if (X) {
        for (int64_t j = 0; j < nc; j++) memcpy(X + j * D, rows[j], sizeof(float) * (size_t)D);
        for (int64_t x2 = nc * D; x2 < BC * D; x2++) X[x2] = 0;
    }
}

#ifdef SN_CPU_X86
/* Keys j0.. (nc of them) of head (b, h) as bf16 pairs for tiles_bf16: KT2 [D/2][BC] and
 * V2 [BC/2][D] (see there; V2 may be NULL), zero past nc. Plain k and v only (no cache). */
INL void load_keys_bf16(const attn_job *a, int64_t b, int64_t h, int64_t j0, int64_t nc,
                        uint32_t *KT2, uint32_t *V2) {
    int64_t HD = a->H * a->D, D = a->D;
    for (int64_t x = 0; x < D / 2 * BC; x++) KT2[x] = 0;
    for (int64_t x = 0; V2 && x < BC / 2 * D; x++) V2[x] = 0;
    for (int64_t j = 0; j < nc; j++) {
        const float *kr = a->k + (b * a->Tk + j0 + j) * HD + h * D;
        const float *vr = a->v + (b * a->Tk + j0 + j) * HD + h * D;
        for (int64_t dp = 0; dp < D / 2; dp++) KT2[dp * BC + j] = bf16_pair(kr[2 * dp], kr[2 * dp + 1]);
        for (int64_t d = 0; V2 && d < D; d++)
            V2[(j / 2) * D + d] |= (uint32_t)sn_f32_to_bf16(vr[d]) << (16 * (j & 1));
    }
}
#endif

/* Asks for rows [0, n) (at most 2 BC) of head (b, h) of x [B, T, H, D] ahead of their use:
 * a head's rows are a few lines each, H * D floats apart, and were met one miss at a time in
 * the loads that gather them (a sixth of the backward's samples on the char Transformer). */
INL void prefetch_head(const attn_job *a, const float *x, int64_t T, int64_t b, int64_t h,
                       int64_t n) {
    int64_t HD = a->H * a->D;
    for (int64_t i = 0; i < n && i < 2 * BC; i++) { /* later rows would go before use */
        const char *r = (const char *)(x + (b * T + i) * HD + h * a->D);
        for (int64_t o = 0; o < a->D * 4; o += 64) __builtin_prefetch(r + o);
    }
}

/* Rows i0.. (n <= RG of them, the rest zero) of x's head (b, h), times mul, into X [RG][D]. */
INL void load_rows(const attn_job *a, const float *x, int64_t b, int64_t h, int64_t i0,
                   int64_t n, float mul, float *X) {
    int64_t HD = a->H * a->D, D = a->D;
    for (int64_t r = 0; r < RG; r++) {
        const float *src = x + (b * a->Tq + i0 + r) * HD + h * D;
        for (int64_t d = 0; d < D; d++) X[r * D + d] = r < n ? src[d] * mul : 0.0f;
    }
}

/* One (b, h, query block): the forward (or only the statistics). Scratch: Qs, O [BR][D],
 * KT [D][BC], V [BC][D], S [RG][BC], m, l [BR]. */
INL void attn_fwd_block(const attn_job *a, const attn_tiles *t, int64_t task, float *w) {
    int64_t D = a->D, HD = a->H * D;
    int64_t qb = task % a->nqb, bh = task / a->nqb, b = bh / a->H, h = bh % a->H;
    int64_t i0 = qb * BR, nr = a->Tq - i0 < BR ? a->Tq - i0 : BR;
    float *Qs = w, *O = Qs + BR * D, *KT = O + BR * D, *V = KT + D * BC, *S = V + BC * D,
          *m = S + RG * BC, *l = m + BR;
    for (int64_t g0 = 0; g0 < BR; g0 += RG)
        load_rows(a, a->q, b, h, i0 + g0, nr - g0, a->scale, Qs + g0 * D);
    for (int64_t x = 0; x < BR * D; x++) O[x] = 0;
    for (int64_t i = 0; i < BR; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
    }
    int64_t kend = key_end(a, i0, nr);
    for (int64_t j0 = 0; j0 < kend; j0 += BC) {
        int64_t nc = kend - j0 < BC ? kend - j0 : BC;
#ifdef SN_CPU_X86
        if (a->bf16) {
            load_keys_bf16(a, b, h, j0, nc, (uint32_t *)(void *)KT, (uint32_t *)(void *)V);
        } else
#endif
        {
            load_keys(a, a->k, a->kc, b, h, j0, nc, KT, NULL);
            if (!a->stats_only) load_keys(a, a->v, a->vc, b, h, j0, nc, NULL, V);
        }
        for (int64_t g0 = 0; g0 < nr; g0 += RG) {
            int64_t last = g0 + RG - 1 < nr ? g0 + RG - 1 : nr - 1; /* sees the most keys */
            int64_t cols = row_limit(a, i0 + last, j0, nc);
            if (cols <= 0 || !tile_live(a, b, i0 + g0, last - g0 + 1, j0, cols)) continue;
            t->scores(S, Qs + g0 * D, D, KT, D, (cols + 15) / 16 * 16);
            int64_t most = 0;
            for (int64_t r = 0; r < RG; r++) {
                int64_t i = g0 + r, jl = i < nr ? row_limit(a, i0 + i, j0, nc) : 0;
                float *s = S + r * BC;
                if (jl <= 0) {
                    for (int j = 0; j < BC; j++) s[j] = 0;
                    continue;
                }
                const float *mr = a->mask ? a->mask + (b * a->Tq + i0 + i) * a->Tk + j0 : NULL;
                if (mr)
                    for (int64_t j = 0; j < jl; j++) s[j] = mr[j] != 0 ? s[j] : -INFINITY;
                /* Whole vectors to jp (a multiple of 32, <= BC) so that no row runs a scalar
                 * tail: -inf adds nothing to the max, 0 nothing to the sum, so the bits are
                 * those over jl. */
                int64_t jp = (jl + 31) / 32 * 32;
                for (int64_t j = jl; j < jp; j++) s[j] = -INFINITY;
                float mx = vec_lanes_max(s, jp);
                if (mx == -INFINITY) { /* the mask hides all of this block from the row */
                    for (int j = 0; j < BC; j++) s[j] = 0;
                    continue;
                }
                if (mx < m[i]) mx = m[i];
                float alpha = m[i] == -INFINITY ? 0.0f : vexp(m[i] - mx);
                if (mr)
                    for (int64_t j = 0; j < jl; j++) s[j] = mr[j] != 0 ? vexp(s[j] - mx) : 0.0f;
                else
                    for (int64_t j = 0; j < jp; j++) s[j] = vexp(s[j] - mx);
                for (int64_t j = jl; j < BC; j++) s[j] = 0;
                l[i] = l[i] * alpha + lane_sum(s, jp); /* the undropped softmax's sum */
                m[i] = mx;
                if (a->drop && !a->stats_only) {
                    float z[BC];
                    drop_factors(a, b, h, i0 + i, j0, jl, z);
                    for (int64_t j = 0; j < jl; j++) s[j] *= z[j];
                }
                for (int64_t d = 0; d < D; d++) O[i * D + d] *= alpha;
                if (jl > most) most = jl;
            }
            if (!a->stats_only && most > 0) t->rows_acc(O + g0 * D, D, S, V, most, D);
        }
    }
    for (int64_t i = 0; i < nr; i++) {
        float *r = a->out + (b * a->Tq + i0 + i) * HD + h * D;
        if (l[i] == 0) { /* masked from every key: the mean of the values (see attn_job) */
            a->lse[bh * a->Tq + i0 + i] = INFINITY;
            if (a->stats_only) continue;
            for (int64_t d = 0; d < D; d++) r[d] = 0;
            float z[BC]; /* dropout drops from the uniform row too */
            for (int64_t j = 0; j < a->Tk; j++) {
                const float *vr = a->v + (b * a->Tk + j) * HD + h * D;
                if (a->drop && j % BC == 0)
                    drop_factors(a, b, h, i0 + i, j, a->Tk - j < BC ? a->Tk - j : BC, z);
                float zj = a->drop ? z[j % BC] : 1.0f;
                for (int64_t d = 0; d < D; d++) r[d] += zj * vr[d];
            }
            for (int64_t d = 0; d < D; d++) r[d] /= (float)a->Tk;
            continue;
        }
        a->lse[bh * a->Tq + i0 + i] = m[i] + logf(l[i]);
        if (a->stats_only) continue;
        float inv = 1.0f / l[i];
        for (int64_t d = 0; d < D; d++) r[d] = O[i * D + d] * inv;
    }
}

/* One (b, h): dq, dk, dv. Scratch: Qs, dO [RG][D], K, dK, dV [BC][D], KT, VT [D][BC],
 * P, dP [RG][BC], delta, lse [Tq], dQ [Tq + RG][D]. */
INL void attn_bwd_head(const attn_job *a, const attn_tiles *t, int64_t bh, float *w) {
    int64_t D = a->D, HD = a->H * D, b = bh / a->H, h = bh % a->H, Tq = a->Tq;
    int64_t nq = a->B * Tq * HD, nk = a->B * a->Tk * HD;
    float *Qs = w, *dO = Qs + RG * D, *K = dO + RG * D, *dK = K + BC * D, *dV = dK + BC * D,
          *KT = dV + BC * D, *VT = KT + D * BC, *P = VT + D * BC, *dP = P + RG * BC,
          *delta = dP + RG * BC, *lse = delta + Tq, *dQ = lse + Tq;
    float *dq = a->out, *dk = a->out + nq, *dv = a->out + nq + nk;
    prefetch_head(a, a->q, Tq, b, h, Tq);
    if (!a->kc) {
        prefetch_head(a, a->k, a->Tk, b, h, a->Tk);
        prefetch_head(a, a->v, a->Tk, b, h, a->Tk);
    }
    for (int64_t i = 0; i < Tq; i++) {
        int64_t r = (b * Tq + i) * HD + h * D;
        delta[i] = lane_dot(a->dy + r, a->o + r, D);
        lse[i] = a->lse_in ? a->lse_in[bh * Tq + i] : a->lse[bh * Tq + i];
    }
    for (int64_t x = 0; x < (Tq + RG) * D; x++) dQ[x] = 0;
    for (int64_t j0 = 0; j0 < a->Tk; j0 += BC) {
        int64_t nc = a->Tk - j0 < BC ? a->Tk - j0 : BC;
#ifdef SN_CPU_X86
        if (a->bf16) { /* P's scores as the bf16 forward made them: KT as bf16 pairs */
            load_keys_bf16(a, b, h, j0, nc, (uint32_t *)(void *)KT, NULL);
            load_keys(a, a->k, a->kc, b, h, j0, nc, NULL, K);
        } else
#endif
            load_keys(a, a->k, a->kc, b, h, j0, nc, KT, K);
        load_keys(a, a->v, a->vc, b, h, j0, nc, VT, NULL);
        for (int64_t x = 0; x < BC * D; x++) dK[x] = dV[x] = 0;
        int64_t first = a->causal ? j0 - a->off : 0; /* rows before it see none of the block */
        if (first < 0) first = 0;
        for (int64_t i0 = first / RG * RG; i0 < Tq; i0 += RG) {
            int64_t g = Tq - i0 < RG ? Tq - i0 : RG, most = 0;
            int64_t cols = row_limit(a, i0 + g - 1, j0, nc); /* the last row sees the most */
            if (cols <= 0 || !tile_live(a, b, i0, g, j0, cols)) continue;
            cols = (cols + 15) / 16 * 16;
            load_rows(a, a->q, b, h, i0, g, a->scale, Qs);
            load_rows(a, a->dy, b, h, i0, g, 1.0f, dO);
#ifdef SN_CPU_X86
            if (a->bf16)
                tiles_bf16.scores(P, Qs, D, KT, D, cols);
            else
#endif
                t->scores(P, Qs, D, KT, D, cols);
            t->scores(dP, dO, D, VT, D, cols);
            for (int64_t r = 0; r < RG; r++) {
                int64_t jl = r < g ? row_limit(a, i0 + r, j0, nc) : 0;
                float *p = P + r * BC, *ds = dP + r * BC, li = r < g ? lse[i0 + r] : 0,
                      di = r < g ? delta[i0 + r] : 0;
                if (li == INFINITY) jl = 0; /* a row masked from every key: done below */
                const float *mr = a->mask && jl > 0
                                      ? a->mask + (b * Tq + i0 + r) * a->Tk + j0 : NULL;
                if (a->drop && jl > 0) {
                    /* dP = z dO v^T, dS = p (dP - delta) (delta = dO.o is rowsum(p dP)), and
                     * dv takes the dropped p z */
                    float z[BC];
                    drop_factors(a, b, h, i0 + r, j0, jl, z);
                    for (int64_t j = 0; j < jl; j++) {
                        p[j] = mr && mr[j] == 0 ? 0.0f : vexp(p[j] - li);
                        ds[j] = p[j] * (z[j] * ds[j] - di);
                        p[j] *= z[j];
                    }
                } else if (mr) {
                    for (int64_t j = 0; j < jl; j++) {
                        p[j] = mr[j] != 0 ? vexp(p[j] - li) : 0.0f;
                        ds[j] = p[j] * (ds[j] - di);
                    }
                } else {
                    for (int64_t j = 0; j < jl; j++) {
                        p[j] = vexp(p[j] - li);
                        ds[j] = p[j] * (ds[j] - di); /* dP becomes dS */
                    }
                }
                for (int64_t j = jl < 0 ? 0 : jl; j < BC; j++) p[j] = ds[j] = 0;
                if (jl > most) most = jl;
            }
            if (most == 0) continue;
            t->cols_acc(dV, P, dO, D, most, D);
            t->cols_acc(dK, dP, Qs, D, most, D);
            t->rows_acc(dQ + i0 * D, D, dP, K, most, D);
        }
        for (int64_t j = 0; j < nc; j++) {
            int64_t r = (b * a->Tk + j0 + j) * HD + h * D;
            memcpy(dk + r, dK + j * D, sizeof *dk * (size_t)D);
            memcpy(dv + r, dV + j * D, sizeof *dv * (size_t)D);
        }
    }
    for (int64_t i = 0; i < Tq; i++) {
        float *r = dq + (b * Tq + i) * HD + h * D;
        for (int64_t d = 0; d < D; d++) r[d] = a->scale * dQ[i * D + d];
    }
    /* Rows masked from every key had uniform probabilities 1 / Tk: only dv gets dy / Tk. */
    for (int64_t i = 0; a->mask && i < Tq; i++) {
        if (lse[i] != INFINITY) continue;
        const float *g = a->dy + (b * Tq + i) * HD + h * D;
        float z[BC];
        for (int64_t j = 0; j < a->Tk; j++) {
            float *r = dv + (b * a->Tk + j) * HD + h * D;
            if (a->drop && j % BC == 0)
                drop_factors(a, b, h, i, j, a->Tk - j < BC ? a->Tk - j : BC, z);
            float wt = (a->drop ? z[j % BC] : 1.0f) / (float)a->Tk;
            for (int64_t d = 0; d < D; d++) r[d] += g[d] * wt;
        }
    }
}

/* ---- ISA variants ---------------------------------------------------------------------- */
typedef struct attn_isa {
    const char *name;
    void (*ln)(float *y, const float *x, const float *g, const float *b, int64_t C, float eps,
               float *tmp);
    void (*ln_grad)(float *dx, float *dg, float *db, const float *x, const float *g,
                    const float *dy, int64_t C, float eps, float *tmp);
    void (*gelu)(float *o, const float *x, const float *dy, int64_t n);
    void (*fwd)(const attn_job *a, int64_t task, float *w);
    void (*bwd)(const attn_job *a, int64_t bh, float *w);
} attn_isa;

/* Each variant's portable tiles, compiled for its ISA; a job's own tiles (AVX-512, AVX2) win. */
#define TILES(sfx, TGT)                                                                       \
    TGT static void scores_##sfx(float *S, const float *A, int64_t lda, const float *BT,      \
                                 int64_t D, int64_t ncols) {                                  \
        scores_c(S, A, lda, BT, D, ncols);                                                    \
    }                                                                                         \
    TGT static void rows_acc_##sfx(float *O, int64_t ldo, const float *P, const float *X,     \
                                   int64_t n, int64_t D) {                                    \
        rows_acc_c(O, ldo, P, X, n, D);                                                       \
    }                                                                                         \
    TGT static void cols_acc_##sfx(float *Y, const float *P, const float *R, int64_t ldr,     \
                                   int64_t n, int64_t D) {                                    \
        cols_acc_c(Y, P, R, ldr, n, D);                                                       \
    }                                                                                         \
    static const attn_tiles tiles_##sfx = {scores_##sfx, rows_acc_##sfx, cols_acc_##sfx};

#define VARIANT(sfx, TGT)                                                                     \
    TGT static void ln_##sfx(float *y, const float *x, const float *g, const float *b,        \
                             int64_t C, float eps, float *tmp) {                              \
        ln_row(y, x, g, b, C, eps, tmp);                                                      \
    }                                                                                         \
    TGT static void ln_grad_##sfx(float *dx, float *dg, float *db, const float *x,            \
                                  const float *g, const float *dy, int64_t C, float eps,      \
                                  float *tmp) {                                               \
        ln_grad_row(dx, dg, db, x, g, dy, C, eps, tmp);                                       \
    }                                                                                         \
    TGT static void gelu_##sfx(float *o, const float *x, const float *dy, int64_t n) {        \
        gelu_tanh_loop(o, x, dy, n);                                                          \
    }                                                                                         \
    TILES(sfx, TGT)                                                                           \
    TGT static void fwd_##sfx(const attn_job *a, int64_t t, float *w) {                       \
        attn_fwd_block(a, a->tiles ? a->tiles : &tiles_##sfx, t, w);                          \
    }                                                                                         \
    TGT static void bwd_##sfx(const attn_job *a, int64_t t, float *w) {                       \
        attn_bwd_head(a, a->tiles ? a->tiles : &tiles_##sfx, t, w);                           \
    }                                                                                         \
    static const attn_isa isa_##sfx = {#sfx, ln_##sfx, ln_grad_##sfx, gelu_##sfx, fwd_##sfx,  \
                                       bwd_##sfx};

#define TGT_NONE
VARIANT(cpu, TGT_NONE)
#ifdef SN_CPU_X86
VARIANT(avx2, TGT_AVX2)
VARIANT(avx512, TGT_AVX512)
#endif

static const attn_isa *isa = &isa_cpu;

static bool all_f32(const sn_kcall *c) {
    if (c->y.dtype != SN_F32) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    return true;
}

/* ---- layer_norm kernels ---------------------------------------------------------------- */
typedef struct ln_ctx {
    const sn_kcall *c;
    int64_t R, C, nchunks;
    float *scratch; /* forward: [nth][C]; backward: [nchunks][2C] partials + [nth][2C] */
} ln_ctx;

static void ln_task(void *vctx, int ith, int nth) {
    const ln_ctx *l = vctx;
    const sn_kcall *c = l->c;
    int64_t lo, hi;
    sn_split_range(l->R, ith, nth, &lo, &hi);
    const float *x = c->in[0], *g = c->in[1], *b = c->in[2];
    float *y = c->out, *tmp = l->scratch + (size_t)ith * (size_t)l->C;
    for (int64_t r = lo; r < hi; r++)
        isa->ln(y + r * l->C, x + r * l->C, g, b, l->C, (float)c->attr->norm.epsilon, tmp);
}

/* Chunks of LN_ROWS rows, each with its own partial dgamma / dbeta, summed in chunk order
 * afterwards: the same bits at any thread count. */
static void ln_grad_task(void *vctx, int ith, int nth) {
    const ln_ctx *l = vctx;
    const sn_kcall *c = l->c;
    int64_t lo, hi, C = l->C;
    sn_split_range(l->nchunks, ith, nth, &lo, &hi);
    const float *x = c->in[0], *g = c->in[1], *dy = c->in[2];
    float *dx = c->out, *tmp = l->scratch + (size_t)(l->nchunks * 2 * C + ith * 2 * C);
    for (int64_t k = lo; k < hi; k++) {
        float *dg = l->scratch + k * 2 * C, *db = dg + C;
        for (int64_t j = 0; j < 2 * C; j++) dg[j] = 0;
        int64_t r1 = (k + 1) * LN_ROWS < l->R ? (k + 1) * LN_ROWS : l->R;
        for (int64_t r = k * LN_ROWS; r < r1; r++)
            isa->ln_grad(dx + r * C, dg, db, x + r * C, g, dy + r * C, C,
                         (float)c->attr->norm.epsilon, tmp);
    }
}

static int threads_for(int64_t items, int64_t work) {
    int64_t t = sn_num_threads();
    if (work < (1 << 14)) t = 1;
    if (t > items) t = items;
    return t < 1 ? 1 : (int)t;
}

static void ln_dims(const sn_kcall *c, int64_t *R, int64_t *C) {
    *C = c->x[1].shape.dim[0];
    *R = sn_shape_numel(&c->x[0].shape) / (*C ? *C : 1);
}

static sn_status ln_prepare(sn_kcall *c, size_t *scratch) {
    int64_t R, C;
    ln_dims(c, &R, &C);
    int64_t nchunks = (R + LN_ROWS - 1) / LN_ROWS, nth = sn_num_threads();
    *scratch = sizeof(float) * (size_t)(c->op == SN_OP_LAYER_NORM
                                            ? nth * C
                                            : nchunks * 2 * C + nth * 2 * C);
    return SN_OK;
}

static sn_status ln_run(sn_kcall *c) {
    int64_t R, C;
    ln_dims(c, &R, &C);
    ln_ctx l = {.c = c, .R = R, .C = C, .nchunks = (R + LN_ROWS - 1) / LN_ROWS,
                .scratch = c->scratch};
    int cap = (int)(c->op == SN_OP_LAYER_NORM
                        ? c->scratch_bytes / sizeof(float) / (size_t)(C ? C : 1)
                        : (c->scratch_bytes / sizeof(float) - (size_t)(l.nchunks * 2 * C)) /
                              (size_t)(2 * (C ? C : 1)));
    if (c->op == SN_OP_LAYER_NORM) {
        int nth = threads_for(R / GRAIN_ROWS, R * C);
        sn_parallel(ln_task, &l, nth < cap ? nth : cap);
        return SN_OK;
    }
    int nth = threads_for(l.nchunks, R * C);
    sn_parallel(ln_grad_task, &l, nth < cap ? nth : cap);
    float *dg = (float *)c->out + R * C, *db = dg + C;
    for (int64_t j = 0; j < 2 * C; j++) dg[j] = 0;
    for (int64_t k = 0; k < l.nchunks; k++) {
        const float *p = l.scratch + k * 2 * C;
        for (int64_t j = 0; j < C; j++) {
            dg[j] += p[j];
            db[j] += p[C + j];
        }
    }
    return SN_OK;
}

static bool ln_supports(const sn_kcall *c) { return all_f32(c); }

/* ---- gelu_tanh kernel ------------------------------------------------------------------ */
typedef struct gelu_ctx {
    const sn_kcall *c;
    int64_t n;
} gelu_ctx;

static void gelu_task(void *vctx, int ith, int nth) {
    const gelu_ctx *gc = vctx;
    int64_t lo, hi;
    sn_split_range(gc->n, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    const sn_kcall *c = gc->c;
    const float *dy = c->n_in == 2 ? (const float *)c->in[1] + lo : NULL;
    isa->gelu((float *)c->out + lo, (const float *)c->in[0] + lo, dy, hi - lo);
}

static sn_status gelu_run(sn_kcall *c) {
    gelu_ctx gc = {.c = c, .n = sn_shape_numel(&c->y.shape)};
    run_tasks(gelu_task, &gc, gc.n, 8192, gc.n);
    return SN_OK;
}

/* ---- attention kernels ----------------------------------------------------------------- */
/* The forward runs its products in bf16: mixed precision asked (c->bf16), AVX-512 with BF16
 * where bf16 arithmetic is faster than f32 (sn_cpu_bf16_pays), head size a multiple of 16.
 * The backward after it recomputes P from the same bf16 scores and does the rest in f32 (see
 * attn_grad_run); unlinked, it is all f32. */
static bool attn_bf16(const sn_kcall *c) {
#ifdef SN_CPU_X86
    return c->bf16 && c->op == SN_OP_ATTENTION && isa == &isa_avx512 &&
           sn_cpu_bf16_pays() && c->x[0].shape.dim[3] % 16 == 0;
#else
    (void)c;
    return false;
#endif
}

static attn_job job_of(const sn_kcall *c) {
    const sn_shape *q = &c->x[0].shape, *k = &c->x[1].shape;
    attn_job a = {.q = c->in[0], .k = c->in[1], .v = c->in[2], .B = q->dim[0], .Tq = q->dim[1],
                  .Tk = k->dim[1], .H = q->dim[2], .D = q->dim[3],
                  .off = c->attr->attn.q_offset, .scale = (float)c->attr->attn.scale,
                  .causal = c->attr->attn.causal, .out = c->out, .scratch = c->scratch};
    a.nqb = (a.Tq + BR - 1) / BR;
    double rate = c->attr->attn.drop_rate;
    if (c->op != SN_OP_ATTENTION_CACHED && rate > 0) {
        a.drop = true;
        a.drop_thresh = (float)rate; /* sn_dropout_keep's comparison */
        a.drop_inv = (float)(1.0 / (1.0 - rate));
        a.drop_seed = c->attr->attn.drop_seed;
        a.drop_hi = sn_dropout_hi(c->attr->attn.drop_node, c->step);
    }
    if (c->op == SN_OP_ATTENTION && c->n_in == 4) a.mask = c->in[3];
    if (c->op == SN_OP_ATTENTION_GRAD && c->n_in == 6) a.mask = c->in[5];
#ifdef SN_CPU_X86
    if (isa == &isa_avx512 && a.D % 16 == 0)
        a.tiles = &tiles_512;
    else if ((isa == &isa_avx512 || isa == &isa_avx2) && a.D % 8 == 0)
        a.tiles = &tiles_256;
    if (attn_bf16(c)) {
        a.bf16 = true;
        a.tiles = &tiles_bf16;
    }
#endif
    return a;
}

static size_t fwd_floats(int64_t D) {
    return (size_t)(2 * BR * D + D * BC + BC * D + RG * BC + 2 * BR);
}
static size_t bwd_floats(int64_t D, int64_t Tq) {
    return (size_t)(2 * RG * D + 3 * BC * D + 2 * D * BC + 2 * RG * BC + 2 * Tq + (Tq + RG) * D);
}

typedef struct attn_state {
    float *lse; /* [B, H, Tq] */
} attn_state;

static void attn_release(sn_kcall *c) {
    attn_state *s = c->state;
    if (s) free(s->lse);
    free(s);
    c->state = NULL;
}

static sn_status attn_prepare(sn_kcall *c, size_t *scratch) {
    attn_job a = job_of(c);
    size_t nth = (size_t)sn_num_threads();
    if (c->op != SN_OP_ATTENTION_GRAD) {
        attn_state *s = calloc(1, sizeof *s);
        if (s) s->lse = malloc(sizeof *s->lse * (size_t)(a.B * a.H * a.Tq + 1));
        if (!s || !s->lse) {
            if (s) free(s);
            return sn_errorf(SN_ERR_NOMEM, "attention: no memory for %lld row statistics",
                             (long long)(a.B * a.H * a.Tq));
        }
        c->state = s;
        *scratch = sizeof(float) * nth * fwd_floats(a.D);
    } else {
        /* with no forward partner the log-sum-exp is recomputed into scratch first */
        *scratch = sizeof(float) * (nth * (bwd_floats(a.D, a.Tq) > fwd_floats(a.D)
                                               ? bwd_floats(a.D, a.Tq) : fwd_floats(a.D)) +
                                    (size_t)(a.B * a.H * a.Tq));
    }
    return SN_OK;
}

typedef struct attn_ctx {
    const attn_job *a;
    int64_t tasks;
    bool bwd;
} attn_ctx;

/* Tasks dealt round-robin: causal query blocks grow in cost with their index, so neighbours
 * go to different threads. */
static void attn_task(void *vctx, int ith, int nth) {
    const attn_ctx *x = vctx;
    unsigned csr = fp_flush_enter();
    float *w = x->a->scratch + (size_t)ith * x->a->per_thread;
    for (int64_t t = ith; t < x->tasks; t += nth) {
        if (x->bwd)
            isa->bwd(x->a, t, w);
        else
            isa->fwd(x->a, t, w);
    }
    fp_flush_leave(csr);
}

static void attn_parallel(const attn_job *a, int64_t tasks, bool bwd, size_t scratch_floats) {
    int cap = (int)(scratch_floats / a->per_thread);
    int nth = threads_for(tasks, a->B * a->H * a->Tq * a->Tk * a->D);
    attn_ctx x = {.a = a, .tasks = tasks, .bwd = bwd};
    sn_parallel(attn_task, &x, nth < cap ? nth : cap);
}

static sn_kernel k_attn;

/* (q [B,Tq,H,D], k, v [B,Tk,H,D]) -> o [B,Tq,H,D]; the log-sum-exp to the call's state */
static sn_status attn_run(sn_kcall *c) {
    attn_job a = job_of(c);
    a.lse = ((attn_state *)c->state)->lse;
    a.per_thread = fwd_floats(a.D);
    attn_parallel(&a, a.B * a.H * a.nqb, false, c->scratch_bytes / sizeof(float));
    return SN_OK;
}

/* (q, k, v, o, dy) -> dq | dk | dv */
static sn_status attn_grad_run(sn_kcall *c) {
    attn_job a = job_of(c);
    a.o = c->in[3];
    a.dy = c->in[4];
    size_t lse_n = (size_t)(a.B * a.H * a.Tq);
    size_t floats = c->scratch_bytes / sizeof(float) - lse_n;
    if (c->fwd && c->fwd_kernel == &k_attn && c->fwd->state) {
        a.lse_in = ((const attn_state *)c->fwd->state)->lse;
        /* a bf16 forward's log-sum-exp is of its bf16 scores: P is recomputed from the same
         * bf16 products, so that it sums to 1; dP, dS and the accumulations stay f32 */
        a.bf16 = attn_bf16(c->fwd);
    } else {
        a.lse = (float *)c->scratch + floats;
        a.stats_only = true;
        a.per_thread = fwd_floats(a.D);
        attn_parallel(&a, a.B * a.H * a.nqb, false, floats);
        a.stats_only = false;
    }
    a.per_thread = bwd_floats(a.D, a.Tq);
    attn_parallel(&a, a.B * a.H, true, floats);
    return SN_OK;
}

static bool attn_supports(const sn_kcall *c) {
    if (c->op == SN_OP_ATTENTION_CACHED) {
        for (int i = 0; i < 5; i++)
            if (c->x[i].dtype != SN_F32) return false;
        return c->y.dtype == SN_F32;
    }
    return all_f32(c);
}

/* (q, k, v [B,s,H,D], kc, vc [B,C,H,D], pos [1]) -> o [B,s,H,D]; pos read now */
static sn_status attn_cached_run(sn_kcall *c) {
    attn_job a = job_of(c);
    int64_t pos = ((const int32_t *)c->in[5])[0];
    a.kc = c->in[3];
    a.vc = c->in[4];
    a.Tc = c->x[3].shape.dim[1];
    if (pos < 0 || pos + a.Tq > a.Tc)
        return sn_errorf(SN_ERR_INVALID, "attention_cached: position %lld with %lld new keys "
                         "does not fit a cache of %lld", (long long)pos, (long long)a.Tq,
                         (long long)a.Tc);
    a.split = pos;
    a.Tk = pos + a.Tq;
    a.off = pos;
    a.lse = ((attn_state *)c->state)->lse;
    a.per_thread = fwd_floats(a.D);
    attn_parallel(&a, a.B * a.H * a.nqb, false, c->scratch_bytes / sizeof(float));
    return SN_OK;
}

static sn_kernel k_ln = {.impl = "cpu", .supports = ln_supports, .prepare = ln_prepare,
                         .run = ln_run};
static sn_kernel k_gelu = {.impl = "cpu", .supports = ln_supports, .run = gelu_run};
static sn_kernel k_attn = {.impl = "cpu", .supports = attn_supports, .prepare = attn_prepare,
                           .run = attn_run, .release = attn_release};
static sn_kernel k_attn_cached = {.impl = "cpu", .supports = attn_supports,
                                   .prepare = attn_prepare, .run = attn_cached_run,
                                   .release = attn_release};
static sn_kernel k_attn_grad = {.impl = "cpu", .supports = attn_supports,
                                .prepare = attn_prepare, .run = attn_grad_run};

void sn_cpu_register_attention(sn_kernel_table *t) {
#ifdef SN_CPU_X86
    isa = pick_variant(&isa_cpu, &isa_avx2, &isa_avx512);
#endif
    k_ln.impl = k_gelu.impl = k_attn.impl = k_attn_grad.impl = k_attn_cached.impl = isa->name;
    t->k[SN_OP_LAYER_NORM] = &k_ln;
    t->k[SN_OP_LAYER_NORM_GRAD] = &k_ln;
    t->k[SN_OP_GELU_TANH] = &k_gelu;
    t->k[SN_OP_GELU_TANH_GRAD] = &k_gelu;
    t->k[SN_OP_ATTENTION] = &k_attn;
    t->k[SN_OP_ATTENTION_GRAD] = &k_attn_grad;
    t->k[SN_OP_ATTENTION_CACHED] = &k_attn_cached;
}
