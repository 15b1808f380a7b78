/* The heavy CPU kernels (backend/cpu/: matmul, convolution, pooling) against the reference
 * kernels (backend/ref/), every implementation of each op: the same random f32 inputs, each
 * with its own output buffer, compared by max|fast - ref| / max|ref| <= 1e-4.
 * Covers all four transpose combinations, batched and broadcast matmuls, stride 2, SAME
 * padding with odd sizes (bottom padding larger than top), non-square kernels, 1x1, channel
 * counts that are not a multiple of the vector blocks, max-pool ties (first maximum wins)
 * and the seed CNN's shapes scaled down. */
#include <math.h>
#include <string.h>

#include "backend/cpu/cpu_blas.h"
#include "backend/kernel.h"
#include "conv_case_util.h"
#include "f32_case_util.h"
#include "sinter/graph.h"

static int n_pass, n_fail;
static sn_rng rng;

static void check(const char *name, sn_op op, const sn_attrs *attr, int n_in, const sn_shape *in,
                  sn_shape out, const sn_kernel *fast, bool ties) {
    tcase t;
    init_case(&t, &rng, op, attr, n_in, in, &out, ties);
    if (!fast || (fast->supports && !fast->supports(&t.call))) {
        printf("FAIL %-34s %-10s does not support the call\n", name, fast ? fast->impl : "-");
        n_fail++;
        free_case(&t);
        return;
    }
    const sn_kernel *ref = sn_ref_kernels()->k[op];
    float *yr = NULL, *yf = NULL;
    sn_status sr = run_kernel(&t, ref, false, &yr), sf = run_kernel(&t, fast, false, &yf);
    if (sr != SN_OK || sf != SN_OK) {
        printf("FAIL %-34s %-10s status ref %s fast %s: %s\n", name, fast->impl,
               sn_status_name(sr), sn_status_name(sf), sn_last_error());
        n_fail++;
    } else {
        int64_t n = sn_shape_numel(&out), worst = -1;
        double maxref = 0, maxdiff = 0;
        for (int64_t i = 0; i < n; i++) {
            double r = yr[i], f = yf[i];
            if (fabs(r) > maxref) maxref = fabs(r);
            double d = fabs(f - r);
            if (!(d <= maxdiff)) maxdiff = d, worst = i; /* NaN counts as worst */
        }
        double err = maxdiff / (maxref > 1e-30 ? maxref : 1.0);
        if (err <= 1e-4) {
            n_pass++;
            printf("ok   %-34s %-10s err %.2e\n", name, fast->impl, err);
        } else {
            n_fail++;
            printf("FAIL %-34s %-10s err %.3e at %lld: fast %g ref %g\n", name, fast->impl, err,
                   (long long)worst, yf[worst], yr[worst]);
        }
    }
    sn_free_aligned(yr);
    sn_free_aligned(yf);
    free_case(&t);
}

/* ---- matmul ------------------------------------------------------------------------------ */

static void check_matmul(const char *tag, sn_shape a, sn_shape b, bool ta, bool tb) {
    sn_attrs attr;
    sn_shape out, in[2];
    matmul_case(a, b, ta, tb, &attr, &out, in);
    char name[80];
    snprintf(name, sizeof name, "matmul %s ta=%d tb=%d", tag, ta, tb);
    const char *impls[] = {"openblas", "dnnl"};
    for (int i = 0; i < 2; i++) {
        const sn_kernel *k = sn_cpu_matmul_impl(impls[i]);
        if (k) check(name, SN_OP_MATMUL, &attr, 2, in, out, k, false);
    }
}

static sn_shape mk(int nd, const int64_t *d) {
    sn_shape s = {.ndim = nd};
    for (int i = 0; i < nd; i++) s.dim[i] = d[i];
    return s;
}

static void matmul_cases(void) {
    const int64_t M = 37, N = 29, K = 53;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int64_t ad[2] = {ta ? K : M, ta ? M : K}, bd[2] = {tb ? N : K, tb ? K : N};
            check_matmul("2-D", mk(2, ad), mk(2, bd), ta, tb);
            int64_t ab[4] = {3, 2, ad[0], ad[1]}, bb[4] = {3, 2, bd[0], bd[1]};
            check_matmul("batched [3,2]", mk(4, ab), mk(4, bb), ta, tb);
            check_matmul("batched a, 2-D b", mk(4, ab), mk(2, bd), ta, tb);
            check_matmul("2-D a, batched b", mk(2, ad), mk(4, bb), ta, tb);
        }
    /* Many small products: the batch-parallel path. */
    check_matmul("16 x 8x8x8", sn_shape_make(3, 16, 8, 8), sn_shape_make(3, 16, 8, 8), false, true);
    /* The seed CNN's dense layers scaled down: forward, dX = dY W^T, dW = X^T dY. */
    check_matmul("dense fwd", sn_shape_make(2, 20, 1152), sn_shape_make(2, 1152, 64), false, false);
    check_matmul("dense bwd_data", sn_shape_make(2, 20, 64), sn_shape_make(2, 1152, 64), false, true);
    check_matmul("dense bwd_weights", sn_shape_make(2, 20, 1152), sn_shape_make(2, 20, 64), true, false);
    check_matmul("1x1", sn_shape_make(2, 1, 1), sn_shape_make(2, 1, 1), false, false);
    check_matmul("K=0", sn_shape_make(2, 3, 0), sn_shape_make(2, 0, 4), false, false);
}

/* ---- convolution ------------------------------------------------------------------------- */

/* x [n,h,w,c], w [kh,kw,c,f], stride (sh,sw); same: TF SAME padding (else VALID). */
static void check_conv(const char *tag, int64_t n, int64_t h, int64_t w, int64_t c, int64_t kh,
                       int64_t kw, int64_t f, int sh, int sw, bool same) {
    conv_case cc = conv_case_make(false, n, h, w, c, kh, kw, f, sh, sw, same);
    const sn_attrs attr = cc.attr;
    const conv_op *ops = cc.ops;
    const char *impls[] = {"dnnl", "dnnl_blocked", "dnnl_plain", "openblas", "c1"};
    for (int o = 0; o < 3; o++) {
        char name[96];
        snprintf(name, sizeof name, "conv %s %s", tag, ops[o].what);
        for (int i = 0; i < 5; i++) {
            const sn_kernel *k = sn_cpu_conv_impl(ops[o].op, impls[i]);
            if (k && i == 4) {
                /* c1 takes one-channel inputs with 16 or 32 filters only: it must decline the
                 * others (they stay on oneDNN), and is checked where it accepts */
                sn_kcall probe = {.op = ops[o].op, .attr = &attr, .n_in = 2,
                                  .y = {SN_F32, ops[o].out},
                                  .x = {{SN_F32, ops[o].in[0]}, {SN_F32, ops[o].in[1]}}};
                bool want = c == 1 && (f == 16 || f == 32);
                if (k->supports(&probe) != want) {
                    printf("FAIL %-34s %-10s supports() says %d, expected %d\n", name, k->impl,
                           (int)k->supports(&probe), (int)want);
                    n_fail++;
                }
                if (!want) continue;
            }
            if (k) check(name, ops[o].op, &attr, 2, ops[o].in, ops[o].out, k, false);
        }
    }
}

static void conv_cases(void) {
    check_conv("seed1 28x28x1->16 3x3", 3, 28, 28, 1, 3, 3, 16, 1, 1, false);
    check_conv("seed2 26x26x16->16 3x3", 3, 26, 26, 16, 3, 3, 16, 1, 1, false);
    check_conv("valid s2 11x11x3 3x3", 2, 11, 11, 3, 3, 3, 5, 2, 2, false);
    check_conv("same 9x7x4 3x3", 2, 9, 7, 4, 3, 3, 6, 1, 1, true);
    check_conv("same s2 9x9x3 3x3", 2, 9, 9, 3, 3, 3, 5, 2, 2, true);
    check_conv("same s2 8x10x3 3x3 (pb>pt)", 2, 8, 10, 3, 3, 3, 7, 2, 2, true);
    check_conv("same 7x7x2 5x5", 1, 7, 7, 2, 5, 5, 3, 1, 1, true);
    check_conv("same 6x5x3 2x2 (pb>pt)", 2, 6, 5, 3, 2, 2, 4, 1, 1, true);
    check_conv("same 7x9x5 3x1 s(1,2)", 2, 7, 9, 5, 3, 1, 4, 1, 2, true);
    check_conv("1x1 5x5x17->33", 2, 5, 5, 17, 1, 1, 33, 1, 1, false);
    /* an implied bottom/right padding of -1: the last row and column are read by no window
     * (Xception's 1x1 stride-2 residual convolutions); the fast kernels must take it */
    check_conv("same s2 1x1 8x8x6->10 (pb=-1)", 2, 8, 8, 6, 1, 1, 10, 2, 2, true);
    check_conv("valid s2 1x1 8x6x5->7 (pb=-1)", 2, 8, 6, 5, 1, 1, 7, 2, 2, false);
    check_conv("valid s3 2x2 8x8x3->4 (pb=-1)", 2, 8, 8, 3, 2, 2, 4, 3, 3, false);
    /* one input channel (cpu_conv_c1.c's filter gradient): small_cnn's first layer scaled
     * down, padding, strides, a 5x5 window, a batch of one; 48 filters stay on oneDNN */
    check_conv("c1 small_cnn 28x28x1->32 3x3", 5, 28, 28, 1, 3, 3, 32, 1, 1, false);
    check_conv("c1 same 9x7x1->16 3x3", 3, 9, 7, 1, 3, 3, 16, 1, 1, true);
    check_conv("c1 same s2 8x10x1->32 3x3", 2, 8, 10, 1, 3, 3, 32, 2, 2, true);
    check_conv("c1 declines 8x8x1->48 3x3", 2, 8, 8, 1, 3, 3, 48, 1, 1, false);
    check_conv("c1 same 11x11x1->16 5x5", 1, 11, 11, 1, 5, 5, 16, 1, 1, true);
    check_conv("c1 valid 6x6x1->16 2x3 s(2,1)", 4, 6, 6, 1, 2, 3, 16, 2, 1, false);
}

/* ---- depthwise convolution ---------------------------------------------------------------- */

/* x [n,h,w,c], w [kh,kw,c,m] (output channel c*m + j), stride (sh,sw); same as check_conv.
 * The CPU table's kernel must take the call (a refusal is a failure): oneDNN's grouped
 * convolution (cpu_depthwise.c); skipped in builds without oneDNN, where the row is ref. */
static void check_dw(const char *tag, int64_t n, int64_t h, int64_t w, int64_t c, int64_t kh,
                     int64_t kw, int64_t m, int sh, int sw, bool same) {
    conv_case cc = conv_case_make(true, n, h, w, c, kh, kw, m, sh, sw, same);
    const sn_attrs attr = cc.attr;
    const conv_op *ops = cc.ops;
    for (int o = 0; o < 3; o++) {
        const sn_kernel *k = sn_cpu_kernels()->k[ops[o].op];
        if (!k || !strcmp(k->impl, "ref")) continue;
        char name[96];
        snprintf(name, sizeof name, "dw %s %s", tag, ops[o].what);
        check(name, ops[o].op, &attr, 2, ops[o].in, ops[o].out, k, false);
    }
}

static void dw_cases(void) {
    check_dw("same 3x3 s1 7x6x5 m1", 2, 7, 6, 5, 3, 3, 1, 1, 1, true);
    check_dw("same 3x3 s2 8x8x16 m1", 2, 8, 8, 16, 3, 3, 1, 2, 2, true);
    check_dw("same 3x3 s2 9x9x4 m2", 2, 9, 9, 4, 3, 3, 2, 2, 2, true);
    /* an implied bottom/right padding of -1: the last row and column are read by no window
     * ("valid" 3x3 stride 2 on an even size, "same" 1x1 stride 2, "valid" 2x2 stride 3);
     * the fast kernel must take it and the data gradient must be 0 there, not unwritten */
    check_dw("valid 3x3 s2 8x8x16 m1 (pb=-1)", 2, 8, 8, 16, 3, 3, 1, 2, 2, false);
    check_dw("valid 3x3 s2 10x7x6 m2 (pb=-1)", 2, 10, 7, 6, 3, 3, 2, 2, 2, false);
    check_dw("same 1x1 s2 8x8x8 m1 (pb=-1)", 2, 8, 8, 8, 1, 1, 1, 2, 2, true);
    check_dw("valid 2x2 s3 10x9x5 m3 (pb=-2,-1)", 2, 10, 9, 5, 2, 2, 3, 3, 3, false);
}

/* ---- pooling ----------------------------------------------------------------------------- */

static void check_pool(const char *tag, int64_t n, int64_t h, int64_t w, int64_t c, int ph,
                       int pw, int sh, int sw, bool same, bool ties) {
    int64_t oh, ow, pt = 0, pl = 0;
    if (same) {
        oh = (h + sh - 1) / sh, ow = (w + sw - 1) / sw;
        int64_t th = (oh - 1) * sh + ph - h, tw = (ow - 1) * sw + pw - w;
        pt = (th > 0 ? th : 0) / 2, pl = (tw > 0 ? tw : 0) / 2;
    } else {
        oh = (h - ph) / sh + 1, ow = (w - pw) / sw + 1;
    }
    sn_shape xs = sn_shape_make(4, n, h, w, c), ys = sn_shape_make(4, n, oh, ow, c);
    sn_attrs attr;
    memset(&attr, 0, sizeof attr);
    attr.pool.pool_h = ph, attr.pool.pool_w = pw, attr.pool.stride_h = sh, attr.pool.stride_w = sw;
    attr.pool.padding = same ? SN_PAD_SAME : SN_PAD_VALID;
    attr.pool.pad_top = (int)pt, attr.pool.pad_left = (int)pl;
    attr.pool.x_shape = xs;
    char name[96];
    sn_shape in2[2] = {xs, ys};
    snprintf(name, sizeof name, "max_pool %s", tag);
    check(name, SN_OP_MAX_POOL2D, &attr, 1, &xs, ys, sn_cpu_pool_impl(SN_OP_MAX_POOL2D), ties);
    snprintf(name, sizeof name, "max_pool_grad %s", tag);
    check(name, SN_OP_MAX_POOL2D_GRAD, &attr, 2, in2, xs, sn_cpu_pool_impl(SN_OP_MAX_POOL2D_GRAD),
          ties);
    if (ties) return;
    snprintf(name, sizeof name, "avg_pool %s", tag);
    check(name, SN_OP_AVG_POOL2D, &attr, 1, &xs, ys, sn_cpu_pool_impl(SN_OP_AVG_POOL2D), false);
    snprintf(name, sizeof name, "avg_pool_grad %s", tag);
    check(name, SN_OP_AVG_POOL2D_GRAD, &attr, 1, &ys, xs, sn_cpu_pool_impl(SN_OP_AVG_POOL2D_GRAD),
          false);
}

static void pool_cases(void) {
    check_pool("2x2 s2 8x8x70", 3, 8, 8, 70, 2, 2, 2, 2, false, false);
    check_pool("2x2 s2 valid 9x9x5", 2, 9, 9, 5, 2, 2, 2, 2, false, false);
    /* stride > pool: rows and columns no window covers (the gradient stores, then zeroes them) */
    check_pool("2x2 s3 valid 10x11x7 (gaps)", 2, 10, 11, 7, 2, 2, 3, 3, false, false);
    check_pool("3x3 s2 same 9x9x6", 2, 9, 9, 6, 3, 3, 2, 2, true, false);
    check_pool("3x3 s1 same 7x6x5 (overlap)", 2, 7, 6, 5, 3, 3, 1, 1, true, false);
    /* overlapping windows that leave the last row and column out: the gradient zeroes rows as
     * its windows reach them, and the rest at the end */
    check_pool("3x3 s2 valid 10x10x6 (overlap, gaps)", 2, 10, 10, 6, 3, 3, 2, 2, false, false);
    check_pool("2x2 s2 same 7x7x3 (pb>pt)", 2, 7, 7, 3, 2, 2, 2, 2, true, false);
    check_pool("2x3 s(2,1) same 8x7x300", 1, 8, 7, 300, 2, 3, 2, 1, true, false);
    check_pool("ties 2x2 s2 8x8x20", 2, 8, 8, 20, 2, 2, 2, 2, false, true);
    check_pool("ties 3x3 s1 same 6x6x9", 2, 6, 6, 9, 3, 3, 1, 1, true, true);
    check_pool("seed 24x24x32 2x2 s2", 2, 24, 24, 32, 2, 2, 2, 2, false, false);
}

/* The CPU table picks these kernels for f32 and keeps the reference for other dtypes. */
static void selection_cases(void) {
    tcase t;
    sn_attrs attr;
    memset(&attr, 0, sizeof attr);
    sn_shape in[2] = {sn_shape_make(2, 4, 5), sn_shape_make(2, 5, 6)};
    sn_shape out = sn_shape_make(2, 4, 6);
    init_case(&t, &rng, SN_OP_MATMUL, &attr, 2, in, &out, false);
    const sn_kernel *k = sn_kernel_select(sn_cpu_kernels(), &t.call);
    bool fast_f32 = k && strcmp(k->impl, "ref") != 0;
    t.call.y.dtype = t.call.x[0].dtype = t.call.x[1].dtype = SN_F64;
    k = sn_kernel_select(sn_cpu_kernels(), &t.call);
    bool ref_f64 = k && strcmp(k->impl, "ref") == 0;
    free_case(&t);
    if (fast_f32 && ref_f64) {
        n_pass++;
        printf("ok   kernel selection (f32 fast, f64 reference)\n");
    } else {
        n_fail++;
        printf("FAIL kernel selection: f32 fast %d, f64 reference %d\n", fast_f32, ref_f64);
    }
}

int main(void) {
    sn_rng_init(&rng, 1234, 0);
    if (getenv("SN_KERNELS")) unsetenv("SN_KERNELS");
    matmul_cases();
    conv_cases();
    dw_cases();
    pool_cases();
    selection_cases();
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
