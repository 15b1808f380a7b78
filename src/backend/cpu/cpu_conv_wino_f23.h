/* Internal to backend/cpu/: the Winograd F(2x2, 3x3) convolution shared by sinter's bf16
 * kernel (cpu_conv_wino_bf16.c, AVX-512, bf16 operands) and its f32 one (cpu_conv_wino_f32.c,
 * AVX2): the geometry of a call and its batch slices, and the transform tasks, written once.
 * cpu_conv_wino_bf16.c's header comment derives the algorithm and the layouts.
 *
 * The first part is plain. The second, the transforms, is instantiated by each includer for
 * its vector width and operand type (C has no templates; the alternative was two copies of
 * every transform). Before including, define:
 *   WV           the f32 vector type (__m512, __m256) and WV_LANES its lanes;
 *   WV_TGT       the target attribute the tasks are compiled for;
 *   WV_ELEM      the type of the transformed operands V, U and Z (uint16_t for bf16, float);
 *   WV_LOAD(p), WV_ZERO(), WV_SET1(x), WV_STORE(p, v): f32 loads and stores;
 *   WV_STORE_ELEM(p, v): v rounded to WV_ELEM and stored;
 *   WVI, WV_GATHER_IDX(stride), WV_GATHER(p, idx): WV_LANES floats at p + idx[i].
 * The arithmetic is GCC's vector operators, which are what the _mm*_add_ps/_sub_ps/_mul_ps
 * intrinsics expand to: the same operations, in the order written (ISO C mode: no FMA
 * contraction). */
#ifndef SN_BACKEND_CPU_CONV_WINO_F23_H
#define SN_BACKEND_CPU_CONV_WINO_F23_H

#include <string.h>

#include "backend/cpu/cpu_blas.h"

/* One call's geometry (an op's operands in the transformed input's terms). */
typedef struct sn_wino_geom {
    sn_op kind;
    int64_t n;          /* images */
    int64_t c, f;       /* the filter's input and output channels */
    int64_t hi, wi, ci; /* the transformed input: x (fwd, bwd-weights) or dy (bwd-data) */
    int64_t ho, wo, co; /* what the tiles cover: y (fwd), dy (bwd-weights), dx (bwd-data) */
    int64_t pt, pl;     /* input rows/columns before the first tile's first (zero padding) */
    int64_t th, tw;     /* tiles per image, down and across */
    int64_t slice;      /* images per slice (the last may be shorter) */
} sn_wino_geom;

/* The geometry of c's op on g; slices of images whose transformed operands take
 * tile_bytes(ci, co) per tile, about slice_bytes a slice, evenly cut. Backward-data is the
 * forward on dy with the rotated filter (a full convolution: dy padded by kh-1-pt on top). */
static inline void sn_wino_geom_init(sn_wino_geom *w, sn_op op, const sn_conv_geom *g) {
    w->kind = op;
    w->n = g->n, w->c = g->c, w->f = g->f;
    if (op == SN_OP_CONV2D_BWD_DATA) {
        w->hi = g->oh, w->wi = g->ow, w->ci = g->f, w->ho = g->h, w->wo = g->w, w->co = g->c;
        w->pt = g->kh - 1 - g->pt, w->pl = g->kw - 1 - g->pl;
    } else {
        w->hi = g->h, w->wi = g->w, w->ci = g->c, w->ho = g->oh, w->wo = g->ow, w->co = g->f;
        w->pt = g->pt, w->pl = g->pl;
    }
    w->th = (w->ho + 1) / 2, w->tw = (w->wo + 1) / 2;
}

/* Sets w->slice: images whose transformed operands (tile_bytes per tile) take about
 * slice_bytes, the batch then cut into even slices. */
static inline void sn_wino_geom_slice(sn_wino_geom *w, size_t tile_bytes, size_t slice_bytes) {
    size_t per_image = (size_t)(w->th * w->tw) * tile_bytes;
    int64_t slice = (int64_t)(slice_bytes / per_image);
    if (slice < 1) slice = 1;
    if (slice > w->n) slice = w->n;
    int64_t slices = (w->n + slice - 1) / slice;
    w->slice = (w->n + slices - 1) / slices;
}

/* One phase of a run over one batch slice. */
typedef struct sn_wino_task {
    const sn_wino_geom *w;
    const float *src; /* the slice's first image (input / output transforms), or w */
    float *dst;       /* the slice's first output image, or dw */
    const float *dy;  /* backward-weights: the slice's first dy image */
    void *u, *v;      /* transformed operands (WV_ELEM) */
    float *m;         /* transform-domain products */
    int64_t imgs;     /* images in this slice */
} sn_wino_task;

/* The 16 transform-domain GEMMs of one slice: M = V x U (forward, backward-data), or
 * M += V^T Z (backward-weights: k->u holds Z), on the includer's GEMM. */
typedef sn_status (*sn_wino_gemm_fn)(void *ctx, const sn_wino_task *k);

/* Tile t of the slice: image, and tile row and column. */
static inline void sn_wino_tile_of(const sn_wino_geom *w, int64_t t, int64_t *img, int64_t *ty,
                                   int64_t *tx) {
    int64_t tpi = w->th * w->tw, r = t % tpi;
    *img = t / tpi, *ty = r / w->tw, *tx = r % w->tw;
}

#endif /* SN_BACKEND_CPU_CONV_WINO_F23_H */

/* ---- the transforms, for the includer's WV ----------------------------------------------- */
#ifdef WV

/* V = B^T d B of each 4x4 input tile (zero outside the input), B^T = [1 0 -1 0; 0 1 1 0;
 * 0 -1 1 0; 0 1 0 -1], into k->v as [16][T][Ci]. */
WV_TGT static void input_tf_task(void *ctx, int ith, int nth) {
    const sn_wino_task *k = ctx;
    const sn_wino_geom *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, lo, hi, ci = w->ci;
    sn_split_range(T, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int64_t img, ty, tx;
        sn_wino_tile_of(w, t, &img, &ty, &tx);
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
        for (int64_t cc = 0; cc < ci; cc += WV_LANES) {
            WV d[4][4], s[4][4];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++)
                    d[i][j] = row[i][j] ? WV_LOAD(row[i][j] + cc) : WV_ZERO();
            for (int j = 0; j < 4; j++) {
                s[0][j] = d[0][j] - d[2][j];
                s[1][j] = d[1][j] + d[2][j];
                s[2][j] = d[2][j] - d[1][j];
                s[3][j] = d[1][j] - d[3][j];
            }
            for (int i = 0; i < 4; i++) {
                WV v[4] = {s[i][0] - s[i][2], s[i][1] + s[i][2], s[i][2] - s[i][1],
                           s[i][1] - s[i][3]};
                for (int j = 0; j < 4; j++)
                    WV_STORE_ELEM((WV_ELEM *)k->v +
                                      ((size_t)(i * 4 + j) * (size_t)T + (size_t)t) * ci + cc,
                                  v[j]);
            }
        }
    }
}

/* Y = A^T M A of each tile from k->m [16][T][Co], A^T = [1 1 1 0; 0 1 -1 -1]; outputs past
 * the edge dropped. */
WV_TGT static void output_tf_task(void *ctx, int ith, int nth) {
    const sn_wino_task *k = ctx;
    const sn_wino_geom *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, lo, hi, co = w->co;
    sn_split_range(T, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int64_t img, ty, tx;
        sn_wino_tile_of(w, t, &img, &ty, &tx);
        float *base = k->dst + img * w->ho * w->wo * co;
        int64_t oy = ty * 2, ox = tx * 2;
        bool down = oy + 1 < w->ho, right = ox + 1 < w->wo;
        for (int64_t cc = 0; cc < co; cc += WV_LANES) {
            WV m[4][4], s[2][4];
            for (int p = 0; p < 16; p++)
                m[p / 4][p % 4] = WV_LOAD(k->m + ((size_t)p * (size_t)T + (size_t)t) * co + cc);
            for (int j = 0; j < 4; j++) {
                s[0][j] = m[0][j] + m[1][j] + m[2][j];
                s[1][j] = m[1][j] - m[2][j] - m[3][j];
            }
            for (int a = 0; a < 2; a++) {
                if (a == 1 && !down) break;
                float *o = base + ((oy + a) * w->wo + ox) * co + cc;
                WV_STORE(o, s[a][0] + s[a][1] + s[a][2]);
                if (right) WV_STORE(o + co, s[a][1] - s[a][2] - s[a][3]);
            }
        }
    }
}

/* Backward-weights: Z = A dY A^T of each 2x2 dy tile (zero past the edge), into k->u as
 * [16][T][F]. */
WV_TGT static void dy_tf_task(void *ctx, int ith, int nth) {
    const sn_wino_task *k = ctx;
    const sn_wino_geom *w = k->w;
    int64_t T = k->imgs * w->th * w->tw, lo, hi, f = w->co;
    sn_split_range(T, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        int64_t img, ty, tx;
        sn_wino_tile_of(w, t, &img, &ty, &tx);
        const float *base = k->dy + img * w->ho * w->wo * f;
        int64_t oy = ty * 2, ox = tx * 2;
        const float *row[2][2];
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++)
                row[a][b] = oy + a < w->ho && ox + b < w->wo
                                ? base + ((oy + a) * w->wo + ox + b) * f
                                : NULL;
        for (int64_t cc = 0; cc < f; cc += WV_LANES) {
            WV y[2][2], r[4][2];
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    y[a][b] = row[a][b] ? WV_LOAD(row[a][b] + cc) : WV_ZERO();
            for (int b = 0; b < 2; b++) {
                r[0][b] = y[0][b];
                r[1][b] = y[0][b] + y[1][b];
                r[2][b] = y[0][b] - y[1][b];
                r[3][b] = WV_ZERO() - y[1][b];
            }
            for (int i = 0; i < 4; i++) {
                WV z[4] = {r[i][0], r[i][0] + r[i][1], r[i][0] - r[i][1],
                           WV_ZERO() - r[i][1]};
                for (int j = 0; j < 4; j++)
                    WV_STORE_ELEM((WV_ELEM *)k->u +
                                      ((size_t)(i * 4 + j) * (size_t)T + (size_t)t) * f + cc,
                                  z[j]);
            }
        }
    }
}

/* U = G g G^T of one 3x3 filter, WV_LANES filters (or input channels) a vector, G = [1 0 0;
 * 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]; u[i * 4 + j] is transform position (i, j). */
WV_TGT static inline void filter_tf(WV g[3][3], WV u[16]) {
    const WV half = WV_SET1(0.5f);
    WV t[4][3];
    for (int kx = 0; kx < 3; kx++) {
        WV s02 = g[0][kx] + g[2][kx];
        t[0][kx] = g[0][kx];
        t[1][kx] = half * (s02 + g[1][kx]);
        t[2][kx] = half * (s02 - g[1][kx]);
        t[3][kx] = g[2][kx];
    }
    for (int i = 0; i < 4; i++) {
        WV s02 = t[i][0] + t[i][2];
        u[i * 4 + 0] = t[i][0];
        u[i * 4 + 1] = half * (s02 + t[i][1]);
        u[i * 4 + 2] = half * (s02 - t[i][1]);
        u[i * 4 + 3] = t[i][2];
    }
}

/* Forward: U [16][C][F] from g = w[., ., c, f] (k->src), for input channels [lo, hi),
 * WV_LANES filters a vector. */
WV_TGT static void filter_tf_task(void *ctx, int ith, int nth) {
    const sn_wino_task *k = ctx;
    const sn_wino_geom *w = k->w;
    int64_t C = w->c, F = w->f, lo, hi;
    sn_split_range(C, ith, nth, &lo, &hi);
    for (int64_t c = lo; c < hi; c++)
        for (int64_t f = 0; f < F; f += WV_LANES) {
            WV g[3][3], u[16];
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++)
                    g[ky][kx] = WV_LOAD(k->src + ((ky * 3 + kx) * C + c) * F + f);
            filter_tf(g, u);
            for (int p = 0; p < 16; p++)
                WV_STORE_ELEM((WV_ELEM *)k->u +
                                  ((size_t)p * (size_t)C + (size_t)c) * (size_t)F + (size_t)f,
                              u[p]);
        }
}

/* Backward-data: U [16][F][C] (the GEMM's plain B, [K = F][N = C]) from the rotated filter
 * g = w[2 - ., 2 - ., c, f], for filters [lo, hi), WV_LANES input channels a vector (gathered
 * at stride F). The same sums as filter_tf_task's, transposed: written this way the GEMM reads
 * a plain B; read through strides ([16][C][F] as transposed B), oneDNN's brgemm copied it
 * transposed and ran 6-9 % slower per row than the forward's (DNNL_VERBOSE, guide CNN, one
 * thread, loaded machine). */
WV_TGT static void filter_tf_rot_task(void *ctx, int ith, int nth) {
    const sn_wino_task *k = ctx;
    const sn_wino_geom *w = k->w;
    int64_t C = w->c, F = w->f, lo, hi;
    sn_split_range(F, ith, nth, &lo, &hi);
    const WVI idx = WV_GATHER_IDX((int)F);
    for (int64_t f = lo; f < hi; f++)
        for (int64_t c = 0; c < C; c += WV_LANES) {
            WV g[3][3], u[16];
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) {
                    int tap = (2 - ky) * 3 + (2 - kx);
                    g[ky][kx] = WV_GATHER(k->src + (tap * C + c) * F + f, idx);
                }
            filter_tf(g, u);
            for (int p = 0; p < 16; p++)
                WV_STORE_ELEM((WV_ELEM *)k->u +
                                  ((size_t)p * (size_t)F + (size_t)f) * (size_t)C + (size_t)c,
                              u[p]);
        }
}

/* Backward-weights: dw = G^T (dL/dU) G (k->dst) from M [16][C][F] (f32), for input channels
 * [lo, hi), WV_LANES filters a vector. */
WV_TGT static void filter_grad_task(void *ctx, int ith, int nth) {
    const sn_wino_task *k = ctx;
    const sn_wino_geom *w = k->w;
    int64_t C = w->c, F = w->f, lo, hi;
    sn_split_range(C, ith, nth, &lo, &hi);
    const WV half = WV_SET1(0.5f);
    for (int64_t c = lo; c < hi; c++)
        for (int64_t f = 0; f < F; f += WV_LANES) {
            WV m[4][4], t[3][4];
            for (int p = 0; p < 16; p++)
                m[p / 4][p % 4] =
                    WV_LOAD(k->m + ((size_t)p * (size_t)C + (size_t)c) * (size_t)F + (size_t)f);
            for (int j = 0; j < 4; j++) {
                WV a = half * (m[1][j] + m[2][j]);
                t[0][j] = m[0][j] + a;
                t[1][j] = half * (m[1][j] - m[2][j]);
                t[2][j] = a + m[3][j];
            }
            for (int ky = 0; ky < 3; ky++) {
                WV a = half * (t[ky][1] + t[ky][2]);
                WV o[3] = {t[ky][0] + a, half * (t[ky][1] - t[ky][2]), a + t[ky][3]};
                for (int kx = 0; kx < 3; kx++)
                    WV_STORE(k->dst + ((ky * 3 + kx) * C + c) * F + f, o[kx]);
            }
        }
}

/* One execution: in0, in1 -> out in the kernel table's operand order (forward x, w -> y;
 * backward-data dy, w -> dx; backward-weights x, dy -> dw), slice by slice, with k's u, v and
 * m pointing into scratch. Backward-weights accumulates M over the slices in slice order, so
 * the result does not depend on the thread count. */
static sn_status wino_run(sn_wino_task *k, const void *in0, const void *in1, void *out,
                          sn_wino_gemm_fn gemm, void *gemm_ctx) {
    const sn_wino_geom *w = k->w;
    int nth = sn_num_threads();
    size_t in_img = (size_t)(w->hi * w->wi * w->ci), out_img = (size_t)(w->ho * w->wo * w->co);
    if (w->kind != SN_OP_CONV2D_BWD_FILTER) {
        k->src = in1;
        sn_parallel(w->kind == SN_OP_CONV2D_BWD_DATA ? filter_tf_rot_task : filter_tf_task, k,
                    nth);
        for (int64_t i0 = 0; i0 < w->n; i0 += w->slice) {
            k->imgs = w->n - i0 < w->slice ? w->n - i0 : w->slice;
            k->src = (const float *)in0 + (size_t)i0 * in_img;
            k->dst = (float *)out + (size_t)i0 * out_img;
            sn_parallel(input_tf_task, k, nth);
            SN_TRY(gemm(gemm_ctx, k));
            sn_parallel(output_tf_task, k, nth);
        }
        return SN_OK;
    }
    memset(k->m, 0, (size_t)(16 * w->c * w->f) * sizeof(float));
    for (int64_t i0 = 0; i0 < w->n; i0 += w->slice) {
        k->imgs = w->n - i0 < w->slice ? w->n - i0 : w->slice;
        k->src = (const float *)in0 + (size_t)i0 * in_img;
        k->dy = (const float *)in1 + (size_t)i0 * out_img;
        sn_parallel(input_tf_task, k, nth);
        sn_parallel(dy_tf_task, k, nth);
        SN_TRY(gemm(gemm_ctx, k));
    }
    k->dst = out;
    sn_parallel(filter_grad_task, k, nth);
    return SN_OK;
}

#endif /* WV */
