/* Fast f32 kernels of the fused BatchNormalization training ops (graph/op_batch_norm.c) on
 * NHWC data viewed as x [M, C], channels contiguous.
 *
 * Hand-written rather than oneDNN's batch normalization primitive: the graph splits the
 * statistics from the normalisation (the layer's moving averages read them) and the backward
 * into dgamma/dbeta and dx, which oneDNN's primitives each do in one call; and ours give the
 * same bits at any thread count, which oneDNN's reductions do not promise. A per-op speed
 * comparison against oneDNN on MobileNetV2's shapes is owed on a quiet machine
 * (docs/kernels.md).
 *
 * Work split: the rows are cut into chunks whose size depends only on M (never on the thread
 * count); threads take whole chunks, each chunk keeps its own partial sums [C] in scratch and
 * the partials are added in chunk order, in double, afterwards: same bits at any thread count.
 * The inner loops run along the C contiguous channels of one row, so they vectorise; each is
 * compiled for AVX-512, AVX2 and baseline (target_clones). The statistics take one pass: sums
 * of d = x - K and d^2 with K the first row (a sample of each channel, so |K - mean| is about
 * one standard deviation and E[d^2] - E[d]^2 loses no more than a bit or two). The
 * normalisation and dx are one elementwise pass each with per-channel coefficients computed
 * first. */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_vec.h"

enum { CHUNK_MIN = 64, CHUNKS_MAX = 256, GRAIN = 1 << 15 };

typedef struct bn_ctx {
    const sn_kcall *c;
    int64_t M, C, rows, nchunks; /* rows per chunk */
    const float *k;              /* stats pass: the shift K [C] */
    const float *mean;           /* grad_params: mean [C] */
    const float *a, *b, *d;      /* elementwise passes: per-channel coefficients [C] */
    float *part;                 /* [nchunks][2C] partial sums */
} bn_ctx;

static void bn_dims(const sn_kcall *c, int64_t *M, int64_t *C, int64_t *rows, int64_t *nchunks) {
    const sn_shape *xs = &c->x[0].shape;
    *C = xs->dim[xs->ndim - 1];
    *M = *C ? sn_shape_numel(xs) / *C : 0;
    int64_t r = (*M + CHUNKS_MAX - 1) / CHUNKS_MAX;
    *rows = r < CHUNK_MIN ? CHUNK_MIN : r;
    *nchunks = (*M + *rows - 1) / *rows;
}

/* stats: part[k] = sum over the chunk's rows of d | d^2, d = x - K */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
stats_task(void *vctx, int ith, int nth) {
    const bn_ctx *t = vctx;
    const int64_t C = t->C;
    const float *x = t->c->in[0], *K = t->k;
    int64_t lo, hi;
    sn_split_range(t->nchunks, ith, nth, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) {
        float *s = t->part + k * 2 * C, *q = s + C;
        for (int64_t j = 0; j < 2 * C; j++) s[j] = 0;
        int64_t r1 = (k + 1) * t->rows < t->M ? (k + 1) * t->rows : t->M;
        for (int64_t r = k * t->rows; r < r1; r++) {
            const float *xr = x + r * C;
            for (int64_t j = 0; j < C; j++) {
                float d = xr[j] - K[j];
                s[j] += d;
                q[j] += d * d;
            }
        }
    }
}

/* grad_params: part[k] = sum over the chunk's rows of dy (x - mean) | dy */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
gp_task(void *vctx, int ith, int nth) {
    const bn_ctx *t = vctx;
    const int64_t C = t->C;
    const float *x = t->c->in[0], *dy = t->c->in[2], *m = t->mean;
    int64_t lo, hi;
    sn_split_range(t->nchunks, ith, nth, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) {
        float *g = t->part + k * 2 * C, *b = g + C;
        for (int64_t j = 0; j < 2 * C; j++) g[j] = 0;
        int64_t r1 = (k + 1) * t->rows < t->M ? (k + 1) * t->rows : t->M;
        for (int64_t r = k * t->rows; r < r1; r++) {
            const float *xr = x + r * C, *dr = dy + r * C;
            for (int64_t j = 0; j < C; j++) {
                g[j] += dr[j] * (xr[j] - m[j]);
                b[j] += dr[j];
            }
        }
    }
}

/* train: y = (x - mean) a + b; grad_x: dx = a dy + b (x - mean) + d. mean is stats row 0. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
ew_task(void *vctx, int ith, int nth) {
    const bn_ctx *t = vctx;
    const sn_kcall *c = t->c;
    const int64_t C = t->C;
    const float *x = c->in[0], *m = c->in[1], *a = t->a, *b = t->b, *d = t->d;
    float *y = c->out;
    int64_t lo, hi;
    sn_split_range(t->nchunks, ith, nth, &lo, &hi);
    int64_t r0 = lo * t->rows, r1 = hi * t->rows < t->M ? hi * t->rows : t->M;
    if (c->op == SN_OP_BN_TRAIN) {
        for (int64_t r = r0; r < r1; r++) {
            const float *xr = x + r * C;
            float *yr = y + r * C;
            for (int64_t j = 0; j < C; j++) yr[j] = (xr[j] - m[j]) * a[j] + b[j];
        }
    } else {
        const float *dy = c->in[3];
        for (int64_t r = r0; r < r1; r++) {
            const float *xr = x + r * C, *dr = dy + r * C;
            float *yr = y + r * C;
            for (int64_t j = 0; j < C; j++) yr[j] = a[j] * dr[j] + b[j] * (xr[j] - m[j]) + d[j];
        }
    }
}

static void run(sn_task_fn fn, bn_ctx *t) {
    run_tasks(fn, t, t->M * t->C, GRAIN, t->nchunks);
}

/* Adds the chunks' partials in chunk order: out[j] = sum_k part[k][j], j < 2C */
static void sum_parts(const bn_ctx *t, double *out) {
    for (int64_t j = 0; j < 2 * t->C; j++) out[j] = 0;
    for (int64_t k = 0; k < t->nchunks; k++) {
        const float *p = t->part + k * 2 * t->C;
        for (int64_t j = 0; j < 2 * t->C; j++) out[j] += p[j];
    }
}

/* scratch: the partials [nchunks][2C] floats, three coefficient vectors [C] floats, and the
 * sums [2C] doubles */
static sn_status bn_prepare(sn_kcall *c, size_t *scratch) {
    int64_t M, C, rows, nchunks;
    bn_dims(c, &M, &C, &rows, &nchunks);
    *scratch = sizeof(float) * (size_t)(nchunks * 2 * C + 3 * C) +
               sizeof(double) * (size_t)(2 * C);
    return SN_OK;
}

static sn_status bn_run(sn_kcall *c) {
    bn_ctx t = {.c = c};
    bn_dims(c, &t.M, &t.C, &t.rows, &t.nchunks);
    const int64_t M = t.M, C = t.C;
    double *sum = c->scratch; /* first: doubles are the stricter alignment */
    float *coef = (float *)(sum + 2 * C), *a = coef, *b = coef + C, *d = coef + 2 * C;
    t.part = coef + 3 * C;
    t.a = a, t.b = b, t.d = d;
    const float *st = c->in[1];
    float *out = c->out;
    const double eps = c->attr->norm.epsilon;
    switch (c->op) {
    case SN_OP_BN_STATS: {
        const float *x = c->in[0];
        if (M == 0) {
            for (int64_t j = 0; j < 2 * C; j++) out[j] = 0;
            return SN_OK;
        }
        t.k = x; /* the first row */
        run(stats_task, &t);
        sum_parts(&t, sum);
        for (int64_t j = 0; j < C; j++) {
            double md = sum[j] / (double)M, v = sum[C + j] / (double)M - md * md;
            out[j] = (float)((double)x[j] + md);
            out[C + j] = (float)(v > 0 ? v : 0);
        }
        return SN_OK;
    }
    case SN_OP_BN_TRAIN: {
        const float *ga = c->in[2], *be = c->in[3];
        for (int64_t j = 0; j < C; j++) {
            a[j] = (float)((double)ga[j] / sqrt((double)st[C + j] + eps));
            b[j] = be[j];
        }
        run(ew_task, &t);
        return SN_OK;
    }
    case SN_OP_BN_GRAD_PARAMS: {
        t.mean = st;
        run(gp_task, &t);
        sum_parts(&t, sum);
        for (int64_t j = 0; j < C; j++) {
            out[j] = (float)(sum[j] / sqrt((double)st[C + j] + eps));
            out[C + j] = (float)sum[C + j];
        }
        return SN_OK;
    }
    case SN_OP_BN_GRAD_X: {
        const float *ga = c->in[2], *dp = c->in[4];
        for (int64_t j = 0; j < C; j++) {
            double s = 1.0 / sqrt((double)st[C + j] + eps), gs = (double)ga[j] * s;
            a[j] = (float)gs;
            b[j] = (float)(-gs * s * (double)dp[j] / (double)M);
            d[j] = (float)(-gs * (double)dp[C + j] / (double)M);
        }
        run(ew_task, &t);
        return SN_OK;
    }
    default:
        return sn_errorf(SN_ERR_UNSUPPORTED, "cpu batch_norm kernel: op %d is not a bn_* op", (int)c->op);
    }
}

static bool bn_supports(const sn_kcall *c) {
    if (c->y.dtype != SN_F32) return false;
    for (int i = 0; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    return true;
}

static const sn_kernel k_bn = {.impl = "cpu", .supports = bn_supports, .prepare = bn_prepare,
                               .run = bn_run};

void sn_cpu_register_batch_norm(sn_kernel_table *t) {
    t->k[SN_OP_BN_STATS] = &k_bn;
    t->k[SN_OP_BN_TRAIN] = &k_bn;
    t->k[SN_OP_BN_GRAD_PARAMS] = &k_bn;
    t->k[SN_OP_BN_GRAD_X] = &k_bn;
}
