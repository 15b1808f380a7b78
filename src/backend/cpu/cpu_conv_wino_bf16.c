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
 * Memory: the batch runs in slices of images sized so that V and M (or V and Z) take about
 * WBF_SLICE_BYTES; everything lives in the plan's scratch (sized at prepare, nothing is
 * allocated per step). */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_conv_wino.h"
#include "backend/cpu/cpu_conv_wino_bf16.h"

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

/* Bytes of transformed operands per slice: the guide CNN's layer (144 tiles an image) takes
 * ~13 images in forward; enough rows per GEMM (~1900) for oneDNN's bf16 kernels, and scratch
 * stays far below oneDNN f32 Winograd's (~950 MB at batch 200). Not tuned (no quiet
 * machine yet). */
enum { WBF_SLICE_BYTES = 48 << 20 };
static size_t slice_bytes = WBF_SLICE_BYTES;

void sn_cpu_conv_wino_bf16_set_slice_bytes(size_t bytes) {
    slice_bytes = bytes ? bytes : WBF_SLICE_BYTES;
}

struct sn_cpu_wino_bf16 {
    sn_op kind;
    int64_t n;          /* images */
    int64_t c, f;       /* the filter's input and output channels */
    int64_t hi, wi, ci; /* the transformed input: x (fwd, bwd-weights) or dy (bwd-data) */
    int64_t ho, wo, co; /* what the tiles cover: y (fwd), dy (bwd-weights), dx (bwd-data) */
    int64_t pt, pl;     /* input rows/columns before the first tile's first (zero padding) */
    int64_t th, tw;     /* tiles per image, down and across */
    int64_t slice;      /* images per slice (the last may be shorter: mm[1]) */
    sn_dnnl_op mm[2];
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
    w->kind = c->op;
    w->n = g.n, w->c = g.c, w->f = g.f;
    if (c->op == SN_OP_CONV2D_BWD_DATA) {
        w->hi = g.oh, w->wi = g.ow, w->ci = g.f, w->ho = g.h, w->wo = g.w, w->co = g.c;
        w->pt = g.kh - 1 - g.pt, w->pl = g.kw - 1 - g.pl;
    } else {
        w->hi = g.h, w->wi = g.w, w->ci = g.c, w->ho = g.oh, w->wo = g.ow, w->co = g.f;
        w->pt = g.pt, w->pl = g.pl;
    }
    w->th = (w->ho + 1) / 2, w->tw = (w->wo + 1) / 2;
    int64_t tpi = w->th * w->tw;
    bool bwf = c->op == SN_OP_CONV2D_BWD_FILTER;
    size_t per_image = (size_t)(16 * tpi) * (size_t)(bwf ? (w->ci + w->co) * 2
                                                          : w->ci * 2 + w->co * 4);
    int64_t slice = (int64_t)(slice_bytes / per_image);
    if (slice < 1) slice = 1;
    if (slice > g.n) slice = g.n;
    int64_t slices = (g.n + slice - 1) / slice;
    w->slice = (g.n + slices - 1) / slices; /* even slices */
    int64_t last = g.n - (slices - 1) * w->slice;
    int64_t t0 = w->slice * tpi, t1 = last * tpi;
    size_t b0 = 0, b1 = 0;
    sn_status st = bwf ? mm_build(&w->mm[0], g.c, t0, g.f, true, true, &b0)
                       : mm_build(&w->mm[0], t0, w->ci, w->co, false, false, &b0);
    if (st == SN_OK && last != w->slice)
        st = bwf ? mm_build(&w->mm[1], g.c, t1, g.f, true, true, &b1)
                 : mm_build(&w->mm[1], t1, w->ci, w->co, false, false, &b1);
    if (st != SN_OK) {
        sn_cpu_conv_wino_bf16_destroy(w);
        return sn_error_context(st, "bf16 Winograd convolution of node %d", (int)c->id);
    }
    size_t off = align64(b0 > b1 ? b0 : b1);
    size_t T = (size_t)t0;
    w->off_u = off;
    off += align64(bwf ? 16 * T * (size_t)g.f * 2 : 16 * (size_t)(w->ci * w->co) * 2);
    w->off_v = off;
    off += align64(16 * T * (size_t)w->ci * 2);
    w->off_m = off;
    off += align64(bwf ? 16 * (size_t)(g.c * g.f) * 4 : 16 * T * (size_t)w->co * 4);
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

/* ---- transforms (f32, 16 channels a vector) --------------------------------------------- */

typedef struct wbf_task {
    const sn_cpu_wino_bf16 *w;
    const float *src;   /* the slice's first image (input / output transforms), or w */
    float *dst;         /* the slice's first output image, or dw */
    const float *dy;    /* backward-weights: the slice's first dy image */
    uint16_t *u, *v;    /* transformed bf16 operands */
    float *m;           /* transform-domain products */
    int64_t imgs;       /* images in this slice */
} wbf_task;

TGT_WBF static inline void store_bf16(uint16_t *p, __m512 x) {
    _mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(x));
}

/* Tile t of the slice: image, and the top-left input element (may lie in the padding). */
static inline void tile_of(const sn_cpu_wino_bf16 *w, int64_t t, int64_t *img, int64_t *ty,
                           int64_t *tx) {
    int64_t tpi = w->th * w->tw, r = t % tpi;
    *img = t / tpi, *ty = r / w->tw, *tx = r % w->tw;
}

/* V = B^T d B of each 4x4 input tile (zero outside the input), B^T = [1 0 -1 0; 0 1 1 0;
 * 0 -1 1 0; 0 1 0 -1]. */
TGT_WBF static void input_tf_task(void *ctx, int ith, int nth) {
    const wbf_task *k = ctx;
    const sn_cpu_wino_bf16 *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, lo, hi, ci = w->ci;
    sn_split_range(T, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int64_t img, ty, tx;
        tile_of(w, t, &img, &ty, &tx);
        int64_t y0 = ty * 2 - w->pt, x0 = tx * 2 - w->pl;
        const float *base = k->src + img * w->hi * w->wi * ci;
        const float *row[4][4];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                int64_t y = y0 + i, x = x0 + j;
                row[i][j] = y >= 0 && y < w->hi && x >= 0 && x < w->wi
                                ? base + (y * w->wi + x) * ci
                                : NULL;
            }
        for (int64_t cc = 0; cc < ci; cc += 16) {
            __m512 d[4][4], s[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    d[i][j] = row[i][j] ? _mm512_loadu_ps(row[i][j] + cc) : _mm512_setzero_ps();
            for (int j = 0; j < 4; j++) {
                s[0][j] = _mm512_sub_ps(d[0][j], d[2][j]);
                s[1][j] = _mm512_add_ps(d[1][j], d[2][j]);
                s[2][j] = _mm512_sub_ps(d[2][j], d[1][j]);
                s[3][j] = _mm512_sub_ps(d[1][j], d[3][j]);
            }
            for (int i = 0; i < 4; i++) {
                __m512 v[4] = {_mm512_sub_ps(s[i][0], s[i][2]), _mm512_add_ps(s[i][1], s[i][2]),
                               _mm512_sub_ps(s[i][2], s[i][1]), _mm512_sub_ps(s[i][1], s[i][3])};
                for (int j = 0; j < 4; j++)
                    store_bf16(k->v + ((size_t)(i * 4 + j) * (size_t)T + (size_t)t) * ci + cc,
                               v[j]);
            }
        }
    }
}

/* Y = A^T M A of each tile, A^T = [1 1 1 0; 0 1 -1 -1]; outputs past the edge dropped. */
TGT_WBF static void output_tf_task(void *ctx, int ith, int nth) {
    const wbf_task *k = ctx;
    const sn_cpu_wino_bf16 *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, lo, hi, co = w->co;
    sn_split_range(T, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int64_t img, ty, tx;
        tile_of(w, t, &img, &ty, &tx);
        float *base = k->dst + img * w->ho * w->wo * co;
        int64_t oy = ty * 2, ox = tx * 2;
        bool down = oy + 1 < w->ho, right = ox + 1 < w->wo;
        for (int64_t cc = 0; cc < co; cc += 16) {
            __m512 m[4][4], s[2][4];
            for (int p = 0; p < 16; p++)
                m[p / 4][p % 4] =
                    _mm512_loadu_ps(k->m + ((size_t)p * (size_t)T + (size_t)t) * co + cc);
            for (int j = 0; j < 4; j++) {
                s[0][j] = _mm512_add_ps(_mm512_add_ps(m[0][j], m[1][j]), m[2][j]);
                s[1][j] = _mm512_sub_ps(_mm512_sub_ps(m[1][j], m[2][j]), m[3][j]);
            }
            for (int a = 0; a < 2; a++) {
                if (a == 1 && !down) break;
                float *o = base + ((oy + a) * w->wo + ox) * co + cc;
                _mm512_storeu_ps(o, _mm512_add_ps(_mm512_add_ps(s[a][0], s[a][1]), s[a][2]));
                if (right)
                    _mm512_storeu_ps(o + co,
                                     _mm512_sub_ps(_mm512_sub_ps(s[a][1], s[a][2]), s[a][3]));
            }
        }
    }
}

/* Backward-weights: Z = A dY A^T of each 2x2 dy tile (zero past the edge), into k->u as
 * [16][T][F] bf16. */
TGT_WBF static void dy_tf_task(void *ctx, int ith, int nth) {
    const wbf_task *k = ctx;
    const sn_cpu_wino_bf16 *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, lo, hi, f = w->co;
    sn_split_range(T, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int64_t img, ty, tx;
        tile_of(w, t, &img, &ty, &tx);
        const float *base = k->dy + img * w->ho * w->wo * f;
        int64_t oy = ty * 2, ox = tx * 2;
        const float *row[2][2];
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++)
                row[a][b] = oy + a < w->ho && ox + b < w->wo
                                ? base + ((oy + a) * w->wo + ox + b) * f
                                : NULL;
        for (int64_t cc = 0; cc < f; cc += 16) {
            __m512 y[2][2], r[4][2];
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    y[a][b] = row[a][b] ? _mm512_loadu_ps(row[a][b] + cc) : _mm512_setzero_ps();
            for (int b = 0; b < 2; b++) {
                r[0][b] = y[0][b];
                r[1][b] = _mm512_add_ps(y[0][b], y[1][b]);
                r[2][b] = _mm512_sub_ps(y[0][b], y[1][b]);
                r[3][b] = _mm512_sub_ps(_mm512_setzero_ps(), y[1][b]);
            }
            for (int i = 0; i < 4; i++) {
                __m512 z[4] = {r[i][0], _mm512_add_ps(r[i][0], r[i][1]),
                               _mm512_sub_ps(r[i][0], r[i][1]),
                               _mm512_sub_ps(_mm512_setzero_ps(), r[i][1])};
                for (int j = 0; j < 4; j++)
                    store_bf16(k->u + ((size_t)(i * 4 + j) * (size_t)T + (size_t)t) * f + cc,
                               z[j]);
            }
        }
    }
}

/* U = G g G^T of one 3x3 filter, 16 filters (or input channels) a vector, G = [1 0 0; 1/2 1/2
 * 1/2; 1/2 -1/2 1/2; 0 0 1]; u[i * 4 + j] is transform position (i, j). */
TGT_WBF static inline void filter_tf(__m512 g[3][3], __m512 u[16]) {
    const __m512 half = _mm512_set1_ps(0.5f);
    __m512 t[4][3];
    for (int kx = 0; kx < 3; kx++) {
        __m512 s02 = _mm512_add_ps(g[0][kx], g[2][kx]);
        t[0][kx] = g[0][kx];
        t[1][kx] = _mm512_mul_ps(half, _mm512_add_ps(s02, g[1][kx]));
        t[2][kx] = _mm512_mul_ps(half, _mm512_sub_ps(s02, g[1][kx]));
        t[3][kx] = g[2][kx];
    }
    for (int i = 0; i < 4; i++) {
        __m512 s02 = _mm512_add_ps(t[i][0], t[i][2]);
        u[i * 4 + 0] = t[i][0];
        u[i * 4 + 1] = _mm512_mul_ps(half, _mm512_add_ps(s02, t[i][1]));
        u[i * 4 + 2] = _mm512_mul_ps(half, _mm512_sub_ps(s02, t[i][1]));
        u[i * 4 + 3] = t[i][2];
    }
}

/* Forward: U [16][C][F] bf16 from g = w[., ., c, f], for the filter's input channels [lo, hi),
 * 16 output channels a vector. */
TGT_WBF static void filter_tf_task(void *ctx, int ith, int nth) {
    const wbf_task *k = ctx;
    const sn_cpu_wino_bf16 *w = k->w;
    int64_t C = w->c, F = w->f, lo, hi;
    sn_split_range(C, ith, nth, &lo, &hi);
    for (int64_t c = lo; c < hi; c++)
        for (int64_t f = 0; f < F; f += 16) {
            __m512 g[3][3], u[16];
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++)
                    g[ky][kx] = _mm512_loadu_ps(k->src + ((ky * 3 + kx) * C + c) * F + f);
            filter_tf(g, u);
            for (int p = 0; p < 16; p++)
                store_bf16(k->u + ((size_t)p * (size_t)C + (size_t)c) * (size_t)F + (size_t)f,
                           u[p]);
        }
}

/* Backward-data: U [16][F][C] bf16 (the GEMM's B, [K = F][N = C], plain) from the rotated
 * filter g = w[2 - ., 2 - ., c, f], for filters [lo, hi), 16 input channels a vector
 * (gathered at stride F). The same sums as filter_tf_task's, transposed: written this way the
 * GEMM reads a plain B; read through strides ([16][C][F] as transposed B), oneDNN's brgemm
 * copied it transposed and ran 6-9 % slower per row than the forward's (DNNL_VERBOSE, guide
 * CNN, one thread, loaded machine). */
TGT_WBF static void filter_tf_rot_task(void *ctx, int ith, int nth) {
    const wbf_task *k = ctx;
    const sn_cpu_wino_bf16 *w = k->w;
    int64_t C = w->c, F = w->f, lo, hi;
    sn_split_range(F, ith, nth, &lo, &hi);
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)F));
    for (int64_t f = lo; f < hi; f++)
        for (int64_t c = 0; c < C; c += 16) {
            __m512 g[3][3], u[16];
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) {
                    int tap = (2 - ky) * 3 + (2 - kx);
                    g[ky][kx] = _mm512_i32gather_ps(idx, k->src + (tap * C + c) * F + f, 4);
                }
            filter_tf(g, u);
            for (int p = 0; p < 16; p++)
                store_bf16(k->u + ((size_t)p * (size_t)F + (size_t)f) * (size_t)C + (size_t)c,
                           u[p]);
        }
}

/* Backward-weights: dw = G^T (dL/dU) G from M [16][C][F] (f32), for input channels [lo, hi),
 * 16 filters a vector. */
TGT_WBF static void filter_grad_task(void *ctx, int ith, int nth) {
    const wbf_task *k = ctx;
    const sn_cpu_wino_bf16 *w = k->w;
    int64_t C = w->c, F = w->f, lo, hi;
    sn_split_range(C, ith, nth, &lo, &hi);
    const __m512 half = _mm512_set1_ps(0.5f);
    for (int64_t c = lo; c < hi; c++)
        for (int64_t f = 0; f < F; f += 16) {
            __m512 m[4][4], t[3][4];
            for (int p = 0; p < 16; p++)
                m[p / 4][p % 4] = _mm512_loadu_ps(k->m + ((size_t)p * (size_t)C + (size_t)c) *
                                                             (size_t)F + (size_t)f);
            for (int j = 0; j < 4; j++) {
                __m512 a = _mm512_mul_ps(half, _mm512_add_ps(m[1][j], m[2][j]));
                t[0][j] = _mm512_add_ps(m[0][j], a);
                t[1][j] = _mm512_mul_ps(half, _mm512_sub_ps(m[1][j], m[2][j]));
                t[2][j] = _mm512_add_ps(a, m[3][j]);
            }
            for (int ky = 0; ky < 3; ky++) {
                __m512 a = _mm512_mul_ps(half, _mm512_add_ps(t[ky][1], t[ky][2]));
                __m512 o[3] = {_mm512_add_ps(t[ky][0], a),
                               _mm512_mul_ps(half, _mm512_sub_ps(t[ky][1], t[ky][2])),
                               _mm512_add_ps(a, t[ky][3])};
                for (int kx = 0; kx < 3; kx++)
                    _mm512_storeu_ps(k->dst + ((ky * 3 + kx) * C + c) * F + f, o[kx]);
            }
        }
}

sn_status sn_cpu_conv_wino_bf16_run(sn_cpu_wino_bf16 *w, const void *in0, const void *in1,
                                    void *out, void *scratch) {
    char *sc = scratch;
    int nth = sn_num_threads();
    wbf_task k = {.w = w,
                  .u = (uint16_t *)(sc + w->off_u),
                  .v = (uint16_t *)(sc + w->off_v),
                  .m = (float *)(sc + w->off_m)};
    size_t in_img = (size_t)(w->hi * w->wi * w->ci), out_img = (size_t)(w->ho * w->wo * w->co);
    if (w->kind != SN_OP_CONV2D_BWD_FILTER) {
        /* forward (x, w) -> y; backward-data (dy, w) -> dx */
        k.src = in1;
        sn_parallel(w->kind == SN_OP_CONV2D_BWD_DATA ? filter_tf_rot_task : filter_tf_task, &k,
                    nth);
        for (int64_t i0 = 0; i0 < w->n; i0 += w->slice) {
            k.imgs = w->n - i0 < w->slice ? w->n - i0 : w->slice;
            k.src = (const float *)in0 + (size_t)i0 * in_img;
            k.dst = (float *)out + (size_t)i0 * out_img;
            sn_parallel(input_tf_task, &k, nth);
            SN_TRY(sn_dnnl_op_run(&w->mm[k.imgs == w->slice ? 0 : 1], k.v, k.u, k.m, scratch));
            sn_parallel(output_tf_task, &k, nth);
        }
        return SN_OK;
    }
    /* backward-weights (x, dy) -> dw: M accumulates over the slices in slice order, so the
     * result does not depend on the thread count */
    memset(k.m, 0, (size_t)(16 * w->c * w->f) * sizeof(float));
    for (int64_t i0 = 0; i0 < w->n; i0 += w->slice) {
        k.imgs = w->n - i0 < w->slice ? w->n - i0 : w->slice;
        k.src = (const float *)in0 + (size_t)i0 * in_img;
        k.dy = (const float *)in1 + (size_t)i0 * out_img;
        sn_parallel(input_tf_task, &k, nth);
        sn_parallel(dy_tf_task, &k, nth);
        SN_TRY(sn_dnnl_op_run(&w->mm[k.imgs == w->slice ? 0 : 1], k.v, k.u, k.m, scratch));
    }
    k.dst = out;
    sn_parallel(filter_grad_task, &k, nth);
    return SN_OK;
}

#endif /* SN_HAVE_DNNL */
