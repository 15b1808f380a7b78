/* MATMUL on the CPU: oneDNN matmul (the default where oneDNN is built, see docs/kernels.md
 * for the measurements) and OpenBLAS sgemm (builds without oneDNN, empty dimensions).
 *
 * Semantics (as the reference kernel): a [..., M, K] ([..., K, M] if ta), b [..., K, N]
 * ([..., N, K] if tb) -> y [..., M, N]; the leading (batch) dimensions of a and b are equal,
 * or one side has none (a 2-D operand is shared by every batch). f32 only; anything else
 * falls back to the reference kernel. With c->bf16 on a CPU with AVX512-BF16, oneDNN reads
 * bf16 copies of a and b made in scratch and accumulates and writes f32. */
#include <cblas.h>
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

/* ---- OpenBLAS ---------------------------------------------------------------------------- */

static void gemm_one(const mm_dims *d, const float *a, const float *b, float *y, int64_t m) {
    if (m == 0 || d->n == 0) return;
    if (d->k == 0) {
        memset(y, 0, (size_t)(m * d->n) * sizeof(float));
        return;
    }
    cblas_sgemm(CblasRowMajor, d->ta ? CblasTrans : CblasNoTrans,
                d->tb ? CblasTrans : CblasNoTrans, (int)m, (int)d->n, (int)d->k, 1.0f, a,
                d->ta ? (int)m : (int)d->k, b, d->tb ? (int)d->k : (int)d->n, 0.0f, y,
                (int)d->n);
}

typedef struct mm_batch_ctx {
    const mm_dims *d;
    const float *a, *b;
    float *y;
} mm_batch_ctx;

/* One thread per slice of the batch, sgemm single-threaded inside (OpenBLAS's OpenMP build
 * runs one thread when called inside a parallel region). Small matrices gain more from this
 * than from splitting one tiny GEMM over the team. */
static void mm_batch_task(void *ctx, int ith, int nth) {
    const mm_batch_ctx *t = ctx;
    const mm_dims *d = t->d;
    int64_t lo, hi;
    sn_split_range(d->batch, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        gemm_one(d, t->a + (d->a_batch > 1 ? i * d->m * d->k : 0),
                 t->b + (d->b_batch > 1 ? i * d->k * d->n : 0), t->y + i * d->m * d->n, d->m);
}

/* a [..., M, K] ([..., K, M] if ta), b [..., K, N] ([..., N, K] if tb) -> y [..., M, N] */
static sn_status mm_blas_run(sn_kcall *c) {
    mm_dims d;
    SN_ASSERT(mm_dims_of(c, &d));
    const float *a = c->in[0], *b = c->in[1];
    float *y = c->out;
    /* A batch of row-major a against one shared b is one tall GEMM. */
    if (d.b_batch == 1 && !d.ta) {
        gemm_one(&d, a, b, y, d.batch * d.m);
        return SN_OK;
    }
    int nth = sn_num_threads();
    double flops = 2.0 * (double)d.m * (double)d.n * (double)d.k;
    if (d.batch >= nth && nth > 1 && flops < 4e6) {
        mm_batch_ctx t = {&d, a, b, y};
        sn_parallel(mm_batch_task, &t, nth);
        return SN_OK;
    }
    for (int64_t i = 0; i < d.batch; i++)
        gemm_one(&d, a + (d.a_batch > 1 ? i * d.m * d.k : 0),
                 b + (d.b_batch > 1 ? i * d.k * d.n : 0), y + i * d.m * d.n, d.m);
    return SN_OK;
}

static const sn_kernel k_matmul_blas = {
    .impl = "openblas",
    .supports = mm_supports,
    .run = mm_blas_run,
};

/* ---- oneDNN ------------------------------------------------------------------------------ */
#ifdef SN_HAVE_DNNL

static void mm_dnnl_release(sn_kcall *c) {
    sn_dnnl_op *s = c->state;
    if (!s) return;
    sn_dnnl_op_destroy(s);
    free(s);
    c->state = NULL;
}

/* bf16: the mixed precision of sn_plan_opts.bf16_compute: a and b are converted to bfloat16
 * in the layouts oneDNN picks (format any: blocked, VNNI-paired weights), and the primitive
 * accumulates and writes float32. */
static sn_status mm_dnnl_build(sn_dnnl_op *s, const mm_dims *d, bool bf16, size_t *scratch_bytes) {
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
        SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&ai, 3, ad, dnnl_bf16, dnnl_format_tag_any));
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
    SN_DNNL_CHECK(st);
    const int arg[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    const dnnl_memory_desc_t *user[3] = {&au, &bu, &ymd};
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
    sn_dnnl_op *s = sn_calloc(1, sizeof *s);
    if (!s) return SN_ERR_NOMEM;
    c->state = s;
    sn_status st = SN_ERR_UNSUPPORTED;
    /* Without AVX512-BF16 oneDNN would emulate bf16, slower than f32: stay f32 there. */
    if (c->bf16 && sn_cpu()->avx512_bf16) st = mm_dnnl_build(s, &d, true, scratch_bytes);
    /* A oneDNN without a bf16 kernel for this shape: f32 is still correct. */
    if (st == SN_ERR_UNSUPPORTED) st = mm_dnnl_build(s, &d, false, scratch_bytes);
    if (st != SN_OK) mm_dnnl_release(c);
    return st;
}

/* a [..., M, K] ([..., K, M] if ta), b [..., K, N] ([..., N, K] if tb) -> y [..., M, N] */
static sn_status mm_dnnl_run(sn_kcall *c) {
    sn_dnnl_op *s = c->state;
    if (!s) return mm_blas_run(c);
    return sn_dnnl_op_run(s, c->in[0], c->in[1], c->out, c->scratch);
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
