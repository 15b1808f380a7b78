/* sinter's own bf16 Winograd convolution, F(2x2, 3x3), for the wide 3x3 stride-1 layers under
 * mixed bf16 (sn_plan_opts.bf16_compute) on CPUs with AVX512-BF16: forward, backward-data and
 * backward-weights.
 *
 * Why: oneDNN 2.6 has no bf16 Winograd (3.x has no Winograd at all), and its f32 Winograd
 * (766 ms fwd+bwd on the guide CNN's 26x26x256->256 layer at batch 200) beats its bf16 direct
 * convolution (957 ms) on Zen 4, so under bf16 these layers ran f32 and the bf16 step was no
 * faster than the f32 one (issue 28). Here the transforms run in f32 and only the 16
 * transform-domain GEMMs run in bf16 (oneDNN's matmul: bf16 operands, f32 accumulation and
 * output), at twice the f32 rate on Zen 4, with 2.25x fewer multiplications than direct.
 *
 * F(2x2, 3x3) rather than F(4x4, 3x3): its transforms have coefficients 0, +-1 and +-1/2 only,
 * so the transformed operands are small sums of the inputs and one rounding to bf16 (8-bit
 * significand) each keeps the error within a few bf16 ulps of the direct sum's scale
 * (tests/test_conv_wino_bf16.c states the bound). F(4x4)'s transforms grow the operands by
 * up to ~10x and would spend that on bf16's 8 bits.
 *
 * Layouts (NHWC activations make channels the contiguous axis, so every transform is a fixed
 * linear combination of 16-channel vectors):
 *   V [16][T][Ci] bf16: B^T d B of each 4x4 input tile (T tiles of a batch slice);
 *   U [16][C][F] bf16: G g G^T of each filter (backward-data: [16][F][C], its GEMM's plain B);
 *   M [16][T][Co] f32 = V x U (16 GEMMs, one oneDNN matmul batched over the 16 positions);
 *   output: A^T M A, the 2x2 outputs of each tile, cropped at ragged edges.
 * Backward-data is the same on dy with the filter rotated by 180 degrees and its in/out
 * channels swapped (a full convolution: dy padded by kh-1-pt on top, kw-1-pl on the left).
 * Backward-weights differentiates the forward's Winograd form: with Z = A dY A^T of each 2x2
 * dy tile (f32, stored bf16), dL/dU = sum over tiles of Z (.) V, i.e. 16 GEMMs
 * [Ci x T] x [T x F] accumulated in f32 over the slices, then dw = G^T (dL/dU) G.
 *
 * The geometry, the transforms and the run's phases are shared with the f32 kernel for AVX2
 * CPUs (cpu_conv_wino_f32.c) through cpu_conv_wino_f23.h, instantiated here for 16-channel
 * AVX-512 vectors with bf16 operands.
 *
 * Memory: the batch runs in slices of images sized so that V and M (or V and Z) take about
 * WBF_SLICE_BYTES; everything lives in the plan's scratch (sized at prepare, nothing is
 * allocated per step). */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_conv_wino.h"
#include "backend/cpu/cpu_conv_wino_bf16.h"
#include "backend/cpu/cpu_conv_wino_f23.h"

bool sn_cpu_conv_wino_bf16_applies(const sn_kcall *c) {
    return sn_cpu_conv_wino_applies(c) && sn_cpu_conv_wino_wide(c) && sn_cpu()->avx512_bf16;
}

bool sn_cpu_conv_wino_bf16_enabled(void) {
    const char *e = sn_env(SN_ENV_CONV_ALGO);
    return !(e && (strcmp(e, "direct") == 0 || strcmp(e, "wino_f32") == 0));
}

#ifdef SN_HAVE_DNNL
#include "backend/cpu/dnnl_util.h"

/* Only called where sn_cpu_conv_wino_bf16_applies held, i.e. on CPUs with AVX512-BF16. */
#define TGT_WBF __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

/* Bytes of transformed operands per slice: the guide CNN's layer (144 tiles an image: 3.5 MB
 * of V and M, 2.4 MB of V and Z in backward-weights) runs one image a slice, so a slice's
 * operands stay in the caches between the transforms and the GEMMs instead of going to
 * memory and back; smaller images take more of them a slice, so each GEMM keeps about as many
 * rows. Measured on Zen 4 (32 MB of
 * L3, 1 MB of L2 a core; bench/bench_conv_wino_bf16 200 1 SLICE_MB, 4 alternating rounds,
 * best of each): the layer's three ops 540 ms at 4 MB and 2 MB (one image), 552 at 8, 593 at
 * 16, 610 at 48 (~13 images); the guide CNN's bf16 step 808 against 877 ms (medians of 4
 * alternating runs, 4 MB against 48). */
enum { WBF_SLICE_BYTES = 4 << 20 };
static size_t slice_bytes = WBF_SLICE_BYTES;

void sn_cpu_conv_wino_bf16_set_slice_bytes(size_t bytes) {
    slice_bytes = bytes ? bytes : WBF_SLICE_BYTES;
}

struct sn_cpu_wino_bf16 {
    sn_wino_geom g;
    sn_dnnl_op mm[2]; /* the 16 GEMMs of a slice; mm[1]: the last, shorter slice */
    /* Scratch: [0, off_u) the matmuls' scratchpad; U (bwd-weights: Z); V; M. */
    size_t off_u, off_v, off_m;
};

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

/* 16 GEMMs [m x k] x [k x n] -> f32 [m x n], bf16 operands; a_trans: A is stored [k][m]
 * (backward-weights' V); accumulate: the product is added to dst (a sum post-op). */
static sn_status mm_build(sn_dnnl_op *op, int64_t m, int64_t k, int64_t n, bool a_trans,
                          bool accumulate, size_t *bytes) {
    dnnl_engine_t eng;
    SN_TRY(sn_dnnl_engine(&eng));
    dnnl_memory_desc_t a, b, d;
    dnnl_dims_t ad = {16, m, k}, bd = {16, k, n}, dd = {16, m, n};
    dnnl_dims_t as = {m * k, a_trans ? 1 : k, a_trans ? m : 1};
    dnnl_dims_t bs = {k * n, n, 1};
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_strides(&a, 3, ad, dnnl_bf16, as));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_strides(&b, 3, bd, dnnl_bf16, bs));
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&d, 3, dd, dnnl_f32, dnnl_abc));
    dnnl_matmul_desc_t md;
    SN_DNNL_CHECK(dnnl_matmul_desc_init(&md, &a, &b, NULL, &d));
    dnnl_primitive_attr_t attr;
    SN_TRY(sn_dnnl_attr_user_scratchpad(&attr));
    dnnl_status_t st = dnnl_success;
    if (accumulate) {
        dnnl_post_ops_t po = NULL;
        st = dnnl_post_ops_create(&po);
        if (st == dnnl_success) st = dnnl_post_ops_append_sum(po, 1.0f);
        if (st == dnnl_success) st = dnnl_primitive_attr_set_post_ops(attr, po);
        if (po) dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd = NULL;
    if (st == dnnl_success) st = dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return sn_dnnl_error(st, "bf16 Winograd: matmul primitive descriptor", __FILE__,
                             __LINE__);
    const int arg[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    const dnnl_memory_desc_t *const user[3] = {&a, &b, &d};
    sn_status r = sn_dnnl_op_init(op, pd, arg, user, bytes);
    dnnl_primitive_desc_destroy(pd);
    return r;
}

sn_status sn_cpu_conv_wino_bf16_build(sn_cpu_wino_bf16 **out, const sn_kcall *c,
                                      size_t *scratch_bytes) {
    *out = NULL;
    *scratch_bytes = 0;
    sn_conv_geom g;
    if (!sn_conv_geom_of(c, &g) || !sn_cpu_conv_wino_bf16_applies(c))
        return sn_errorf(SN_ERR_UNSUPPORTED,
                         "bf16 Winograd convolution: node %d is not a 3x3 stride-1 convolution "
                         "with >= 128 channels (multiples of 16) on a CPU with AVX512-BF16",
                         (int)c->id);
    sn_cpu_wino_bf16 *w = sn_calloc(1, sizeof *w);
    if (!w) return SN_ERR_NOMEM;
    sn_wino_geom *e = &w->g;
    sn_wino_geom_init(e, c->op, &g);
    bool bwf = c->op == SN_OP_CONV2D_BWD_FILTER;
    sn_wino_geom_slice(e, 16 * (size_t)(bwf ? (e->ci + e->co) * 2 : e->ci * 2 + e->co * 4),
                       slice_bytes);
    int64_t tpi = e->th * e->tw, slices = (g.n + e->slice - 1) / e->slice;
    int64_t last = g.n - (slices - 1) * e->slice;
    int64_t t0 = e->slice * tpi, t1 = last * tpi;
    size_t b0 = 0, b1 = 0;
    sn_status st = bwf ? mm_build(&w->mm[0], g.c, t0, g.f, true, true, &b0)
                       : mm_build(&w->mm[0], t0, e->ci, e->co, false, false, &b0);
    if (st == SN_OK && last != e->slice)
        st = bwf ? mm_build(&w->mm[1], g.c, t1, g.f, true, true, &b1)
                 : mm_build(&w->mm[1], t1, e->ci, e->co, false, false, &b1);
    if (st != SN_OK) {
        sn_cpu_conv_wino_bf16_destroy(w);
        return sn_error_context(st, "bf16 Winograd convolution of node %d", (int)c->id);
    }
    size_t off = align64(b0 > b1 ? b0 : b1);
    size_t T = (size_t)t0;
    w->off_u = off;
    off += align64(bwf ? 16 * T * (size_t)g.f * 2 : 16 * (size_t)(e->ci * e->co) * 2);
    w->off_v = off;
    off += align64(16 * T * (size_t)e->ci * 2);
    w->off_m = off;
    off += align64(bwf ? 16 * (size_t)(g.c * g.f) * 4 : 16 * T * (size_t)e->co * 4);
    *scratch_bytes = off;
    *out = w;
    return SN_OK;
}

void sn_cpu_conv_wino_bf16_destroy(sn_cpu_wino_bf16 *w) {
    if (!w) return;
    sn_dnnl_op_destroy(&w->mm[0]);
    sn_dnnl_op_destroy(&w->mm[1]);
    free(w);
}

/* ---- transforms (cpu_conv_wino_f23.h: 16 channels an AVX-512 vector, bf16 operands) ---- */

TGT_WBF static inline void store_bf16(uint16_t *p, __m512 x) {
    _mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(x));
}

#define WV __m512
#define WV_LANES 16
#define WV_TGT TGT_WBF
#define WV_ELEM uint16_t
#define WV_LOAD(p) _mm512_loadu_ps(p)
#define WV_ZERO() _mm512_setzero_ps()
#define WV_SET1(x) _mm512_set1_ps(x)
#define WV_STORE(p, v) _mm512_storeu_ps((p), (v))
#define WV_STORE_ELEM(p, v) store_bf16((p), (v))
#define WVI __m512i
#define WV_GATHER_IDX(stride)                                                                  \
    _mm512_mullo_epi32(                                                                        \
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),               \
        _mm512_set1_epi32(stride))
#define WV_GATHER(p, idx) _mm512_i32gather_ps((idx), (p), 4)
#include "backend/cpu/cpu_conv_wino_f23.h"

typedef struct gemm_ctx {
    sn_cpu_wino_bf16 *w;
    void *scratch;
} gemm_ctx;

/* The 16 GEMMs of a slice as one batched oneDNN matmul (bf16 operands, f32 M; backward-
 * weights adds to M through its sum post-op). */
static sn_status gemm_bf16(void *ctx, const sn_wino_task *k) {
    gemm_ctx *x = ctx;
    return sn_dnnl_op_run(&x->w->mm[k->imgs == x->w->g.slice ? 0 : 1], k->v, k->u, k->m,
                          x->scratch);
}

sn_status sn_cpu_conv_wino_bf16_run(sn_cpu_wino_bf16 *w, const void *in0, const void *in1,
                                    void *out, void *scratch) {
    char *sc = scratch;
    sn_wino_task k = {.w = &w->g,
                      .u = sc + w->off_u,
                      .v = sc + w->off_v,
                      .m = (float *)(sc + w->off_m)};
    gemm_ctx x = {.w = w, .scratch = scratch};
    return wino_run(&k, in0, in1, out, gemm_bf16, &x);
}

#endif /* SN_HAVE_DNNL */
