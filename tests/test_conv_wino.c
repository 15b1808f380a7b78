/* The Winograd convolution (backend/cpu/cpu_conv_wino.c) against the reference kernels and
 * against oneDNN's direct convolution, forward, backward-data and backward-weights, on the
 * guide CNN's 3x3 wide layers scaled down: the same random inputs, compared by
 * max|wino - ref| / max|ref| <= 1e-4 (measured ~5e-6: the Winograd transforms round
 * differently from a direct sum, nothing more). Also: which calls it takes (3x3, stride 1,
 * >= 32 channels, multiples of 16; mixed bf16 only >= 128), that the default oneDNN kernel runs it (bit for bit the
 * Winograd kernel's output, also under mixed bf16 on CPUs without AMX) and that
 * SN_CONV_ALGO=direct turns it off (bit for bit direct); a batch of several slices.
 * Skips (77) without oneDNN or AVX-512. */
#include <stdlib.h>

#include "sn_test.h"

#ifdef SN_HAVE_DNNL /* the checks need oneDNN's kernels; main skips without them */
#include "backend/cpu/cpu_blas.h"
#include "backend/cpu/cpu_conv_wino.h"
#include "conv_case_util.h"
#include "f32_case_util.h"

static sn_rng rng;

/* A k x k case (conv_case_util.h) */
static conv_case make_case(int64_t n, int64_t h, int64_t w, int64_t c, int64_t k, int64_t f,
                           int stride, bool same) {
    return conv_case_make(false, n, h, w, c, k, k, f, stride, stride, same);
}

/* The call of op o (0 forward, 1 backward-data, 2 backward-weights), for applies() */
static sn_kcall probe_of(const conv_case *cc, int o) {
    const conv_op *co = &cc->ops[o];
    sn_kcall c;
    memset(&c, 0, sizeof c);
    c.op = co->op;
    c.attr = &cc->attr;
    c.n_in = 2;
    c.y.dtype = c.x[0].dtype = c.x[1].dtype = SN_F32;
    c.y.shape = co->out;
    c.x[0].shape = co->in[0];
    c.x[1].shape = co->in[1];
    return c;
}

static double rel_err(const float *a, const float *ref, int64_t n) {
    double md = 0, mr = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - ref[i]);
        if (!(d <= md)) md = d; /* NaN counts as the worst */
        if (fabs(ref[i]) > mr) mr = fabs(ref[i]);
    }
    return md / (mr > 1e-30 ? mr : 1.0);
}

static void check_case(const char *tag, const conv_case *cc) {
    static const sn_op ops[3] = {SN_OP_CONV2D, SN_OP_CONV2D_BWD_DATA, SN_OP_CONV2D_BWD_FILTER};
    static const char *names[3] = {"fwd", "bwd_data", "bwd_weights"};
    for (int o = 0; o < 3; o++) {
        sn_kcall p = probe_of(cc, o);
        tcase t;
        sn_shape in[2] = {p.x[0].shape, p.x[1].shape};
        init_case(&t, &rng, ops[o], &cc->attr, 2, in, &p.y.shape, false);
        const sn_kernel *wino = sn_cpu_conv_impl(ops[o], "dnnl_wino"),
                        *direct = sn_cpu_conv_impl(ops[o], "dnnl_blocked"),
                        *deflt = sn_cpu_kernels()->k[ops[o]], *ref = sn_ref_kernels()->k[ops[o]];
        CHECK(wino && direct && deflt && ref, "%s %s: kernels missing", tag, names[o]);
        CHECK(wino && wino->supports(&t.call), "%s %s: Winograd declines the call", tag,
              names[o]);
        float *yr = NULL, *yw = NULL, *yd = NULL, *ydef = NULL, *yoff = NULL;
        CHECK_OK(run_kernel(&t, ref, false, &yr));
        CHECK_OK(run_kernel(&t, wino, false, &yw));
        CHECK_OK(run_kernel(&t, direct, false, &yd));
        CHECK_OK(run_kernel(&t, deflt, false, &ydef));
        /* mixed bf16: f32 Winograd too where the CPU has no AMX (sn_cpu_conv_wino_over_bf16)
         * and sinter's bf16 Winograd is off (wino_f32; it is tested in test_conv_wino_bf16) */
        float *ybf = NULL;
        setenv("SN_CONV_ALGO", "wino_f32", 1);
        CHECK_OK(run_kernel(&t, deflt, true, &ybf));
        setenv("SN_CONV_ALGO", "direct", 1);
        CHECK_OK(run_kernel(&t, deflt, false, &yoff));
        unsetenv("SN_CONV_ALGO");
        int64_t n = sn_shape_numel(&p.y.shape);
        double ew = rel_err(yw, yr, n), ed = rel_err(yd, yr, n);
        printf("%-28s %-12s Winograd err %.2e, direct err %.2e\n", tag, names[o], ew, ed);
        CHECK(ew <= 1e-4, "%s %s: Winograd vs reference %.3e > 1e-4", tag, names[o], ew);
        CHECK(ed <= 1e-4, "%s %s: direct vs reference %.3e > 1e-4", tag, names[o], ed);
        CHECK(memcmp(ydef, yw, (size_t)n * sizeof(float)) == 0,
              "%s %s: the default kernel did not run Winograd", tag, names[o]);
        CHECK(memcmp(yoff, yd, (size_t)n * sizeof(float)) == 0,
              "%s %s: SN_CONV_ALGO=direct did not run direct convolution", tag, names[o]);
        if (sn_cpu_conv_wino_over_bf16())
            CHECK(memcmp(ybf, yw, (size_t)n * sizeof(float)) == 0,
                  "%s %s: under bf16 the default kernel did not run f32 Winograd", tag, names[o]);
        sn_free_aligned(ybf);
        sn_free_aligned(yr);
        sn_free_aligned(yw);
        sn_free_aligned(yd);
        sn_free_aligned(ydef);
        sn_free_aligned(yoff);
        free_case(&t);
    }
}

static void check_applies(void) {
    struct {
        const char *what;
        conv_case cc;
        bool want;
    } cases[] = {
        {"guide conv2 26x26x256->256", make_case(200, 26, 26, 256, 3, 256, 1, false), true},
        {"same 9x9x128->144", make_case(1, 9, 9, 128, 3, 144, 1, true), true},
        {"stride 2", make_case(2, 12, 12, 128, 3, 128, 2, false), false},
        {"5x5", make_case(2, 12, 12, 128, 5, 128, 1, false), false},
        {"small_cnn conv2 13x13x32->64", make_case(2, 13, 13, 32, 3, 64, 1, false), true},
        {"16 channels (under 32)", make_case(2, 12, 12, 16, 3, 64, 1, false), false},
        {"c 136 (not x16)", make_case(2, 12, 12, 136, 3, 128, 1, false), false},
        {"f 120 (not x16)", make_case(2, 12, 12, 128, 3, 120, 1, false), false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int o = 0; o < 3; o++) {
            sn_kcall p = probe_of(&cases[i].cc, o);
            CHECK(sn_cpu_conv_wino_applies(&p) == cases[i].want, "%s op %d: applies says %d",
                  cases[i].what, o, (int)!cases[i].want);
            /* of those, mixed bf16 takes a Winograd on the wide layers only */
            const sn_shape *ws = &cases[i].cc.ops[0].in[1];
            bool wide = ws->dim[2] >= 128 && ws->dim[3] >= 128;
            if (cases[i].want)
                CHECK(sn_cpu_conv_wino_wide(&p) == wide, "%s op %d: wide says %d",
                      cases[i].what, o, (int)!wide);
        }
}

#endif

int main(void) {
#ifndef SN_HAVE_DNNL
    sn_test_skip("built without oneDNN: no Winograd convolution");
    return sn_test_finish("test_conv_wino");
#else
    if (!sn_cpu()->avx512f) {
        sn_test_skip("no AVX-512 on this CPU: no Winograd convolution");
        return sn_test_finish("test_conv_wino");
    }
    sn_rng_init(&rng, 15, 0);
    unsetenv("SN_CONV_ALGO");
    check_applies();
    conv_case a = make_case(2, 12, 12, 128, 3, 128, 1, false);
    check_case("guide-like 12x12x128->128", &a);
    conv_case b = make_case(1, 9, 7, 128, 3, 144, 1, true);
    check_case("same 9x7x128->144", &b);
    /* more images than one slice (48): 100 = 34 + 34 + 32, two primitives, and a filter
     * gradient summed over the slices */
    conv_case d = make_case(100, 6, 6, 128, 3, 128, 1, false);
    check_case("100 images 6x6x128->128", &d);
    return sn_test_finish("test_conv_wino");
#endif
}
