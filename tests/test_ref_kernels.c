/* The reference kernels (backend/ref/) against values worked out by hand or from the defining
 * formula written out here independently: one call struct built by hand per case, no graph.
 * Prints every mismatch and exits non-zero if any. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernel.h"
#include "kernel_test_util.h"
#include "sinter/graph.h"

static sn_kernel_table table; /* filled from the ref register functions */

/* ---- a hand-built kernel call (tcall, tc_init, tc_input: kernel_test_util.h) ------------- */

static sn_status tc_run(tcall *t, void *out) {
    t->c.out = out;
    const sn_kernel *k = table.k[t->c.op];
    if (!k) {
        FAIL("no reference kernel for op %d", (int)t->c.op);
        return SN_ERR_UNSUPPORTED;
    }
    return k->run(&t->c);
}

/* Runs and reports a failing status. */
static void tc_ok(tcall *t, void *out, const char *what) {
    sn_status s = tc_run(t, out);
    if (s != SN_OK) FAIL("%s: status %d: %s", what, (int)s, sn_last_error());
}

static void check(const char *what, const double *got, const double *want, int64_t n, double tol) {
    int shown = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        if (!(err <= tol * (1 + fabs(want[i])))) {
            if (shown++ < 6) FAIL("%s[%lld]: got %.10g, want %.10g", what, (long long)i, got[i], want[i]);
            else failures++;
        }
    }
}

static void check_f32(const char *what, const float *got, const double *want, int64_t n, double tol) {
    double *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) abort();
    for (int64_t i = 0; i < n; i++) tmp[i] = got[i];
    check(what, tmp, want, n, tol);
    free(tmp);
}

#define S1(a) sn_shape_make(1, (int64_t)(a))
#define S2(a, b) sn_shape_make(2, (int64_t)(a), (int64_t)(b))
#define S3(a, b, c) sn_shape_make(3, (int64_t)(a), (int64_t)(b), (int64_t)(c))
#define S4(a, b, c, d) sn_shape_make(4, (int64_t)(a), (int64_t)(b), (int64_t)(c), (int64_t)(d))
#define N_OF(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

/* ---- matmul ----------------------------------------------------------------------------- */

static void test_matmul(void) {
    const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 2, 3, 4, 5, 6}; /* 2x3, 3x2 */
    const double want[] = {22, 28, 49, 64};
    double out[4];
    tcall t;
    tc_init(&t, SN_OP_MATMUL, SN_F64, S2(2, 2));
    tc_input(&t, SN_F64, S2(2, 3), a);
    tc_input(&t, SN_F64, S2(3, 2), b);
    tc_ok(&t, out, "matmul");
    check("matmul 2x3*3x2", out, want, 4, 0);

    /* The same product from transposed storage: a^T is 3x2, b^T is 2x3. */
    const double at[] = {1, 4, 2, 5, 3, 6}, bt[] = {1, 3, 5, 2, 4, 6};
    tc_init(&t, SN_OP_MATMUL, SN_F64, S2(2, 2));
    t.attr.matmul.ta = true;
    t.attr.matmul.tb = true;
    tc_input(&t, SN_F64, S2(3, 2), at);
    tc_input(&t, SN_F64, S2(2, 3), bt);
    tc_ok(&t, out, "matmul ta tb");
    check("matmul ta,tb", out, want, 4, 0);

    /* Batch of 2 on the left, shared 2-D right operand; second batch is 2 * a. */
    const double ab[] = {1, 2, 3, 4, 5, 6, 2, 4, 6, 8, 10, 12};
    const double wantb[] = {22, 28, 49, 64, 44, 56, 98, 128};
    double outb[8];
    tc_init(&t, SN_OP_MATMUL, SN_F64, S3(2, 2, 2));
    tc_input(&t, SN_F64, S3(2, 2, 3), ab);
    tc_input(&t, SN_F64, S2(3, 2), b);
    tc_ok(&t, outb, "matmul batched");
    check("matmul batch x 2-D", outb, wantb, 8, 0);

    /* bf16 holds these small integers exactly. */
    uint16_t a16[6], b16[6], o16[4];
    for (int i = 0; i < 6; i++) a16[i] = sn_f32_to_bf16((float)a[i]), b16[i] = sn_f32_to_bf16((float)b[i]);
    tc_init(&t, SN_OP_MATMUL, SN_BF16, S2(2, 2));
    tc_input(&t, SN_BF16, S2(2, 3), a16);
    tc_input(&t, SN_BF16, S2(3, 2), b16);
    tc_ok(&t, o16, "matmul bf16");
    for (int i = 0; i < 4; i++) out[i] = sn_bf16_to_f32(o16[i]);
    check("matmul bf16", out, want, 4, 0);

    /* Large enough to take the threaded path; checked against a plain triple loop. */
    enum { M = 70, K = 50, N = 60 };
    static float fa[M * K], fb[K * N], fo[M * N];
    static double fw[M * N];
    for (int i = 0; i < M * K; i++) fa[i] = (float)((i * 7 % 13) - 6) * 0.25f;
    for (int i = 0; i < K * N; i++) fb[i] = (float)((i * 5 % 11) - 5) * 0.5f;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)fa[i * K + k] * fb[k * N + j];
            fw[i * N + j] = s;
        }
    tc_init(&t, SN_OP_MATMUL, SN_F32, S2(M, N));
    tc_input(&t, SN_F32, S2(M, K), fa);
    tc_input(&t, SN_F32, S2(K, N), fb);
    tc_ok(&t, fo, "matmul 70x50x60");
    check_f32("matmul 70x50x60 f32", fo, fw, M * N, 1e-6);
}

/* ---- elementwise ------------------------------------------------------------------------ */

static void test_elementwise(void) {
    tcall t;
    const double a[] = {1, 2, 3, 4, 5, 6}, r[] = {10, 20, 30}, col[] = {2, 4};
    double out[6];

    tc_init(&t, SN_OP_ADD, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S2(2, 3), a);
    tc_input(&t, SN_F64, S1(3), r);
    tc_ok(&t, out, "add");
    check("add [2,3]+[3]", out, (double[]){11, 22, 33, 14, 25, 36}, 6, 0);

    tc_init(&t, SN_OP_SUB, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S1(3), r);
    tc_input(&t, SN_F64, S2(2, 3), a);
    tc_ok(&t, out, "sub");
    check("sub [3]-[2,3]", out, (double[]){9, 18, 27, 6, 15, 24}, 6, 0);

    /* Outer product through broadcasting: [2,1] * [1,3]. */
    tc_init(&t, SN_OP_MUL, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S2(2, 1), col);
    tc_input(&t, SN_F64, S2(1, 3), r);
    tc_ok(&t, out, "mul");
    check("mul [2,1]*[1,3]", out, (double[]){20, 40, 60, 40, 80, 120}, 6, 0);

    tc_init(&t, SN_OP_DIV, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S2(2, 3), a);
    tc_input(&t, SN_F64, S2(2, 1), col);
    tc_ok(&t, out, "div");
    check("div [2,3]/[2,1]", out, (double[]){0.5, 1, 1.5, 1, 1.25, 1.5}, 6, 0);

    tc_init(&t, SN_OP_BIAS_ADD, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S2(2, 3), a);
    tc_input(&t, SN_F64, S1(3), r);
    tc_ok(&t, out, "bias_add");
    check("bias_add", out, (double[]){11, 22, 33, 14, 25, 36}, 6, 0);

    const double x[] = {-2, -0.5, 0, 0.5, 2, 30};
    struct { sn_op op; double (*f)(double); const char *name; } un[] = {
        {SN_OP_TANH, tanh, "tanh"}, {SN_OP_EXP, exp, "exp"},
    };
    for (int u = 0; u < 2; u++) {
        double want[6];
        for (int i = 0; i < 6; i++) want[i] = un[u].f(x[i]);
        tc_init(&t, un[u].op, SN_F64, S1(6));
        tc_input(&t, SN_F64, S1(6), x);
        tc_ok(&t, out, un[u].name);
        check(un[u].name, out, want, 6, 1e-15);
    }
    tc_init(&t, SN_OP_RELU, SN_F64, S1(6));
    tc_input(&t, SN_F64, S1(6), x);
    tc_ok(&t, out, "relu");
    check("relu", out, (double[]){0, 0, 0, 0.5, 2, 30}, 6, 0);

    tc_init(&t, SN_OP_SIGMOID, SN_F64, S1(6));
    tc_input(&t, SN_F64, S1(6), x);
    tc_ok(&t, out, "sigmoid");
    double ws[6];
    for (int i = 0; i < 6; i++) ws[i] = 1 / (1 + exp(-x[i]));
    check("sigmoid", out, ws, 6, 1e-15);
    /* Large negative input must not overflow into NaN. */
    double big = -1000, sb;
    tc_init(&t, SN_OP_SIGMOID, SN_F64, S1(1));
    tc_input(&t, SN_F64, S1(1), &big);
    tc_ok(&t, &sb, "sigmoid(-1000)");
    if (!(sb == 0)) FAIL("sigmoid(-1000) = %g, want 0", sb);

    const double p[] = {1, 4, 0.25};
    tc_init(&t, SN_OP_LOG, SN_F64, S1(3));
    tc_input(&t, SN_F64, S1(3), p);
    tc_ok(&t, out, "log");
    check("log", out, (double[]){0, log(4.0), log(0.25)}, 3, 1e-15);
    tc_init(&t, SN_OP_SQRT, SN_F64, S1(3));
    tc_input(&t, SN_F64, S1(3), p);
    tc_ok(&t, out, "sqrt");
    check("sqrt", out, (double[]){1, 2, 0.5}, 3, 0);
    tc_init(&t, SN_OP_NEG, SN_F64, S1(3));
    tc_input(&t, SN_F64, S1(3), p);
    tc_ok(&t, out, "neg");
    check("neg", out, (double[]){-1, -4, -0.25}, 3, 0);

    /* Pointwise gradients. */
    const double y[] = {0.25, 0.5, 0.9}, dy[] = {2, -1, 3};
    tc_init(&t, SN_OP_SIGMOID_GRAD, SN_F64, S1(3));
    tc_input(&t, SN_F64, S1(3), y);
    tc_input(&t, SN_F64, S1(3), dy);
    tc_ok(&t, out, "sigmoid_grad");
    check("sigmoid_grad", out, (double[]){2 * 0.25 * 0.75, -0.25, 3 * 0.9 * 0.1}, 3, 1e-15);
    tc_init(&t, SN_OP_TANH_GRAD, SN_F64, S1(3));
    tc_input(&t, SN_F64, S1(3), y);
    tc_input(&t, SN_F64, S1(3), dy);
    tc_ok(&t, out, "tanh_grad");
    check("tanh_grad", out, (double[]){2 * (1 - 0.0625), -0.75, 3 * (1 - 0.81)}, 3, 1e-15);
    const double xr[] = {-1, 0, 2};
    tc_init(&t, SN_OP_RELU_GRAD, SN_F64, S1(3));
    tc_input(&t, SN_F64, S1(3), xr);
    tc_input(&t, SN_F64, S1(3), dy);
    tc_ok(&t, out, "relu_grad");
    check("relu_grad", out, (double[]){0, 0, 3}, 3, 0);
}

static void test_cast(void) {
    tcall t;
    /* 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0 (0x3F80).
     * 1 + 3 * 2^-8 is halfway between 0x3F81 and 0x3F82: ties to even -> 0x3F82. */
    const float f[] = {1.0f, 1.00390625f, 1.01171875f, -2.5f};
    const uint16_t want[] = {0x3F80, 0x3F80, 0x3F82, 0xC020};
    uint16_t o[4];
    tc_init(&t, SN_OP_CAST, SN_BF16, S1(4));
    t.attr.cast.to = SN_BF16;
    tc_input(&t, SN_F32, S1(4), f);
    tc_ok(&t, o, "cast f32->bf16");
    for (int i = 0; i < 4; i++)
        if (o[i] != want[i]) FAIL("cast f32->bf16 [%d]: got 0x%04X want 0x%04X", i, o[i], want[i]);

    const int32_t lab[] = {0, 7, -3};
    float fo[3];
    tc_init(&t, SN_OP_CAST, SN_F32, S1(3));
    t.attr.cast.to = SN_F32;
    tc_input(&t, SN_I32, S1(3), lab);
    tc_ok(&t, fo, "cast i32->f32");
    check_f32("cast i32->f32", fo, (double[]){0, 7, -3}, 3, 0);
}

/* ---- softmax family --------------------------------------------------------------------- */

static void test_softmax(void) {
    tcall t;
    /* softmax([1, 2, 3]) = e^k / (e + e^2 + e^3); rows shifted by a constant give the same. */
    double e1 = exp(1.0), e2 = exp(2.0), e3 = exp(3.0), s = e1 + e2 + e3;
    const double x[] = {1, 2, 3, 1001, 1002, 1003};
    double want[6] = {e1 / s, e2 / s, e3 / s, e1 / s, e2 / s, e3 / s}, out[6];
    tc_init(&t, SN_OP_SOFTMAX, SN_F64, S2(2, 3));
    t.attr.axis.axis = 1;
    tc_input(&t, SN_F64, S2(2, 3), x);
    tc_ok(&t, out, "softmax");
    check("softmax rows", out, want, 6, 1e-14);
    for (int r = 0; r < 2; r++)
        if (fabs(out[3 * r] + out[3 * r + 1] + out[3 * r + 2] - 1) > 1e-15) FAIL("softmax row %d sum != 1", r);
    if (fabs(out[0] - 0.09003057317038046) > 1e-15) FAIL("softmax[0] = %.17g", out[0]);

    double lwant[6];
    for (int i = 0; i < 6; i++) lwant[i] = log(want[i]);
    tc_init(&t, SN_OP_LOG_SOFTMAX, SN_F64, S2(2, 3));
    t.attr.axis.axis = 1;
    tc_input(&t, SN_F64, S2(2, 3), x);
    tc_ok(&t, out, "log_softmax");
    check("log_softmax rows", out, lwant, 6, 1e-14);

    /* Over axis 0 of [2, 2]: columns (0, ln 3) and (0, 0). */
    const double xc[] = {0, 0, log(3.0), 0};
    tc_init(&t, SN_OP_SOFTMAX, SN_F64, S2(2, 2));
    t.attr.axis.axis = 0;
    tc_input(&t, SN_F64, S2(2, 2), xc);
    tc_ok(&t, out, "softmax axis 0");
    check("softmax axis 0", out, (double[]){0.25, 0.5, 0.75, 0.5}, 4, 1e-15);

    /* Gradients from their formulas. */
    const double y[] = {0.2, 0.3, 0.5}, dy[] = {1, -2, 0.5};
    double dot = 0.2 * 1 + 0.3 * -2 + 0.5 * 0.5, sdy = 1 - 2 + 0.5;
    tc_init(&t, SN_OP_SOFTMAX_GRAD, SN_F64, S2(1, 3));
    t.attr.axis.axis = 1;
    tc_input(&t, SN_F64, S2(1, 3), y);
    tc_input(&t, SN_F64, S2(1, 3), dy);
    tc_ok(&t, out, "softmax_grad");
    check("softmax_grad", out, (double[]){0.2 * (1 - dot), 0.3 * (-2 - dot), 0.5 * (0.5 - dot)}, 3, 1e-15);
    const double ly[] = {log(0.2), log(0.3), log(0.5)};
    tc_init(&t, SN_OP_LOG_SOFTMAX_GRAD, SN_F64, S2(1, 3));
    t.attr.axis.axis = 1;
    tc_input(&t, SN_F64, S2(1, 3), ly);
    tc_input(&t, SN_F64, S2(1, 3), dy);
    tc_ok(&t, out, "log_softmax_grad");
    check("log_softmax_grad", out, (double[]){1 - 0.2 * sdy, -2 - 0.3 * sdy, 0.5 - 0.5 * sdy}, 3, 1e-14);
}

static void test_xent(void) {
    tcall t;
    const double logits[] = {1, 2, 3, 1, 1, 1};
    const int32_t labels[] = {2, 0};
    double out[6];
    tc_init(&t, SN_OP_SPARSE_XENT, SN_F64, S1(2));
    tc_input(&t, SN_F64, S2(2, 3), logits);
    tc_input(&t, SN_I32, S1(2), labels);
    tc_ok(&t, out, "sparse_xent");
    double lse0 = log(exp(1.0) + exp(2.0) + exp(3.0));
    check("sparse_xent", out, (double[]){lse0 - 3, log(3.0)}, 2, 1e-15);

    /* Gradient: (softmax - onehot) * dloss. */
    const double dloss[] = {2, 0.5};
    tc_init(&t, SN_OP_SPARSE_XENT_GRAD, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S2(2, 3), logits);
    tc_input(&t, SN_I32, S1(2), labels);
    tc_input(&t, SN_F64, S1(2), dloss);
    tc_ok(&t, out, "sparse_xent_grad");
    double want[6];
    for (int j = 0; j < 3; j++) want[j] = 2 * (exp(logits[j] - lse0) - (j == 2));
    for (int j = 0; j < 3; j++) want[3 + j] = 0.5 * (1.0 / 3 - (j == 0));
    check("sparse_xent_grad", out, want, 6, 1e-15);

    /* A label outside [0, C) is an error naming the label, the example and the range. */
    static double big[40];
    const int32_t bad[] = {0, 1, 2, 12};
    double o4[4];
    tc_init(&t, SN_OP_SPARSE_XENT, SN_F64, S1(4));
    tc_input(&t, SN_F64, S2(4, 10), big);
    tc_input(&t, SN_I32, S1(4), bad);
    sn_status st = tc_run(&t, o4);
    const char *msg = sn_last_error();
    if (st != SN_ERR_INVALID) FAIL("bad label: status %d, want SN_ERR_INVALID", (int)st);
    if (strcmp(msg, "sparse_softmax_xent: label 12 at example 3 is outside [0, 10)") != 0)
        FAIL("bad label message: \"%s\"", msg);

    /* Accuracy and argmax: ties go to the first maximum. */
    const double lg[] = {0.1, 0.7, 0.2, 5, 5, 1, -1, -3, -2};
    const int32_t lb[] = {1, 1, 0};
    float acc[3];
    tc_init(&t, SN_OP_SPARSE_ACCURACY, SN_F32, S1(3));
    tc_input(&t, SN_F64, S2(3, 3), lg);
    tc_input(&t, SN_I32, S1(3), lb);
    tc_ok(&t, acc, "sparse_accuracy");
    check_f32("sparse_accuracy", acc, (double[]){1, 0, 1}, 3, 0);
    int32_t am[3];
    tc_init(&t, SN_OP_ARGMAX, SN_I32, S1(3));
    tc_input(&t, SN_F64, S2(3, 3), lg);
    tc_ok(&t, am, "argmax");
    if (am[0] != 1 || am[1] != 0 || am[2] != 0) FAIL("argmax = %d %d %d, want 1 0 0", am[0], am[1], am[2]);
}

/* ---- reductions ------------------------------------------------------------------------- */

static void test_reduce(void) {
    tcall t;
    double x[24], out[24];
    for (int i = 0; i < 24; i++) x[i] = i; /* [2, 3, 4]: x[a][b][c] = 12a + 4b + c */
    /* Sum over axis 1: 3 * (12a + c) + 12. */
    double want[8];
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 4; c++) want[a * 4 + c] = 3 * (12 * a + c) + 12;
    tc_init(&t, SN_OP_REDUCE_SUM, SN_F64, S3(2, 1, 4));
    t.attr.reduce.mask = 1u << 1;
    t.attr.reduce.keepdims = true;
    tc_input(&t, SN_F64, S3(2, 3, 4), x);
    tc_ok(&t, out, "reduce_sum");
    check("reduce_sum axis 1", out, want, 8, 0);

    /* Mean over axes 0 and 2 (no keepdims): mean of 12a + c over a, c = 6 + 1.5 + 4b. */
    tc_init(&t, SN_OP_REDUCE_MEAN, SN_F64, S1(3));
    t.attr.reduce.mask = (1u << 0) | (1u << 2);
    tc_input(&t, SN_F64, S3(2, 3, 4), x);
    tc_ok(&t, out, "reduce_mean");
    check("reduce_mean axes 0,2", out, (double[]){7.5, 11.5, 15.5}, 3, 1e-15);

    /* Max over everything, and over the last axis. */
    tc_init(&t, SN_OP_REDUCE_MAX, SN_F64, sn_shape_make(0));
    t.attr.reduce.mask = 7;
    tc_input(&t, SN_F64, S3(2, 3, 4), x);
    tc_ok(&t, out, "reduce_max all");
    check("reduce_max all", out, (double[]){23}, 1, 0);

    /* reduce_max_grad: ties go to the first position. */
    const double xm[] = {1, 3, 3, 2, 0, 5}, ym[] = {3, 5}, dym[] = {10, 20};
    tc_init(&t, SN_OP_REDUCE_MAX_GRAD, SN_F64, S2(2, 3));
    t.attr.reduce.mask = 1u << 1;
    tc_input(&t, SN_F64, S2(2, 3), xm);
    tc_input(&t, SN_F64, S1(2), ym);
    tc_input(&t, SN_F64, S1(2), dym);
    tc_ok(&t, out, "reduce_max_grad");
    check("reduce_max_grad", out, (double[]){0, 10, 0, 0, 0, 20}, 6, 0);

    /* broadcast_to: [2, 1] -> [2, 3] and [3] -> [2, 3]. */
    const double col[] = {1, 2}, row[] = {7, 8, 9};
    tc_init(&t, SN_OP_BROADCAST_TO, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S2(2, 1), col);
    tc_ok(&t, out, "broadcast_to col");
    check("broadcast_to [2,1]", out, (double[]){1, 1, 1, 2, 2, 2}, 6, 0);
    tc_init(&t, SN_OP_BROADCAST_TO, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S1(3), row);
    tc_ok(&t, out, "broadcast_to row");
    check("broadcast_to [3]", out, (double[]){7, 8, 9, 7, 8, 9}, 6, 0);
}

/* ---- shape ops -------------------------------------------------------------------------- */

static void test_shape(void) {
    tcall t;
    const double x[] = {1, 2, 3, 4, 5, 6};
    double out[24];
    tc_init(&t, SN_OP_RESHAPE, SN_F64, S2(3, 2));
    tc_input(&t, SN_F64, S2(2, 3), x);
    tc_ok(&t, out, "reshape");
    check("reshape", out, x, 6, 0);

    tc_init(&t, SN_OP_TRANSPOSE, SN_F64, S2(3, 2));
    t.attr.transpose.perm[0] = 1;
    t.attr.transpose.perm[1] = 0;
    tc_input(&t, SN_F64, S2(2, 3), x);
    tc_ok(&t, out, "transpose");
    check("transpose 2-D", out, (double[]){1, 4, 2, 5, 3, 6}, 6, 0);

    /* 3-D: in [2, 3, 4] (value 100a + 10b + c), perm (2, 0, 1) -> out [4, 2, 3]:
     * out[i][j][k] = in[j][k][i]. */
    double x3[24], w3[24];
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++) x3[(a * 3 + b) * 4 + c] = 100 * a + 10 * b + c;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 3; k++) w3[(i * 2 + j) * 3 + k] = 100 * j + 10 * k + i;
    tc_init(&t, SN_OP_TRANSPOSE, SN_F64, S3(4, 2, 3));
    t.attr.transpose.perm[0] = 2;
    t.attr.transpose.perm[1] = 0;
    t.attr.transpose.perm[2] = 1;
    tc_input(&t, SN_F64, S3(2, 3, 4), x3);
    tc_ok(&t, out, "transpose 3-D");
    check("transpose 3-D", out, w3, 24, 0);

    /* slice [1:2, 1:3, 0:4:] of x3 -> [1, 2, 4]; then its gradient puts it back. */
    tc_init(&t, SN_OP_SLICE, SN_F64, S3(1, 2, 4));
    t.attr.slice.begin[0] = 1;
    t.attr.slice.begin[1] = 1;
    t.attr.slice.in_shape = S3(2, 3, 4);
    tc_input(&t, SN_F64, S3(2, 3, 4), x3);
    tc_ok(&t, out, "slice");
    check("slice", out, (double[]){110, 111, 112, 113, 120, 121, 122, 123}, 8, 0);
    double sl[8], dx[24], wdx[24] = {0};
    memcpy(sl, out, sizeof sl);
    for (int i = 0; i < 8; i++) wdx[16 + i] = sl[i];
    tc_init(&t, SN_OP_SLICE_GRAD, SN_F64, S3(2, 3, 4));
    t.attr.slice.begin[0] = 1;
    t.attr.slice.begin[1] = 1;
    t.attr.slice.in_shape = S3(2, 3, 4);
    tc_input(&t, SN_F64, S3(1, 2, 4), sl);
    tc_ok(&t, dx, "slice_grad");
    check("slice_grad", dx, wdx, 24, 0);

    /* concat along axis 1: [2,1] ++ [2,2] ++ [2,1]. */
    const double c0[] = {1, 2}, c1[] = {3, 4, 5, 6}, c2[] = {7, 8};
    tc_init(&t, SN_OP_CONCAT, SN_F64, S2(2, 4));
    t.attr.axis.axis = 1;
    tc_input(&t, SN_F64, S2(2, 1), c0);
    tc_input(&t, SN_F64, S2(2, 2), c1);
    tc_input(&t, SN_F64, S2(2, 1), c2);
    tc_ok(&t, out, "concat");
    check("concat axis 1", out, (double[]){1, 3, 4, 7, 2, 5, 6, 8}, 8, 0);

    /* gather rows of a [4, 2] table; gather_grad scatter-adds repeated indices. */
    const float table4[] = {0, 1, 10, 11, 20, 21, 30, 31};
    const int32_t idx[] = {2, 0, 2, 3};
    float g[8];
    tc_init(&t, SN_OP_GATHER, SN_F32, S3(2, 2, 2));
    tc_input(&t, SN_F32, S2(4, 2), table4);
    tc_input(&t, SN_I32, S2(2, 2), idx);
    tc_ok(&t, g, "gather");
    check_f32("gather", g, (double[]){20, 21, 0, 1, 20, 21, 30, 31}, 8, 0);
    const int32_t badidx[] = {2, 0, 4, 3};
    tc_init(&t, SN_OP_GATHER, SN_F32, S3(2, 2, 2));
    tc_input(&t, SN_F32, S2(4, 2), table4);
    tc_input(&t, SN_I32, S2(2, 2), badidx);
    if (tc_run(&t, g) != SN_ERR_INVALID ||
        strcmp(sn_last_error(), "gather: index 4 at position 2 is outside [0, 4)") != 0)
        FAIL("gather bad index: \"%s\"", sn_last_error());
    const float dyg[] = {1, 2, 3, 4, 5, 6, 7, 8};
    float dt[8];
    tc_init(&t, SN_OP_GATHER_GRAD, SN_F32, S2(4, 2));
    t.attr.gather.vocab = 4;
    tc_input(&t, SN_I32, S2(2, 2), idx);
    tc_input(&t, SN_F32, S3(2, 2, 2), dyg);
    tc_ok(&t, dt, "gather_grad");
    check_f32("gather_grad", dt, (double[]){3, 4, 0, 0, 6, 8, 7, 8}, 8, 0);
}

/* ---- convolution and pooling ------------------------------------------------------------ */

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Forward and both backward convolutions on generated data against one scatter loop:
 * y[n,oy,ox,f] += x[n,iy,ix,c] w[ky,kx,c,f], dx[...] += dy w, dw[...] += x dy. */
static void conv_case(int N, int H, int W, int C, int KH, int KW, int F, int sh, int sw, int pt,
                      int pl, int OH, int OW, bool hand) {
    int nx = N * H * W * C, nw = KH * KW * C * F, ny = N * OH * OW * F;
    double *X = calloc((size_t)nx, 8), *Wt = calloc((size_t)nw, 8), *DY = calloc((size_t)ny, 8);
    double *Y = calloc((size_t)ny, 8), *DX = calloc((size_t)nx, 8), *DW = calloc((size_t)nw, 8);
    double *y0 = calloc((size_t)ny, 8), *dx0 = calloc((size_t)nx, 8), *dw0 = calloc((size_t)nw, 8);
    if (!X || !Wt || !DY || !Y || !DX || !DW || !y0 || !dx0 || !dw0) abort();
    for (int i = 0; i < nx; i++) X[i] = sin(0.7 * i + 0.1);
    for (int i = 0; i < nw; i++) Wt[i] = cos(1.3 * i);
    for (int i = 0; i < ny; i++) DY[i] = sin(2.1 * i + 0.5);
    for (int n = 0; n < N; n++)
        for (int oy = 0; oy < OH; oy++)
            for (int ox = 0; ox < OW; ox++)
                for (int ky = 0; ky < KH; ky++)
                    for (int kx = 0; kx < KW; kx++) {
                        int iy = oy * sh + ky - pt, ix = ox * sw + kx - pl;
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                        for (int c = 0; c < C; c++)
                            for (int f = 0; f < F; f++) {
                                int xi = ((n * H + iy) * W + ix) * C + c;
                                int wi = ((ky * KW + kx) * C + c) * F + f;
                                int yi = ((n * OH + oy) * OW + ox) * F + f;
                                y0[yi] += X[xi] * Wt[wi];
                                dx0[xi] += DY[yi] * Wt[wi];
                                dw0[wi] += X[xi] * DY[yi];
                            }
                    }
    sn_attrs ca = {0};
    ca.conv.stride_h = sh;
    ca.conv.stride_w = sw;
    ca.conv.pad_top = pt;
    ca.conv.pad_left = pl;
    ca.conv.x_shape = S4(N, H, W, C);
    ca.conv.w_shape = S4(KH, KW, C, F);
    tcall t;
    tc_init(&t, SN_OP_CONV2D, SN_F64, S4(N, OH, OW, F));
    t.attr = ca;
    tc_input(&t, SN_F64, S4(N, H, W, C), X);
    tc_input(&t, SN_F64, S4(KH, KW, C, F), Wt);
    tc_ok(&t, Y, "conv2d");
    check("conv2d vs scatter loop", Y, y0, ny, 1e-13);
    if (hand) {
        /* Image 1, (oy, ox) = (2, 1), filter 2 of the 2x(5x6x2) * (3x2x2x3) stride-2 case:
         * rows 3, 4 (row 5 is padding), columns 2, 3. */
        double y1 = 0;
        for (int ky = 0; ky < 2; ky++)
            for (int kx = 0; kx < 2; kx++)
                for (int ci = 0; ci < 2; ci++)
                    y1 += X[((1 * 5 + 3 + ky) * 6 + 2 + kx) * 2 + ci] * Wt[((ky * 2 + kx) * 2 + ci) * 3 + 2];
        check("conv2d strided one output", &Y[((1 * 3 + 2) * 3 + 1) * 3 + 2], &y1, 1, 1e-14);
    }
    tc_init(&t, SN_OP_CONV2D_BWD_DATA, SN_F64, S4(N, H, W, C));
    t.attr = ca;
    tc_input(&t, SN_F64, S4(N, OH, OW, F), DY);
    tc_input(&t, SN_F64, S4(KH, KW, C, F), Wt);
    tc_ok(&t, DX, "conv2d_bwd_data");
    check("conv2d_bwd_data vs scatter loop", DX, dx0, nx, 1e-13);
    tc_init(&t, SN_OP_CONV2D_BWD_FILTER, SN_F64, S4(KH, KW, C, F));
    t.attr = ca;
    tc_input(&t, SN_F64, S4(N, H, W, C), X);
    tc_input(&t, SN_F64, S4(N, OH, OW, F), DY);
    tc_ok(&t, DW, "conv2d_bwd_filter");
    check("conv2d_bwd_filter vs scatter loop", DW, dw0, nw, 1e-13);
    /* And the adjoint identity <conv(x, w), dy> = <x, dx> = <w, dw>. */
    double lhs = dot(Y, DY, ny), via_dx = dot(X, DX, nx), via_dw = dot(Wt, DW, nw);
    check("conv2d_bwd_data adjoint", &via_dx, &lhs, 1, 1e-12);
    check("conv2d_bwd_filter adjoint", &via_dw, &lhs, 1, 1e-12);
    free(X), free(Wt), free(DY), free(Y), free(DX), free(DW), free(y0), free(dx0), free(dw0);
}

static void test_conv(void) {
    tcall t;
    /* 1 image, 3x3, 1 channel (1..9); 2x2 kernel [[1,2],[3,4]], valid, stride 1. */
    const double x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[] = {1, 2, 3, 4};
    double out[64];
    tc_init(&t, SN_OP_CONV2D, SN_F64, S4(1, 2, 2, 1));
    t.attr.conv.stride_h = t.attr.conv.stride_w = 1;
    tc_input(&t, SN_F64, S4(1, 3, 3, 1), x);
    tc_input(&t, SN_F64, S4(2, 2, 1, 1), w);
    tc_ok(&t, out, "conv2d valid");
    check("conv2d 3x3 * 2x2 valid", out, (double[]){37, 47, 67, 77}, 4, 0);

    /* SAME with an all-ones 3x3 kernel (pad 1): sums of the 3x3 neighbourhoods. */
    const double ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    tc_init(&t, SN_OP_CONV2D, SN_F64, S4(1, 3, 3, 1));
    t.attr.conv.stride_h = t.attr.conv.stride_w = 1;
    t.attr.conv.pad_top = t.attr.conv.pad_left = 1;
    tc_input(&t, SN_F64, S4(1, 3, 3, 1), x);
    tc_input(&t, SN_F64, S4(3, 3, 1, 1), ones);
    tc_ok(&t, out, "conv2d same");
    check("conv2d 3x3 ones same", out, (double[]){12, 21, 16, 27, 45, 33, 24, 39, 28}, 9, 0);

    /* Hand-checked output on a strided, padded case, then both cases against a direct
     * scatter loop written here (the kernels gather instead). */
    conv_case(2, 5, 6, 2, 3, 2, 3, 2, 2, 1, 0, 3, 3, true);
    conv_case(4, 12, 12, 3, 3, 3, 8, 1, 1, 1, 1, 12, 12, false); /* threaded path */
}

static void test_pool(void) {
    tcall t;
    /* 3x3 (1..9), 2x2 window, stride 2, SAME: 2x2 output, padding only at bottom/right. */
    const double x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    double out[9];
    sn_attrs pa = {0};
    pa.pool.pool_h = pa.pool.pool_w = 2;
    pa.pool.stride_h = pa.pool.stride_w = 2;
    pa.pool.padding = SN_PAD_SAME;
    pa.pool.x_shape = S4(1, 3, 3, 1);
    tc_init(&t, SN_OP_MAX_POOL2D, SN_F64, S4(1, 2, 2, 1));
    t.attr = pa;
    tc_input(&t, SN_F64, S4(1, 3, 3, 1), x);
    tc_ok(&t, out, "max_pool same");
    check("max_pool2d same", out, (double[]){5, 6, 8, 9}, 4, 0);
    tc_init(&t, SN_OP_AVG_POOL2D, SN_F64, S4(1, 2, 2, 1));
    t.attr = pa;
    tc_input(&t, SN_F64, S4(1, 3, 3, 1), x);
    tc_ok(&t, out, "avg_pool same");
    check("avg_pool2d same (valid cells only)", out, (double[]){3, 4.5, 7.5, 9}, 4, 0);

    const double dy[] = {1, 2, 3, 4};
    tc_init(&t, SN_OP_MAX_POOL2D_GRAD, SN_F64, S4(1, 3, 3, 1));
    t.attr = pa;
    tc_input(&t, SN_F64, S4(1, 3, 3, 1), x);
    tc_input(&t, SN_F64, S4(1, 2, 2, 1), dy);
    tc_ok(&t, out, "max_pool grad");
    check("max_pool2d_grad", out, (double[]){0, 0, 0, 0, 1, 2, 0, 3, 4}, 9, 0);
    const double dya[] = {4, 4, 2, 3};
    tc_init(&t, SN_OP_AVG_POOL2D_GRAD, SN_F64, S4(1, 3, 3, 1));
    t.attr = pa;
    tc_input(&t, SN_F64, S4(1, 2, 2, 1), dya);
    tc_ok(&t, out, "avg_pool grad");
    check("avg_pool2d_grad", out, (double[]){1, 1, 2, 1, 1, 2, 1, 1, 3}, 9, 0);

    /* Overlapping windows (1x2, stride 1) over [1, 3, 2] and a tie [4, 4]: gradients add at
     * the shared maximum; a tie goes to the first cell. */
    const double xo[] = {1, 3, 2, 4, 4}, dyo[] = {1, 1, 5, 7};
    sn_attrs po = {0};
    po.pool.pool_h = 1;
    po.pool.pool_w = 2;
    po.pool.stride_h = po.pool.stride_w = 1;
    tc_init(&t, SN_OP_MAX_POOL2D_GRAD, SN_F64, S4(1, 1, 5, 1));
    t.attr = po;
    tc_input(&t, SN_F64, S4(1, 1, 5, 1), xo);
    tc_input(&t, SN_F64, S4(1, 1, 4, 1), dyo);
    tc_ok(&t, out, "max_pool grad overlap");
    check("max_pool2d_grad overlap", out, (double[]){0, 2, 0, 12, 0}, 5, 0);
}

/* ---- dropout ---------------------------------------------------------------------------- */

static void test_dropout(void) {
    enum { N = 20000 };
    static float x[N], a[N], b[N], c2[N], d[N];
    for (int i = 0; i < N; i++) x[i] = 1.0f + (float)(i % 7);
    tcall t;
    sn_attrs da = {0};
    da.dropout.rate = 0.3;
    da.dropout.seed = 1234;
    da.dropout.mask_node = 17;
    tc_init(&t, SN_OP_DROPOUT, SN_F32, S1(N));
    t.attr = da;
    t.c.step = 5;
    tc_input(&t, SN_F32, S1(N), x);
    tc_ok(&t, a, "dropout");
    tc_ok(&t, b, "dropout again");
    t.c.step = 6;
    tc_ok(&t, c2, "dropout next step");
    int kept = 0, same_mask = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        bool k = a[i] != 0;
        kept += k;
        if (k && fabsf(a[i] - x[i] / 0.7f) > 1e-5f * a[i]) bad++;
        if (a[i] != b[i]) bad++;
        same_mask += k == (c2[i] != 0);
    }
    double frac = (double)kept / N;
    if (fabs(frac - 0.7) > 0.02) FAIL("dropout kept %.4f of elements, want about 0.7", frac);
    if (bad) FAIL("dropout: %d elements not x / (1 - rate) or not reproducible", bad);
    /* Independent masks agree on about 0.7^2 + 0.3^2 = 0.58 of the elements. */
    if (same_mask > N * 0.65) FAIL("dropout masks of steps 5 and 6 agree on %d of %d", same_mask, N);

    /* The gradient applies the same mask to dy (attributes copied from the forward node). */
    tc_init(&t, SN_OP_DROPOUT_GRAD, SN_F32, S1(N));
    t.attr = da;
    t.c.step = 5;
    tc_input(&t, SN_F32, S1(N), x);
    tc_ok(&t, d, "dropout_grad");
    if (memcmp(a, d, sizeof a) != 0) FAIL("dropout_grad mask differs from the forward mask");
}

/* ---- side effects and optimizers -------------------------------------------------------- */

static void test_assign(void) {
    tcall t;
    double var[6] = {1, 2, 3, 4, 5, 6};
    const double v[] = {10, 20, 30};
    tc_init(&t, SN_OP_ASSIGN_ADD, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S2(2, 3), var);
    tc_input(&t, SN_F64, S1(3), v);
    tc_ok(&t, var, "assign_add");
    check("assign_add broadcast", var, (double[]){11, 22, 33, 14, 25, 36}, 6, 0);
    const double nv[] = {-1, -2, -3, -4, -5, -6};
    tc_init(&t, SN_OP_ASSIGN, SN_F64, S2(2, 3));
    tc_input(&t, SN_F64, S2(2, 3), var);
    tc_input(&t, SN_F64, S2(2, 3), nv);
    tc_ok(&t, var, "assign");
    check("assign", var, nv, 6, 0);
    int32_t it = 4, one = 1;
    tc_init(&t, SN_OP_ASSIGN_ADD, SN_I32, sn_shape_make(0));
    tc_input(&t, SN_I32, sn_shape_make(0), &it);
    tc_input(&t, SN_I32, sn_shape_make(0), &one);
    tc_ok(&t, &it, "assign_add i32");
    if (it != 5) FAIL("iterations += 1 gave %d", it);
}

/* Runs `steps` updates of a 3-element variable with the given optimizer; grads differ per
 * step. slots: 0-3 slot arrays of 3 doubles each (zero-initialised by the caller). */
static void run_optimizer(sn_attrs a, int nslots, double *var, double (*slots)[3], int steps,
                          double (*grads)[3]) {
    for (int s = 0; s < steps; s++) {
        tcall t;
        int32_t iterations = s;
        tc_init(&t, SN_OP_APPLY_OPTIMIZER, SN_F64, S1(3));
        t.attr = a;
        tc_input(&t, SN_F64, S1(3), var);
        tc_input(&t, SN_F64, S1(3), grads[s]);
        tc_input(&t, SN_I32, sn_shape_make(0), &iterations);
        for (int k = 0; k < nslots; k++) tc_input(&t, SN_F64, S1(3), slots[k]);
        tc_ok(&t, var, "apply_optimizer");
    }
}

static void test_optimizers(void) {
    double grads[3][3] = {{0.1, -0.2, 0.3}, {0.5, 0.0, -1.0}, {-0.3, 0.4, 2.0}};
    const double init[3] = {1.0, -0.5, 2.0};

    /* Adam, 3 steps, against the formula (Keras 3: alpha folds in the bias correction). */
    sn_attrs a = {0};
    a.optim.kind = SN_OPTIM_ADAM;
    a.optim.lr = 0.01;
    a.optim.beta1 = 0.9;
    a.optim.beta2 = 0.999;
    a.optim.epsilon = 1e-7;
    double var[3], slots[3][3] = {{0}}, want[3], m[3] = {0}, v[3] = {0};
    memcpy(var, init, sizeof var);
    memcpy(want, init, sizeof want);
    run_optimizer(a, 2, var, slots, 3, grads);
    for (int s = 0; s < 3; s++) {
        double t = s + 1, alpha = 0.01 * sqrt(1 - pow(0.999, t)) / (1 - pow(0.9, t));
        for (int i = 0; i < 3; i++) {
            double g = grads[s][i];
            m[i] = m[i] + (g - m[i]) * 0.1;
            v[i] = v[i] + (g * g - v[i]) * (1 - 0.999);
            want[i] -= alpha * m[i] / (sqrt(v[i]) + 1e-7);
        }
    }
    check("adam 3 steps var", var, want, 3, 1e-14);
    check("adam m", slots[0], m, 3, 1e-14);
    check("adam v", slots[1], v, 3, 1e-14);
    /* First Adam step moves each weight by about lr * sign(g). */
    if (fabs(var[0] - init[0]) < 1e-4) FAIL("adam did not move var[0]");

    /* AdamW: decay first, then Adam. One step. */
    a.optim.kind = SN_OPTIM_ADAMW;
    a.optim.weight_decay = 0.004;
    double vw[3], sw[3][3] = {{0}}, ww[3];
    memcpy(vw, init, sizeof vw);
    run_optimizer(a, 2, vw, sw, 1, grads);
    for (int i = 0; i < 3; i++) {
        double g = grads[0][i], w = init[i] - init[i] * 0.004 * 0.01;
        double mm = 0.1 * g, vv = 0.001 * g * g, alpha = 0.01 * sqrt(1 - 0.999) / (1 - 0.9);
        ww[i] = w - alpha * mm / (sqrt(vv) + 1e-7);
    }
    check("adamw 1 step", vw, ww, 3, 1e-14);

    /* SGD plain, with momentum, with Nesterov: 2 steps each. */
    sn_attrs sg = {0};
    sg.optim.kind = SN_OPTIM_SGD;
    sg.optim.lr = 0.1;
    double vs[3], ss[3][3] = {{0}}, ws[3];
    memcpy(vs, init, sizeof vs);
    run_optimizer(sg, 0, vs, ss, 2, grads);
    for (int i = 0; i < 3; i++) ws[i] = init[i] - 0.1 * grads[0][i] - 0.1 * grads[1][i];
    check("sgd 2 steps", vs, ws, 3, 1e-15);
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        sg.optim.momentum = 0.9;
        sg.optim.nesterov = nesterov;
        double vm[3], sm[3][3] = {{0}}, wm[3], mo[3] = {0};
        memcpy(vm, init, sizeof vm);
        memcpy(wm, init, sizeof wm);
        run_optimizer(sg, 1, vm, sm, 2, grads);
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 3; i++) {
                double g = grads[s][i];
                mo[i] = 0.9 * mo[i] - 0.1 * g;
                wm[i] += nesterov ? 0.9 * mo[i] - 0.1 * g : mo[i];
            }
        check(nesterov ? "sgd nesterov" : "sgd momentum", vm, wm, 3, 1e-15);
        check("sgd momentum slot", sm[0], mo, 3, 1e-15);
    }

    /* RMSprop without and with momentum: 2 steps. */
    for (int withmom = 0; withmom < 2; withmom++) {
        sn_attrs r = {0};
        r.optim.kind = SN_OPTIM_RMSPROP;
        r.optim.lr = 0.001;
        r.optim.rho = 0.9;
        r.optim.epsilon = 1e-7;
        r.optim.momentum = withmom ? 0.5 : 0;
        double vr[3], sr[3][3] = {{0}}, wr[3], vel[3] = {0}, mom[3] = {0};
        memcpy(vr, init, sizeof vr);
        memcpy(wr, init, sizeof wr);
        run_optimizer(r, 1 + withmom, vr, sr, 2, grads);
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 3; i++) {
                double g = grads[s][i];
                vel[i] = 0.9 * vel[i] + 0.1 * g * g;
                double inc = 0.001 * g / sqrt(vel[i] + 1e-7);
                if (withmom) {
                    mom[i] = 0.5 * mom[i] + inc;
                    wr[i] -= mom[i];
                } else {
                    wr[i] -= inc;
                }
            }
        check(withmom ? "rmsprop momentum" : "rmsprop", vr, wr, 3, 1e-14);
    }

    /* Too few slots is an error, not a read past the inputs. */
    tcall t;
    int32_t it = 0;
    double vv[3] = {0}, g0[3] = {0};
    tc_init(&t, SN_OP_APPLY_OPTIMIZER, SN_F64, S1(3));
    t.attr = a;
    tc_input(&t, SN_F64, S1(3), vv);
    tc_input(&t, SN_F64, S1(3), g0);
    tc_input(&t, SN_I32, sn_shape_make(0), &it);
    if (tc_run(&t, vv) != SN_ERR_INVALID) FAIL("apply_optimizer without slots did not fail");
}

/* ---- tables ----------------------------------------------------------------------------- */

static bool never(const sn_kcall *c) { return c == NULL; }
static sn_status dummy_run(sn_kcall *c) { return SN_ERR_UNSUPPORTED; }

static void test_tables(void) {
    for (int op = 0; op < SN_OP_COUNT; op++) {
        bool leaf = op == SN_OP_INPUT || op == SN_OP_VARIABLE || op == SN_OP_CONST;
        if (leaf != (table.k[op] == NULL))
            FAIL("op %d: reference kernel %s", op, leaf ? "set for a leaf" : "missing");
    }
    const sn_kernel_table *ref = sn_ref_kernels();
    if (ref != sn_ref_kernels()) FAIL("sn_ref_kernels built twice");
    if (memcmp(ref, &table, sizeof table) != 0) FAIL("sn_ref_kernels differs from the ref registers");
    setenv("SN_KERNELS", "ref", 1);
    if (sn_cpu_kernels() != ref) FAIL("SN_KERNELS=ref did not select the reference table");
    unsetenv("SN_KERNELS");
    /* A row whose supports() declines falls back to the reference row. */
    sn_kernel_table t2 = table;
    static const sn_kernel picky = {.impl = "picky", .supports = never, .run = dummy_run};
    t2.k[SN_OP_ADD] = &picky;
    sn_kcall c = {.op = SN_OP_ADD};
    if (sn_kernel_select(&t2, &c) != table.k[SN_OP_ADD]) FAIL("kernel_select did not fall back");
    c.op = SN_OP_INPUT;
    if (sn_kernel_select(&t2, &c) != NULL) FAIL("kernel_select returned a kernel for a leaf");
    const sn_kernel *mk = sn_cpu_kernels()->k[SN_OP_MATMUL];
    printf("cpu table matmul row: %s\n", mk ? mk->impl : "(none)");
}

int main(void) {
    sn_set_num_threads(2);
    sn_ref_register_elementwise(&table);
    sn_ref_register_reduce(&table);
    sn_ref_register_softmax(&table);
    sn_ref_register_shape(&table);
    sn_ref_register_matmul(&table);
    sn_ref_register_conv(&table);
    sn_ref_register_state(&table);
    sn_ref_register_rnn(&table);
    sn_ref_register_rnn_layer(&table);
    sn_ref_register_activation(&table);
    sn_ref_register_attention(&table);
    sn_ref_register_batch_norm(&table);

    test_matmul();
    test_elementwise();
    test_cast();
    test_softmax();
    test_xent();
    test_reduce();
    test_shape();
    test_conv();
    test_pool();
    test_dropout();
    test_assign();
    test_optimizers();
    test_tables();
    if (failures) {
        printf("test_ref_kernels: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_ref_kernels: all passed\n");
    return 0;
}
