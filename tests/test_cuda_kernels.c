/* The CUDA backend's kernels (src/backend/cuda/) against the reference kernels (backend/ref/):
 * for each op, random inputs (sn_rng), the reference run on the host through a hand-built call
 * (kernel_test_util.h), the CUDA launcher run on device copies, and a comparison with a stated
 * tolerance: |gpu - ref| <= tol * (1 + |ref|), tol 1e-5 for f32 elementwise and softmax
 * kernels, 2e-5 for sums, bit-exact for the bf16 cast and the dropout mask; matmul and
 * convolutions 1e-5 with an fp32-strict context and 5e-3 with TF32 (10-bit mantissa inputs).
 * Then a small training run (a 2-layer MLP, softmax cross-entropy, Adam, 20 steps) by the same
 * kernels on CPU (reference) and GPU: every weight within 1e-3 * (1 + |ref|) after 20 steps.
 * Last, a step captured as a CUDA graph and launched 10 times equals 10 issued steps bit for
 * bit (steps_per_execution's mechanism).
 *
 * Without a GPU (none present, no driver, or a build without CUDA) it prints why and exits 77:
 * CTest shows SKIPPED, never Passed. This test has not yet run on a GPU (docs/cuda.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/gpu.h"
#include "backend/kernel.h"

#ifndef SN_HAVE_CUDA
int main(void) {
    printf("SKIP: %s\n", sn_gpu_none_reason());
    return 77;
}
#else

#include "backend/cuda/cuda_ctx.h"
#include "kernel_test_util.h"

static int cases;
static sn_rng rng;
static sn_cuda_ctx *ctx, *ctx_strict;

static void *xmalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    return p;
}

#define OK(expr)                                                                               \
    do {                                                                                       \
        sn_status s_ = (expr);                                                                 \
        if (s_ != SN_OK) FAIL("%s -> %s: %s", #expr, sn_status_name(s_), sn_last_error());     \
    } while (0)

static float *rand_f32(int64_t n, double lo, double hi) {
    float *p = xmalloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * sn_rng_uniform(&rng));
    return p;
}

/* A device copy of n bytes of host data (freed with sn_cuda_free). */
static void *dev(const void *host, size_t n) {
    void *d = NULL;
    OK(sn_cuda_alloc(ctx, n, &d));
    if (d && host) OK(sn_cuda_to_device(ctx, d, host, n));
    return d;
}

static void *host_of(const void *d, size_t n) {
    void *h = xmalloc(n);
    OK(sn_cuda_ctx_sync(ctx));
    OK(sn_cuda_to_host(ctx, h, d, n));
    return h;
}

static void compare(const char *what, const float *got, const float *want, int64_t n, double tol) {
    cases++;
    int shown = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        bool ok = (isnan(w) || isinf(w)) ? ((isnan(w) && isnan(g)) || g == w)
                                         : fabs(g - w) <= tol * (1 + fabs(w));
        if (!ok && shown++ < 5) FAIL("%s [%lld]: gpu %.9g, ref %.9g", what, (long long)i, g, w);
        else if (!ok) failures++;
    }
}

/* Runs the reference kernel of t (inputs already attached) into a fresh host buffer. */
static float *ref_out(tcall *t) {
    size_t nb = (size_t)sn_shape_numel(&t->c.y.shape) * sn_dtype_size(t->c.y.dtype);
    void *out = xmalloc(nb);
    t->c.out = out;
    const sn_kernel *k = sn_ref_kernels()->k[t->c.op];
    if (!k) {
        FAIL("no reference kernel for op %d", (int)t->c.op);
        return out;
    }
    OK(k->run(&t->c));
    return out;
}

/* ---- elementwise ----------------------------------------------------------------------- */

static void test_binary(void) {
    const sn_op ops[] = {SN_OP_ADD, SN_OP_SUB, SN_OP_MUL, SN_OP_DIV};
    const sn_cuda_binary cu[] = {SN_CU_ADD, SN_CU_SUB, SN_CU_MUL, SN_CU_DIV};
    for (int o = 0; o < 4; o++) {
        /* same shape, 1000003 elements (not a multiple of any block) */
        int64_t n = 1000003;
        sn_shape s = sn_shape_make(1, n);
        float *a = rand_f32(n, -2, 2), *b = rand_f32(n, 0.5, 2);
        tcall t;
        tc_init(&t, ops[o], SN_F32, s);
        tc_input(&t, SN_F32, s, a);
        tc_input(&t, SN_F32, s, b);
        float *want = ref_out(&t);
        float *da = dev(a, n * 4), *db = dev(b, n * 4), *dout = dev(NULL, n * 4);
        OK(sn_cuda_binary_f32(sn_cuda_ctx_stream(ctx), cu[o], n, da, db, dout));
        float *got = host_of(dout, n * 4);
        compare("binary same shape", got, want, n, 1e-6);
        free(got), free(want), free(a), free(b);
        sn_cuda_free(ctx, da), sn_cuda_free(ctx, db), sn_cuda_free(ctx, dout);

        /* broadcast [4, 1, 5] op [3, 5] -> [4, 3, 5] */
        sn_shape sa = sn_shape_make(3, 4, 1, 5), sb = sn_shape_make(2, 3, 5),
                 so = sn_shape_make(3, 4, 3, 5);
        a = rand_f32(20, -2, 2), b = rand_f32(15, 0.5, 2);
        tc_init(&t, ops[o], SN_F32, so);
        tc_input(&t, SN_F32, sa, a);
        tc_input(&t, SN_F32, sb, b);
        want = ref_out(&t);
        sn_cuda_bcast bc = {.ndim = 3, .dim = {4, 3, 5}, .sa = {5, 0, 1}, .sb = {0, 5, 1}};
        da = dev(a, 20 * 4), db = dev(b, 15 * 4), dout = dev(NULL, 60 * 4);
        OK(sn_cuda_binary_bcast_f32(sn_cuda_ctx_stream(ctx), cu[o], &bc, da, db, dout));
        got = host_of(dout, 60 * 4);
        compare("binary broadcast", got, want, 60, 1e-6);
        free(got), free(want), free(a), free(b);
        sn_cuda_free(ctx, da), sn_cuda_free(ctx, db), sn_cuda_free(ctx, dout);
    }
}

static void test_bias_add(void) {
    for (int relu = 0; relu < 2; relu++) {
        int64_t rows = 333, ch = 17, n = rows * ch;
        sn_shape sx = sn_shape_make(2, rows, ch), sb = sn_shape_make(1, ch);
        float *x = rand_f32(n, -1, 1), *b = rand_f32(ch, -1, 1);
        tcall t;
        tc_init(&t, SN_OP_BIAS_ADD, SN_F32, sx);
        tc_input(&t, SN_F32, sx, x);
        tc_input(&t, SN_F32, sb, b);
        t.c.relu = relu;
        float *want = ref_out(&t);
        float *dx = dev(x, n * 4), *db = dev(b, ch * 4), *dout = dev(NULL, n * 4);
        OK(sn_cuda_bias_add_f32(sn_cuda_ctx_stream(ctx), rows, ch, dx, db, relu, dout));
        float *got = host_of(dout, n * 4);
        compare(relu ? "bias_add+relu" : "bias_add", got, want, n, 1e-6);
        free(got), free(want), free(x), free(b);
        sn_cuda_free(ctx, dx), sn_cuda_free(ctx, db), sn_cuda_free(ctx, dout);
    }
}

static void test_unary_and_grads(void) {
    const struct { sn_op op; sn_cuda_unary cu; double lo, hi; } un[] = {
        {SN_OP_RELU, SN_CU_RELU, -3, 3},       {SN_OP_SIGMOID, SN_CU_SIGMOID, -20, 20},
        {SN_OP_TANH, SN_CU_TANH, -5, 5},       {SN_OP_EXP, SN_CU_EXP, -10, 10},
        {SN_OP_LOG, SN_CU_LOG, 1e-3, 100},     {SN_OP_SQRT, SN_CU_SQRT, 0, 100},
        {SN_OP_NEG, SN_CU_NEG, -3, 3},         {SN_OP_GELU, SN_CU_GELU, -6, 6},
        {SN_OP_SILU, SN_CU_SILU, -10, 10},     {SN_OP_ELU, SN_CU_ELU, -5, 5},
        {SN_OP_LEAKY_RELU, SN_CU_LEAKY_RELU, -3, 3}, {SN_OP_RELU6, SN_CU_RELU6, -2, 8},
        {SN_OP_GELU_TANH, SN_CU_GELU_TANH, -6, 6},
    };
    int64_t n = 4099;
    sn_shape s = sn_shape_make(1, n);
    for (size_t u = 0; u < sizeof un / sizeof un[0]; u++) {
        float *x = rand_f32(n, un[u].lo, un[u].hi);
        tcall t;
        tc_init(&t, un[u].op, SN_F32, s);
        tc_input(&t, SN_F32, s, x);
        t.attr.act.alpha = 0.3;
        float *want = ref_out(&t);
        float *dx = dev(x, n * 4), *dout = dev(NULL, n * 4);
        OK(sn_cuda_unary_f32(sn_cuda_ctx_stream(ctx), un[u].cu, n, dx, 0.3, dout));
        float *got = host_of(dout, n * 4);
        char what[64];
        snprintf(what, sizeof what, "unary op %d", (int)un[u].op);
        compare(what, got, want, n, 1e-5);
        free(got), free(want), free(x);
        sn_cuda_free(ctx, dx), sn_cuda_free(ctx, dout);
    }
    const struct { sn_op op; sn_cuda_grad cu; double lo, hi; } gr[] = {
        {SN_OP_RELU_GRAD, SN_CU_RELU_GRAD, -3, 3},   {SN_OP_SIGMOID_GRAD, SN_CU_SIGMOID_GRAD, 0, 1},
        {SN_OP_TANH_GRAD, SN_CU_TANH_GRAD, -1, 1},   {SN_OP_GELU_GRAD, SN_CU_GELU_GRAD, -6, 6},
        {SN_OP_SILU_GRAD, SN_CU_SILU_GRAD, -10, 10}, {SN_OP_ELU_GRAD, SN_CU_ELU_GRAD, -5, 5},
        {SN_OP_LEAKY_RELU_GRAD, SN_CU_LEAKY_RELU_GRAD, -3, 3},
        {SN_OP_RELU6_GRAD, SN_CU_RELU6_GRAD, -2, 8},
        {SN_OP_GELU_TANH_GRAD, SN_CU_GELU_TANH_GRAD, -6, 6},
    };
    for (size_t u = 0; u < sizeof gr / sizeof gr[0]; u++) {
        float *v = rand_f32(n, gr[u].lo, gr[u].hi), *dy = rand_f32(n, -1, 1);
        tcall t;
        tc_init(&t, gr[u].op, SN_F32, s);
        tc_input(&t, SN_F32, s, v);
        tc_input(&t, SN_F32, s, dy);
        t.attr.act.alpha = 0.3;
        float *want = ref_out(&t);
        float *dv = dev(v, n * 4), *ddy = dev(dy, n * 4), *dout = dev(NULL, n * 4);
        OK(sn_cuda_grad_f32(sn_cuda_ctx_stream(ctx), gr[u].cu, n, dv, ddy, 0.3, dout));
        float *got = host_of(dout, n * 4);
        char what[64];
        snprintf(what, sizeof what, "gradient op %d", (int)gr[u].op);
        compare(what, got, want, n, 1e-5);
        free(got), free(want), free(v), free(dy);
        sn_cuda_free(ctx, dv), sn_cuda_free(ctx, ddy), sn_cuda_free(ctx, dout);
    }
}

static void test_cast_and_dropout(void) {
    int64_t n = 100003;
    float *x = rand_f32(n, -1e4, 1e4);
    x[0] = NAN, x[1] = INFINITY, x[2] = -0.0f, x[3] = 1e-40f; /* special values */
    uint16_t *want = xmalloc(n * 2);
    for (int64_t i = 0; i < n; i++) want[i] = sn_f32_to_bf16(x[i]);
    float *dx = dev(x, n * 4);
    uint16_t *dh = dev(NULL, n * 2);
    float *dback = dev(NULL, n * 4);
    OK(sn_cuda_f32_to_bf16(sn_cuda_ctx_stream(ctx), n, dx, dh));
    OK(sn_cuda_bf16_to_f32(sn_cuda_ctx_stream(ctx), n, dh, dback));
    uint16_t *got = host_of(dh, n * 2);
    float *back = host_of(dback, n * 4);
    cases++;
    if (memcmp(got, want, n * 2) != 0) FAIL("f32 -> bf16: not bit-identical to sn_f32_to_bf16");
    for (int64_t i = 0; i < n; i++)
        if (back[i] != sn_bf16_to_f32(want[i]) && !isnan(back[i])) {
            FAIL("bf16 -> f32 [%lld]: %g, expected %g", (long long)i, back[i], sn_bf16_to_f32(want[i]));
            break;
        }
    free(got), free(back), free(want);
    sn_cuda_free(ctx, dh), sn_cuda_free(ctx, dback);

    /* dropout: the same mask as the CPU, bit for bit, at several steps and rates */
    const double rates[] = {0.1, 0.5, 0.9};
    for (int r = 0; r < 3; r++)
        for (int64_t step = 0; step < 3; step++) {
            sn_shape s = sn_shape_make(1, n);
            tcall t;
            tc_init(&t, SN_OP_DROPOUT, SN_F32, s);
            tc_input(&t, SN_F32, s, x);
            t.attr.dropout.rate = rates[r];
            t.attr.dropout.seed = 1234;
            t.attr.dropout.mask_node = 7;
            t.c.step = step * 1000;
            float *ref = ref_out(&t);
            float *dout = dev(NULL, n * 4);
            OK(sn_cuda_dropout_f32(sn_cuda_ctx_stream(ctx), n, dx, 1234, 7, step * 1000, rates[r], dout));
            float *g = host_of(dout, n * 4);
            cases++;
            for (int64_t i = 0; i < n; i++)
                if ((g[i] == 0) != (ref[i] == 0) && !isnan(ref[i])) {
                    FAIL("dropout rate %g step %lld: mask differs at %lld", rates[r],
                         (long long)step * 1000, (long long)i);
                    break;
                }
            compare("dropout values", g + 4, ref + 4, n - 4, 1e-6);
            free(g), free(ref);
            sn_cuda_free(ctx, dout);
        }
    free(x);
    sn_cuda_free(ctx, dx);
}

/* ---- reductions and the softmax family ----------------------------------------------------- */

static void test_reduce(void) {
    const struct { int64_t d0, d1, d2; uint32_t mask; } cs[] = {
        {1000, 37, 1, 1u << 0},   /* bias gradient: [N, C] over N */
        {37, 1000, 1, 1u << 1},   /* rows */
        {1, 1000003, 1, 1u << 1}, /* everything */
        {8, 300, 5, 1u << 1},     /* middle axis */
    };
    const sn_op ops[] = {SN_OP_REDUCE_SUM, SN_OP_REDUCE_MEAN, SN_OP_REDUCE_MAX};
    const sn_cuda_reduce cu[] = {SN_CU_SUM, SN_CU_MEAN, SN_CU_MAX};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int o = 0; o < 3; o++) {
            int64_t outer = cs[c].mask == 1u ? 1 : cs[c].d0;
            int64_t len = cs[c].mask == 1u ? cs[c].d0 : cs[c].d1;
            int64_t inner = cs[c].mask == 1u ? cs[c].d1 * cs[c].d2 : cs[c].d2;
            int64_t n = cs[c].d0 * cs[c].d1 * cs[c].d2, no = outer * inner;
            sn_shape sx = sn_shape_make(3, cs[c].d0, cs[c].d1, cs[c].d2);
            sn_shape so = sx;
            so.dim[cs[c].mask == 1u ? 0 : 1] = 1;
            float *x = rand_f32(n, -1, 1);
            tcall t;
            tc_init(&t, ops[o], SN_F32, so);
            tc_input(&t, SN_F32, sx, x);
            t.attr.reduce.mask = cs[c].mask;
            t.attr.reduce.keepdims = true;
            float *want = ref_out(&t);
            float *dx = dev(x, n * 4), *dout = dev(NULL, no * 4);
            OK(sn_cuda_reduce_f32(sn_cuda_ctx_stream(ctx), cu[o], outer, len, inner, dx, dout));
            float *got = host_of(dout, no * 4);
            compare("reduce", got, want, no, o == 2 ? 0 : 2e-5);
            free(got), free(want), free(x);
            sn_cuda_free(ctx, dx), sn_cuda_free(ctx, dout);
        }
}

static void test_softmax(void) {
    int64_t rows = 301, len = 10, n = rows * len;
    sn_shape s = sn_shape_make(2, rows, len), sr = sn_shape_make(1, rows);
    float *x = rand_f32(n, -20, 20), *dy = rand_f32(n, -1, 1);
    float *dx = dev(x, n * 4), *ddy = dev(dy, n * 4), *dout = dev(NULL, n * 4);
    for (int lg = 0; lg < 2; lg++) {
        tcall t;
        tc_init(&t, lg ? SN_OP_LOG_SOFTMAX : SN_OP_SOFTMAX, SN_F32, s);
        tc_input(&t, SN_F32, s, x);
        t.attr.axis.axis = 1;
        float *want = ref_out(&t);
        OK(sn_cuda_softmax_f32(sn_cuda_ctx_stream(ctx), rows, len, dx, lg, dout));
        float *got = host_of(dout, n * 4);
        compare(lg ? "log_softmax" : "softmax", got, want, n, 1e-5);
        /* gradient from y = the reference output */
        float *dyv = dev(want, n * 4);
        tc_init(&t, lg ? SN_OP_LOG_SOFTMAX_GRAD : SN_OP_SOFTMAX_GRAD, SN_F32, s);
        tc_input(&t, SN_F32, s, want);
        tc_input(&t, SN_F32, s, dy);
        t.attr.axis.axis = 1;
        float *gwant = ref_out(&t);
        OK(sn_cuda_softmax_grad_f32(sn_cuda_ctx_stream(ctx), rows, len, dyv, ddy, lg, dout));
        float *ggot = host_of(dout, n * 4);
        compare(lg ? "log_softmax_grad" : "softmax_grad", ggot, gwant, n, 1e-5);
        free(got), free(want), free(gwant), free(ggot);
        sn_cuda_free(ctx, dyv);
    }
    /* sparse cross-entropy, its gradient and accuracy */
    int32_t *lab = xmalloc(rows * 4);
    for (int64_t r = 0; r < rows; r++) lab[r] = (int32_t)sn_rng_below(&rng, (uint64_t)len);
    float *dl = rand_f32(rows, 0, 1);
    int32_t *dlab = dev(lab, rows * 4);
    float *ddl = dev(dl, rows * 4), *drow = dev(NULL, rows * 4);
    sn_shape sl = sn_shape_make(1, rows);
    tcall t;
    tc_init(&t, SN_OP_SPARSE_XENT, SN_F32, sr);
    tc_input(&t, SN_F32, s, x);
    tc_input(&t, SN_I32, sl, lab);
    float *want = ref_out(&t);
    OK(sn_cuda_sparse_xent_f32(sn_cuda_ctx_stream(ctx), rows, len, dx, dlab, drow,
                               sn_cuda_ctx_error_flag(ctx)));
    float *got = host_of(drow, rows * 4);
    compare("sparse_xent", got, want, rows, 1e-5);
    free(got), free(want);
    tc_init(&t, SN_OP_SPARSE_XENT_GRAD, SN_F32, s);
    tc_input(&t, SN_F32, s, x);
    tc_input(&t, SN_I32, sl, lab);
    tc_input(&t, SN_F32, sl, dl);
    want = ref_out(&t);
    OK(sn_cuda_sparse_xent_grad_f32(sn_cuda_ctx_stream(ctx), rows, len, dx, dlab, ddl, dout,
                                    sn_cuda_ctx_error_flag(ctx)));
    got = host_of(dout, n * 4);
    compare("sparse_xent_grad", got, want, n, 1e-5);
    free(got), free(want);
    tc_init(&t, SN_OP_SPARSE_ACCURACY, SN_F32, sr);
    tc_input(&t, SN_F32, s, x);
    tc_input(&t, SN_I32, sl, lab);
    want = ref_out(&t);
    OK(sn_cuda_sparse_accuracy_f32(sn_cuda_ctx_stream(ctx), rows, len, dx, dlab, drow,
                                   sn_cuda_ctx_error_flag(ctx)));
    got = host_of(drow, rows * 4);
    compare("sparse_accuracy", got, want, rows, 0);
    free(got), free(want);
    /* a label out of range is an error naming the example, after the sync */
    lab[17] = (int32_t)len;
    OK(sn_cuda_to_device(ctx, dlab, lab, rows * 4));
    OK(sn_cuda_sparse_xent_f32(sn_cuda_ctx_stream(ctx), rows, len, dx, dlab, drow,
                               sn_cuda_ctx_error_flag(ctx)));
    sn_status st = sn_cuda_ctx_sync(ctx);
    cases++;
    if (st != SN_ERR_INVALID || !strstr(sn_last_error(), "example 17"))
        FAIL("bad label: expected SN_ERR_INVALID naming example 17, got %s: %s",
             sn_status_name(st), sn_last_error());
    OK(sn_cuda_ctx_sync(ctx)); /* the flag was cleared */
    free(lab), free(dl), free(x), free(dy);
    sn_cuda_free(ctx, dlab), sn_cuda_free(ctx, ddl), sn_cuda_free(ctx, drow);
    sn_cuda_free(ctx, dx), sn_cuda_free(ctx, ddy), sn_cuda_free(ctx, dout);
}

/* ---- state: assign and the optimizers --------------------------------------------------------- */

static void test_optimizers(void) {
    const struct { sn_optimizer_kind kind; double mom; bool nesterov, centered; int slots; } os[] = {
        {SN_OPTIM_SGD, 0, false, false, 0},   {SN_OPTIM_SGD, 0.9, true, false, 1},
        {SN_OPTIM_ADAM, 0, false, false, 2},  {SN_OPTIM_ADAMW, 0, false, false, 2},
        {SN_OPTIM_RMSPROP, 0.9, false, true, 3},
    };
    int64_t n = 10007;
    sn_shape s = sn_shape_make(1, n), s0 = sn_shape_make(0);
    for (size_t o = 0; o < sizeof os / sizeof os[0]; o++) {
        float *var = rand_f32(n, -1, 1), *grad = rand_f32(n, -1, 1);
        float *slot[3];
        for (int k = 0; k < 3; k++) slot[k] = rand_f32(n, 0, 0.1);
        int32_t it = 4;
        float *dvar = dev(var, n * 4), *dgrad = dev(grad, n * 4), *dslot[3];
        for (int k = 0; k < 3; k++) dslot[k] = dev(slot[k], n * 4);
        int32_t *dit = dev(&it, 4);
        tcall t;
        tc_init(&t, SN_OP_APPLY_OPTIMIZER, SN_F32, s);
        tc_input(&t, SN_F32, s, var);
        tc_input(&t, SN_F32, s, grad);
        tc_input(&t, SN_I32, s0, &it);
        for (int k = 0; k < os[o].slots; k++) tc_input(&t, SN_F32, s, slot[k]);
        sn_attrs *a = &t.attr;
        a->optim.kind = os[o].kind;
        a->optim.lr = 0.01, a->optim.beta1 = 0.9, a->optim.beta2 = 0.999, a->optim.epsilon = 1e-7;
        a->optim.momentum = os[o].mom, a->optim.rho = 0.9, a->optim.nesterov = os[o].nesterov;
        a->optim.centered = os[o].centered;
        a->optim.weight_decay = os[o].kind == SN_OPTIM_ADAMW ? 0.004 : 0;
        t.c.out = var; /* in place, as the planner aliases it */
        OK(sn_ref_kernels()->k[SN_OP_APPLY_OPTIMIZER]->run(&t.c));
        sn_cuda_optim co = {.kind = (int)a->optim.kind, .lr = a->optim.lr, .beta1 = a->optim.beta1,
                            .beta2 = a->optim.beta2, .epsilon = a->optim.epsilon,
                            .momentum = a->optim.momentum, .rho = a->optim.rho,
                            .weight_decay = a->optim.weight_decay, .nesterov = a->optim.nesterov,
                            .centered = a->optim.centered};
        OK(sn_cuda_apply_optimizer_f32(sn_cuda_ctx_stream(ctx), &co, n, dvar, dgrad, dit, dslot[0],
                                       dslot[1], dslot[2]));
        float *got = host_of(dvar, n * 4);
        compare("optimizer var", got, var, n, 1e-5);
        free(got);
        for (int k = 0; k < os[o].slots; k++) {
            got = host_of(dslot[k], n * 4);
            compare("optimizer slot", got, slot[k], n, 1e-5);
            free(got);
        }
        free(var), free(grad);
        for (int k = 0; k < 3; k++) free(slot[k]), sn_cuda_free(ctx, dslot[k]);
        sn_cuda_free(ctx, dvar), sn_cuda_free(ctx, dgrad), sn_cuda_free(ctx, dit);
    }
    /* assign_add with a broadcast value [5] into [4, 5] */
    float *var = rand_f32(20, -1, 1), *val = rand_f32(5, -1, 1);
    float *dvar = dev(var, 80), *dval = dev(val, 20);
    sn_shape sv = sn_shape_make(2, 4, 5), sx = sn_shape_make(1, 5);
    tcall t;
    tc_init(&t, SN_OP_ASSIGN_ADD, SN_F32, sv);
    tc_input(&t, SN_F32, sv, var);
    tc_input(&t, SN_F32, sx, val);
    t.c.out = var;
    OK(sn_ref_kernels()->k[SN_OP_ASSIGN_ADD]->run(&t.c));
    sn_cuda_bcast bc = {.ndim = 2, .dim = {4, 5}, .sb = {0, 1}};
    OK(sn_cuda_assign_f32(sn_cuda_ctx_stream(ctx), &bc, dval, true, dvar));
    float *got = host_of(dvar, 80);
    compare("assign_add", got, var, 20, 1e-6);
    free(got), free(var), free(val);
    sn_cuda_free(ctx, dvar), sn_cuda_free(ctx, dval);
}

/* ---- cuBLASLt and cuDNN --------------------------------------------------------------------- */

static void test_matmul(void) {
    const int64_t sz[][3] = {{1, 1, 1}, {64, 10, 128}, {200, 128, 784}, {33, 65, 17}};
    for (size_t z = 0; z < sizeof sz / sizeof sz[0]; z++)
        for (int tr = 0; tr < 4; tr++)
            for (int strict = 0; strict < 2; strict++) {
                int64_t m = sz[z][0], n = sz[z][1], k = sz[z][2];
                bool ta = tr & 1, tb = tr & 2;
                sn_shape sa = ta ? sn_shape_make(2, k, m) : sn_shape_make(2, m, k);
                sn_shape sb = tb ? sn_shape_make(2, n, k) : sn_shape_make(2, k, n);
                float *a = rand_f32(m * k, -1, 1), *b = rand_f32(k * n, -1, 1);
                tcall t;
                tc_init(&t, SN_OP_MATMUL, SN_F32, sn_shape_make(2, m, n));
                tc_input(&t, SN_F32, sa, a);
                tc_input(&t, SN_F32, sb, b);
                t.attr.matmul.ta = ta, t.attr.matmul.tb = tb;
                float *want = ref_out(&t);
                sn_cuda_ctx *cx = strict ? ctx_strict : ctx;
                float *da = dev(a, m * k * 4), *db = dev(b, k * n * 4), *dc = dev(NULL, m * n * 4);
                sn_cuda_matmul *p = NULL;
                OK(sn_cuda_matmul_new(cx, m, n, k, ta, tb, &p));
                if (p) OK(sn_cuda_matmul_run(p, da, db, dc));
                OK(sn_cuda_ctx_sync(cx));
                float *got = host_of(dc, m * n * 4);
                /* |sum| of k products of [-1, 1] values: the error scales with sqrt(k) */
                compare(strict ? "matmul fp32" : "matmul tf32", got, want, m * n,
                        (strict ? 1e-5 : 5e-3) * sqrt((double)k));
                sn_cuda_matmul_free(p);
                free(got), free(want), free(a), free(b);
                sn_cuda_free(ctx, da), sn_cuda_free(ctx, db), sn_cuda_free(ctx, dc);
            }
}

static void test_conv_pool(void) {
    /* the guide's CNN shapes at a small batch: 28x28x1 -> 3x3 same -> 32, and 14x14x32 -> 64 */
    const sn_cuda_conv_desc cs[] = {
        {.n = 3, .h = 28, .w = 28, .c = 1, .kh = 3, .kw = 3, .f = 32, .oh = 28, .ow = 28,
         .stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_left = 1},
        {.n = 2, .h = 14, .w = 14, .c = 32, .kh = 3, .kw = 3, .f = 64, .oh = 12, .ow = 12,
         .stride_h = 1, .stride_w = 1, .pad_top = 0, .pad_left = 0},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int strict = 0; strict < 2; strict++) {
            const sn_cuda_conv_desc *d = &cs[c];
            sn_cuda_ctx *cx = strict ? ctx_strict : ctx;
            double tol = (strict ? 1e-5 : 5e-3) * sqrt((double)(d->kh * d->kw * d->c));
            int64_t nx = d->n * d->h * d->w * d->c, nw = d->kh * d->kw * d->c * d->f,
                    ny = d->n * d->oh * d->ow * d->f;
            sn_shape sx = sn_shape_make(4, d->n, d->h, d->w, d->c),
                     sw = sn_shape_make(4, d->kh, d->kw, d->c, d->f),
                     sy = sn_shape_make(4, d->n, d->oh, d->ow, d->f);
            float *x = rand_f32(nx, -1, 1), *w = rand_f32(nw, -1, 1), *dy = rand_f32(ny, -1, 1);
            sn_attrs at;
            memset(&at, 0, sizeof at);
            at.conv.stride_h = d->stride_h, at.conv.stride_w = d->stride_w;
            at.conv.pad_top = d->pad_top, at.conv.pad_left = d->pad_left;
            at.conv.x_shape = sx, at.conv.w_shape = sw;
            float *gx = dev(x, nx * 4), *gw = dev(w, nw * 4), *gdy = dev(dy, ny * 4);
            float *gy = dev(NULL, ny * 4), *gdx = dev(NULL, nx * 4), *gdw = dev(NULL, nw * 4);
            sn_cuda_conv *p = NULL;
            OK(sn_cuda_conv_new(cx, d, &p));
            if (!p) continue;
            OK(sn_cuda_conv_fwd(p, gx, gw, gy));
            OK(sn_cuda_conv_bwd_data(p, gdy, gw, gdx));
            OK(sn_cuda_conv_bwd_filter(p, gx, gdy, gdw));
            OK(sn_cuda_ctx_sync(cx));
            tcall t;
            tc_init(&t, SN_OP_CONV2D, SN_F32, sy);
            tc_input(&t, SN_F32, sx, x);
            tc_input(&t, SN_F32, sw, w);
            t.attr = at;
            float *want = ref_out(&t), *got = host_of(gy, ny * 4);
            compare("conv2d", got, want, ny, tol);
            free(want), free(got);
            tc_init(&t, SN_OP_CONV2D_BWD_DATA, SN_F32, sx);
            tc_input(&t, SN_F32, sy, dy);
            tc_input(&t, SN_F32, sw, w);
            t.attr = at;
            want = ref_out(&t), got = host_of(gdx, nx * 4);
            compare("conv2d_bwd_data", got, want, nx, (strict ? 1e-5 : 5e-3) * sqrt((double)(d->kh * d->kw * d->f)));
            free(want), free(got);
            tc_init(&t, SN_OP_CONV2D_BWD_FILTER, SN_F32, sw);
            tc_input(&t, SN_F32, sx, x);
            tc_input(&t, SN_F32, sy, dy);
            t.attr = at;
            want = ref_out(&t), got = host_of(gdw, nw * 4);
            compare("conv2d_bwd_filter", got, want, nw, (strict ? 1e-5 : 5e-3) * sqrt((double)(d->n * d->oh * d->ow)));
            free(want), free(got);
            sn_cuda_conv_free(p);
            free(x), free(w), free(dy);
            sn_cuda_free(ctx, gx), sn_cuda_free(ctx, gw), sn_cuda_free(ctx, gdy);
            sn_cuda_free(ctx, gy), sn_cuda_free(ctx, gdx), sn_cuda_free(ctx, gdw);
        }
    /* 2x2 stride-2 pooling of [3, 28, 28, 32], max and average, forward and backward */
    for (int mx = 0; mx < 2; mx++) {
        sn_cuda_pool_desc d = {.n = 3, .h = 28, .w = 28, .c = 32, .oh = 14, .ow = 14, .pool_h = 2,
                               .pool_w = 2, .stride_h = 2, .stride_w = 2, .max = mx};
        int64_t nx = 3 * 28 * 28 * 32, ny = 3 * 14 * 14 * 32;
        sn_shape sx = sn_shape_make(4, 3, 28, 28, 32), sy = sn_shape_make(4, 3, 14, 14, 32);
        float *x = rand_f32(nx, -1, 1), *dy = rand_f32(ny, -1, 1);
        sn_attrs at;
        memset(&at, 0, sizeof at);
        at.pool.pool_h = at.pool.pool_w = at.pool.stride_h = at.pool.stride_w = 2;
        at.pool.x_shape = sx;
        float *gx = dev(x, nx * 4), *gdy = dev(dy, ny * 4), *gy = dev(NULL, ny * 4),
              *gdx = dev(NULL, nx * 4);
        sn_cuda_pool *p = NULL;
        OK(sn_cuda_pool_new(ctx, &d, &p));
        if (!p) continue;
        OK(sn_cuda_pool_fwd(p, gx, gy));
        OK(sn_cuda_pool_bwd(p, gx, gdy, gdx));
        tcall t;
        tc_init(&t, mx ? SN_OP_MAX_POOL2D : SN_OP_AVG_POOL2D, SN_F32, sy);
        tc_input(&t, SN_F32, sx, x);
        t.attr = at;
        float *want = ref_out(&t), *got = host_of(gy, ny * 4);
        compare(mx ? "max_pool2d" : "avg_pool2d", got, want, ny, 1e-6);
        free(want), free(got);
        if (mx) {
            tc_init(&t, SN_OP_MAX_POOL2D_GRAD, SN_F32, sx);
            tc_input(&t, SN_F32, sx, x);
            tc_input(&t, SN_F32, sy, dy);
        } else {
            tc_init(&t, SN_OP_AVG_POOL2D_GRAD, SN_F32, sx);
            tc_input(&t, SN_F32, sy, dy);
        }
        t.attr = at;
        want = ref_out(&t), got = host_of(gdx, nx * 4);
        compare(mx ? "max_pool2d_grad" : "avg_pool2d_grad", got, want, nx, 1e-6);
        free(want), free(got);
        sn_cuda_pool_free(p);
        free(x), free(dy);
        sn_cuda_free(ctx, gx), sn_cuda_free(ctx, gdy), sn_cuda_free(ctx, gy), sn_cuda_free(ctx, gdx);
    }
}

/* ---- a small training run: the same MLP steps by the reference kernels and by the GPU ------- */

/* Runs reference kernel op into out: inputs (shape, data) pairs, attributes copied. */
static void ref_call(sn_op op, sn_shape so, void *out, int n_in, const sn_shape *si,
                     void *const *in, const sn_dtype *dt, const sn_attrs *at, bool relu) {
    tcall t;
    tc_init(&t, op, SN_F32, so);
    for (int i = 0; i < n_in; i++) tc_input(&t, dt ? dt[i] : SN_F32, si[i], in[i]);
    if (at) t.attr = *at;
    t.c.relu = relu;
    t.c.out = out;
    OK(sn_ref_kernels()->k[op]->run(&t.c));
}

/* x [B, D] -> relu(x W1 + b1) [B, H] -> logits [B, C] -> mean sparse cross-entropy; Adam on
 * W1, b1, W2, b2. Reference kernels on the host, cuBLASLt (fp32-strict) and our kernels on the
 * GPU; after 20 steps every weight agrees within 1e-3 * (1 + |ref|). */
static void test_training_run(void) {
    enum { B = 64, D = 20, H = 32, C = 5, STEPS = 20, NV = 4 };
    const int64_t vn[NV] = {D * H, H, H * C, C};
    float *x = rand_f32(B * D, -1, 1);
    int32_t lab[B];
    for (int i = 0; i < B; i++) lab[i] = (int32_t)sn_rng_below(&rng, C);
    float *w[NV], *m[NV], *v[NV], *g[NV];
    for (int k = 0; k < NV; k++) {
        w[k] = rand_f32(vn[k], -0.3, 0.3);
        m[k] = xmalloc(vn[k] * 4), v[k] = xmalloc(vn[k] * 4), g[k] = xmalloc(vn[k] * 4);
    }
    /* device copies */
    float *gx = dev(x, B * D * 4), *gw[NV], *gm[NV], *gv[NV], *gg[NV];
    int32_t *glab = dev(lab, B * 4);
    for (int k = 0; k < NV; k++) {
        gw[k] = dev(w[k], vn[k] * 4), gm[k] = dev(m[k], vn[k] * 4), gv[k] = dev(v[k], vn[k] * 4);
        gg[k] = dev(NULL, vn[k] * 4);
    }
    float *h = xmalloc(B * H * 4), *pre = xmalloc(B * H * 4), *lg = xmalloc(B * C * 4),
          *loss = xmalloc(B * 4), *dl = xmalloc(B * 4), *dlg = xmalloc(B * C * 4),
          *dh = xmalloc(B * H * 4), *dpre = xmalloc(B * H * 4);
    for (int i = 0; i < B; i++) dl[i] = 1.0f / B;
    float *gh = dev(NULL, B * H * 4), *gpre = dev(NULL, B * H * 4), *glg = dev(NULL, B * C * 4),
          *gloss = dev(NULL, B * 4), *gdl = dev(dl, B * 4), *gdlg = dev(NULL, B * C * 4),
          *gdh = dev(NULL, B * H * 4), *gdpre = dev(NULL, B * H * 4);
    int32_t *git = dev(NULL, 4);
    sn_cuda_matmul *mm[6] = {0};
    OK(sn_cuda_matmul_new(ctx_strict, B, H, D, false, false, &mm[0]));  /* x W1 */
    OK(sn_cuda_matmul_new(ctx_strict, B, C, H, false, false, &mm[1]));  /* h W2 */
    OK(sn_cuda_matmul_new(ctx_strict, H, C, B, true, false, &mm[2]));   /* h^T dlogits */
    OK(sn_cuda_matmul_new(ctx_strict, B, H, C, false, true, &mm[3]));   /* dlogits W2^T */
    OK(sn_cuda_matmul_new(ctx_strict, D, H, B, true, false, &mm[4]));   /* x^T dpre */
    for (int k = 0; k < 5; k++)
        if (!mm[k]) goto done;
    sn_cuda_stream s = sn_cuda_ctx_stream(ctx_strict);
    int *flag = sn_cuda_ctx_error_flag(ctx_strict);
    sn_attrs mat = {0}, mat_ta = {0}, mat_tb = {0}, red = {0}, opt = {0};
    mat_ta.matmul.ta = true, mat_tb.matmul.tb = true;
    red.reduce.mask = 1u, red.reduce.keepdims = false;
    opt.optim.kind = SN_OPTIM_ADAM, opt.optim.lr = 0.01, opt.optim.beta1 = 0.9;
    opt.optim.beta2 = 0.999, opt.optim.epsilon = 1e-7;
    sn_cuda_optim co = {.kind = 1, .lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-7};
    const sn_shape sx = sn_shape_make(2, B, D), sh = sn_shape_make(2, B, H),
                   slg = sn_shape_make(2, B, C), sb = sn_shape_make(1, B), s0 = sn_shape_make(0),
                   sv[NV] = {sn_shape_make(2, D, H), sn_shape_make(1, H), sn_shape_make(2, H, C),
                             sn_shape_make(1, C)};
    const sn_dtype xent_dt[3] = {SN_F32, SN_I32, SN_F32};
    for (int32_t step = 0; step < STEPS; step++) {
        /* host, reference kernels */
        ref_call(SN_OP_MATMUL, sh, pre, 2, (sn_shape[]){sx, sv[0]}, (void *[]){x, w[0]}, NULL, &mat, false);
        ref_call(SN_OP_BIAS_ADD, sh, h, 2, (sn_shape[]){sh, sv[1]}, (void *[]){pre, w[1]}, NULL, NULL, true);
        ref_call(SN_OP_MATMUL, slg, pre, 2, (sn_shape[]){sh, sv[2]}, (void *[]){h, w[2]}, NULL, &mat, false);
        ref_call(SN_OP_BIAS_ADD, slg, lg, 2, (sn_shape[]){slg, sv[3]}, (void *[]){pre, w[3]}, NULL, NULL, false);
        ref_call(SN_OP_SPARSE_XENT_GRAD, slg, dlg, 3, (sn_shape[]){slg, sb, sb}, (void *[]){lg, lab, dl}, xent_dt, NULL, false);
        ref_call(SN_OP_MATMUL, sv[2], g[2], 2, (sn_shape[]){sh, slg}, (void *[]){h, dlg}, NULL, &mat_ta, false);
        ref_call(SN_OP_REDUCE_SUM, sv[3], g[3], 1, (sn_shape[]){slg}, (void *[]){dlg}, NULL, &red, false);
        ref_call(SN_OP_MATMUL, sh, dh, 2, (sn_shape[]){slg, sv[2]}, (void *[]){dlg, w[2]}, NULL, &mat_tb, false);
        ref_call(SN_OP_RELU_GRAD, sh, dpre, 2, (sn_shape[]){sh, sh}, (void *[]){h, dh}, NULL, NULL, false);
        ref_call(SN_OP_MATMUL, sv[0], g[0], 2, (sn_shape[]){sx, sh}, (void *[]){x, dpre}, NULL, &mat_ta, false);
        ref_call(SN_OP_REDUCE_SUM, sv[1], g[1], 1, (sn_shape[]){sh}, (void *[]){dpre}, NULL, &red, false);
        for (int k = 0; k < NV; k++)
            ref_call(SN_OP_APPLY_OPTIMIZER, sv[k], w[k], 5,
                     (sn_shape[]){sv[k], sv[k], s0, sv[k], sv[k]},
                     (void *[]){w[k], g[k], &step, m[k], v[k]},
                     (sn_dtype[]){SN_F32, SN_F32, SN_I32, SN_F32, SN_F32}, &opt, false);
        /* GPU */
        OK(sn_cuda_to_device(ctx_strict, git, &step, 4));
        OK(sn_cuda_matmul_run(mm[0], gx, gw[0], gpre));
        OK(sn_cuda_bias_add_f32(s, B, H, gpre, gw[1], true, gh));
        OK(sn_cuda_matmul_run(mm[1], gh, gw[2], glg));
        OK(sn_cuda_bias_add_f32(s, B, C, glg, gw[3], false, glg));
        OK(sn_cuda_sparse_xent_grad_f32(s, B, C, glg, glab, gdl, gdlg, flag));
        OK(sn_cuda_matmul_run(mm[2], gh, gdlg, gg[2]));
        OK(sn_cuda_reduce_f32(s, SN_CU_SUM, 1, B, C, gdlg, gg[3]));
        OK(sn_cuda_matmul_run(mm[3], gdlg, gw[2], gdh));
        OK(sn_cuda_grad_f32(s, SN_CU_RELU_GRAD, B * H, gh, gdh, 0, gdpre));
        OK(sn_cuda_matmul_run(mm[4], gx, gdpre, gg[0]));
        OK(sn_cuda_reduce_f32(s, SN_CU_SUM, 1, B, H, gdpre, gg[1]));
        for (int k = 0; k < NV; k++)
            OK(sn_cuda_apply_optimizer_f32(s, &co, vn[k], gw[k], gg[k], git, gm[k], gv[k], NULL));
        OK(sn_cuda_ctx_sync(ctx_strict));
    }
    for (int k = 0; k < NV; k++) {
        float *got = host_of(gw[k], vn[k] * 4);
        compare("MLP weights after 20 Adam steps, GPU vs CPU reference", got, w[k], vn[k], 1e-3);
        free(got);
    }
    (void)loss;
done:
    for (int k = 0; k < 6; k++) sn_cuda_matmul_free(mm[k]);
    for (int k = 0; k < NV; k++) {
        free(w[k]), free(m[k]), free(v[k]), free(g[k]);
        sn_cuda_free(ctx, gw[k]), sn_cuda_free(ctx, gm[k]), sn_cuda_free(ctx, gv[k]), sn_cuda_free(ctx, gg[k]);
    }
    free(x), free(h), free(pre), free(lg), free(loss), free(dl), free(dlg), free(dh), free(dpre);
    sn_cuda_free(ctx, gx), sn_cuda_free(ctx, glab), sn_cuda_free(ctx, gh), sn_cuda_free(ctx, gpre);
    sn_cuda_free(ctx, glg), sn_cuda_free(ctx, gloss), sn_cuda_free(ctx, gdl), sn_cuda_free(ctx, gdlg);
    sn_cuda_free(ctx, gdh), sn_cuda_free(ctx, gdpre), sn_cuda_free(ctx, git);
}

/* steps_per_execution as a CUDA graph: one captured step (y = x * 0.5 + b; x = y) launched 10
 * times equals the same step issued 10 times, bit for bit (same kernels, same order). */
static void test_graph_capture(void) {
    int64_t n = 4099;
    float *x = rand_f32(n, -1, 1), *b = rand_f32(n, -1, 1), half[1] = {0.5f};
    sn_cuda_stream s = sn_cuda_ctx_stream(ctx);
    float *gx[2], *gb = dev(b, n * 4), *gh = dev(half, 4), *gy = dev(NULL, n * 4);
    sn_cuda_bcast bc = {.ndim = 1, .dim = {n}, .sa = {1}, .sb = {0}};
    for (int r = 0; r < 2; r++) {
        gx[r] = dev(x, n * 4);
        sn_cuda_graph *g = NULL;
        if (r == 1) OK(sn_cuda_capture_begin(ctx));
        for (int k = 0; k < (r == 1 ? 1 : 10); k++) {
            OK(sn_cuda_binary_bcast_f32(s, SN_CU_MUL, &bc, gx[r], gh, gy));
            OK(sn_cuda_binary_f32(s, SN_CU_ADD, n, gy, gb, gx[r]));
        }
        if (r == 1) {
            OK(sn_cuda_capture_end(ctx, &g));
            if (g) OK(sn_cuda_graph_launch(g, 10));
        }
        OK(sn_cuda_ctx_sync(ctx));
        sn_cuda_graph_free(g);
    }
    float *want = host_of(gx[0], n * 4), *got = host_of(gx[1], n * 4);
    compare("10 launches of a captured step vs 10 issued steps", got, want, n, 0);
    free(want), free(got), free(x), free(b);
    sn_cuda_free(ctx, gx[0]), sn_cuda_free(ctx, gx[1]), sn_cuda_free(ctx, gb);
    sn_cuda_free(ctx, gh), sn_cuda_free(ctx, gy);
}

/* ---- the ops the coverage test asked for: i32 state and casts, broadcast, layer_norm ------- */

static void test_more_ops(void) {
    sn_cuda_stream st = sn_cuda_ctx_stream(ctx);
    /* iterations += 1 (i32), 5 times */
    int32_t it0 = 41, one = 1;
    int32_t *dit = dev(&it0, 4), *done = dev(&one, 4);
    sn_cuda_bcast b0 = {.ndim = 0};
    for (int i = 0; i < 5; i++) OK(sn_cuda_assign_i32(st, &b0, done, true, dit));
    int32_t *git = host_of(dit, 4);
    cases++;
    if (*git != 46) FAIL("assign_add i32: %d, want 46", (int)*git);
    free(git);
    sn_cuda_free(ctx, dit), sn_cuda_free(ctx, done);
    /* i32 <-> f32 */
    int64_t n = 4099;
    int32_t *xi = xmalloc((size_t)n * 4);
    float *xf = rand_f32(n, -3e6, 3e6), *wf = xmalloc((size_t)n * 4), *wi = xmalloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
        xi[i] = (int32_t)(i * 2654435761u) >> 3;
        wf[i] = (float)xi[i];
        wi[i] = (float)(int32_t)xf[i];
    }
    int32_t *dxi = dev(xi, n * 4), *doi = dev(NULL, n * 4);
    float *dxf = dev(xf, n * 4), *dof = dev(NULL, n * 4);
    OK(sn_cuda_i32_to_f32(st, n, dxi, dof));
    OK(sn_cuda_f32_to_i32(st, n, dxf, doi));
    float *gf = host_of(dof, n * 4);
    int32_t *gi = host_of(doi, n * 4);
    float *gif = xmalloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) gif[i] = (float)gi[i];
    compare("cast i32 -> f32", gf, wf, n, 0);
    compare("cast f32 -> i32 (toward zero)", gif, wi, n, 0);
    free(xi), free(xf), free(wf), free(wi), free(gf), free(gi), free(gif);
    sn_cuda_free(ctx, dxi), sn_cuda_free(ctx, doi), sn_cuda_free(ctx, dxf), sn_cuda_free(ctx, dof);
    /* broadcast_to [3, 1, 5] -> [4, 3, 7, 5] through the assign kernel */
    {
        sn_shape xs = sn_shape_make(3, 3, 1, 5), ys = sn_shape_make(4, 4, 3, 7, 5);
        float *x = rand_f32(15, -1, 1);
        tcall t;
        tc_init(&t, SN_OP_BROADCAST_TO, SN_F32, ys);
        tc_input(&t, SN_F32, xs, x);
        float *want = ref_out(&t);
        sn_cuda_bcast bc = {.ndim = 4, .dim = {4, 3, 7, 5}, .sb = {0, 5, 0, 1}};
        float *dx = dev(x, 60), *dy = dev(NULL, 420 * 4);
        OK(sn_cuda_assign_f32(st, &bc, dx, false, dy));
        float *got = host_of(dy, 420 * 4);
        compare("broadcast_to", got, want, 420, 0);
        free(x), free(want), free(got);
        sn_cuda_free(ctx, dx), sn_cuda_free(ctx, dy);
    }
    /* layer_norm and its gradient, rows of 128 and of 7 (a tail under one warp) */
    const int64_t dims[][2] = {{64, 128}, {33, 7}, {1, 1000}};
    for (size_t z = 0; z < sizeof dims / sizeof dims[0]; z++) {
        int64_t R = dims[z][0], C = dims[z][1];
        sn_shape xs = sn_shape_make(2, R, C), cs = sn_shape_make(1, C);
        float *x = rand_f32(R * C, -3, 3), *g = rand_f32(C, 0.5, 1.5), *be = rand_f32(C, -1, 1);
        float *dyv = rand_f32(R * C, -1, 1);
        tcall t;
        tc_init(&t, SN_OP_LAYER_NORM, SN_F32, xs);
        tc_input(&t, SN_F32, xs, x);
        tc_input(&t, SN_F32, cs, g);
        tc_input(&t, SN_F32, cs, be);
        t.attr.norm.epsilon = 1e-5;
        float *want = ref_out(&t);
        tcall tg;
        tc_init(&tg, SN_OP_LAYER_NORM_GRAD, SN_F32, sn_shape_make(1, R * C + 2 * C));
        tc_input(&tg, SN_F32, xs, x);
        tc_input(&tg, SN_F32, cs, g);
        tc_input(&tg, SN_F32, xs, dyv);
        tg.attr.norm.epsilon = 1e-5;
        float *wantg = ref_out(&tg);
        float *dx = dev(x, R * C * 4), *dg = dev(g, C * 4), *db = dev(be, C * 4);
        float *ddy = dev(dyv, R * C * 4), *dy = dev(NULL, R * C * 4);
        float *dout = dev(NULL, (R * C + 2 * C) * 4), *dst = dev(NULL, 2 * R * 4);
        OK(sn_cuda_layer_norm_f32(st, R, C, dx, dg, db, 1e-5, dy));
        OK(sn_cuda_layer_norm_grad_f32(st, R, C, dx, dg, ddy, 1e-5, dst, dout));
        float *got = host_of(dy, R * C * 4), *gotg = host_of(dout, (R * C + 2 * C) * 4);
        compare("layer_norm", got, want, R * C, 2e-5);
        /* dgamma, dbeta: sums over R rows */
        compare("layer_norm_grad", gotg, wantg, R * C + 2 * C, 2e-5 * sqrt((double)R));
        free(x), free(g), free(be), free(dyv), free(want), free(wantg), free(got), free(gotg);
        sn_cuda_free(ctx, dx), sn_cuda_free(ctx, dg), sn_cuda_free(ctx, db);
        sn_cuda_free(ctx, ddy), sn_cuda_free(ctx, dy), sn_cuda_free(ctx, dout);
        sn_cuda_free(ctx, dst);
    }
    /* batched matmul: [3, 33, 17] @ [3, 17, 9] as a strided batch, fp32-strict */
    {
        int64_t B = 3, m = 33, k = 17, nn = 9;
        float *a = rand_f32(B * m * k, -1, 1), *b = rand_f32(B * k * nn, -1, 1);
        tcall t;
        tc_init(&t, SN_OP_MATMUL, SN_F32, sn_shape_make(3, B, m, nn));
        tc_input(&t, SN_F32, sn_shape_make(3, B, m, k), a);
        tc_input(&t, SN_F32, sn_shape_make(3, B, k, nn), b);
        float *want = ref_out(&t);
        float *da = dev(a, B * m * k * 4), *db = dev(b, B * k * nn * 4), *dc = dev(NULL, B * m * nn * 4);
        sn_cuda_matmul_desc d = {.m = m, .n = nn, .k = k, .batch = B, .a_stride = m * k,
                                 .b_stride = k * nn, .tf32 = false};
        sn_cuda_matmul *p = NULL;
        OK(sn_cuda_matmul_new_desc(ctx, &d, &p));
        if (p) OK(sn_cuda_matmul_run(p, da, db, dc));
        float *got = host_of(dc, B * m * nn * 4);
        compare("batched matmul (strided batch, fp32)", got, want, B * m * nn, 1e-5 * sqrt((double)k));
        sn_cuda_matmul_free(p);
        free(a), free(b), free(want), free(got);
        sn_cuda_free(ctx, da), sn_cuda_free(ctx, db), sn_cuda_free(ctx, dc);
    }
}

int main(void) {
    if (sn_gpu_count() == 0) {
        printf("SKIP: no GPU: %s\n", sn_gpu_none_reason());
        return 77;
    }
    sn_rng_init(&rng, 42, 0);
    sn_cuda_ctx_opts o = sn_cuda_ctx_opts_defaults();
    sn_status st = sn_cuda_ctx_new(&o, &ctx);
    o.tf32 = false;
    if (st == SN_OK) st = sn_cuda_ctx_new(&o, &ctx_strict);
    if (st != SN_OK) {
        printf("FAIL: a CUDA context on GPU:0: %s\n", sn_last_error());
        sn_cuda_ctx_free(ctx);
        return 1;
    }
    test_binary();
    test_bias_add();
    test_unary_and_grads();
    test_cast_and_dropout();
    test_reduce();
    test_softmax();
    test_optimizers();
    test_matmul();
    test_conv_pool();
    test_training_run();
    test_graph_capture();
    test_more_ops();
    sn_cuda_ctx_free(ctx_strict);
    sn_cuda_ctx_free(ctx);
    printf("%d cases, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
#endif
