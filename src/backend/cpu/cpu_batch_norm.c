/* Fast f32 kernels of the fused BatchNormalization training ops (graph/op_batch_norm.c) on
 * NHWC data viewed as x [M, C], channels contiguous. Under mixed bf16 the plan may store x
 * (a convolution's output) and the output of bn_train and bn_grad_x in bfloat16
 * (graph/plan_bf16.c): the kernels read and write those as they are and compute in f32.
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
 * first.
 *
 * Fused with the activation that follows (SN_FUSED_BN_RELU/RELU6, graph/plan_fuse.c): the
 * normalisation pass applies it, and the two gradient passes mask the incoming gradient by
 * its derivative at the normalised value, recomputed from x with the forward's own
 * coefficients and operations (bn_norm; no FMA contraction in ISO C mode), so the mask is the
 * forward's bit for bit and every value is the unfused plan's.
 *
 * With the bias gradient of the layer before it (SN_FUSED_BN_GRAD_SUM, or a second output of
 * a fused grad_x): dx's column sums are taken as dx is written, per chunk, and added in chunk
 * order in double as the reductions' are. */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_vec.h"

enum { CHUNK_MIN = 64, CHUNKS_MAX = 256, GRAIN = 1 << 15 };

/* The activation fused into the call (kernel.h, SN_FUSED_BN_RELU/RELU6) */
typedef enum { ACT_NONE, ACT_RELU, ACT_RELU6 } bn_act;

typedef struct bn_ctx {
    const sn_kcall *c;
    int64_t M, C, rows, nchunks; /* rows per chunk */
    bn_act act;
    bool xb;                     /* x is bfloat16 (get) */
    const float *k;              /* stats pass: the shift K [C] */
    const float *mean;           /* grad_params: mean [C] */
    const float *dy;             /* gradient passes: the incoming gradient */
    const float *a, *b, *d;      /* elementwise passes: per-channel coefficients [C] */
    const float *fa, *fb;        /* fused gradient passes: the forward's coefficients [C] */
    float *part;                 /* [nchunks][2C] partial sums */
} bn_ctx;

/* The normalised value as the forward pass computes it: y = (x - mean) a + b. */
INL float bn_norm(float x, float m, float a, float b) { return (x - m) * a + b; }

INL float act_fwd(bn_act k, float v) {
    return k == ACT_RELU ? relu1(v) : k == ACT_RELU6 ? relu6_1(v) : v;
}

/* dy through the activation at normalised value v, as relu_grad (which reads relu's output,
 * > 0 exactly where v is) and relu6_grad compute it */
INL float act_bwd(bn_act k, float v, float dy) {
    return k == ACT_RELU ? relu_grad1(v, dy) : k == ACT_RELU6 ? relu6_grad1(v, dy) : dy;
}

/* The forward's coefficients: a = gamma / sqrt(var + eps), b = beta (bn_train and the fused
 * gradients' masks compute them here alike) */
static void fwd_coefs(const sn_kcall *c, const float *st, const float *ga, const float *be,
                      int64_t C, float *a, float *b) {
    const double eps = c->attr->norm.epsilon;
    for (int64_t j = 0; j < C; j++) {
        a[j] = (float)((double)ga[j] / sqrt((double)st[C + j] + eps));
        b[j] = be[j];
    }
}

static void bn_dims(const sn_kcall *c, int64_t *M, int64_t *C, int64_t *rows, int64_t *nchunks) {
    const sn_shape *xs = &c->x[0].shape;
    *C = xs->dim[xs->ndim - 1];
    *M = *C ? sn_shape_numel(xs) / *C : 0;
    int64_t r = (*M + CHUNKS_MAX - 1) / CHUNKS_MAX;
    *rows = r < CHUNK_MIN ? CHUNK_MIN : r;
    *nchunks = (*M + *rows - 1) / *rows;
}

/* The variants of a row function fn(k, xb, ...) by activation and input type (BY_ACT_X), and
 * of fn(k, xb, b16, ...) by output type too (BY_VARIANT): each a loop with constants. */
#define BY_X(t, fn, k, ...)                                                                    \
    ((t)->xb ? fn(k, true, __VA_ARGS__) : fn(k, false, __VA_ARGS__))
#define BY_ACT_X(t, fn, ...)                                                                   \
    do {                                                                                       \
        switch ((t)->act) {                                                                    \
        case ACT_NONE: BY_X(t, fn, ACT_NONE, __VA_ARGS__); break;                              \
        case ACT_RELU: BY_X(t, fn, ACT_RELU, __VA_ARGS__); break;                              \
        case ACT_RELU6: BY_X(t, fn, ACT_RELU6, __VA_ARGS__); break;                            \
        }                                                                                      \
    } while (0)
#define BY_VARIANT(t, fn, ...)                                                                 \
    do {                                                                                       \
        if ((t)->c->y.dtype == SN_BF16) BY_ACT_X(t, fn, true, __VA_ARGS__);                    \
        else BY_ACT_X(t, fn, false, __VA_ARGS__);                                              \
    } while (0)

/* stats of chunk k: part[k] = sum over its rows of d | d^2, d = x - K; xb a constant where
 * it is inlined */
INL void stats_chunk(bool xb, const bn_ctx *t, int64_t k) {
    const int64_t C = t->C;
    const void *restrict x = t->c->in[0];
    const float *restrict K = t->k;
    float *restrict s = t->part + k * 2 * C, *restrict q = s + C;
    for (int64_t j = 0; j < 2 * C; j++) s[j] = 0;
    int64_t r1 = (k + 1) * t->rows < t->M ? (k + 1) * t->rows : t->M;
    for (int64_t r = k * t->rows; r < r1; r++)
        for (int64_t j = 0; j < C; j++) {
            float d = ld_act(xb, x, r * C + j) - K[j];
            s[j] += d;
            q[j] += d * d;
        }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) static void
stats_task(void *vctx, int ith, int nth) {
    const bn_ctx *t = vctx;
    int64_t lo, hi;
    sn_split_range(t->nchunks, ith, nth, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) t->xb ? stats_chunk(true, t, k) : stats_chunk(false, t, k);
}

/* One row of grad_params with the activation k (a constant where it is inlined). restrict:
 * without it GCC 12 (-fopt-info-vec) vectorised only the unfused variant, behind run-time
 * alias checks, and the fused ones ran scalar: 17.4 ms against 6.7 on Xception's largest
 * layer. */
INL void gp_row(bn_act k, bool xb, const bn_ctx *t, int64_t r, float *restrict g,
                float *restrict b) {
    const float *restrict m = t->mean, *restrict fa = t->fa, *restrict fb = t->fb;
    const void *restrict x = t->c->in[0];
    const float *restrict dr = t->dy + r * t->C;
    for (int64_t j = 0; j < t->C; j++) {
        float xv = ld_act(xb, x, r * t->C + j);
        float d = act_bwd(k, k == ACT_NONE ? 0.0f : bn_norm(xv, m[j], fa[j], fb[j]), dr[j]);
        g[j] += d * (xv - m[j]);
        b[j] += d;
    }
}

/* grad_params: part[k] = sum over the chunk's rows of dy (x - mean) | dy */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
gp_task(void *vctx, int ith, int nth) {
    const bn_ctx *t = vctx;
    const int64_t C = t->C;
    int64_t lo, hi;
    sn_split_range(t->nchunks, ith, nth, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) {
        float *g = t->part + k * 2 * C, *b = g + C;
        for (int64_t j = 0; j < 2 * C; j++) g[j] = 0;
        int64_t r1 = (k + 1) * t->rows < t->M ? (k + 1) * t->rows : t->M;
        for (int64_t r = k * t->rows; r < r1; r++) BY_ACT_X(t, gp_row, t, r, g, b);
    }
}

/* Element i of the output: float32, or bfloat16 where the plan stores the value so
 * (graph/plan_bf16.c: its readers are convolutions that would convert it to bfloat16 with
 * this rounding anyway). b16 is a constant where it is inlined. */
INL void put(bool b16, void *restrict y, int64_t i, float v) {
    if (b16) ((uint16_t *)y)[i] = bf16_rne1(v);
    else ((float *)y)[i] = v;
}

/* Rows [r0, r1) of train (y = act((x - mean) a + b)) or grad_x (dx = a dy' + b (x - mean) +
 * d, dy' = dy through the activation), the activation k and b16 constants where it is
 * inlined */
INL void ew_rows(bn_act k, bool xb, bool b16, const bn_ctx *t, int64_t r0, int64_t r1) {
    const sn_kcall *c = t->c;
    const int64_t C = t->C;
    const void *x = c->in[0];
    const float *m = c->in[1], *a = t->a, *b = t->b, *d = t->d;
    void *y = c->out;
    if (c->op == SN_OP_BN_TRAIN) {
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = 0; j < C; j++) {
                float v = bn_norm(ld_act(xb, x, r * C + j), m[j], a[j], b[j]);
                put(b16, y, r * C + j, act_fwd(k, v));
            }
        return;
    }
    const float *dy = t->dy, *fa = t->fa, *fb = t->fb;
    for (int64_t r = r0; r < r1; r++) {
        const float *dr = dy + r * C;
        for (int64_t j = 0; j < C; j++) {
            float xv = ld_act(xb, x, r * C + j);
            float g = act_bwd(k, k == ACT_NONE ? 0.0f : bn_norm(xv, m[j], fa[j], fb[j]), dr[j]);
            put(b16, y, r * C + j, a[j] * g + b[j] * (xv - m[j]) + d[j]);
        }
    }
}

/* grad_x with the sum of dx over rows (SN_FUSED_BN_GRAD_SUM): rows [r0, r1) as ew_rows, and
 * s[j] = the sum of their dx[., j] (of the float32 values, before any rounding to bfloat16).
 * restrict: as gp_row. */
INL void gx_sum_rows(bn_act k, bool xb, bool b16, const bn_ctx *t, int64_t r0, int64_t r1,
                     float *restrict s) {
    const int64_t C = t->C;
    const void *restrict x = t->c->in[0];
    const float *restrict m = t->c->in[1], *restrict a = t->a,
                          *restrict b = t->b, *restrict d = t->d, *restrict fa = t->fa,
                          *restrict fb = t->fb, *restrict dy = t->dy;
    void *restrict y = t->c->out;
    for (int64_t j = 0; j < C; j++) s[j] = 0;
    for (int64_t r = r0; r < r1; r++) {
        const float *restrict dr = dy + r * C;
        for (int64_t j = 0; j < C; j++) {
            float xv = ld_act(xb, x, r * C + j);
            float g = act_bwd(k, k == ACT_NONE ? 0.0f : bn_norm(xv, m[j], fa[j], fb[j]), dr[j]);
            float v = a[j] * g + b[j] * (xv - m[j]) + d[j];
            put(b16, y, r * C + j, v);
            s[j] += v;
        }
    }
}


__attribute__((target_clones("avx512f", "avx2", "default"))) static void
ew_task(void *vctx, int ith, int nth) {
    const bn_ctx *t = vctx;
    int64_t lo, hi;
    sn_split_range(t->nchunks, ith, nth, &lo, &hi);
    int64_t r0 = lo * t->rows, r1 = hi * t->rows < t->M ? hi * t->rows : t->M;
    BY_VARIANT(t, ew_rows, t, r0, r1);
}

/* grad_x with the sum: each chunk's dx and its partial sums part[k][0..C) */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
gx_sum_task(void *vctx, int ith, int nth) {
    const bn_ctx *t = vctx;
    int64_t lo, hi;
    sn_split_range(t->nchunks, ith, nth, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) {
        int64_t r0 = k * t->rows, r1 = (k + 1) * t->rows < t->M ? (k + 1) * t->rows : t->M;
        float *s = t->part + k * 2 * t->C;
        BY_VARIANT(t, gx_sum_rows, t, r0, r1, s);
    }
}

static void run(sn_task_fn fn, bn_ctx *t) {
    run_tasks(fn, t, t->M * t->C, GRAIN, t->nchunks);
}

/* Adds the chunks' partials in chunk order: out[j] = sum_k part[k][j], j < width (2C, or C
 * for grad_x's sum) */
static void sum_parts(const bn_ctx *t, double *out, int64_t width) {
    for (int64_t j = 0; j < width; j++) out[j] = 0;
    for (int64_t k = 0; k < t->nchunks; k++) {
        const float *p = t->part + k * 2 * t->C;
        for (int64_t j = 0; j < width; j++) out[j] += p[j];
    }
}

/* scratch: the sums [2C] doubles, five coefficient vectors [C] floats, and for the two
 * reductions (and grad_x's sum) the partials [nchunks][2C] floats. The elementwise calls
 * ask for no partials:
 * the plan places each call's scratch for that call alone (plan_arena.c), and bn_train's runs
 * while its output and every earlier activation are live. */
static sn_status bn_prepare(sn_kcall *c, size_t *scratch) {
    int64_t M, C, rows, nchunks;
    bn_dims(c, &M, &C, &rows, &nchunks);
    bool reduces = c->op == SN_OP_BN_STATS || c->op == SN_OP_BN_GRAD_PARAMS || c->n_out2;
    *scratch = sizeof(float) * (size_t)((reduces ? nchunks * 2 * C : 0) + 5 * C) +
               sizeof(double) * (size_t)(2 * C);
    return SN_OK;
}

static sn_status bn_run(sn_kcall *c) {
    bn_ctx t = {.c = c, .xb = c->x[0].dtype == SN_BF16};
    bn_dims(c, &t.M, &t.C, &t.rows, &t.nchunks);
    const int64_t M = t.M, C = t.C;
    double *sum = c->scratch; /* first: doubles are the stricter alignment */
    float *coef = (float *)(sum + 2 * C), *a = coef, *b = coef + C, *d = coef + 2 * C;
    float *fa = coef + 3 * C, *fb = coef + 4 * C;
    t.part = coef + 5 * C;
    t.a = a, t.b = b, t.d = d, t.fa = fa, t.fb = fb;
    t.act = c->fused == SN_FUSED_BN_RELU ? ACT_RELU : c->fused == SN_FUSED_BN_RELU6 ? ACT_RELU6
                                                                                   : ACT_NONE;
    const float *st = c->in[1];
    float *out = c->out;
    const double eps = c->attr->norm.epsilon;
    switch (c->op) {
    case SN_OP_BN_STATS: {
        if (M == 0) {
            for (int64_t j = 0; j < 2 * C; j++) out[j] = 0;
            return SN_OK;
        }
        /* K: the first row, in float32 */
        for (int64_t j = 0; j < C; j++) a[j] = ld_act(t.xb, c->in[0], j);
        t.k = a;
        run(stats_task, &t);
        sum_parts(&t, sum, 2 * C);
        for (int64_t j = 0; j < C; j++) {
            double md = sum[j] / (double)M, v = sum[C + j] / (double)M - md * md;
            out[j] = (float)((double)a[j] + md);
            out[C + j] = (float)(v > 0 ? v : 0);
        }
        return SN_OK;
    }
    case SN_OP_BN_TRAIN:
        fwd_coefs(c, st, c->in[2], c->in[3], C, a, b);
        run(ew_task, &t);
        return SN_OK;
    case SN_OP_BN_GRAD_PARAMS: {
        t.mean = st;
        t.dy = c->in[t.act ? 3 : 2];
        if (t.act) fwd_coefs(c, st, c->in[4], c->in[5], C, fa, fb);
        run(gp_task, &t);
        sum_parts(&t, sum, 2 * C);
        for (int64_t j = 0; j < C; j++) {
            out[j] = (float)(sum[j] / sqrt((double)st[C + j] + eps));
            out[C + j] = (float)sum[C + j];
        }
        return SN_OK;
    }
    case SN_OP_BN_GRAD_X: {
        const float *ga = c->in[2], *dp = c->in[4];
        t.dy = c->in[t.act ? 5 : 3];
        if (t.act) fwd_coefs(c, st, ga, c->in[6], C, fa, fb);
        for (int64_t j = 0; j < C; j++) {
            double s = 1.0 / sqrt((double)st[C + j] + eps), gs = (double)ga[j] * s;
            a[j] = (float)gs;
            b[j] = (float)(-gs * s * (double)dp[j] / (double)M);
            d[j] = (float)(-gs * (double)dp[C + j] / (double)M);
        }
        if (!c->n_out2) {
            run(ew_task, &t);
            return SN_OK;
        }
        run(gx_sum_task, &t);
        sum_parts(&t, sum, C);
        float *bias_grad = c->out2[0];
        for (int64_t j = 0; j < C; j++) bias_grad[j] = (float)sum[j];
        return SN_OK;
    }
    default:
        return sn_errorf(SN_ERR_UNSUPPORTED, "cpu batch_norm kernel: op %d is not a bn_* op", (int)c->op);
    }
}

static bool bn_supports(const sn_kcall *c) {
    /* bn_train's and bn_grad_x's output may be bfloat16 (the plan stores it so where every
     * reader converts it: graph/plan_bf16.c) */
    bool writes_bf16 = c->op == SN_OP_BN_TRAIN || c->op == SN_OP_BN_GRAD_X;
    if (c->y.dtype != SN_F32 && !(c->y.dtype == SN_BF16 && writes_bf16)) return false;
    /* bfloat16 activations only where mixed bf16 computes in bf16 (elsewhere it keeps f32's
     * numbers, docs/kernels.md) */
    if ((c->y.dtype == SN_BF16 || c->x[0].dtype == SN_BF16) && !sn_cpu_bf16_pays()) return false;
    /* x may be bfloat16 (the plan stores a convolution's output so where this layer is its
     * only reader: graph/plan_bf16.c); every other input is float32 */
    if (c->x[0].dtype != SN_F32 && c->x[0].dtype != SN_BF16) return false;
    for (int i = 1; i < c->n_in; i++)
        if (c->x[i].dtype != SN_F32) return false;
    if (!c->fused) return c->n_out2 == 0;
    /* grad_x's sum: [C] floats */
    if (c->n_out2 && (c->op != SN_OP_BN_GRAD_X || c->n_out2 != 1 || c->y2[0].dtype != SN_F32 ||
                      sn_shape_numel(&c->y2[0].shape) != c->x[0].shape.dim[c->x[0].shape.ndim - 1]))
        return false;
    if (c->fused == SN_FUSED_BN_GRAD_SUM) return c->n_out2 == 1 && c->n_in == 5;
    /* the fused calls' inputs: the op's own, then dy (gradients) and gamma, beta as needed */
    int want = c->op == SN_OP_BN_TRAIN ? 4 : c->op == SN_OP_BN_GRAD_PARAMS ? 6
             : c->op == SN_OP_BN_GRAD_X ? 7 : -1;
    return (c->fused == SN_FUSED_BN_RELU || c->fused == SN_FUSED_BN_RELU6) && c->n_in == want;
}

static const sn_kernel k_bn = {.impl = "cpu", .supports = bn_supports, .prepare = bn_prepare,
                               .run = bn_run, .bf16_io = true};

void sn_cpu_register_batch_norm(sn_kernel_table *t) {
    t->k[SN_OP_BN_STATS] = &k_bn;
    t->k[SN_OP_BN_TRAIN] = &k_bn;
    t->k[SN_OP_BN_GRAD_PARAMS] = &k_bn;
    t->k[SN_OP_BN_GRAD_X] = &k_bn;
    t->fused[SN_FUSED_BN_RELU] = &k_bn;
    t->fused[SN_FUSED_BN_RELU6] = &k_bn;
    t->fused[SN_FUSED_BN_GRAD_SUM] = &k_bn;
}
