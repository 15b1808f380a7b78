/* sinter's own f32 Winograd convolution, F(2x2, 3x3), for the wide 3x3 stride-1 layers on
 * AVX2 + FMA CPUs (no AVX-512): forward, backward-data and backward-weights.
 *
 * Why: oneDNN 2.6 has Winograd only on AVX-512 (cpu_conv_wino.c), and its direct convolution
 * already runs the guide CNN at 94 % of an AVX2 machine's FMA peak; only fewer multiplications
 * go faster. F(2x2, 3x3) does 16 multiplications per 2x2 outputs where direct does 36.
 *
 * The algorithm, the layouts and the batch slices are those of the bf16 Winograd
 * (cpu_conv_wino_bf16.c, whose header comment derives them), in f32 throughout:
 *   V [16][T][Ci]: B^T d B of each 4x4 input tile (T tiles of a batch slice);
 *   U [16][C][F] (backward-data: [16][F][C]): G g G^T of each filter;
 *   M [16][T][Co] = V x U: 16 GEMMs on OpenBLAS (sn_cpu_sgemm_1t), then A^T M A;
 *   backward-weights: Z = A dY A^T into [16][T][F], dL/dU [16][C][F] += V^T Z over the
 *   slices, dw = G^T (dL/dU) G.
 * The transforms are 8-channel AVX2 vectors (channels are NHWC's contiguous axis).
 *
 * Determinism: every GEMM is cut into tiles whose geometry follows from the shape alone (16
 * positions x fixed row blocks), each tile one single-threaded sgemm; the team only takes
 * tiles. Backward-weights adds the slices in slice order. So the bits do not depend on the
 * thread count (tests/test_conv_wino_f32.c checks 1 against 2 threads).
 *
 * Memory: the batch runs in slices of images sized so that V and M (or V and Z) take about
 * WF_SLICE_BYTES, in the plan's scratch (sized at prepare, nothing allocated per step). */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_conv_wino_f32.h"

/* Below this many channels each way the transforms' memory traffic is a larger share of the
 * work; only the guide CNN's 256 -> 256 layer was measured (docs/kernels.md). */
enum { WF_MIN_CHANNELS = 128 };

bool sn_cpu_conv_wino_f32_applies(const sn_kcall *c) {
    sn_conv_geom g;
    if (!sn_conv_geom_of(c, &g)) return false;
    const sn_cpu_features *cpu = sn_cpu();
    return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.c >= WF_MIN_CHANNELS &&
           g.f >= WF_MIN_CHANNELS && g.c % 8 == 0 && g.f % 8 == 0 && cpu->avx2 && cpu->fma &&
           !cpu->avx512f;
}

#define TGT_WF __attribute__((target("avx2,fma")))

/* Bytes of transformed operands per slice: the guide CNN's layer (144 tiles an image, 4.7 MB
 * of V and M) takes 10 images. */
enum { WF_SLICE_BYTES = 48 << 20 };
static size_t slice_bytes = WF_SLICE_BYTES;

void sn_cpu_conv_wino_f32_set_slice_bytes(size_t bytes) {
    slice_bytes = bytes ? bytes : WF_SLICE_BYTES;
}

/* GEMM tiles: rows of a forward / backward-data product (tiles), rows of a backward-weights
 * one (input channels). Fixed, so the cut never depends on the team. */
enum { WF_ROWS = 512, WF_CROWS = 64 };

struct sn_cpu_wino_f32 {
    sn_op kind;
    int64_t n;          /* images */
    int64_t c, f;       /* the filter's input and output channels */
    int64_t hi, wi, ci; /* the transformed input: x (fwd, bwd-weights) or dy (bwd-data) */
    int64_t ho, wo, co; /* what the tiles cover: y (fwd), dy (bwd-weights), dx (bwd-data) */
    int64_t pt, pl;     /* input rows/columns before the first tile's first (zero padding) */
    int64_t th, tw;     /* tiles per image, down and across */
    int64_t slice;      /* images per slice (the last may be shorter) */
    size_t off_v, off_m; /* scratch: U (bwd-weights: Z) at 0; V; M */
};

static size_t align64(size_t b) { return (b + 63) & ~(size_t)63; }

sn_status sn_cpu_conv_wino_f32_build(sn_cpu_wino_f32 **out, const sn_kcall *c,
                                     size_t *scratch_bytes) {
    *out = NULL;
    *scratch_bytes = 0;
    sn_conv_geom g;
    if (!sn_conv_geom_of(c, &g) || !sn_cpu_conv_wino_f32_applies(c))
        return sn_errorf(SN_ERR_UNSUPPORTED,
                         "f32 Winograd convolution: node %d is not a 3x3 stride-1 convolution "
                         "with >= 128 channels (multiples of 8) on an AVX2 CPU without AVX-512",
                         (int)c->id);
    sn_cpu_wino_f32 *w = sn_calloc(1, sizeof *w);
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
    size_t per_image = (size_t)(16 * tpi) * (size_t)(w->ci + w->co) * sizeof(float);
    int64_t slice = (int64_t)(slice_bytes / per_image);
    if (slice < 1) slice = 1;
    if (slice > g.n) slice = g.n;
    int64_t slices = (g.n + slice - 1) / slice;
    w->slice = (g.n + slices - 1) / slices; /* even slices */
    size_t T = (size_t)(w->slice * tpi);
    bool bwf = c->op == SN_OP_CONV2D_BWD_FILTER;
    size_t off = align64(bwf ? 16 * T * (size_t)g.f * 4 : 16 * (size_t)(w->ci * w->co) * 4);
    w->off_v = off;
    off += align64(16 * T * (size_t)w->ci * 4);
    w->off_m = off;
    off += align64(bwf ? 16 * (size_t)(g.c * g.f) * 4 : 16 * T * (size_t)w->co * 4);
    *scratch_bytes = off;
    *out = w;
    return SN_OK;
}

void sn_cpu_conv_wino_f32_destroy(sn_cpu_wino_f32 *w) { free(w); }

/* ---- transforms (f32, 8 channels a vector) ---------------------------------------------- */

typedef struct wf_task {
    const sn_cpu_wino_f32 *w;
    const float *src; /* the slice's first image (input / output transforms), or w */
    float *dst;       /* the slice's first output image, or dw */
    const float *dy;  /* backward-weights: the slice's first dy image */
    float *u, *v, *m; /* transformed operands, products */
    int64_t imgs;     /* images in this slice */
} wf_task;

/* Tile t of the slice: image, and tile row and column. */
static inline void tile_of(const sn_cpu_wino_f32 *w, int64_t t, int64_t *img, int64_t *ty,
                           int64_t *tx) {
    int64_t tpi = w->th * w->tw, r = t % tpi;
    *img = t / tpi, *ty = r / w->tw, *tx = r % w->tw;
}

/* V = B^T d B of each 4x4 input tile (zero outside the input), B^T = [1 0 -1 0; 0 1 1 0;
 * 0 -1 1 0; 0 1 0 -1]. */
TGT_WF static void input_tf_task(void *ctx, int ith, int nth) {
    const wf_task *k = ctx;
    const sn_cpu_wino_f32 *w = k->w;
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
        float *v0 = k->v + (size_t)t * (size_t)ci;
        size_t pstride = (size_t)T * (size_t)ci;
        for (int64_t cc = 0; cc < ci; cc += 8) {
            __m256 d[4][4], s[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    d[i][j] = row[i][j] ? _mm256_loadu_ps(row[i][j] + cc) : _mm256_setzero_ps();
            for (int j = 0; j < 4; j++) {
                s[0][j] = d[0][j] - d[2][j];
                s[1][j] = d[1][j] + d[2][j];
                s[2][j] = d[2][j] - d[1][j];
                s[3][j] = d[1][j] - d[3][j];
            }
            for (int i = 0; i < 4; i++) {
                float *o = v0 + (size_t)(i * 4) * pstride + cc;
                _mm256_storeu_ps(o, s[i][0] - s[i][2]);
                _mm256_storeu_ps(o + pstride, s[i][1] + s[i][2]);
                _mm256_storeu_ps(o + 2 * pstride, s[i][2] - s[i][1]);
                _mm256_storeu_ps(o + 3 * pstride, s[i][1] - s[i][3]);
            }
        }
    }
}

/* Y = A^T M A of each tile, A^T = [1 1 1 0; 0 1 -1 -1]; outputs past the edge dropped. */
TGT_WF static void output_tf_task(void *ctx, int ith, int nth) {
    const wf_task *k = ctx;
    const sn_cpu_wino_f32 *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, lo, hi, co = w->co;
    sn_split_range(T, ith, nth, &lo, &hi);
    size_t pstride = (size_t)T * (size_t)co;
    for (int64_t t = lo; t < hi; t++) {
        int64_t img, ty, tx;
        tile_of(w, t, &img, &ty, &tx);
        float *base = k->dst + img * w->ho * w->wo * co;
        int64_t oy = ty * 2, ox = tx * 2;
        bool down = oy + 1 < w->ho, right = ox + 1 < w->wo;
        const float *m0 = k->m + (size_t)t * (size_t)co;
        for (int64_t cc = 0; cc < co; cc += 8) {
            __m256 m[4][4], s[2][4];
            for (int p = 0; p < 16; p++)
                m[p / 4][p % 4] = _mm256_loadu_ps(m0 + (size_t)p * pstride + cc);
            for (int j = 0; j < 4; j++) {
                s[0][j] = m[0][j] + m[1][j] + m[2][j];
                s[1][j] = m[1][j] - m[2][j] - m[3][j];
            }
            for (int a = 0; a < 2; a++) {
                if (a == 1 && !down) break;
                float *o = base + ((oy + a) * w->wo + ox) * co + cc;
                _mm256_storeu_ps(o, s[a][0] + s[a][1] + s[a][2]);
                if (right) _mm256_storeu_ps(o + co, s[a][1] - s[a][2] - s[a][3]);
            }
        }
    }
}

/* Backward-weights: Z = A dY A^T of each 2x2 dy tile (zero past the edge), into k->u as
 * [16][T][F]. */
TGT_WF static void dy_tf_task(void *ctx, int ith, int nth) {
    const wf_task *k = ctx;
    const sn_cpu_wino_f32 *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, lo, hi, f = w->co;
    sn_split_range(T, ith, nth, &lo, &hi);
    size_t pstride = (size_t)T * (size_t)f;
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
        float *z0 = k->u + (size_t)t * (size_t)f;
        for (int64_t cc = 0; cc < f; cc += 8) {
            __m256 y[2][2], r[4][2];
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    y[a][b] = row[a][b] ? _mm256_loadu_ps(row[a][b] + cc) : _mm256_setzero_ps();
            for (int b = 0; b < 2; b++) {
                r[0][b] = y[0][b];
                r[1][b] = y[0][b] + y[1][b];
                r[2][b] = y[0][b] - y[1][b];
                r[3][b] = -y[1][b];
            }
            for (int i = 0; i < 4; i++) {
                float *o = z0 + (size_t)(i * 4) * pstride + cc;
                _mm256_storeu_ps(o, r[i][0]);
                _mm256_storeu_ps(o + pstride, r[i][0] + r[i][1]);
                _mm256_storeu_ps(o + 2 * pstride, r[i][0] - r[i][1]);
                _mm256_storeu_ps(o + 3 * pstride, -r[i][1]);
            }
        }
    }
}

/* U = G g G^T of one 3x3 filter, 8 filters (or input channels) a vector, G = [1 0 0; 1/2 1/2
 * 1/2; 1/2 -1/2 1/2; 0 0 1]; u[i * 4 + j] is transform position (i, j). */
TGT_WF static inline void filter_tf(__m256 g[3][3], __m256 u[16]) {
    const __m256 half = _mm256_set1_ps(0.5f);
    __m256 t[4][3];
    for (int kx = 0; kx < 3; kx++) {
        __m256 s02 = g[0][kx] + g[2][kx];
        t[0][kx] = g[0][kx];
        t[1][kx] = half * (s02 + g[1][kx]);
        t[2][kx] = half * (s02 - g[1][kx]);
        t[3][kx] = g[2][kx];
    }
    for (int i = 0; i < 4; i++) {
        __m256 s02 = t[i][0] + t[i][2];
        u[i * 4 + 0] = t[i][0];
        u[i * 4 + 1] = half * (s02 + t[i][1]);
        u[i * 4 + 2] = half * (s02 - t[i][1]);
        u[i * 4 + 3] = t[i][2];
    }
}

/* Forward: U [16][C][F] from g = w[., ., c, f], for input channels [lo, hi), 8 filters a
 * vector. */
TGT_WF static void filter_tf_task(void *ctx, int ith, int nth) {
    const wf_task *k = ctx;
    const sn_cpu_wino_f32 *w = k->w;
    int64_t C = w->c, F = w->f, lo, hi;
    sn_split_range(C, ith, nth, &lo, &hi);
    for (int64_t c = lo; c < hi; c++)
        for (int64_t f = 0; f < F; f += 8) {
            __m256 g[3][3], u[16];
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++)
                    g[ky][kx] = _mm256_loadu_ps(k->src + ((ky * 3 + kx) * C + c) * F + f);
            filter_tf(g, u);
            for (int p = 0; p < 16; p++)
                _mm256_storeu_ps(k->u + ((size_t)p * (size_t)C + (size_t)c) * (size_t)F +
                                     (size_t)f,
                                 u[p]);
        }
}

/* Backward-data: U [16][F][C] (the GEMM's plain B, [K = F][N = C]) from the rotated filter
 * g = w[2 - ., 2 - ., c, f], for filters [lo, hi), 8 input channels a vector (gathered at
 * stride F). */
TGT_WF static void filter_tf_rot_task(void *ctx, int ith, int nth) {
    const wf_task *k = ctx;
    const sn_cpu_wino_f32 *w = k->w;
    int64_t C = w->c, F = w->f, lo, hi;
    sn_split_range(F, ith, nth, &lo, &hi);
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                           _mm256_set1_epi32((int)F));
    for (int64_t f = lo; f < hi; f++)
        for (int64_t c = 0; c < C; c += 8) {
            __m256 g[3][3], u[16];
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) {
                    int tap = (2 - ky) * 3 + (2 - kx);
                    g[ky][kx] = _mm256_i32gather_ps(k->src + (tap * C + c) * F + f, idx, 4);
                }
            filter_tf(g, u);
            for (int p = 0; p < 16; p++)
                _mm256_storeu_ps(k->u + ((size_t)p * (size_t)F + (size_t)f) * (size_t)C +
                                     (size_t)c,
                                 u[p]);
        }
}

/* Backward-weights: dw = G^T (dL/dU) G from M [16][C][F], for input channels [lo, hi),
 * 8 filters a vector. */
TGT_WF static void filter_grad_task(void *ctx, int ith, int nth) {
    const wf_task *k = ctx;
    const sn_cpu_wino_f32 *w = k->w;
    int64_t C = w->c, F = w->f, lo, hi;
    sn_split_range(C, ith, nth, &lo, &hi);
    const __m256 half = _mm256_set1_ps(0.5f);
    for (int64_t c = lo; c < hi; c++)
        for (int64_t f = 0; f < F; f += 8) {
            __m256 m[4][4], t[3][4];
            for (int p = 0; p < 16; p++)
                m[p / 4][p % 4] = _mm256_loadu_ps(k->m + ((size_t)p * (size_t)C + (size_t)c) *
                                                             (size_t)F + (size_t)f);
            for (int j = 0; j < 4; j++) {
                __m256 a = half * (m[1][j] + m[2][j]);
                t[0][j] = m[0][j] + a;
                t[1][j] = half * (m[1][j] - m[2][j]);
                t[2][j] = a + m[3][j];
            }
            for (int ky = 0; ky < 3; ky++) {
                __m256 a = half * (t[ky][1] + t[ky][2]);
                _mm256_storeu_ps(k->dst + ((ky * 3 + 0) * C + c) * F + f, t[ky][0] + a);
                _mm256_storeu_ps(k->dst + ((ky * 3 + 1) * C + c) * F + f,
                                 half * (t[ky][1] - t[ky][2]));
                _mm256_storeu_ps(k->dst + ((ky * 3 + 2) * C + c) * F + f, a + t[ky][3]);
            }
        }
}

/* ---- the 16 transform-domain GEMMs ---------------------------------------------------- */

/* Forward / backward-data: M_p [T][Co] = V_p [T][Ci] x U_p [Ci][Co], in tiles of WF_ROWS rows
 * of each position. */
static void gemm_task(void *ctx, int ith, int nth) {
    const wf_task *k = ctx;
    const sn_cpu_wino_f32 *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, ci = w->ci, co = w->co;
    int64_t nb = (T + WF_ROWS - 1) / WF_ROWS, lo, hi;
    sn_split_range(16 * nb, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int64_t p = i / nb, r0 = i % nb * WF_ROWS;
        int64_t rows = T - r0 < WF_ROWS ? T - r0 : WF_ROWS;
        size_t row = (size_t)p * (size_t)T + (size_t)r0;
        sn_cpu_sgemm_1t(false, false, rows, co, ci, k->v + row * (size_t)ci, ci,
                        k->u + (size_t)p * (size_t)(ci * co), co, 0.0f, k->m + row * (size_t)co,
                        co);
    }
}

/* Backward-weights: dL/dU_p [C][F] += V_p^T [C][T] x Z_p [T][F], in tiles of WF_CROWS input
 * channels of each position. */
static void gemm_bwf_task(void *ctx, int ith, int nth) {
    const wf_task *k = ctx;
    const sn_cpu_wino_f32 *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, C = w->c, F = w->f;
    int64_t nb = (C + WF_CROWS - 1) / WF_CROWS, lo, hi;
    sn_split_range(16 * nb, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int64_t p = i / nb, c0 = i % nb * WF_CROWS;
        int64_t rows = C - c0 < WF_CROWS ? C - c0 : WF_CROWS;
        sn_cpu_sgemm_1t(true, false, rows, F, T, k->v + (size_t)p * (size_t)(T * C) + (size_t)c0,
                        C, k->u + (size_t)p * (size_t)(T * F), F, 1.0f,
                        k->m + ((size_t)p * (size_t)C + (size_t)c0) * (size_t)F, F);
    }
}

sn_status sn_cpu_conv_wino_f32_run(sn_cpu_wino_f32 *w, const void *in0, const void *in1,
                                   void *out, void *scratch) {
    char *sc = scratch;
    int nth = sn_num_threads();
    wf_task k = {.w = w,
                 .u = (float *)sc,
                 .v = (float *)(sc + w->off_v),
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
            sn_parallel(gemm_task, &k, nth);
            sn_parallel(output_tf_task, &k, nth);
        }
        return SN_OK;
    }
    /* backward-weights (x, dy) -> dw: M accumulates over the slices in slice order */
    memset(k.m, 0, (size_t)(16 * w->c * w->f) * sizeof(float));
    for (int64_t i0 = 0; i0 < w->n; i0 += w->slice) {
        k.imgs = w->n - i0 < w->slice ? w->n - i0 : w->slice;
        k.src = (const float *)in0 + (size_t)i0 * in_img;
        k.dy = (const float *)in1 + (size_t)i0 * out_img;
        sn_parallel(input_tf_task, &k, nth);
        sn_parallel(dy_tf_task, &k, nth);
        sn_parallel(gemm_bwf_task, &k, nth);
    }
    k.dst = out;
    sn_parallel(filter_grad_task, &k, nth);
    return SN_OK;
}
