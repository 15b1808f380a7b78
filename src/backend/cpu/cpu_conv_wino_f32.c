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
 * The geometry and the transforms are the bf16 kernel's (cpu_conv_wino_f23.h, written once),
 * instantiated here for 8-channel AVX2 vectors (channels are NHWC's contiguous axis).
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
#include "backend/cpu/cpu_conv_wino_f23.h"
#include "backend/cpu/cpu_conv_wino_f32.h"

/* Below this many channels each way the transforms' memory traffic is a larger share of the
 * work; only the guide CNN's 256 -> 256 layer was measured (docs/kernels.md). */
enum { WF_MIN_CHANNELS = 128 };

/* Tests only (sn_cpu_conv_wino_f32_set_on_avx512): take AVX-512 CPUs too. */
static bool on_avx512;

void sn_cpu_conv_wino_f32_set_on_avx512(bool on) { on_avx512 = on; }

bool sn_cpu_conv_wino_f32_applies(const sn_kcall *c) {
    sn_conv_geom g;
    if (!sn_conv_geom_of(c, &g)) return false;
    const sn_cpu_features *cpu = sn_cpu();
    return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.c >= WF_MIN_CHANNELS &&
           g.f >= WF_MIN_CHANNELS && g.c % 8 == 0 && g.f % 8 == 0 && cpu->avx2 && cpu->fma &&
           (!cpu->avx512f || on_avx512);
}

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
    sn_wino_geom g;
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
    sn_wino_geom *e = &w->g;
    sn_wino_geom_init(e, c->op, &g);
    sn_wino_geom_slice(e, 16 * (size_t)(e->ci + e->co) * sizeof(float), slice_bytes);
    size_t T = (size_t)(e->slice * e->th * e->tw);
    bool bwf = c->op == SN_OP_CONV2D_BWD_FILTER;
    size_t off = align64(bwf ? 16 * T * (size_t)g.f * 4 : 16 * (size_t)(e->ci * e->co) * 4);
    w->off_v = off;
    off += align64(16 * T * (size_t)e->ci * 4);
    w->off_m = off;
    off += align64(bwf ? 16 * (size_t)(g.c * g.f) * 4 : 16 * T * (size_t)e->co * 4);
    *scratch_bytes = off;
    *out = w;
    return SN_OK;
}

void sn_cpu_conv_wino_f32_destroy(sn_cpu_wino_f32 *w) { free(w); }

/* ---- transforms (cpu_conv_wino_f23.h: 8 channels an AVX2 vector, f32 operands) --------- */

#define WV __m256
#define WV_LANES 8
#define WV_TGT __attribute__((target("avx2,fma")))
#define WV_ELEM float
#define WV_LOAD(p) _mm256_loadu_ps(p)
#define WV_ZERO() _mm256_setzero_ps()
#define WV_SET1(x) _mm256_set1_ps(x)
#define WV_STORE(p, v) _mm256_storeu_ps((p), (v))
#define WV_STORE_ELEM(p, v) _mm256_storeu_ps((p), (v))
#define WVI __m256i
#define WV_GATHER_IDX(stride)                                                                  \
    _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride))
#define WV_GATHER(p, idx) _mm256_i32gather_ps((p), (idx), 4)
#include "backend/cpu/cpu_conv_wino_f23.h"

/* ---- the 16 transform-domain GEMMs ---------------------------------------------------- */

/* Each position p's product, in tiles of rows of its output C_p [M][N] (fixed tile heights,
 * so the cut never depends on the team):
 * - forward / backward-data: M_p [T][Co] = V_p [T][Ci] x U_p [Ci][Co], tiles of WF_ROWS tiles;
 * - backward-weights: dL/dU_p [C][F] += V_p^T [C][T] x Z_p [T][F] (V_p stored [T][C]), tiles
 *   of WF_CROWS input channels. */
static void gemm_task(void *ctx, int ith, int nth) {
    const sn_wino_task *k = ctx;
    const sn_wino_geom *w = k->w;
    bool bwf = w->kind == SN_OP_CONV2D_BWD_FILTER;
    int64_t T = k->imgs * w->th * w->tw;
    int64_t M = bwf ? w->c : T, N = bwf ? w->f : w->co, K = bwf ? T : w->ci;
    int64_t tile = bwf ? WF_CROWS : WF_ROWS, nb = (M + tile - 1) / tile, lo, hi;
    sn_split_range(16 * nb, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int64_t p = i / nb, r0 = i % nb * tile;
        int64_t rows = M - r0 < tile ? M - r0 : tile;
        const float *a = (const float *)k->v + (size_t)(p * M * K) + (size_t)(bwf ? r0 : r0 * K);
        sn_cpu_sgemm_1t(bwf, false, rows, N, K, a, bwf ? M : K,
                        (const float *)k->u + (size_t)(p * K * N), N, bwf ? 1.0f : 0.0f,
                        k->m + (size_t)((p * M + r0) * N), N);
    }
}

static sn_status gemm_f32(void *ctx, const sn_wino_task *k) {
    (void)ctx;
    sn_parallel(gemm_task, (void *)k, sn_num_threads());
    return SN_OK;
}

sn_status sn_cpu_conv_wino_f32_run(sn_cpu_wino_f32 *w, const void *in0, const void *in1,
                                   void *out, void *scratch) {
    char *sc = scratch;
    sn_wino_task k = {.w = &w->g, .u = sc, .v = sc + w->off_v, .m = (float *)(sc + w->off_m)};
    return wino_run(&k, in0, in1, out, gemm_f32, NULL);
}
