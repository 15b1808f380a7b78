/* Layers: forward values on tiny inputs against numbers worked out by hand (or, for the
 * multi-channel convolution and the 4-D BatchNormalization, against plain loops written here),
 * finite-difference gradients of every layer through the graph, and the initialisers.
 *
 * Gradient checks run the real layer code in double precision: the model's dtype is set to
 * SN_F64 before build (nn_impl.h), so variables, inputs and every constant a forward adds are
 * f64 and the reference kernels run. In f32 a central difference has ~1e-3 relative noise,
 * too coarse to catch a wrong factor in a gradient rule. Check, as tests/test_gradcheck.c:
 * |analytic - numeric| <= tol * max(1, |analytic|, |numeric|), eps = 1e-6. */
#include <stdlib.h>

#include "layer_test_util.h"

/* ---- forward values ---------------------------------------------------------------------- */
static void test_dense(void) {
    /* kernel [in 3, units 2], bias: y = relu(x k + b) worked out by hand:
     * [1, 0, -1] -> [1 - 5, 2 - 6] + [0.5, -1] = [-3.5, -5] -> relu [0, 0]
     * [2, 1,  0] -> [2 + 3, 4 + 4] + [0.5, -1] = [5.5, 7] */
    const float k[] = {1, 2, 3, 4, 5, 6}, b[] = {0.5f, -1}, x[] = {1, 0, -1, 2, 1, 0};
    const float want[] = {0, 0, 5.5f, 7};
    fixture f;
    if (fx_build(&f, sn_layer_dense(2, SN_ACT_RELU), (sn_shape)S1(3), 1, SN_F32) && fx_plan(&f, 2, false)) {
        set_var(&f, 0, k);
        set_var(&f, 1, b);
        expect("dense relu", run(&f, x), want, 4, 1e-6);
        sn_shape os = sn_node_shape(f.m->g, f.y);
        CHECK(os.ndim == 2 && os.dim[0] == 2 && os.dim[1] == 2, "dense output rank %d", os.ndim);
    }
    fx_free(&f);
    /* The same rows as one sequence [1, 2, 3]: Dense acts on the last axis. */
    if (fx_build(&f, sn_layer_dense(2, SN_ACT_NONE), (sn_shape)S2(2, 3), 1, SN_F32) && fx_plan(&f, 1, false)) {
        set_var(&f, 0, k);
        set_var(&f, 1, b);
        const float want3[] = {-3.5f, -5, 5.5f, 7};
        expect("dense on [B, T, in]", run(&f, x), want3, 4, 1e-6);
        CHECK(f.l->out_shape.ndim == 2 && f.l->out_shape.dim[1] == 2, "dense 3-D out shape");
    }
    fx_free(&f);
}

static void test_conv_hand(void) {
    /* x = 3x3 image 1..9, kernel 2x2 [[1, 2], [3, 4]], bias 0.5.
     * valid: x00 + 2 x01 + 3 x10 + 4 x11 = 1 + 4 + 12 + 20 = 37, then 47, 67, 77.
     * same (TF/Keras: pad total k - 1 = 1, all of it after: bottom/right): the last column
     * sees only its left tap pair: 3 + 3*6 = 21, 6 + 3*9 = 33; the last row 7 + 2*8 = 23,
     * 8 + 2*9 = 26; the corner 9.
     * same, stride 2: rows/columns 0 and 2 of the stride-1 result: 37, 21, 23, 9. */
    const float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, k[] = {1, 2, 3, 4}, b[] = {0.5f};
    static const float valid[] = {37.5f, 47.5f, 67.5f, 77.5f};
    static const float same[] = {37.5f, 47.5f, 21.5f, 67.5f, 77.5f, 33.5f, 23.5f, 26.5f, 9.5f};
    static const float same2[] = {37.5f, 21.5f, 23.5f, 9.5f};
    struct { sn_padding pad; int stride; const float *want; int64_t n, out; const char *what; } c[] = {
        {SN_PAD_VALID, 1, valid, 4, 2, "conv2d valid"},
        {SN_PAD_SAME, 1, same, 9, 3, "conv2d same"},
        {SN_PAD_SAME, 2, same2, 4, 2, "conv2d same stride 2"},
    };
    for (int i = 0; i < 3; i++) {
        sn_conv2d_layer_opts o = sn_conv2d_layer_defaults(1, 2, 2);
        o.padding = c[i].pad;
        o.stride_h = o.stride_w = c[i].stride;
        fixture f;
        if (fx_build(&f, sn_layer_conv2d_ex(&o), (sn_shape)S3(3, 3, 1), 1, SN_F32) && fx_plan(&f, 1, false)) {
            CHECK(f.l->out_shape.dim[0] == c[i].out && f.l->out_shape.dim[1] == c[i].out,
                  "%s: out shape %lld", c[i].what, (long long)f.l->out_shape.dim[0]);
            set_var(&f, 0, k);
            set_var(&f, 1, b);
            expect(c[i].what, run(&f, x), c[i].want, c[i].n, 1e-6);
        }
        fx_free(&f);
    }
}

/* 2 input channels, 3 filters, stride (2, 1), same padding, tanh: against a direct loop. */
static void test_conv_loop(void) {
    const int H = 5, W = 4, C = 2, F = 3, KH = 3, KW = 2, SH = 2, SW = 1;
    const int OH = 3, OW = 4; /* ceil(5/2), ceil(4/1) */
    const int PT = ((OH - 1) * SH + KH - H) / 2, PL = ((OW - 1) * SW + KW - W) / 2;
    sn_conv2d_layer_opts o = sn_conv2d_layer_defaults(F, KH, KW);
    o.stride_h = SH;
    o.stride_w = SW;
    o.padding = SN_PAD_SAME;
    o.activation = SN_ACT_TANH;
    float x[2 * 5 * 4 * 2], want[2 * 3 * 4 * 3];
    sn_rng r;
    sn_rng_init(&r, 5, 0);
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = (float)sn_rng_normal(&r);
    fixture f;
    if (fx_build(&f, sn_layer_conv2d_ex(&o), (sn_shape)S3(H, W, C), 3, SN_F32) && fx_plan(&f, 2, false)) {
        const float *k = sn_variable_data(f.m->g, f.l->vars[0]);
        float bias[3] = {0.1f, -0.2f, 0.3f};
        set_var(&f, 1, bias);
        for (int n = 0; n < 2; n++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++)
                    for (int fo = 0; fo < F; fo++) {
                        double s = bias[fo];
                        for (int a = 0; a < KH; a++)
                            for (int bb = 0; bb < KW; bb++) {
                                int ih = oh * SH + a - PT, iw = ow * SW + bb - PL;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                for (int c = 0; c < C; c++)
                                    s += (double)x[((n * H + ih) * W + iw) * C + c] *
                                         k[((a * KW + bb) * C + c) * F + fo];
                            }
                        want[((n * OH + oh) * OW + ow) * F + fo] = (float)tanh(s);
                    }
        expect("conv2d 2->3 channels, stride (2,1), same, tanh", run(&f, x), want,
               (int64_t)(sizeof want / sizeof want[0]), 1e-5);
    }
    fx_free(&f);
}

static void test_pools(void) {
    /* 4x4 image 1..16, 2x2 pools: max [[6, 8], [14, 16]], mean [[3.5, 5.5], [11.5, 13.5]]. */
    float x16[16], x9[9];
    for (int i = 0; i < 16; i++) x16[i] = (float)(i + 1);
    for (int i = 0; i < 9; i++) x9[i] = (float)(i + 1);
    const float wmax[] = {6, 8, 14, 16}, wavg[] = {3.5f, 5.5f, 11.5f, 13.5f};
    /* 3x3 image 1..9, 2x2 stride 2 same: the padding (bottom/right) is not counted in the
     * average, as in TF/Keras: max [[5, 6], [8, 9]], mean [[3, 4.5], [7.5, 9]]. */
    const float smax[] = {5, 6, 8, 9}, savg[] = {3, 4.5f, 7.5f, 9};
    sn_pool2d_opts same = {.pool_h = 2, .pool_w = 2, .padding = SN_PAD_SAME};
    struct { sn_layer *l; sn_shape in; const float *x, *want; const char *what; } c[] = {
        {sn_layer_max_pool2d(2, 2), S3(4, 4, 1), x16, wmax, "max_pool2d 2x2"},
        {sn_layer_avg_pool2d(2, 2), S3(4, 4, 1), x16, wavg, "avg_pool2d 2x2"},
        {sn_layer_max_pool2d_ex(&same), S3(3, 3, 1), x9, smax, "max_pool2d same"},
        {sn_layer_avg_pool2d_ex(&same), S3(3, 3, 1), x9, savg, "avg_pool2d same"},
    };
    for (int i = 0; i < 4; i++) {
        fixture f;
        if (fx_build(&f, c[i].l, c[i].in, 1, SN_F32) && fx_plan(&f, 1, false)) {
            CHECK(f.l->out_shape.dim[0] == 2 && f.l->out_shape.dim[1] == 2 && f.l->out_shape.dim[2] == 1,
                  "%s: out shape", c[i].what);
            CHECK(f.l->pool.stride_h == 2 && f.l->pool.stride_w == 2, "%s: strides default to the pool",
                  c[i].what);
            expect(c[i].what, run(&f, c[i].x), c[i].want, 4, 1e-6);
        }
        fx_free(&f);
    }
}

static void test_flatten_activation(void) {
    fixture f;
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i;
    if (fx_build(&f, sn_layer_flatten(), (sn_shape)S3(2, 3, 2), 1, SN_F32) && fx_plan(&f, 1, false)) {
        CHECK(f.l->out_shape.ndim == 1 && f.l->out_shape.dim[0] == 12, "flatten shape");
        expect("flatten keeps row-major order", run(&f, x), x, 12, 0);
    }
    fx_free(&f);
    /* softmax([1, 2, 3]) = e^i / (e + e^2 + e^3) = 0.09003057, 0.24472847, 0.66524096 */
    const float xs[] = {1, 2, 3, -1, 0, 0.5f};
    const float wsm[] = {0.09003057f, 0.24472847f, 0.66524096f, 0.12195165f, 0.33149896f, 0.54654939f};
    const float wsig[] = {0.7310586f, 0.8807971f, 0.9525741f, 0.2689414f, 0.5f, 0.6224593f};
    const float wtanh[] = {0.7615942f, 0.9640276f, 0.9950548f, -0.7615942f, 0, 0.4621172f};
    const float wrelu[] = {1, 2, 3, 0, 0, 0.5f};
    struct { sn_activation a; const float *want; const char *what; } c[] = {
        {SN_ACT_SOFTMAX, wsm, "activation softmax"}, {SN_ACT_SIGMOID, wsig, "activation sigmoid"},
        {SN_ACT_TANH, wtanh, "activation tanh"}, {SN_ACT_RELU, wrelu, "activation relu"},
        {SN_ACT_NONE, xs, "activation linear"},
    };
    for (int i = 0; i < 5; i++) {
        if (fx_build(&f, sn_layer_activation(c[i].a), (sn_shape)S1(3), 1, SN_F32) && fx_plan(&f, 2, false))
            expect(c[i].what, run(&f, xs), c[i].want, 6, 1e-6);
        fx_free(&f);
    }
}

static void test_dropout(void) {
    enum { N = 4000 };
    float *x = malloc(sizeof *x * N);
    for (int i = 0; i < N; i++) x[i] = 1.0f + (float)(i % 7);
    fixture f;
    /* training: each element is 0 or x / (1 - 0.25); about a quarter are 0 */
    if (fx_build(&f, sn_layer_dropout(0.25), (sn_shape)S1(1000), 9, SN_F32) && fx_plan(&f, 4, true)) {
        const float *y = run(&f, x);
        int zeros = 0, bad = 0;
        for (int i = 0; i < N; i++) {
            if (y[i] == 0) zeros++;
            else if (fabsf(y[i] - x[i] / 0.75f) > 1e-5f * x[i]) bad++;
        }
        CHECK(bad == 0, "dropout: %d kept values not scaled by 1/(1-rate)", bad);
        /* binomial(4000, 0.25): mean 1000, sd 27; 5 sd */
        CHECK(abs(zeros - N / 4) < 140, "dropout: %d of %d dropped, expected about %d", zeros, N, N / 4);
        /* the mask is a function of the model seed: a second model with the same seed agrees */
        fixture f2;
        if (fx_build(&f2, sn_layer_dropout(0.25), (sn_shape)S1(1000), 9, SN_F32) && fx_plan(&f2, 4, true)) {
            float *y1 = malloc(sizeof *y1 * N);
            memcpy(y1, y, sizeof *y1 * N);
            sn_plan_set_step(f.p, 0);
            y = run(&f, x);
            CHECK(memcmp(y, y1, sizeof *y1 * N) == 0, "dropout: same step, different mask");
            const float *y2 = run(&f2, x); /* f2 at step 0, f at step 1 now */
            CHECK(memcmp(y2, y1, sizeof *y1 * N) == 0, "dropout: same seed, different mask");
            free(y1);
        }
        fx_free(&f2);
    }
    fx_free(&f);
    if (fx_build(&f, sn_layer_dropout(0.25), (sn_shape)S1(1000), 9, SN_F32) && fx_plan(&f, 4, false)) {
        expect("dropout at inference is the identity", run(&f, x), x, N, 0);
        CHECK(f.y == f.x, "dropout at inference adds no node");
    }
    fx_free(&f);
    free(x);
}

static void test_batch_norm(void) {
    /* x [4, 2]: channel 0 = 1, 2, 3, 4 (mean 2.5, biased variance 1.25); channel 1 = 2, 4, 6, 8
     * (mean 5, variance 5). gamma [1, 2], beta [0, 1]. */
    const float x[] = {1, 2, 2, 4, 3, 6, 4, 8}, gamma[] = {1, 2}, beta[] = {0, 1};
    const double mean[2] = {2.5, 5}, var[2] = {1.25, 5};
    float want[8];
    for (int i = 0; i < 8; i++) {
        int c = i % 2;
        want[i] = (float)((x[i] - mean[c]) / sqrt(var[c] + 1e-3) * gamma[c] + beta[c]);
    }
    fixture f;
    if (fx_build(&f, sn_layer_batch_norm(), (sn_shape)S1(2), 1, SN_F32) && fx_plan(&f, 4, true)) {
        CHECK(f.l->n_vars == 4 && strcmp(f.l->var_names[2], "moving_mean") == 0 &&
              strcmp(f.l->var_names[3], "moving_variance") == 0, "bn variables");
        CHECK(f.u.n == 2, "bn training pushes 2 updates, got %d", f.u.n);
        set_var(&f, 0, gamma);
        set_var(&f, 1, beta);
        expect("batch_norm training", run(&f, x), want, 8, 1e-5);
        /* moving = moving * 0.99 + batch * 0.01, from 0 and 1 */
        const float wmm[] = {0.025f, 0.05f}, wmv[] = {0.99f + 0.0125f, 0.99f + 0.05f};
        expect("bn moving_mean after a step", sn_variable_data(f.m->g, f.l->vars[2]), wmm, 2, 1e-6);
        expect("bn moving_variance after a step (biased variance)",
               sn_variable_data(f.m->g, f.l->vars[3]), wmv, 2, 1e-6);
    }
    fx_free(&f);
    /* inference: moving_mean [1, 2], moving_variance [4, 9] */
    if (fx_build(&f, sn_layer_batch_norm(), (sn_shape)S1(2), 1, SN_F32) && fx_plan(&f, 4, false)) {
        const float mm[] = {1, 2}, mv[] = {4, 9};
        set_var(&f, 0, gamma);
        set_var(&f, 1, beta);
        set_var(&f, 2, mm);
        set_var(&f, 3, mv);
        for (int i = 0; i < 8; i++) {
            int c = i % 2;
            want[i] = (float)((x[i] - mm[c]) / sqrt(mv[c] + 1e-3) * gamma[c] + beta[c]);
        }
        expect("batch_norm inference", run(&f, x), want, 8, 1e-6);
        CHECK(f.u.n == 0, "bn inference pushes no updates");
        const float wmm[] = {1, 2};
        expect("bn inference leaves moving_mean", sn_variable_data(f.m->g, f.l->vars[2]), wmm, 2, 0);
    }
    fx_free(&f);
    /* 4-D input [2, 2, 3, 3]: statistics over batch, height and width, per channel (loop). */
    enum { N = 36, C = 3 };
    float x4[N], w4[N];
    sn_rng r;
    sn_rng_init(&r, 8, 0);
    for (int i = 0; i < N; i++) x4[i] = (float)(3 * sn_rng_normal(&r) + i % 3);
    for (int c = 0; c < C; c++) {
        double s = 0, ss = 0;
        for (int i = c; i < N; i += C) s += x4[i];
        double mu = s / (N / C);
        for (int i = c; i < N; i += C) ss += (x4[i] - mu) * (x4[i] - mu);
        double v = ss / (N / C);
        for (int i = c; i < N; i += C) w4[i] = (float)((x4[i] - mu) / sqrt(v + 1e-3));
    }
    if (fx_build(&f, sn_layer_batch_norm(), (sn_shape)S3(2, 3, 3), 1, SN_F32) && fx_plan(&f, 2, true))
        expect("batch_norm training on NHWC", run(&f, x4), w4, N, 2e-5);
    fx_free(&f);
}

static void test_gradients(void) {
    sn_conv2d_layer_opts same = sn_conv2d_layer_defaults(3, 3, 2);
    same.padding = SN_PAD_SAME;
    same.stride_h = 2;
    same.activation = SN_ACT_TANH;
    sn_pool2d_opts ps = {.pool_h = 3, .pool_w = 2, .stride_h = 2, .stride_w = 1, .padding = SN_PAD_SAME};
    /* matmul/conv sums: ~1e-6 relative noise in the numeric estimate, tolerance 1e-5 */
    grad_case("Dense linear", sn_layer_dense(3, SN_ACT_NONE), (sn_shape)S1(4), 3, false, 1e-5);
    grad_case("Dense relu", sn_layer_dense(3, SN_ACT_RELU), (sn_shape)S1(4), 3, false, 1e-5);
    grad_case("Dense sigmoid on [B, T, in]", sn_layer_dense(2, SN_ACT_SIGMOID), (sn_shape)S2(3, 4), 2, false, 1e-5);
    grad_case("Dense softmax", sn_layer_dense(4, SN_ACT_SOFTMAX), (sn_shape)S1(3), 2, false, 1e-5);
    grad_case("Conv2D valid", sn_layer_conv2d(2, 3, 3, SN_ACT_NONE), (sn_shape)S3(5, 4, 2), 2, false, 1e-5);
    grad_case("Conv2D same stride (2,1) tanh", sn_layer_conv2d_ex(&same), (sn_shape)S3(5, 4, 2), 2, false, 1e-5);
    grad_case("MaxPooling2D 2x2", sn_layer_max_pool2d(2, 2), (sn_shape)S3(4, 4, 2), 2, false, 1e-7);
    grad_case("MaxPooling2D 3x2 same", sn_layer_max_pool2d_ex(&ps), (sn_shape)S3(5, 4, 2), 1, false, 1e-7);
    grad_case("AveragePooling2D 2x2", sn_layer_avg_pool2d(2, 2), (sn_shape)S3(4, 4, 2), 2, false, 1e-7);
    grad_case("AveragePooling2D 3x2 same", sn_layer_avg_pool2d_ex(&ps), (sn_shape)S3(5, 4, 2), 1, false, 1e-7);
    grad_case("Flatten", sn_layer_flatten(), (sn_shape)S3(2, 3, 2), 2, false, 1e-7);
    grad_case("Dropout training", sn_layer_dropout(0.4), (sn_shape)S1(10), 3, true, 1e-7);
    grad_case("Activation tanh", sn_layer_activation(SN_ACT_TANH), (sn_shape)S1(5), 2, false, 1e-7);
    /* BN in training: the output depends on the whole batch through mean and variance */
    grad_case("BatchNormalization training", sn_layer_batch_norm(), (sn_shape)S1(3), 5, true, 1e-5);
    grad_case("BatchNormalization training NHWC", sn_layer_batch_norm(), (sn_shape)S3(2, 2, 3), 2, true, 1e-5);
    grad_case("BatchNormalization inference", sn_layer_batch_norm(), (sn_shape)S1(3), 4, false, 1e-5);
}

/* ---- initialisers -------------------------------------------------------------------------- */
static void test_init(void) {
    fixture a, b, c;
    bool ok = fx_build(&a, sn_layer_dense(300, SN_ACT_NONE), (sn_shape)S1(200), 42, SN_F32);
    ok = fx_build(&b, sn_layer_dense(300, SN_ACT_NONE), (sn_shape)S1(200), 42, SN_F32) && ok;
    ok = fx_build(&c, sn_layer_dense(300, SN_ACT_NONE), (sn_shape)S1(200), 43, SN_F32) && ok;
    if (ok) {
        const float *k = sn_variable_data(a.m->g, a.l->vars[0]), *bias = sn_variable_data(a.m->g, a.l->vars[1]);
        const int64_t n = 200 * 300;
        double lim = sqrt(6.0 / 500), s = 0, ss = 0, mx = 0;
        for (int64_t i = 0; i < n; i++) {
            s += k[i];
            ss += (double)k[i] * k[i];
            mx = fmax(mx, fabs(k[i]));
        }
        double mean = s / n, var = ss / n - mean * mean;
        CHECK(mx <= lim && mx > 0.999 * lim, "glorot: max |w| %g, limit %g", mx, lim);
        /* U(-l, l): mean 0 (sd of the sample mean l / sqrt(3 n) = 2.6e-4), variance l^2 / 3 */
        CHECK(fabs(mean) < 1.5e-3, "glorot: mean %g", mean);
        CHECK(fabs(var / (lim * lim / 3) - 1) < 0.02, "glorot: variance %g, expected %g", var, lim * lim / 3);
        int nz = 0;
        for (int i = 0; i < 300; i++) nz += bias[i] != 0;
        CHECK(nz == 0, "bias: %d nonzero", nz);
        size_t ba, bb, bc;
        const void *va = sn_graph_variable_buffer(a.m->g, &ba), *vb = sn_graph_variable_buffer(b.m->g, &bb),
                   *vc = sn_graph_variable_buffer(c.m->g, &bc);
        CHECK(ba == bb && memcmp(va, vb, ba) == 0, "same seed: different weights");
        CHECK(ba == bc && memcmp(va, vc, ba) != 0, "different seed: same weights");
    }
    fx_free(&a);
    fx_free(&b);
    fx_free(&c);
    /* Conv2D: fan_in = 3*3*4 = 36, fan_out = 3*3*8 = 72 */
    if (fx_build(&a, sn_layer_conv2d(8, 3, 3, SN_ACT_RELU), (sn_shape)S3(5, 5, 4), 1, SN_F32)) {
        const float *k = sn_variable_data(a.m->g, a.l->vars[0]);
        double lim = sqrt(6.0 / 108), mx = 0;
        for (int i = 0; i < 3 * 3 * 4 * 8; i++) mx = fmax(mx, fabs(k[i]));
        CHECK(mx <= lim && mx > 0.9 * lim, "conv glorot: max |w| %g, limit %g", mx, lim);
        CHECK(strcmp(sn_node_name(a.m->g, a.l->vars[0]), "conv2d/kernel") == 0 &&
              strcmp(sn_node_name(a.m->g, a.l->vars[1]), "conv2d/bias") == 0,
              "conv variable names '%s'", sn_node_name(a.m->g, a.l->vars[0]));
    }
    fx_free(&a);
    if (fx_build(&a, sn_layer_batch_norm(), (sn_shape)S1(3), 1, SN_F32)) {
        const float want[4][3] = {{1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}};
        const char *names[4] = {"batch_normalization/gamma", "batch_normalization/beta",
                                "batch_normalization/moving_mean", "batch_normalization/moving_variance"};
        for (int j = 0; j < 4; j++) {
            expect(names[j], sn_variable_data(a.m->g, a.l->vars[j]), want[j], 3, 0);
            CHECK(strcmp(sn_node_name(a.m->g, a.l->vars[j]), names[j]) == 0, "bn var %d name '%s'", j,
                  sn_node_name(a.m->g, a.l->vars[j]));
        }
        CHECK(sn_model_param_count(a.m, true) == 6 && sn_model_param_count(a.m, false) == 12,
              "bn params %lld trainable of %lld", (long long)sn_model_param_count(a.m, true),
              (long long)sn_model_param_count(a.m, false));
    }
    fx_free(&a);
}

static void test_bad_args(void) {
    CHECK(sn_layer_dense(0, SN_ACT_NONE) == NULL && strstr(sn_last_error(), "units"), "dense(0): '%s'",
          sn_last_error());
    CHECK(sn_layer_dropout(1.0) == NULL && strstr(sn_last_error(), "rate"), "dropout(1): '%s'", sn_last_error());
    CHECK(sn_layer_conv2d(4, 0, 3, SN_ACT_NONE) == NULL && strstr(sn_last_error(), "kernel"),
          "conv kernel 0: '%s'", sn_last_error());
    CHECK(sn_layer_max_pool2d(0, 2) == NULL && strstr(sn_last_error(), "MaxPooling2D"), "pool 0: '%s'",
          sn_last_error());
    CHECK(sn_layer_activation((sn_activation)99) == NULL, "activation 99");
    sn_layer *l = sn_layer_flatten();
    CHECK_ERR(sn_layer_set_name(l, "a/b"), SN_ERR_INVALID, "'/'");
    sn_model *m = sn_sequential_new(NULL);
    CHECK_ERR(sn_model_add(m, NULL), SN_ERR_INVALID, "layer is NULL");
    sn_model_add(m, l);
    sn_model_free(m);
}

int main(void) {
    test_dense();
    test_conv_hand();
    test_conv_loop();
    test_pools();
    test_flatten_activation();
    test_dropout();
    test_batch_norm();
    test_gradients();
    test_init();
    test_bad_args();
    return sn_test_finish("test_layers");
}
