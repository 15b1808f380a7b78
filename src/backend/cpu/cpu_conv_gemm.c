/* Convolution as im2col + OpenBLAS sgemm, for CONV2D, CONV2D_BWD_DATA, CONV2D_BWD_FILTER.
 *
 * Written to measure against oneDNN (examples/bench_kernels.c, docs/kernels.md), and kept as
 * the kernel for builds without oneDNN. NHWC with HWIO weights makes im2col natural: the
 * column matrix of one image is [OH*OW, KH*KW*C] and the weights are already the matrix
 * [KH*KW*C, F], so
 *   forward      y_n  = col(x_n) . W
 *   backward dx  dx_n = col2im(dy_n . W^T)
 *   backward dW  dW   = sum_n col(x_n)^T . dy_n
 * Threads take whole images, each with its own column buffer in scratch, and call a
 * single-threaded sgemm (OpenBLAS's OpenMP build runs one thread inside a parallel region):
 * on few cores that beats splitting each image's small GEMM over the team. */
#include <string.h>

#include "backend/cpu/cpu_blas.h"

typedef struct conv_gemm_state {
    int nth;          /* threads the scratch was sized for */
    int groups;       /* CONV2D_BWD_FILTER: sample groups, each summed into its own buffer */
    size_t col_bytes; /* per thread, 64-byte rounded */
    size_t dw_bytes;  /* per group (groups 1..groups-1) for CONV2D_BWD_FILTER partial sums */
} conv_gemm_state;

/* The filter gradient sums over the samples in DW_GROUPS fixed groups (fewer with fewer
 * samples) and then adds the groups in order: the grouping follows from the batch alone, so
 * the bits do not depend on the thread count (a group per thread did). Up to 8 threads work
 * on this op at once. */
enum { DW_GROUPS = 8 };

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

static bool gemm_supports(const sn_kcall *c) {
    sn_conv_geom g;
    if (!sn_conv_geom_of(c, &g)) return false;
    int64_t kkc = g.kh * g.kw * g.c;
    return g.oh * g.ow <= INT32_MAX && kkc <= INT32_MAX;
}

static sn_status gemm_prepare(sn_kcall *c, size_t *scratch_bytes) {
    sn_conv_geom g;
    SN_ASSERT(sn_conv_geom_of(c, &g));
    conv_gemm_state *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    int nth = sn_num_threads();
    if (nth > g.n) nth = (int)g.n;
    s->nth = nth;
    s->groups = (int)(g.n < DW_GROUPS ? g.n : DW_GROUPS);
    s->col_bytes = round64((size_t)(g.oh * g.ow * g.kh * g.kw * g.c) * sizeof(float));
    s->dw_bytes = c->op == SN_OP_CONV2D_BWD_FILTER
                      ? round64((size_t)(g.kh * g.kw * g.c * g.f) * sizeof(float))
                      : 0;
    c->state = s;
    *scratch_bytes = (size_t)nth * s->col_bytes + (size_t)(s->groups - 1) * s->dw_bytes;
    return SN_OK;
}

static void gemm_release(sn_kcall *c) {
    free(c->state);
    c->state = NULL;
}

/* col [OH*OW, KH*KW*C] of image x_n [H, W, C]; padding reads as zero. */
static void im2col(const sn_conv_geom *g, const float *x, float *col) {
    const int64_t C = g->c, kwc = g->kw * C;
    for (int64_t oh = 0; oh < g->oh; oh++) {
        for (int64_t ow = 0; ow < g->ow; ow++) {
            float *row = col + (oh * g->ow + ow) * g->kh * kwc;
            for (int64_t kh = 0; kh < g->kh; kh++) {
                int64_t ih = oh * g->sh - g->pt + kh;
                float *dst = row + kh * kwc;
                if (ih < 0 || ih >= g->h) {
                    memset(dst, 0, (size_t)kwc * sizeof(float));
                    continue;
                }
                int64_t iw0 = ow * g->sw - g->pl;
                if (iw0 >= 0 && iw0 + g->kw <= g->w) { /* whole row of the window inside */
                    memcpy(dst, x + (ih * g->w + iw0) * C, (size_t)kwc * sizeof(float));
                    continue;
                }
                for (int64_t kw = 0; kw < g->kw; kw++) {
                    int64_t iw = iw0 + kw;
                    if (iw < 0 || iw >= g->w) memset(dst + kw * C, 0, (size_t)C * sizeof(float));
                    else memcpy(dst + kw * C, x + (ih * g->w + iw) * C, (size_t)C * sizeof(float));
                }
            }
        }
    }
}

/* dx_n [H, W, C] = sum of col's entries over the windows that read each cell. */
static void col2im(const sn_conv_geom *g, const float *col, float *dx) {
    const int64_t C = g->c;
    memset(dx, 0, (size_t)(g->h * g->w * C) * sizeof(float));
    for (int64_t oh = 0; oh < g->oh; oh++) {
        for (int64_t ow = 0; ow < g->ow; ow++) {
            const float *row = col + (oh * g->ow + ow) * g->kh * g->kw * C;
            for (int64_t kh = 0; kh < g->kh; kh++) {
                int64_t ih = oh * g->sh - g->pt + kh;
                if (ih < 0 || ih >= g->h) continue;
                for (int64_t kw = 0; kw < g->kw; kw++) {
                    int64_t iw = ow * g->sw - g->pl + kw;
                    if (iw < 0 || iw >= g->w) continue;
                    const float *src = row + (kh * g->kw + kw) * C;
                    float *d = dx + (ih * g->w + iw) * C;
                    for (int64_t ci = 0; ci < C; ci++) d[ci] += src[ci];
                }
            }
        }
    }
}

typedef struct gemm_ctx {
    const sn_kcall *c;
    const conv_gemm_state *s;
    sn_conv_geom g;
} gemm_ctx;

static void gemm_task(void *vctx, int ith, int nth) {
    gemm_ctx *t = vctx;
    const sn_conv_geom *g = &t->g;
    const sn_kcall *c = t->c;
    const int P = (int)(g->oh * g->ow), KKC = (int)(g->kh * g->kw * g->c), F = (int)g->f;
    const int64_t xsz = g->h * g->w * g->c, ysz = g->oh * g->ow * g->f;
    unsigned char *base = c->scratch;
    float *col = (float *)(base + (size_t)ith * t->s->col_bytes);
    int64_t lo, hi;
    sn_split_range(g->n, ith, nth, &lo, &hi);
    switch (c->op) {
    case SN_OP_CONV2D: {
        const float *x = c->in[0], *w = c->in[1];
        float *y = c->out;
        for (int64_t n = lo; n < hi; n++) {
            im2col(g, x + n * xsz, col);
            sn_cpu_sgemm_1t(false, false, P, F, KKC, col, KKC, w, F, 0.0f, y + n * ysz, F);
        }
        break;
    }
    case SN_OP_CONV2D_BWD_DATA: {
        const float *dy = c->in[0], *w = c->in[1];
        float *dx = c->out;
        for (int64_t n = lo; n < hi; n++) {
            sn_cpu_sgemm_1t(false, true, P, KKC, F, dy + n * ysz, F, w, F, 0.0f, col, KKC);
            col2im(g, col, dx + n * xsz);
        }
        break;
    }
    default: {
        const float *x = c->in[0], *dy = c->in[1];
        /* Group 0 sums into the output; the others into their own partial buffers. */
        int64_t g0, g1;
        sn_split_range(t->s->groups, ith, nth, &g0, &g1);
        for (int64_t gi = g0; gi < g1; gi++) {
            float *dw = gi == 0 ? (float *)c->out
                                : (float *)(base + (size_t)t->s->nth * t->s->col_bytes +
                                            (size_t)(gi - 1) * t->s->dw_bytes);
            sn_split_range(g->n, (int)gi, t->s->groups, &lo, &hi);
            if (lo == hi) memset(dw, 0, (size_t)KKC * (size_t)F * sizeof(float));
            for (int64_t n = lo; n < hi; n++) {
                im2col(g, x + n * xsz, col);
                sn_cpu_sgemm_1t(true, false, KKC, F, P, col, KKC, dy + n * ysz, F,
                                n == lo ? 0.0f : 1.0f, dw, F);
            }
        }
        break;
    }
    }
}

typedef struct dw_sum_ctx {
    float *out;
    const unsigned char *partials;
    size_t stride;
    int nparts;
    int64_t len;
} dw_sum_ctx;

static void dw_sum_task(void *vctx, int ith, int nth) {
    const dw_sum_ctx *t = vctx;
    int64_t lo, hi;
    sn_split_range(t->len, ith, nth, &lo, &hi);
    for (int p = 0; p < t->nparts; p++) {
        const float *src = (const float *)(t->partials + (size_t)p * t->stride);
        for (int64_t i = lo; i < hi; i++) t->out[i] += src[i];
    }
}

/* The three conv ops, shapes as in cpu_conv.c's conv_run (x, w, y NHWC / HWIO). */
static sn_status gemm_run(sn_kcall *c) {
    gemm_ctx t = {.c = c, .s = c->state};
    SN_ASSERT(sn_conv_geom_of(c, &t.g));
    sn_parallel(gemm_task, &t, t.s->nth);
    if (c->op == SN_OP_CONV2D_BWD_FILTER && t.s->groups > 1) {
        dw_sum_ctx d = {.out = c->out,
                        .partials = (unsigned char *)c->scratch + (size_t)t.s->nth * t.s->col_bytes,
                        .stride = t.s->dw_bytes,
                        .nparts = t.s->groups - 1,
                        .len = t.g.kh * t.g.kw * t.g.c * t.g.f};
        sn_parallel(dw_sum_task, &d, sn_num_threads());
    }
    return SN_OK;
}

static const sn_kernel k_conv_gemm = {
    .impl = "openblas",
    .supports = gemm_supports,
    .prepare = gemm_prepare,
    .run = gemm_run,
    .release = gemm_release,
};

const sn_kernel *sn_cpu_conv_gemm_kernel(void) { return &k_conv_gemm; }
