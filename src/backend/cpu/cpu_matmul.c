/* MATMUL on the CPU: oneDNN matmul (the default where oneDNN is built, see docs/kernels.md
 * for the measurements) and OpenBLAS sgemm (builds without oneDNN, empty dimensions).
 *
 * Semantics (as the reference kernel): a [..., M, K] ([..., K, M] if ta), b [..., K, N]
 * ([..., N, K] if tb) -> y [..., M, N]; the leading (batch) dimensions of a and b are equal,
 * or one side has none (a 2-D operand is shared by every batch). f32 only; anything else
 * falls back to the reference kernel. With c->bf16 on a CPU with AVX512-BF16, oneDNN reads
 * bf16 copies of a and b made in scratch and accumulates and writes f32. */
#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/dnnl_util.h"

typedef struct mm_dims {
    int64_t batch, a_batch, b_batch; /* a_batch, b_batch are 1 or batch */
    int64_t m, n, k;
    bool ta, tb;
} mm_dims;

static int64_t lead_numel(const sn_shape *s) {
    int64_t p = 1;
    for (int i = 0; i < s->ndim - 2; i++) p *= s->dim[i];
    return p;
}

/* Reads the call's geometry; false when it is not an f32 matmul this file handles. */
static bool mm_dims_of(const sn_kcall *c, mm_dims *d) {
    if (c->n_in != 2 || c->y.dtype != SN_F32) return false;
    const sn_shape *as = &c->x[0].shape, *bs = &c->x[1].shape;
    if (c->x[0].dtype != SN_F32 || c->x[1].dtype != SN_F32) return false;
    if (as->ndim < 2 || bs->ndim < 2) return false;
    d->ta = c->attr->matmul.ta;
    d->tb = c->attr->matmul.tb;
    d->m = d->ta ? as->dim[as->ndim - 1] : as->dim[as->ndim - 2];
    d->k = d->ta ? as->dim[as->ndim - 2] : as->dim[as->ndim - 1];
    int64_t kb = d->tb ? bs->dim[bs->ndim - 1] : bs->dim[bs->ndim - 2];
    d->n = d->tb ? bs->dim[bs->ndim - 2] : bs->dim[bs->ndim - 1];
    if (kb != d->k) return false;
    d->a_batch = lead_numel(as);
    d->b_batch = lead_numel(bs);
    if (d->a_batch != d->b_batch && d->a_batch != 1 && d->b_batch != 1) return false;
    d->batch = d->a_batch > d->b_batch ? d->a_batch : d->b_batch;
    /* BLAS takes int dimensions and leading dimensions. */
    if (d->m > INT32_MAX || d->n > INT32_MAX || d->k > INT32_MAX) return false;
    return sn_shape_numel(&c->y.shape) == d->batch * d->m * d->n;
}

static bool mm_supports(const sn_kcall *c) {
    mm_dims d;
    return mm_dims_of(c, &d);
}

/* ---- OpenBLAS ----------------------------------------------------------------------------
 *
 * Results must not depend on the thread count. OpenBLAS's do: its kernels for some CPUs
 * (Haswell, Zen: what Debian's OpenBLAS 0.3.21 picks on AMD Zen 4 unless it detects
 * Cooperlake) give an element other bits when the same product is cut into other pieces,
 * and OpenBLAS cuts it by its own thread count (measured: 65 x 2048 x 16, 16 % of the
 * elements differ between 1 and 2 threads, and between one call and two half-calls). So
 * OpenBLAS always runs on one thread here, on tiles of C whose geometry follows from the
 * shape alone; the team takes the tiles. */

void sn_cpu_sgemm_1t(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t lda, const float *b, int64_t ldb, float beta, float *y, int64_t ldy) {
    /* OpenBLAS's OpenMP build runs one thread inside an active parallel region and otherwise
     * as many as omp_get_max_threads() says: outside a region, that is made 1 for the call. */
    int prev = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (prev > 1) omp_set_num_threads(1);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, y, (int)ldy);
    if (prev > 1) omp_set_num_threads(prev);
}

/* Tiles of one [m, n] product: whole columns in row blocks of tm, or whole rows in column
 * blocks of tn. From the shape only (never the team size): an even number of tiles asked for
 * (two threads share them evenly), one per 8 MFLOP or so (two from 4 MFLOP), at most 64; tm a
 * multiple of 32, tn of 64. Each tile is an OpenBLAS call that packs the whole of the other
 * operand again: at the earlier 2 MFLOP per tile (tm 16) the char Transformer's 768 x 512 x
 * 128 product ran at 58 GFLOP/s on one Zen 3 thread, against 76 with tm 64 and 84 as one call
 * (thread CPU clock). */
typedef struct mm_tiles {
    int64_t tm, tn, nm, nn; /* tile sizes and counts along m and n */
} mm_tiles;

static mm_tiles tiles_of(int64_t m, int64_t n, int64_t k) {
    double flops = 2.0 * (double)m * (double)n * (double)k;
    int64_t want = (int64_t)(flops / 8e6);
    if (flops >= 4e6 && want < 2) want = 2; /* two threads still share a mid-sized product */
    want = want < 1 ? 1 : want > 64 ? 64 : (want + 1) / 2 * 2;
    mm_tiles t = {.tm = m, .tn = n, .nm = 1, .nn = 1};
    if (want == 1 || m == 0 || n == 0) return t;
    if (m >= n) {
        t.tm = ((m + want - 1) / want + 31) / 32 * 32;
        t.nm = (m + t.tm - 1) / t.tm;
    } else {
        t.tn = ((n + want - 1) / want + 63) / 64 * 64;
        t.nn = (n + t.tn - 1) / t.tn;
    }
    return t;
}

typedef struct mm_tile_ctx {
    const mm_dims *d;
    mm_tiles t;
    int64_t rows;     /* m of each product (batch * m for one tall product) */
    int64_t products; /* 1, or the batch */
    const float *a, *b;
    float *y;
} mm_tile_ctx;

/* Tiles [lo, hi) of every product, in one fixed numbering. */
static void mm_tile_task(void *ctx, int ith, int nth) {
    const mm_tile_ctx *x = ctx;
    const mm_dims *d = x->d;
    int64_t per = x->t.nm * x->t.nn, lo, hi;
    sn_split_range(x->products * per, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int64_t p = i / per, r0 = (i % per) / x->t.nn * x->t.tm, c0 = (i % per) % x->t.nn * x->t.tn;
        int64_t mr = x->rows - r0 < x->t.tm ? x->rows - r0 : x->t.tm;
        int64_t nc = d->n - c0 < x->t.tn ? d->n - c0 : x->t.tn;
        const float *a = x->a + (d->a_batch > 1 ? p * d->m * d->k : 0);
        const float *b = x->b + (d->b_batch > 1 ? p * d->k * d->n : 0);
        float *y = x->y + p * x->rows * d->n + r0 * d->n + c0;
        /* a's rows r0.. (its columns when ta); b's columns c0.. (its rows when tb) */
        const float *at = d->ta ? a + r0 : a + r0 * d->k;
        const float *bt = d->tb ? b + c0 * d->k : b + c0;
        if (d->k == 0) {
            for (int64_t r = 0; r < mr; r++) memset(y + r * d->n, 0, sizeof(float) * (size_t)nc);
            continue;
        }
        sn_cpu_sgemm_1t(d->ta, d->tb, mr, nc, d->k, at, d->ta ? x->rows : d->k, bt,
                        d->tb ? d->k : d->n, 0.0f, y, d->n);
    }
}

/* a [..., M, K] ([..., K, M] if ta), b [..., K, N] ([..., N, K] if tb) -> y [..., M, N] */
static sn_status mm_blas_run(sn_kcall *c) {
    mm_dims d;
    SN_ASSERT(mm_dims_of(c, &d));
    if (d.batch == 0 || d.m == 0 || d.n == 0) return SN_OK;
    mm_tile_ctx x = {.d = &d, .rows = d.m, .products = d.batch, .a = c->in[0], .b = c->in[1],
                     .y = c->out};
    /* A batch of row-major a against one shared b is one tall product. */
    if (d.b_batch == 1 && !d.ta) {
        x.rows = d.batch * d.m;
        x.products = 1;
    }
    x.t = tiles_of(x.rows, d.n, d.k);
    int64_t tasks = x.products * x.t.nm * x.t.nn;
    int nth = sn_num_threads();
    sn_parallel(mm_tile_task, &x, (int)(tasks < nth ? tasks : nth));
    return SN_OK;
}

static const sn_kernel k_matmul_blas = {
    .impl = "openblas",
    .supports = mm_supports,
    .run = mm_blas_run,
};

/* ---- oneDNN ------------------------------------------------------------------------------ */
#ifdef SN_HAVE_DNNL

/* The call's state: the primitive, and where own_tb holds, the offset in scratch of our own
 * bf16 copy of b (mm_tb_bf16_task). */
typedef struct mm_dnnl_state {
    sn_dnnl_op op;
    mm_dims d;
    bool own_tb;
    size_t tb_off;
} mm_dnnl_state;

static void mm_dnnl_release(sn_kcall *c) {
    mm_dnnl_state *s = c->state;
    if (!s) return;
    sn_dnnl_op_destroy(&s->op);
    free(s);
    c->state = NULL;
}

/* own_tb (bf16 with tb, N a multiple of 32 and K of 16, where oneDNN takes b as plain bf16
 * [K, N]): we
 * make that copy ourselves. oneDNN's reorder of the transposed f32 b into it is a strided
 * transposition and was the slowest copy of the guide CNN's bf16 step: for dX = dY W^T of the
 * 147456 x 256 Dense kernel, 121 ms per call against 24 ms for the untransposed conversion of
 * the same W (DNNL_VERBOSE, one thread, loaded machine). Here b is transposed in registers,
 * rounded to bf16 the same way (vcvtne2ps2bf16: round to nearest even, as oneDNN's reorder on
 * AVX512-BF16) and stored a 64-byte line at a time: the same bits, so the product is
 * unchanged (tests/test_bf16.c). A first version gathered the columns (vgatherdps) and took
 * ~2x this one's time (perf samples, loaded machine). */
static bool own_tb_enabled = true;

void sn_cpu_matmul_set_own_tb(bool on) { own_tb_enabled = on; }

typedef struct mm_tb_ctx {
    const mm_dims *d;
    const float *b;  /* [b_batch][N][K] f32 */
    uint16_t *bt;    /* [b_batch][K][N] bf16 */
} mm_tb_ctx;

#define TGT_TB __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

/* r[i] (row i of a 16 x 16 f32 block) becomes column i: unpack, shuffle, then two rounds of
 * 128-bit-lane shuffles. */
TGT_TB static inline void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++) {
            t[8 * h + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0x88);
            t[8 * h + 4 + i] = _mm512_shuffle_f32x4(r[8 * h + i], r[8 * h + 4 + i], 0xDD);
        }
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
    }
}

/* 32 rows of b x 16 columns at a time: two 16 x 16 blocks transposed in registers, each
 * column's 32 values rounded and stored as one 64-byte line of the copy. */
TGT_TB static void mm_tb_bf16_task(void *ctx, int ith, int nth) {
    const mm_tb_ctx *x = ctx;
    int64_t n = x->d->n, k = x->d->k, blocks = n / 32, lo, hi;
    sn_split_range(x->d->b_batch * blocks, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int64_t p = i / blocks, n0 = i % blocks * 32;
        const float *src = x->b + (size_t)p * (size_t)(n * k) + (size_t)(n0 * k);
        uint16_t *dst = x->bt + (size_t)p * (size_t)(n * k) + (size_t)n0;
        for (int64_t k0 = 0; k0 < k; k0 += 16) {
            __m512 r0[16], r1[16];
            for (int j = 0; j < 16; j++) {
                r0[j] = _mm512_loadu_ps(src + j * k + k0);
                r1[j] = _mm512_loadu_ps(src + (16 + j) * k + k0);
            }
            transpose16(r0);
            transpose16(r1);
            for (int l = 0; l < 16; l++)
                _mm512_storeu_si512((void *)(dst + (size_t)(k0 + l) * (size_t)n),
                                    (__m512i)_mm512_cvtne2ps_pbh(r1[l], r0[l]));
        }
    }
}

/* bf16: the mixed precision of sn_plan_opts.bf16_compute: a and b are converted to bfloat16
 * in the layouts oneDNN picks (format any: blocked, VNNI-paired weights), and the primitive
 * accumulates and writes float32. */
/* keep_ta (bf16 with ta only): oneDNN reads a's bf16 copy in a's own transposed layout, so the
 * copy is a plain conversion. In the format oneDNN would pick (plain, untransposed) the copy is
 * a transposition: on the guide CNN's weight gradient X^T dY (X 200 x 147456) that reorder took
 * as long as the product itself (DNNL_VERBOSE, 2 cores: ~360-400 ms against ~340; ~50-70 ms
 * as a conversion, the product unchanged). Taken only where oneDNN runs it on brgemm, so a
 * shape it would hand to a slower kernel keeps the transposing copy. */
static sn_status mm_dnnl_build(sn_dnnl_op *s, const mm_dims *d, bool bf16, bool keep_ta,
                               bool own_tb, size_t *scratch_bytes) {
    dnnl_engine_t eng;
    SN_TRY(sn_dnnl_engine(&eng));
    /* Always 3-D: a batch dimension of 1 broadcasts. Transposes are permuted layouts. */
    dnnl_dims_t ad = {d->a_batch, d->m, d->k}, bd = {d->b_batch, d->k, d->n},
                yd = {d->batch, d->m, d->n};
    dnnl_memory_desc_t au, bu, ymd, ai, bi;
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&au, 3, ad, dnnl_f32, d->ta ? dnnl_acb : dnnl_abc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&bu, 3, bd, dnnl_f32, d->tb ? dnnl_acb : dnnl_abc));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&ymd, 3, yd, dnnl_f32, dnnl_abc));
    if (bf16) {
        SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&ai, 3, ad, dnnl_bf16,
                                                   keep_ta ? dnnl_acb : dnnl_format_tag_any));
        SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&bi, 3, bd, dnnl_bf16, dnnl_format_tag_any));
    } else {
        ai = au, bi = bu;
    }
    dnnl_matmul_desc_t md;
    SN_DNNL_CHECK(dnnl_matmul_desc_init(&md, &ai, &bi, NULL, &ymd));
    dnnl_primitive_attr_t attr;
    SN_TRY(sn_dnnl_attr_user_scratchpad(&attr));
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    /* Only brgemm: oneDNN's other matmul (gemm:jit, its only f32 one on CPUs without
     * AVX-512) cuts K by the team's size, so an element's bits would change with the thread
     * count (tests/test_thread_count.c; 4,087 of the stepper table's elements on an AMD
     * Zen 3). keep_ta also needs brgemm's speed to be worth it. */
    if (st == dnnl_success && strncmp(sn_dnnl_impl_name(pd), "brg", 3) != 0) {
        dnnl_primitive_desc_destroy(pd);
        return SN_ERR_UNSUPPORTED;
    }
    if (keep_ta && st == dnnl_unimplemented) return SN_ERR_UNSUPPORTED;
    SN_DNNL_CHECK(st);
    /* own_tb: b's operand must be plain bf16 [K, N], which our copy then is (no reorder). */
    dnnl_memory_desc_t bplain;
    if (own_tb) {
        SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&bplain, 3, bd, dnnl_bf16, dnnl_abc));
        const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        if (!wmd || !dnnl_memory_desc_equal(wmd, &bplain)) {
            dnnl_primitive_desc_destroy(pd);
            return SN_ERR_UNSUPPORTED;
        }
    }
    const int arg[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    const dnnl_memory_desc_t *user[3] = {&au, own_tb ? &bplain : &bu, &ymd};
    sn_status r = sn_dnnl_op_init(s, pd, arg, user, scratch_bytes);
    dnnl_primitive_desc_destroy(pd);
    return r;
}

static sn_status mm_dnnl_prepare(sn_kcall *c, size_t *scratch_bytes) {
    mm_dims d;
    SN_ASSERT(mm_dims_of(c, &d));
    *scratch_bytes = 0;
    c->state = NULL;
    /* oneDNN rejects empty dimensions: those (trivial) products run on sgemm. */
    if (d.m == 0 || d.n == 0 || d.k == 0 || d.batch == 0) return SN_OK;
    mm_dnnl_state *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    c->state = s;
    s->d = d;
    sn_status st = SN_ERR_UNSUPPORTED;
    /* Without AVX512-BF16 oneDNN would emulate bf16, slower than f32: stay f32 there, and
     * where bf16 arithmetic is no faster than f32 (sn_cpu_bf16_pays). */
    if (c->bf16 && sn_cpu_bf16_pays()) {
        /* keep_ta before own_tb: each is dropped where oneDNN will not take it. */
        bool own_tb = own_tb_enabled && d.tb && d.n % 32 == 0 && d.k % 16 == 0;
        for (int i = 0; i < 4 && st == SN_ERR_UNSUPPORTED; i++) {
            bool keep_ta = i < 2, own = i % 2 == 0;
            if ((keep_ta && !d.ta) || (own && !own_tb)) continue;
            st = mm_dnnl_build(&s->op, &d, true, keep_ta, own, scratch_bytes);
            s->own_tb = own && st == SN_OK;
        }
    }
    /* A oneDNN without a bf16 kernel for this shape: f32 is still correct. */
    if (st == SN_ERR_UNSUPPORTED) st = mm_dnnl_build(&s->op, &d, false, false, false, scratch_bytes);
    if (st == SN_ERR_UNSUPPORTED) {
        /* no brgemm for the shape on this CPU: the OpenBLAS tiles, whose bits do not
         * depend on the thread count (mm_dnnl_run without a state) */
        mm_dnnl_release(c);
        *scratch_bytes = 0;
        return SN_OK;
    }
    if (st != SN_OK) {
        mm_dnnl_release(c);
        return st;
    }
    if (s->own_tb) {
        s->tb_off = (*scratch_bytes + 63) & ~(size_t)63;
        *scratch_bytes = s->tb_off + (size_t)(d.b_batch * d.k * d.n) * 2;
    }
    return SN_OK;
}

/* a [..., M, K] ([..., K, M] if ta), b [..., K, N] ([..., N, K] if tb) -> y [..., M, N] */
static sn_status mm_dnnl_run(sn_kcall *c) {
    mm_dnnl_state *s = c->state;
    if (!s) return mm_blas_run(c);
    const void *b = c->in[1];
    if (s->own_tb) {
        mm_tb_ctx x = {.d = &s->d, .b = c->in[1], .bt = (uint16_t *)((char *)c->scratch + s->tb_off)};
        int64_t tasks = s->d.b_batch * (s->d.n / 32);
        int nth = sn_num_threads();
        sn_parallel(mm_tb_bf16_task, &x, (int)(tasks < nth ? tasks : nth));
        b = x.bt;
    }
    return sn_dnnl_op_run(&s->op, c->in[0], b, c->out, c->scratch);
}

static const sn_kernel k_matmul_dnnl = {
    .impl = "dnnl",
    .supports = mm_supports,
    .prepare = mm_dnnl_prepare,
    .run = mm_dnnl_run,
    .release = mm_dnnl_release,
};
#endif

const sn_kernel *sn_cpu_matmul_impl(const char *impl) {
    if (strcmp(impl, "openblas") == 0) return &k_matmul_blas;
#ifdef SN_HAVE_DNNL
    if (strcmp(impl, "dnnl") == 0) return &k_matmul_dnnl;
#endif
    return NULL;
}

void sn_cpu_register_matmul(sn_kernel_table *t) {
    /* oneDNN: 1.1-2.5x OpenBLAS on the seed CNN's dense shapes even with OpenBLAS's AVX-512
     * kernels, and 4x when OpenBLAS misdetects this CPU (docs/kernels.md). */
#ifdef SN_HAVE_DNNL
    t->k[SN_OP_MATMUL] = &k_matmul_dnnl;
#else
    t->k[SN_OP_MATMUL] = &k_matmul_blas;
#endif
}
