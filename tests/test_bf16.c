/* Mixed bfloat16 (sn_plan_opts.bf16_compute, sn_compile_opts.mixed_bfloat16).
 *
 * 1. Each bf16 kernel (matmul, conv2d and both backward ops on oneDNN) against the reference
 *    f32 kernel (computed in double) on the same random f32 inputs. Tolerance: the inputs are
 *    rounded to bfloat16's 8-bit mantissa (relative error <= 2^-9 each, so ~2^-8 per product);
 *    products are summed in f32, so the rounding errors of K terms add like a random walk and
 *    stay near 2^-8 * max|y| / sqrt(K)..2^-8 * max|y|. Bound: max|fast - ref| <= 2e-2 *
 *    max|ref| for K up to 2304 (measured: 1.9e-3..3.1e-3). Also max|fast - ref| >= 1e-4 * max|ref|,
 *    which f32 (measured <= 1e-6) never reaches: it proves bf16 really ran. Narrow
 *    convolutions (C < 16) stay f32 by design and are held to f32's 1e-4.
 * 2. The plan option reaches the kernels: one matmul planned with and without bf16_compute;
 *    SN_BF16_COMPUTE=off plans it in f32, and by default it computes in bf16 only where
 *    bf16 arithmetic is faster than f32 (sn_cpu_bf16_pays: AMD, or AMX), in f32 elsewhere.
 * 3. A small CNN trained with mixed_bfloat16 on a Fashion-MNIST subset reaches an accuracy
 *    within 0.03 of the same model in fp32 (both measured here, in this run), and bf16
 *    training is deterministic: same seed twice -> bit-identical weights.
 * Parts 1-2 are skipped where the CPU lacks AVX512-BF16 or the build lacks oneDNN (the option
 * is then ignored), and the test then exits 77 (SKIPPED) after part 3, which runs everywhere
 * (without them it trains in f32). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/kernel.h"
#include "conv_case_util.h"
#include "f32_case_util.h"
#include "nn/train/train_impl.h"
#include "sn_test.h"
#include "fmnist_test_util.h"


static sn_rng rng;

/* ---- 1. kernels vs the reference --------------------------------------------------------- */

/* expect_bf16: the error must look like bf16's (1e-4 < err <= 2e-2); else like f32's. */
static void check(const char *name, sn_op op, const sn_attrs *attr, const sn_shape *in,
                  sn_shape out, const sn_kernel *fast, bool expect_bf16) {
    tcase t;
    init_case(&t, &rng, op, attr, 2, in, &out, false);
    CHECK(fast && (!fast->supports || fast->supports(&t.call)), "%s: no kernel", name);
    float *yr = NULL, *yf = NULL;
    sn_status sr = run_kernel(&t, sn_ref_kernels()->k[op], false, &yr);
    sn_status sf = fast ? run_kernel(&t, fast, true, &yf) : SN_ERR_UNSUPPORTED;
    CHECK(sr == SN_OK && sf == SN_OK, "%s: status ref %s bf16 %s: %s", name,
          sn_status_name(sr), sn_status_name(sf), sn_last_error());
    if (sr == SN_OK && sf == SN_OK) {
        int64_t n = sn_shape_numel(&out);
        double maxref = 0, maxdiff = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs((double)yf[i] - yr[i]);
            if (fabs(yr[i]) > maxref) maxref = fabs(yr[i]);
            if (!(d <= maxdiff)) maxdiff = d; /* NaN counts as worst */
        }
        double err = maxdiff / (maxref > 1e-30 ? maxref : 1.0);
        printf("%s %-44s err %.2e (%s)\n", "    ", name, err, expect_bf16 ? "bf16" : "f32");
        if (expect_bf16)
            CHECK(err > 1e-4 && err <= 2e-2, "%s: relative error %.3e outside (1e-4, 2e-2]",
                  name, err);
        else
            CHECK(err <= 1e-4, "%s: relative error %.3e > 1e-4 (f32 expected)", name, err);
    }
    sn_free_aligned(yr);
    sn_free_aligned(yf);
    free_case(&t);
}

static void check_matmul(const char *tag, sn_shape a, sn_shape b, bool ta, bool tb) {
    sn_attrs attr;
    sn_shape out, in[2];
    matmul_case(a, b, ta, tb, &attr, &out, in);
    char name[96];
    snprintf(name, sizeof name, "matmul %s ta=%d tb=%d", tag, ta, tb);
    check(name, SN_OP_MATMUL, &attr, in, out, sn_cpu_matmul_impl("dnnl"), true);
}

/* b transposed: our own bf16 copy of b (cpu_matmul.c's own_tb) must give the product the
 * same bits as oneDNN's transposing reorder, and both be bf16 against the reference. */
static void check_matmul_tb(const char *tag, sn_shape a, sn_shape b, bool ta) {
    check_matmul(tag, a, b, ta, true);
    sn_attrs attr;
    sn_shape out, in[2];
    matmul_case(a, b, ta, true, &attr, &out, in);
    tcase t;
    init_case(&t, &rng, SN_OP_MATMUL, &attr, 2, in, &out, false);
    float *y_own = NULL, *y_dnnl = NULL;
    const sn_kernel *k = sn_cpu_matmul_impl("dnnl");
    sn_status s1 = run_kernel(&t, k, true, &y_own);
    sn_cpu_matmul_set_own_tb(false);
    sn_status s2 = run_kernel(&t, k, true, &y_dnnl);
    sn_cpu_matmul_set_own_tb(true);
    CHECK(s1 == SN_OK && s2 == SN_OK, "matmul %s: status own %s oneDNN %s: %s", tag,
          sn_status_name(s1), sn_status_name(s2), sn_last_error());
    if (s1 == SN_OK && s2 == SN_OK) {
        int64_t n = sn_shape_numel(&out), differ = 0;
        for (int64_t i = 0; i < n; i++) differ += memcmp(&y_own[i], &y_dnnl[i], 4) != 0;
        printf("     matmul %-37s own bf16 copy of b vs oneDNN's: %lld of %lld differ\n", tag,
               (long long)differ, (long long)n);
        CHECK(differ == 0, "matmul %s: %lld of %lld outputs differ between our bf16 copy of b "
              "and oneDNN's reorder (expected bit-identical)", tag, (long long)differ,
              (long long)n);
    }
    sn_free_aligned(y_own);
    sn_free_aligned(y_dnnl);
    free_case(&t);
}

/* x [n,h,w,c], w [kh,kw,c,f], VALID, stride s; all three ops. */
static void check_conv(const char *tag, int64_t n, int64_t h, int64_t w, int64_t c, int64_t k,
                       int64_t f, int s) {
    conv_case cc = conv_case_make(false, n, h, w, c, k, k, f, s, s, false);
    const sn_attrs attr = cc.attr;
    const conv_op *ops = cc.ops;
    for (int o = 0; o < 3; o++) {
        char name[96];
        snprintf(name, sizeof name, "conv %s %s", tag, ops[o].what);
        check(name, ops[o].op, &attr, ops[o].in, ops[o].out, sn_cpu_conv_impl(ops[o].op, "dnnl"),
              c >= 16);
    }
}

/* Depthwise (cpu_depthwise.c): x [n,h,w,c], w [k,k,c,m], VALID, stride s; all three ops, in
 * bf16 on the "dnnl_bf16" kernel, and in f32 on the table's under the bf16 flag. */
static void check_dw(const char *tag, int64_t n, int64_t h, int64_t w, int64_t c, int64_t k,
                     int64_t m, int s) {
    conv_case cc = conv_case_make(true, n, h, w, c, k, k, m, s, s, false);
    const sn_attrs attr = cc.attr;
    const conv_op *ops = cc.ops;
    for (int o = 0; o < 3; o++) {
        char name[96];
        snprintf(name, sizeof name, "depthwise %s %s", tag, ops[o].what);
        check(name, ops[o].op, &attr, ops[o].in, ops[o].out, sn_cpu_depthwise_impl("dnnl_bf16"),
              true);
        /* the table's kernel keeps f32 compute under mixed bf16 (cpu_depthwise.c says why) */
        snprintf(name, sizeof name, "depthwise %s %s (table: f32)", tag, ops[o].what);
        check(name, ops[o].op, &attr, ops[o].in, ops[o].out, sn_cpu_kernels()->k[ops[o].op],
              false);
    }
}

/* The sliced filter gradient's scratch (the case above): its bf16 copies hold one slice, so
 * it asks for less than 3/4 of the whole batch's copies (unsliced it asks for more than all
 * of them). */
static void check_sliced_scratch(void) {
    conv_case cc = conv_case_make(false, 21, 24, 24, 128, 1, 1, 128, 1, 1, false);
    tcase t;
    init_case(&t, &rng, SN_OP_CONV2D_BWD_FILTER, &cc.attr, 2, cc.ops[2].in, &cc.ops[2].out,
              false);
    const sn_kernel *k = sn_cpu_conv_impl(SN_OP_CONV2D_BWD_FILTER, "dnnl");
    sn_kcall c = t.call;
    c.bf16 = true;
    size_t scratch = 0, copies = (size_t)21 * (24 * 24 * 128 * 2) * 2;
    CHECK_OK(k->prepare(&c, &scratch));
    printf("     sliced bf16 filter gradient: scratch %zu bytes, whole-batch copies %zu\n",
           scratch, copies);
    CHECK(scratch < copies / 4 * 3, "sliced filter gradient asks for %zu bytes of scratch, "
          "expected < %zu (3/4 of the whole batch's bf16 copies)", scratch, copies / 4 * 3);
    if (k->release) k->release(&c);
    free_case(&t);
}

static void kernel_cases(void) {
    /* The seed CNN's dense layers scaled down: forward, dX = dY W^T, dW = X^T dY. */
    check_matmul("dense fwd", sn_shape_make(2, 20, 1152), sn_shape_make(2, 1152, 64), false, false);
    check_matmul_tb("dense bwd_data", sn_shape_make(2, 20, 64), sn_shape_make(2, 1152, 64), false);
    /* own_tb on a batched b, with ta; N = 40 and K = 40 (not multiples of 32 and 16: oneDNN's
     * reorder) */
    check_matmul_tb("batched tb", sn_shape_make(3, 3, 20, 48), sn_shape_make(3, 3, 96, 48), false);
    check_matmul_tb("ta tb", sn_shape_make(2, 48, 20), sn_shape_make(2, 64, 48), true);
    check_matmul_tb("tb N=40", sn_shape_make(2, 20, 64), sn_shape_make(2, 40, 64), false);
    check_matmul_tb("tb K=40", sn_shape_make(2, 20, 40), sn_shape_make(2, 64, 40), false);
    check_matmul("dense bwd_weights", sn_shape_make(2, 20, 1152), sn_shape_make(2, 20, 64), true,
                 false);
    check_matmul("odd 37x53x29 both transposed", sn_shape_make(2, 53, 37), sn_shape_make(2, 29, 53),
                 true, true);
    check_matmul("batched [3,2] a, 2-D b", sn_shape_make(4, 3, 2, 17, 45), sn_shape_make(2, 45, 10),
                 false, false);
    check_matmul("K=2304", sn_shape_make(2, 64, 2304), sn_shape_make(2, 2304, 48), false, false);
    /* a transposed: oneDNN reads a's bf16 copy in a's own (transposed) layout; batched, and
     * the guide CNN's weight-gradient shape scaled down (K = the batch, M large) */
    check_matmul("batched ta", sn_shape_make(3, 3, 45, 17), sn_shape_make(3, 3, 45, 10), true,
                 false);
    check_matmul("weight gradient ta, K=40", sn_shape_make(2, 40, 4608), sn_shape_make(2, 40, 64),
                 true, false);
    /* The seed CNN's conv2 (C = 256, K = 2304) on a small image; C = 16 and an odd C = 17. */
    check_conv("seed2 10x10x256->32 3x3", 2, 10, 10, 256, 3, 32, 1);
    check_conv("12x12x16->16 3x3", 3, 12, 12, 16, 3, 16, 1);
    check_conv("s2 11x11x17->33 3x3", 2, 11, 11, 17, 3, 33, 2);
    check_conv("s2 1x1 12x12x32->16 (pb=-1)", 2, 12, 12, 32, 1, 16, 2);
    /* Narrow: stays f32 (C < 16) even when bf16 is asked for. */
    check_conv("narrow 28x28x1->16 3x3", 2, 28, 28, 1, 3, 16, 1);
    /* MobileNetV2's depthwise layers scaled down: stride 1 and 2 (pb=-1), a multiplier */
    check_dw("s1 12x12x32 3x3", 2, 12, 12, 32, 3, 1, 1);
    check_dw("s2 12x12x96 3x3 (pb=-1)", 2, 12, 12, 96, 3, 1, 2);
    check_dw("s1 9x9x17 3x3 m2", 2, 9, 9, 17, 3, 2, 1);
    /* A filter gradient whose bf16 copies of x and dy (6.2 MB) exceed cpu_conv.c's 4 MB runs
     * over slices of the batch: 21 = 11 + 10 images, the second slice a primitive of its own,
     * the partial gradients summed; it asks for well under the whole batch's copies. */
    check_conv("1x1 21x24x24x128->128 (sliced dw)", 21, 24, 24, 128, 1, 128, 1);
    check_sliced_scratch();
}

/* ---- 2. the plan option reaches the kernels ---------------------------------------------- */

static double plan_matmul_err(bool bf16) {
    sn_graph *g = sn_graph_new();
    sn_shape as = sn_shape_make(2, 64, 300), bs = sn_shape_make(2, 300, 40);
    sn_node a = sn_input(g, "a", SN_F32, &as), b = sn_input(g, "b", SN_F32, &bs);
    sn_node y = sn_matmul(g, a, b, false, false);
    sn_plan_opts o = sn_plan_opts_defaults();
    o.bf16_compute = bf16;
    sn_plan *p = NULL;
    double err = NAN;
    CHECK_OK(sn_plan_new(&p, g, 1, &y, &o));
    if (p) {
        float *pa = sn_plan_buffer(p, a), *pb = sn_plan_buffer(p, b);
        for (int i = 0; i < 64 * 300; i++) pa[i] = (float)sn_rng_normal(&rng);
        for (int i = 0; i < 300 * 40; i++) pb[i] = (float)sn_rng_normal(&rng);
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        const float *py = sn_plan_buffer(p, y);
        double maxref = 0, maxdiff = 0;
        for (int i = 0; i < 64; i++)
            for (int j = 0; j < 40; j++) {
                double r = 0;
                for (int k = 0; k < 300; k++) r += (double)pa[i * 300 + k] * pb[k * 40 + j];
                maxref = fmax(maxref, fabs(r));
                maxdiff = fmax(maxdiff, fabs(py[i * 40 + j] - r));
            }
        err = maxdiff / maxref;
    }
    sn_plan_free(p);
    sn_graph_free(g);
    return err;
}

static void plan_cases(void) {
    /* main set SN_BF16_COMPUTE=on: bf16 arithmetic on every CPU with AVX512-BF16 */
    double e32 = plan_matmul_err(false), e16 = plan_matmul_err(true);
    printf("     plan matmul 64x300x40: err f32 %.2e, bf16_compute %.2e\n", e32, e16);
    CHECK(e32 <= 1e-5, "plan without bf16_compute: error %.3e (f32 expected)", e32);
    CHECK(e16 > 1e-4 && e16 <= 2e-2, "plan with bf16_compute: error %.3e outside (1e-4, 2e-2]",
          e16);
    /* off: the same plan computes in f32 */
    setenv("SN_BF16_COMPUTE", "off", 1);
    double eoff = plan_matmul_err(true);
    CHECK(!sn_cpu_bf16_pays() && eoff <= 1e-5,
          "SN_BF16_COMPUTE=off: bf16_compute plan error %.3e (f32 expected)", eoff);
    /* unset (what users get): bf16 where it is faster than f32 (AMD, AMX), f32 elsewhere */
    unsetenv("SN_BF16_COMPUTE");
    const sn_cpu_features *f = sn_cpu();
    bool pays = sn_cpu_bf16_pays();
    double eauto = plan_matmul_err(true);
    printf("     default on this CPU (%s%s): bf16 arithmetic %s, err %.2e\n",
           f->amd ? "AMD" : "not AMD", f->amx_bf16 ? ", AMX" : ", no AMX", pays ? "on" : "off",
           eauto);
    CHECK(pays == (f->amd || f->amx_bf16), "sn_cpu_bf16_pays %d on a CPU with amd=%d amx=%d",
          (int)pays, f->amd, f->amx_bf16);
    CHECK(pays ? eauto > 1e-4 && eauto <= 2e-2 : eauto <= 1e-5,
          "default bf16_compute plan error %.3e: expected %s", eauto,
          pays ? "bf16's (1e-4, 2e-2]" : "f32's <= 1e-5");
    setenv("SN_BF16_COMPUTE", "on", 1);
}

/* ---- 3. training ------------------------------------------------------------------------- */

static sn_tensor *train_x, *train_y, *test_x, *test_y;


/* conv(16) - pool - conv(32) - pool - dense(10): the second convolution (C = 16) and the dense
 * layer run in bf16 under mixed_bfloat16; the first (C = 1) stays f32 by design. Trains on
 * n_train images for `epochs`; returns the test accuracy on 1,000 images and (if weights) a
 * copy of the variables the caller frees. */
static double train_cnn(bool bf16, int64_t n_train, int epochs, unsigned char **weights,
                        size_t *bytes) {
    sn_model *m = sn_sequential_new("cnn");
    CHECK_OK(sn_model_add(m, sn_layer_conv2d(16, 3, 3, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_max_pool2d(2, 2)));
    CHECK_OK(sn_model_add(m, sn_layer_conv2d(32, 3, 3, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_max_pool2d(2, 2)));
    CHECK_OK(sn_model_add(m, sn_layer_flatten()));
    CHECK_OK(sn_model_add(m, sn_layer_dense(10, SN_ACT_NONE)));
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {28, 28, 1}}, 7));
    sn_compile_opts c = sn_compile_defaults();
    c.steps_per_execution = 20;
    c.mixed_bfloat16 = bf16;
    CHECK_OK(sn_model_compile(m, &c));
    sn_dataset *tr = fmnist_ds(train_x, train_y, n_train, 32, 11, true);
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = epochs;
    CHECK_OK(sn_model_fit(m, tr, &f, NULL));
    double v[2] = {NAN, NAN};
    int nv = 0;
    if (!weights) {
        sn_dataset *te = fmnist_ds(test_x, test_y, 1000, 100, 0, true);
        CHECK_OK(sn_model_evaluate(m, te, 0, v, 2, &nv));
        sn_dataset_free(te);
    } else {
        size_t n = 0;
        const void *buf = sn_graph_variable_buffer(sn_model_graph(m), &n);
        *weights = malloc(n);
        SN_ASSERT(*weights);
        memcpy(*weights, buf, n);
        *bytes = n;
    }
    sn_dataset_free(tr);
    sn_model_free(m);
    return v[1];
}

static void training_cases(void) {
    double t0 = sn_now();
    double a32 = train_cnn(false, 2000, 2, NULL, NULL);
    double t1 = sn_now();
    double a16 = train_cnn(true, 2000, 2, NULL, NULL);
    double t2 = sn_now();
    printf("     cnn, 2,000 images, 2 epochs: test accuracy fp32 %.4f (%.1f s), "
           "mixed_bfloat16 %.4f (%.1f s)\n", a32, t1 - t0, a16, t2 - t1);
    /* Measured: fp32 0.7340, mixed_bfloat16 0.7320 (docs/kernels.md, bf16). */
    CHECK(a32 >= 0.70, "fp32 accuracy %g < 0.70", a32);
    CHECK(a16 >= a32 - 0.03, "mixed_bfloat16 accuracy %g more than 0.03 below fp32's %g", a16,
          a32);
    unsigned char *w1 = NULL, *w2 = NULL;
    size_t n1 = 0, n2 = 0;
    train_cnn(true, 320, 1, &w1, &n1);
    train_cnn(true, 320, 1, &w2, &n2);
    CHECK(n1 == n2 && n1 > 0 && memcmp(w1, w2, n1) == 0,
          "mixed_bfloat16: same seed twice gave different weights");
    free(w1);
    free(w2);
}

int main(void) {
    /* The bf16 arithmetic itself, on every CPU with AVX512-BF16, also where the default
     * computes mixed bf16 in f32 as faster (sn_cpu_bf16_pays: Intel without AMX) */
    setenv("SN_BF16_COMPUTE", "on", 1);
    sn_rng_init(&rng, 2024, 0);
#ifdef SN_HAVE_DNNL
    const bool dnnl = true;
#else
    const bool dnnl = false; /* the bf16 matmul and convolution kernels are oneDNN's */
#endif
    if (!dnnl) {
        sn_test_skip("test_bf16: kernel and plan checks: this build has no oneDNN "
                     "(-DSN_WITH_DNNL=OFF), so bf16_compute is ignored (f32)");
    } else if (!sn_cpu()->avx512_bf16) {
        sn_test_skip("test_bf16: kernel and plan checks: this CPU lacks AVX512-BF16, so "
                     "bf16_compute is ignored (f32)");
    } else {
        kernel_cases();
        plan_cases();
    }
    if (access(FMNIST, R_OK) != 0) {
        sn_test_skip("test_bf16: training checks (Fashion-MNIST not installed)");
    } else {
        CHECK_OK(sn_mnist_load(FMNIST, "train", &train_x, &train_y));
        CHECK_OK(sn_mnist_load(FMNIST, "test", &test_x, &test_y));
        if (train_x && test_x) training_cases();
        sn_tensor_free(train_x);
        sn_tensor_free(train_y);
        sn_tensor_free(test_x);
        sn_tensor_free(test_y);
    }
    return sn_test_finish("test_bf16");
}
