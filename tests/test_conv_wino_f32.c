/* sinter's f32 Winograd convolution F(2x2, 3x3) on AVX2 (backend/cpu/cpu_conv_wino_f32.c)
 * against the reference kernels (double accumulation) and oneDNN's direct convolution:
 * forward, backward-data and backward-weights, on odd sizes with ragged edge tiles, valid and
 * same padding, batch 1 and more, the guide CNN's layer (26x26x256 -> 256, smaller batch),
 * GEMMs cut into several row tiles, and a batch run in several slices.
 *
 * The bound. Everything runs in f32: the transforms' sums (coefficients 0, +-1, +-1/2) and the
 * GEMMs' f32 sums over Ci (backward-weights: over the tiles) round at u = 2^-24 per addition,
 * so the error grows with the length of the sums, not with a rounding of the operands as in
 * the bf16 kernel. Each op is held to max|err| <= 1e-4 max|ref| (the brief's "relative 1e-4 of
 * the scale"); measured 1e-7..1e-6, the same order as oneDNN's direct convolution against the
 * same reference (printed beside).
 *
 * Also: the default oneDNN kernel takes it on such a CPU (bit for bit), SN_CONV_ALGO=direct
 * turns it off, and the result is the same bits at 1 and 2 threads. Skips (77) on CPUs
 * without AVX2/FMA; on AVX-512 CPUs (where the default runs oneDNN's Winograd) it turns the
 * kernel on for itself and checks all but the default's choice. */
#include <stdlib.h>

#include "sn_test.h"

#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_conv_wino_f32.h"
#include "conv_case_util.h"
#include "f32_case_util.h"

static sn_rng rng;

/* A 3x3 stride-1 case (conv_case_util.h) */
static conv_case make_case(int64_t n, int64_t h, int64_t w, int64_t c, int64_t f, bool same) {
    return conv_case_make(false, n, h, w, c, 3, 3, f, 1, 1, same);
}

/* max |a - r| / max |r| (NaN counts as the worst) */
static double rel_err(const float *a, const float *r, int64_t n) {
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - r[i]);
        if (!(d <= e)) e = d;
        if (fabs(r[i]) > m) m = fabs(r[i]);
    }
    return e / (m > 0 ? m : 1);
}

static void check_case(const char *tag, const conv_case *cc) {
    static const char *names[3] = {"fwd", "bwd_data", "bwd_weights"};
    for (int o = 0; o < 3; o++) {
        const conv_op *co = &cc->ops[o];
        sn_op op = co->op;
        sn_shape out = co->out;
        tcase t;
        init_case(&t, &rng, op, &cc->attr, 2, co->in, &out, false);
        const sn_kernel *wf = sn_cpu_conv_impl(op, "wino_avx2"), *deflt = sn_cpu_kernels()->k[op],
                        *ref = sn_ref_kernels()->k[op];
        CHECK(wf && deflt && ref, "%s %s: kernels missing", tag, names[o]);
        CHECK(wf && wf->supports(&t.call), "%s %s: f32 Winograd declines the call", tag,
              names[o]);
        float *yr = NULL, *yw = NULL, *yw2 = NULL, *ydef = NULL, *ydir = NULL;
        CHECK_OK(run_kernel(&t, ref, false, &yr));
        sn_set_num_threads(1);
        CHECK_OK(run_kernel(&t, wf, false, &yw));
        sn_set_num_threads(2);
        CHECK_OK(run_kernel(&t, wf, false, &yw2));
        CHECK_OK(run_kernel(&t, deflt, false, &ydef));
        setenv("SN_CONV_ALGO", "direct", 1);
        CHECK_OK(run_kernel(&t, deflt, false, &ydir));
        unsetenv("SN_CONV_ALGO");
        int64_t m = sn_shape_numel(&out);
        double err = rel_err(yw, yr, m), ed = rel_err(ydir, yr, m);
        printf("%-28s %-12s err %.2e of max|ref| (direct %.2e)\n", tag, names[o], err, ed);
        CHECK(err <= 1e-4, "%s %s: f32 Winograd vs reference %.3e of max|ref| > 1e-4", tag,
              names[o], err);
        size_t bytes = (size_t)m * sizeof(float);
        CHECK(memcmp(yw, yw2, bytes) == 0, "%s %s: f32 Winograd differs at 1 and 2 threads",
              tag, names[o]);
#ifdef SN_HAVE_DNNL
        /* AVX-512: the default takes oneDNN's Winograd first (the kernel runs here only as
         * the test asks, sn_cpu_conv_wino_f32_set_on_avx512) */
        if (!sn_cpu()->avx512f) {
        CHECK(memcmp(ydef, yw, bytes) == 0,
              "%s %s: the default kernel did not run the f32 Winograd", tag, names[o]);
        CHECK(memcmp(ydir, yw, bytes) != 0, "%s %s: SN_CONV_ALGO=direct still ran a Winograd",
              tag, names[o]);
        }
#endif
        sn_free_aligned(yr);
        sn_free_aligned(yw);
        sn_free_aligned(yw2);
        sn_free_aligned(ydef);
        sn_free_aligned(ydir);
        free_case(&t);
    }
}

int main(void) {
    const sn_cpu_features *cpu = sn_cpu();
    if (!cpu->avx2 || !cpu->fma) {
        sn_test_skip("not an AVX2 + FMA CPU: no f32 Winograd of our own");
        return sn_test_finish("test_conv_wino_f32");
    }
    /* The kernel serves AVX2 CPUs without AVX-512; on AVX-512 ones it is checked all the same
     * (everything but "the default takes it"), so every CI machine runs it. */
    if (cpu->avx512f) sn_cpu_conv_wino_f32_set_on_avx512(true);
    sn_rng_init(&rng, 29, 0);
    unsetenv("SN_CONV_ALGO");
    conv_case a = make_case(1, 7, 7, 128, 128, false); /* 5x5 out: ragged last tiles */
    check_case("valid 7x7x128->128 n1", &a);
    conv_case b = make_case(3, 9, 6, 128, 136, true);
    check_case("same 9x6x128->136 n3", &b);
    conv_case d = make_case(2, 26, 26, 256, 256, false); /* the guide layer, batch 2 */
    check_case("valid 26x26x256->256 n2", &d);
    /* 576 tiles: two GEMM row tiles of each position (512 + 64) */
    conv_case r = make_case(4, 26, 26, 128, 128, false);
    check_case("valid 26x26x128->128 n4", &r);
    conv_case e = make_case(1, 8, 11, 136, 128, true); /* backward-weights: 64 + 64 + 8 rows */
    check_case("same 8x11x136->128 n1", &e);
    /* several slices: 5 images as 2 + 2 + 1 (backward-weights accumulates over the slices) */
    sn_cpu_conv_wino_f32_set_slice_bytes(16 * 16 * (128 + 128) * 4 * 2);
    conv_case s = make_case(5, 7, 8, 128, 128, true);
    check_case("same 7x8x128->128 n5 sliced", &s);
    sn_cpu_conv_wino_f32_set_slice_bytes(0);
    return sn_test_finish("test_conv_wino_f32");
}
