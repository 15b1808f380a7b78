/* Fast f32 reductions: sum, mean and max over any set of axes that folds into the pattern
 * x [A, R, B] -> out [A, B] (reduce all, the last axes, the leading axes, or a middle run of
 * axes such as H, W of an NHWC tensor). Other masks fall back to the reference kernel.
 *
 * Determinism: the order of every sum depends on the shape only, never on the thread count,
 * so the same input gives the same bits for any SN_NUM_THREADS (and on any ISA variant):
 *   - a row (B == 1) is summed in blocks of ROW_BLOCK elements; a block is summed in 32
 *     fixed lanes (lane j takes elements j, j+32, ...) then folded 16+16, 8+8, ..., and the
 *     block sums are added in block order. Threads compute whole blocks;
 *   - columns (B > 1) are summed row after row within blocks of COL_BLOCK rows, and the block
 *     partials are added in block order. Threads compute whole (block, column range) pieces.
 * Lanes and blocks are also more accurate than one running sum (errors grow with the block
 * length, not with R).
 *
 * Small calls (a bias gradient [32, 128] -> [128]) run on the calling thread without
 * entering a parallel region. The inner loops are compiled for AVX-512, AVX2 and baseline
 * x86-64 and chosen once via sn_cpu() (SN_CPU_ISA overrides, as in cpu_elementwise.c). */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_vec.h"
#include "backend/kernel.h"

enum {
    GRAIN = 32768,     /* elements below which one thread does the whole reduction */
    LANES = 32,        /* two AVX-512 registers: two independent add chains */
    ROW_BLOCK = 4096,  /* elements per block of a row sum */
    COL_BLOCK = 256,   /* rows per block of a column sum */
    COL_CHUNK = 1024,  /* columns per work piece of a column sum */
};

typedef enum { R_SUM, R_MEAN, R_MAX } red_kind;

/* ---- inner loops (maxnan: the NaN-propagating max of cpu_vec.h) ------------------------- */

INL float lanes_sum_body(const float *x, int64_t n) { return vec_lanes_sum(x, n, LANES); }

/* acc[b] = acc[b] (+ or max) x[r * ld + b] for r < rows, b < n: rows in order. */
INL void cols_body(int is_max, float *restrict acc, const float *restrict x, int64_t ld,
                   int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ld;
        if (is_max)
            for (int64_t b = 0; b < n; b++) acc[b] = maxnan(acc[b], xr[b]);
        else
            for (int64_t b = 0; b < n; b++) acc[b] += xr[b];
    }
}

typedef struct red_isa {
    const char *name;
    float (*lanes_sum)(const float *x, int64_t n);
    float (*lanes_max)(const float *x, int64_t n);
    void (*cols)(int is_max, float *acc, const float *x, int64_t ld, int64_t rows, int64_t n);
} red_isa;

static float lanes_sum_generic(const float *x, int64_t n) { return lanes_sum_body(x, n); }
static float lanes_max_generic(const float *x, int64_t n) { return vec_lanes_max(x, n); }
static void cols_generic(int is_max, float *acc, const float *x, int64_t ld, int64_t rows,
                         int64_t n) {
    if (is_max)
        cols_body(1, acc, x, ld, rows, n);
    else
        cols_body(0, acc, x, ld, rows, n);
}
static const red_isa isa_generic = {"cpu", lanes_sum_generic, lanes_max_generic, cols_generic};

#ifdef SN_CPU_X86
TGT_AVX512 static float lanes_sum_avx512(const float *x, int64_t n) { return lanes_sum_body(x, n); }
TGT_AVX512 static float lanes_max_avx512(const float *x, int64_t n) { return vec_lanes_max(x, n); }
TGT_AVX512 static void cols_avx512(int is_max, float *acc, const float *x, int64_t ld,
                                   int64_t rows, int64_t n) {
    if (is_max)
        cols_body(1, acc, x, ld, rows, n);
    else
        cols_body(0, acc, x, ld, rows, n);
}
static const red_isa isa_avx512 = {"avx512", lanes_sum_avx512, lanes_max_avx512, cols_avx512};

TGT_AVX2 static float lanes_sum_avx2(const float *x, int64_t n) { return lanes_sum_body(x, n); }
TGT_AVX2 static float lanes_max_avx2(const float *x, int64_t n) { return vec_lanes_max(x, n); }
TGT_AVX2 static void cols_avx2(int is_max, float *acc, const float *x, int64_t ld, int64_t rows,
                               int64_t n) {
    if (is_max)
        cols_body(1, acc, x, ld, rows, n);
    else
        cols_body(0, acc, x, ld, rows, n);
}
static const red_isa isa_avx2 = {"avx2", lanes_sum_avx2, lanes_max_avx2, cols_avx2};
#endif

static const red_isa *isa = &isa_generic;

/* ---- shape analysis --------------------------------------------------------------------- */

/* The reduction as x [A, R, B] -> [A, B]: size-1 axes are ignored, runs of kept or reduced
 * axes merge. False when the mask does not fold into that (kept, reduced, kept) pattern, or
 * the input is empty (the reference handles both). */
static bool red_shape(const sn_shape *xs, uint32_t mask_bits, int64_t *A, int64_t *R, int64_t *B) {
    int64_t grp[SN_MAX_DIMS];
    int flag[SN_MAX_DIMS], ng = 0;
    for (int d = 0; d < xs->ndim; d++) {
        if (xs->dim[d] == 0) return false;
        if (xs->dim[d] == 1) continue;
        int red = (mask_bits >> d) & 1u;
        if (ng > 0 && flag[ng - 1] == red) {
            grp[ng - 1] *= xs->dim[d];
        } else {
            flag[ng] = red;
            grp[ng++] = xs->dim[d];
        }
    }
    *A = *R = *B = 1;
    int g = 0;
    if (g < ng && !flag[g]) *A = grp[g++];
    if (g < ng && flag[g]) *R = grp[g++];
    if (g < ng && !flag[g]) *B = grp[g++];
    return g == ng;
}

/* ---- kernels ---------------------------------------------------------------------------- */

typedef struct red_ctx {
    red_kind kind;
    int64_t A, R, B;
    int64_t nblk, blk;    /* blocks along R and their length (elements or rows) */
    int64_t nchunk;       /* column pieces (B > 1) */
    const float *x;
    float *out, *part;    /* part: [A][nblk] (rows) or [A][nblk][B] (columns) when nblk > 1 */
} red_ctx;

static float finish(const red_ctx *c, float v) {
    return c->kind == R_MEAN ? v / (float)c->R : v;
}

/* Rows (B == 1): item = (a, block). */
static void rows_task(void *vctx, int ith, int nth) {
    const red_ctx *c = vctx;
    int64_t lo, hi;
    sn_split_range(c->A * c->nblk, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        int64_t a = it / c->nblk, k = it % c->nblk;
        int64_t b0 = k * c->blk, len = c->R - b0 < c->blk ? c->R - b0 : c->blk;
        const float *x = c->x + a * c->R + b0;
        float v = c->kind == R_MAX ? isa->lanes_max(x, len) : isa->lanes_sum(x, len);
        if (c->nblk == 1)
            c->out[a] = finish(c, v);
        else
            c->part[it] = v;
    }
}

/* Rows: block partials added in block order. */
static void rows_combine_task(void *vctx, int ith, int nth) {
    const red_ctx *c = vctx;
    int64_t lo, hi;
    sn_split_range(c->A, ith, nth, &lo, &hi);
    for (int64_t a = lo; a < hi; a++) {
        const float *p = c->part + a * c->nblk;
        float v = p[0];
        for (int64_t k = 1; k < c->nblk; k++) v = c->kind == R_MAX ? maxnan(v, p[k]) : v + p[k];
        c->out[a] = finish(c, v);
    }
}

/* Columns (B > 1): item = (a, block of rows, column chunk). */
static void cols_task(void *vctx, int ith, int nth) {
    const red_ctx *c = vctx;
    int64_t lo, hi;
    sn_split_range(c->A * c->nblk * c->nchunk, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        int64_t ch = it % c->nchunk, ak = it / c->nchunk, k = ak % c->nblk, a = ak / c->nblk;
        int64_t c0 = ch * COL_CHUNK, n = c->B - c0 < COL_CHUNK ? c->B - c0 : COL_CHUNK;
        int64_t r0 = k * c->blk, rows = c->R - r0 < c->blk ? c->R - r0 : c->blk;
        float *acc = (c->nblk == 1 ? c->out + a * c->B : c->part + ak * c->B) + c0;
        float init = c->kind == R_MAX ? -INFINITY : 0.0f;
        for (int64_t b = 0; b < n; b++) acc[b] = init;
        isa->cols(c->kind == R_MAX, acc, c->x + (a * c->R + r0) * c->B + c0, c->B, rows, n);
        if (c->nblk == 1 && c->kind == R_MEAN)
            for (int64_t b = 0; b < n; b++) acc[b] = finish(c, acc[b]);
    }
}

/* Columns: block partials added in block order; item = (a, column chunk). */
static void cols_combine_task(void *vctx, int ith, int nth) {
    const red_ctx *c = vctx;
    int64_t lo, hi;
    sn_split_range(c->A * c->nchunk, ith, nth, &lo, &hi);
    for (int64_t it = lo; it < hi; it++) {
        int64_t a = it / c->nchunk, c0 = (it % c->nchunk) * COL_CHUNK;
        int64_t n = c->B - c0 < COL_CHUNK ? c->B - c0 : COL_CHUNK;
        float *o = c->out + a * c->B + c0;
        const float *p = c->part + a * c->nblk * c->B + c0;
        memcpy(o, p, (size_t)n * sizeof(float));
        for (int64_t k = 1; k < c->nblk; k++) isa->cols(c->kind == R_MAX, o, p + k * c->B, 0, 1, n);
        if (c->kind == R_MEAN)
            for (int64_t b = 0; b < n; b++) o[b] = finish(c, o[b]);
    }
}

static void red_layout(const sn_kcall *k, red_ctx *c) {
    SN_ASSERT(red_shape(&k->x[0].shape, k->attr->reduce.mask, &c->A, &c->R, &c->B));
    if (c->B == 1) {
        c->blk = ROW_BLOCK;
        c->nchunk = 1;
    } else {
        c->blk = COL_BLOCK;
        c->nchunk = (c->B + COL_CHUNK - 1) / COL_CHUNK;
    }
    c->nblk = (c->R + c->blk - 1) / c->blk;
}

static size_t part_bytes(const red_ctx *c) {
    return c->nblk > 1 ? (size_t)(c->A * c->nblk * c->B) * sizeof(float) : 0;
}

static bool reduce_supports(const sn_kcall *c) {
    int64_t A, R, B;
    return c->n_in == 1 && c->x[0].dtype == SN_F32 && c->y.dtype == SN_F32 &&
           red_shape(&c->x[0].shape, c->attr->reduce.mask, &A, &R, &B);
}

static sn_status reduce_prepare(sn_kcall *k, size_t *scratch_bytes) {
    red_ctx c;
    red_layout(k, &c);
    *scratch_bytes = part_bytes(&c);
    return SN_OK;
}

/* x [any] f32 -> x's shape with the masked axes reduced (as [A, R, B] -> [A, B]) */
static sn_status reduce_common(sn_kcall *k, red_kind kind) {
    red_ctx c = {.kind = kind, .x = k->in[0], .out = k->out};
    red_layout(k, &c);
    size_t need = part_bytes(&c);
    void *own = NULL;
    if (need > 0) {
        /* The executor provides the scratch asked for in prepare; a caller that skipped
         * prepare (an eager call) gets it allocated here. */
        if (k->scratch && k->scratch_bytes >= need) {
            c.part = k->scratch;
        } else {
            own = sn_malloc(need);
            if (!own) return SN_ERR_NOMEM;
            c.part = own;
        }
    }
    int64_t work = c.A * c.R * c.B;
    if (c.B == 1) {
        run_tasks(rows_task, &c, work, GRAIN, c.A * c.nblk);
        if (c.nblk > 1) run_tasks(rows_combine_task, &c, c.A * c.nblk, GRAIN, c.A);
    } else {
        run_tasks(cols_task, &c, work, GRAIN, c.A * c.nblk * c.nchunk);
        if (c.nblk > 1) run_tasks(cols_combine_task, &c, c.A * c.nblk * c.B, GRAIN,
                                  c.A * c.nchunk);
    }
    free(own);
    return SN_OK;
}

static sn_status reduce_sum_run(sn_kcall *k) { return reduce_common(k, R_SUM); }
static sn_status reduce_mean_run(sn_kcall *k) { return reduce_common(k, R_MEAN); }
static sn_status reduce_max_run(sn_kcall *k) { return reduce_common(k, R_MAX); }

#define RED_KERNEL(fn) {.impl = "cpu", .supports = reduce_supports, .prepare = reduce_prepare, .run = fn}
static sn_kernel k_sum = RED_KERNEL(reduce_sum_run), k_mean = RED_KERNEL(reduce_mean_run),
                 k_max = RED_KERNEL(reduce_max_run);

void sn_cpu_register_reduce(sn_kernel_table *t) {
#ifdef SN_CPU_X86
    isa = pick_variant(&isa_generic, &isa_avx2, &isa_avx512);
#endif
    k_sum.impl = k_mean.impl = k_max.impl = isa->name;
    t->k[SN_OP_REDUCE_SUM] = &k_sum;
    t->k[SN_OP_REDUCE_MEAN] = &k_mean;
    t->k[SN_OP_REDUCE_MAX] = &k_max;
}
