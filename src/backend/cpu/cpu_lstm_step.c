/* The batch-1 LSTM step with a bf16 recurrent kernel (cpu_lstm_step.h).
 *
 * Layout. The units are cut into blocks of 16 (one AVX-512 register of f32). Block b's panel
 * holds, for each pair of rows (2p, 2p+1) of R, the four gates' 16 columns as bf16 pairs:
 *     panel[b][p][q][j] = (R[2p][q*U + 16b + j], R[2p + 1][q*U + 16b + j]), q = i, f, c, o,
 * 64 bytes per (p, q): exactly the operand VDPBF16PS multiplies with a broadcast pair
 * (h[2p], h[2p + 1]) and adds into 16 f32 lanes. A thread reads its blocks' panels front to
 * back (one sequential stream, what the hardware prefetchers follow best), ends each block
 * with the four gates of its 16 units in four registers and applies the cell there: the
 * gates never go to memory. The Dense kernel is packed the same way in f32, 16 logits per
 * panel, [V/16][U][16].
 *
 * Threads: unit blocks are split over the team, then (after a barrier: the logits need all
 * of h) the logit blocks. Padding (U or V not a multiple of 16, U odd) is zeros, which adds
 * exact zeros. */
#include <string.h>

#include "backend/cpu/cpu_lstm_step.h"
#include "backend/cpu/cpu_vec.h"
#include "backend/kernel.h"

#define BLK 16

struct sn_lstm_step {
    int64_t U, V, P;  /* units, logits, row pairs (ceil(U / 2)) */
    int64_t nb, nbd;  /* unit blocks, logit blocks */
    uint16_t *rk;     /* [nb][P][4][BLK][2] bf16, 64-byte aligned */
    float *dk;        /* [nbd][U][BLK] f32 */
    float *db;        /* [nbd * BLK] bias (zeros without one) */
    float *hn;        /* [nb * BLK] the new h, read by the logits phase */
    uint32_t *hp;     /* [P] h_{t-1} as bf16 pairs (h[2p] low, h[2p + 1] high) */
};

bool sn_lstm_step_bf16_supported(void) {
#ifdef SN_CPU_X86
    /* the AVX-512 variant as every other kernel picks it (SN_CPU_ISA may narrow it), plus BF16 */
    static const char avx512;
    return pick_variant(NULL, NULL, &avx512) == &avx512 && sn_cpu()->avx512_bf16;
#else
    return false;
#endif
}

void sn_lstm_step_free(sn_lstm_step *s) {
    if (!s) return;
    sn_free_aligned(s->rk);
    sn_free_aligned(s->dk);
    sn_free_aligned(s->db);
    sn_free_aligned(s->hn);
    sn_free_aligned(s->hp);
    free(s);
}

sn_status sn_lstm_step_new(const float *R, int64_t U, const float *Wd, const float *bd,
                           int64_t V, sn_lstm_step **out) {
    if (!R || !Wd || !out || U < 1 || V < 1)
        return sn_errorf(SN_ERR_INVALID, "sn_lstm_step_new: NULL weights or U %lld, V %lld < 1",
                         (long long)U, (long long)V);
    *out = NULL;
    if (!sn_lstm_step_bf16_supported())
        return sn_errorf(SN_ERR_UNSUPPORTED, "bf16 LSTM step: this CPU has no AVX512-BF16 "
                         "(or SN_CPU_ISA asks for less than avx512)");
    sn_lstm_step *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    s->U = U;
    s->V = V;
    s->P = (U + 1) / 2;
    s->nb = (U + BLK - 1) / BLK;
    s->nbd = (V + BLK - 1) / BLK;
    size_t rk_n = (size_t)(s->nb * s->P * 4 * BLK * 2), dk_n = (size_t)(s->nbd * U * BLK);
    s->rk = sn_malloc_aligned(sizeof(uint16_t) * rk_n);
    s->dk = sn_malloc_aligned(sizeof(float) * dk_n);
    s->db = sn_malloc_aligned(sizeof(float) * (size_t)(s->nbd * BLK));
    s->hn = sn_malloc_aligned(sizeof(float) * (size_t)(s->nb * BLK));
    s->hp = sn_malloc_aligned(sizeof(uint32_t) * (size_t)s->P);
    if (!s->rk || !s->dk || !s->db || !s->hn || !s->hp) {
        sn_lstm_step_free(s);
        return SN_ERR_NOMEM;
    }
    int64_t G = 4 * U;
    for (int64_t b = 0; b < s->nb; b++)
        for (int64_t p = 0; p < s->P; p++)
            for (int q = 0; q < 4; q++) {
                uint16_t *o = s->rk + (((b * s->P + p) * 4 + q) * BLK) * 2;
                for (int j = 0; j < BLK; j++) {
                    int64_t u = b * BLK + j, k = 2 * p;
                    bool in = u < U;
                    o[2 * j] = in ? sn_f32_to_bf16(R[k * G + q * U + u]) : 0;
                    o[2 * j + 1] =
                        in && k + 1 < U ? sn_f32_to_bf16(R[(k + 1) * G + q * U + u]) : 0;
                }
            }
    for (int64_t b = 0; b < s->nbd; b++)
        for (int64_t k = 0; k < U; k++)
            for (int j = 0; j < BLK; j++) {
                int64_t v = b * BLK + j;
                s->dk[(b * U + k) * BLK + j] = v < V ? Wd[k * V + v] : 0.0f;
            }
    for (int64_t v = 0; v < s->nbd * BLK; v++) s->db[v] = bd && v < V ? bd[v] : 0.0f;
    *out = s;
    return SN_OK;
}

typedef struct step_ctx {
    sn_lstm_step *s;
    const float *xw;
    float *c, *logits;
} step_ctx;

#ifdef SN_CPU_X86
#define TGT_BF16                                                                               \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,"                     \
                          "prefer-vector-width=512")))

/* The cell on one block: z = the four gates' pre-activations [4][BLK], c = c_{t-1} of n units
 * (replaced by c_t), h = h_t out. Short loops, one function each, as in cpu_rnn.c (GCC
 * vectorises each); lanes past n compute on zeros and are not stored. */
TGT_BF16 static void cell_block(float *restrict z, float *restrict c, float *restrict h, int n) {
    float *zi = z, *zf = z + BLK, *zg = z + 2 * BLK, *zo = z + 3 * BLK, cc[BLK], cpl[BLK] = {0};
    memcpy(cpl, c, sizeof(float) * (size_t)n);
    for (int j = 0; j < BLK; j++) zi[j] = vsigmoid(zi[j]);
    for (int j = 0; j < BLK; j++) zf[j] = vsigmoid(zf[j]);
    for (int j = 0; j < BLK; j++) zg[j] = vtanh(zg[j]);
    for (int j = 0; j < BLK; j++) zo[j] = vsigmoid(zo[j]);
    for (int j = 0; j < BLK; j++) cc[j] = zf[j] * cpl[j] + zi[j] * zg[j];
    for (int j = 0; j < BLK; j++) zi[j] = vtanh(cc[j]);
    for (int j = 0; j < BLK; j++) zi[j] *= zo[j];
    memcpy(c, cc, sizeof(float) * (size_t)n);
    memcpy(h, zi, sizeof(float) * (size_t)n);
}

/* xw [4U], s->hp (h_{t-1}), c [U]: units [16 b0, 16 b1) of c and s->hn replaced; then the
 * logits of blocks [b0, b1) of the second split. */
TGT_BF16 static void step_task(void *ctx_, int ith, int nth) {
    const step_ctx *x = ctx_;
    sn_lstm_step *s = x->s;
    const int64_t U = s->U, P = s->P;
    const uint32_t *hp = s->hp;
    int64_t b0, b1;
    sn_split_range(s->nb, ith, nth, &b0, &b1);
    for (int64_t b = b0; b < b1; b++) {
        const __m512i *w = (const __m512i *)(s->rk + b * P * 4 * BLK * 2);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t p = 0; p < P; p++, w += 4) {
            __m512bh hv = (__m512bh)_mm512_set1_epi32((int)hp[p]);
            a0 = _mm512_dpbf16_ps(a0, hv, (__m512bh)_mm512_load_si512(w));
            a1 = _mm512_dpbf16_ps(a1, hv, (__m512bh)_mm512_load_si512(w + 1));
            a2 = _mm512_dpbf16_ps(a2, hv, (__m512bh)_mm512_load_si512(w + 2));
            a3 = _mm512_dpbf16_ps(a3, hv, (__m512bh)_mm512_load_si512(w + 3));
        }
        int64_t u0 = b * BLK;
        int n = (int)(U - u0 < BLK ? U - u0 : BLK);
        __mmask16 m = (__mmask16)((1u << n) - 1u);
        float z[4 * BLK];
        _mm512_storeu_ps(z, _mm512_add_ps(a0, _mm512_maskz_loadu_ps(m, x->xw + u0)));
        _mm512_storeu_ps(z + BLK, _mm512_add_ps(a1, _mm512_maskz_loadu_ps(m, x->xw + U + u0)));
        _mm512_storeu_ps(z + 2 * BLK,
                         _mm512_add_ps(a2, _mm512_maskz_loadu_ps(m, x->xw + 2 * U + u0)));
        _mm512_storeu_ps(z + 3 * BLK,
                         _mm512_add_ps(a3, _mm512_maskz_loadu_ps(m, x->xw + 3 * U + u0)));
        cell_block(z, x->c + u0, s->hn + u0, n);
    }
    /* The logits read all of the new h. (Outside a parallel region, nth == 1, the barrier is
     * a no-op.) */
#pragma omp barrier
    sn_split_range(s->nbd, ith, nth, &b0, &b1);
    for (int64_t b = b0; b < b1; b++) {
        const float *w = s->dk + b * U * BLK, *hn = s->hn;
        /* Four chains over k mod 4 (FMA latency), added in one fixed order. */
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int64_t k = 0;
        for (; k + 4 <= U; k += 4, w += 4 * BLK) {
            a0 = _mm512_fmadd_ps(_mm512_set1_ps(hn[k]), _mm512_load_ps(w), a0);
            a1 = _mm512_fmadd_ps(_mm512_set1_ps(hn[k + 1]), _mm512_load_ps(w + BLK), a1);
            a2 = _mm512_fmadd_ps(_mm512_set1_ps(hn[k + 2]), _mm512_load_ps(w + 2 * BLK), a2);
            a3 = _mm512_fmadd_ps(_mm512_set1_ps(hn[k + 3]), _mm512_load_ps(w + 3 * BLK), a3);
        }
        for (; k < U; k++, w += BLK) a0 = _mm512_fmadd_ps(_mm512_set1_ps(hn[k]), _mm512_load_ps(w), a0);
        __m512 y = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
        y = _mm512_add_ps(y, _mm512_load_ps(s->db + b * BLK));
        int64_t v0 = b * BLK;
        int n = (int)(s->V - v0 < BLK ? s->V - v0 : BLK);
        _mm512_mask_storeu_ps(x->logits + v0, (__mmask16)((1u << n) - 1u), y);
    }
}
#endif

void sn_lstm_step_run(sn_lstm_step *s, const float *xw, float *h, float *c, float *logits) {
#ifdef SN_CPU_X86
    step_ctx x = {.s = s, .xw = xw, .c = c, .logits = logits};
    for (int64_t p = 0; p < s->P; p++) {
        uint32_t lo = sn_f32_to_bf16(h[2 * p]),
                 hi = 2 * p + 1 < s->U ? sn_f32_to_bf16(h[2 * p + 1]) : 0;
        s->hp[p] = lo | hi << 16;
    }
    /* Both phases are split in blocks of 16: more threads than blocks would idle. */
    int64_t most = s->nb > s->nbd ? s->nb : s->nbd;
    int nth = sn_num_threads();
    if (nth > most) nth = (int)most;
    sn_parallel(step_task, &x, nth);
    memcpy(h, s->hn, sizeof(float) * (size_t)s->U);
#else
    (void)s, (void)xw, (void)h, (void)c, (void)logits;
    SN_ASSERT(!"sn_lstm_step_run without AVX512-BF16: sn_lstm_step_new refuses that");
#endif
}

/* ---- the kernel of lstm_dense_step (graph/op_rnn.h) under bf16_compute ------------------- */
/* The packed weights and the variables' version they were packed from: packed at the first
 * run, again whenever the version moves (new weights), never per step. */
typedef struct step_state {
    sn_lstm_step *s;
    uint64_t vars_version;
} step_state;

static bool step_supports(const sn_kcall *c) {
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    return c->bf16 && c->y.dtype == SN_F32 && c->x[0].shape.dim[0] == 1 &&
           sn_lstm_step_bf16_supported();
}

static sn_status step_prepare(sn_kcall *c, size_t *scratch_bytes) {
    *scratch_bytes = 0;
    c->state = sn_calloc(1, sizeof(step_state));
    return c->state ? SN_OK : SN_ERR_NOMEM;
}

static void step_release(sn_kcall *c) {
    step_state *st = c->state;
    if (st) sn_lstm_step_free(st->s);
    free(st);
    c->state = NULL;
}

/* (xw [1, 4U], r [U, 4U], h, c [1, U], wd [U, V], bd [V]) -> [1, 2U + V]: h and c are copied
 * to the output's first 2U and stepped there. */
static sn_status step_run(sn_kcall *c) {
    step_state *st = c->state;
    int64_t U = c->x[1].shape.dim[0], V = c->x[4].shape.dim[1];
    if (!st->s || st->vars_version != c->vars_version) {
        sn_lstm_step_free(st->s);
        st->s = NULL;
        SN_TRY(sn_lstm_step_new(c->in[1], U, c->in[4], c->in[5], V, &st->s));
        st->vars_version = c->vars_version;
    }
    float *out = c->out;
    memcpy(out, c->in[2], sizeof(float) * (size_t)U);
    memcpy(out + U, c->in[3], sizeof(float) * (size_t)U);
    sn_lstm_step_run(st->s, c->in[0], out, out + U, out + 2 * U);
    return SN_OK;
}

static const sn_kernel k_lstm_step_bf16 = {.impl = "avx512_bf16",
                                           .supports = step_supports,
                                           .prepare = step_prepare,
                                           .run = step_run,
                                           .release = step_release};

void sn_cpu_register_lstm_step(sn_kernel_table *t) {
    t->k[SN_OP_LSTM_DENSE_STEP] = &k_lstm_step_bf16;
}
