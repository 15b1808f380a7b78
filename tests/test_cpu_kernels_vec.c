/* The fast elementwise, reduction, softmax-family and state kernels (backend/cpu/cpu_
 * {elementwise,reduce,softmax,state,shape}.c) against the reference kernels: for each op, random
 * inputs (sn_rng), one hand-built call per case run through both into separate outputs, and a
 * comparison (f32: |fast - ref| <= tol * (1 + |ref|); bit-exact for casts to bf16 and the
 * dropout mask). Cases cover the broadcast patterns, vector-loop tails (1, 15, 17, 1000003
 * elements), special values, thread-count independence of reductions (1 vs 2 threads, same
 * bits), fallback to the reference for unsupported patterns, the bad-label message, and
 * subnormal optimizer slots flushed to zero.
 * Prints every mismatch and exits non-zero if any. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/kernel.h"
#include "kernel_test_util.h"

static int cases;
static sn_kernel_table fast; /* reference rows overridden by the four register functions */
static sn_rng rng;

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

/* ---- a hand-built kernel call (tcall, tc_init, tc_input: kernel_test_util.h) ------------- */

static size_t bytes_of(sn_dtype dt, const sn_shape *s) {
    return (size_t)sn_shape_numel(s) * sn_dtype_size(dt);
}

typedef enum { FILL_UNIFORM, FILL_LABELS, FILL_ZERO, FILL_INTS } fill_kind;

/* Adds an input (owned: t->data, freed by tc_free) filled with values in [lo, hi) (uniform),
 * labels in [0, lo), zeros, or integers in [lo, hi) stored as the dtype (ties for argmax). */
static void *tc_in(tcall *t, sn_dtype dt, sn_shape shape, fill_kind fk, double lo, double hi) {
    int i = t->c.n_in;
    size_t nb = bytes_of(dt, &shape);
    t->data[i] = xmalloc(nb);
    memset(t->data[i], 0, nb);
    int64_t n = sn_shape_numel(&shape);
    for (int64_t j = 0; j < n; j++) {
        double v = 0;
        switch (fk) {
        case FILL_UNIFORM: v = lo + (hi - lo) * sn_rng_uniform(&rng); break;
        case FILL_LABELS: v = (double)sn_rng_below(&rng, (uint64_t)lo); break;
        case FILL_ZERO: v = 0; break;
        case FILL_INTS: v = lo + (double)sn_rng_below(&rng, (uint64_t)(hi - lo)); break;
        }
        sn_store(dt, t->data[i], j, v);
    }
    tc_input(t, dt, shape, t->data[i]);
    return t->data[i];
}

static void tc_free(tcall *t) {
    for (int i = 0; i < t->c.n_in; i++) free(t->data[i]);
}

/* One run of kernel k with prepare/scratch as the executor does it. */
static sn_status run_kernel(const sn_kernel *k, sn_kcall *c) {
    size_t sb = 0;
    c->state = NULL;
    c->scratch = NULL;
    c->scratch_bytes = 0;
    if (k->prepare) {
        sn_status s = k->prepare(c, &sb);
        if (s != SN_OK) return s;
    }
    void *scratch = sb ? xmalloc(sb) : NULL;
    c->scratch = scratch;
    c->scratch_bytes = sb;
    sn_status s = k->run(c);
    if (k->release) k->release(c);
    free(scratch);
    return s;
}

/* ---- comparison ------------------------------------------------------------------------- */

static double tol_for(sn_op op) {
    switch (op) {
    case SN_OP_REDUCE_SUM:
    case SN_OP_REDUCE_MEAN: return 2e-5; /* f32 sums of up to 1M terms vs a double sum */
    default: return 1e-5;
    }
}

/* Compares n values of dtype dt; NaN must match NaN, inf must match inf of the same sign. */
static void compare(const char *what, sn_dtype dt, const void *got, const void *want, int64_t n,
                    double tol, bool exact) {
    int shown = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = sn_load(dt, got, i), w = sn_load(dt, want, i);
        bool ok;
        if (exact && dt == SN_F32)
            ok = memcmp((const float *)got + i, (const float *)want + i, 4) == 0 ||
                 (isnan(g) && isnan(w));
        else if (exact || dt == SN_I32 || dt == SN_U8)
            ok = g == w || (isnan(g) && isnan(w));
        else if (isnan(w) || isinf(w))
            ok = (isnan(w) && isnan(g)) || g == w;
        else
            ok = fabs(g - w) <= tol * (1 + fabs(w));
        if (!ok && shown++ < 5)
            FAIL("%s [%lld]: fast %.9g, ref %.9g", what, (long long)i, g, w);
        else if (!ok)
            failures++;
    }
}

/* Runs the fast kernel (which must have accepted the call, unless want_fast is false) and the
 * reference on copies of the inputs, compares the outputs and, for side-effect ops, every
 * updated input. Returns the fast output (caller frees) when keep is set. */
static void *check_call(const char *what, tcall *t, bool want_fast, bool exact) {
    cases++;
    sn_op op = t->c.op;
    const sn_kernel *ref = sn_ref_kernels()->k[op];
    const sn_kernel *k = sn_kernel_select(&fast, &t->c);
    if (!k || !ref) {
        FAIL("%s: no kernel for op %d", what, (int)op);
        return NULL;
    }
    bool is_fast = strcmp(k->impl, "ref") != 0;
    if (is_fast != want_fast)
        FAIL("%s: expected the %s kernel, selection gave '%s'", what, want_fast ? "fast" : "ref",
             k->impl);
    bool side = op == SN_OP_ASSIGN || op == SN_OP_ASSIGN_ADD || op == SN_OP_APPLY_OPTIMIZER;
    size_t ob = bytes_of(t->c.y.dtype, &t->c.y.shape);
    void *out[2];
    void *ins[2][SN_MAX_INPUTS];
    const sn_kernel *ks[2] = {k, ref};
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < t->c.n_in; i++) {
            size_t nb = bytes_of(t->c.x[i].dtype, &t->c.x[i].shape);
            ins[r][i] = xmalloc(nb);
            memcpy(ins[r][i], t->data[i], nb);
            t->c.in[i] = ins[r][i];
        }
        out[r] = side ? ins[r][0] : xmalloc(ob);
        if (!side) memset(out[r], 0xA5, ob); /* garbage: every element must be written */
        t->c.out = out[r];
        sn_status s = run_kernel(ks[r], &t->c);
        if (s != SN_OK) FAIL("%s: %s kernel failed: %s", what, r ? "ref" : "fast", sn_last_error());
    }
    double tol = tol_for(op);
    compare(what, t->c.y.dtype, out[0], out[1], sn_shape_numel(&t->c.y.shape), tol, exact);
    if (side)
        for (int i = 1; i < t->c.n_in; i++) {
            char w[160];
            snprintf(w, sizeof w, "%s (input %d after)", what, i);
            compare(w, t->c.x[i].dtype, ins[0][i], ins[1][i], sn_shape_numel(&t->c.x[i].shape),
                    tol, exact);
        }
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < t->c.n_in; i++) free(ins[r][i]);
        if (!side) free(out[r]);
    }
    for (int i = 0; i < t->c.n_in; i++) t->c.in[i] = t->data[i];
    return NULL;
}

/* Runs only the fast kernel into a new buffer (caller frees). */
static void *run_fast(tcall *t) {
    size_t ob = bytes_of(t->c.y.dtype, &t->c.y.shape);
    void *out = xmalloc(ob);
    t->c.out = out;
    const sn_kernel *k = sn_kernel_select(&fast, &t->c);
    sn_status s = run_kernel(k, &t->c);
    if (s != SN_OK) FAIL("fast kernel failed: %s", sn_last_error());
    return out;
}

static sn_shape S0(void) { return sn_shape_make(0); }
static sn_shape S1(int64_t a) { return sn_shape_make(1, a); }
static sn_shape S2(int64_t a, int64_t b) { return sn_shape_make(2, a, b); }
static sn_shape S3(int64_t a, int64_t b, int64_t c) { return sn_shape_make(3, a, b, c); }
static sn_shape S4(int64_t a, int64_t b, int64_t c, int64_t d) {
    return sn_shape_make(4, a, b, c, d);
}

/* ---- elementwise ------------------------------------------------------------------------ */

static void test_binary(void) {
    struct { sn_shape a, b, o; } sh[] = {
        {S1(1000003), S1(1000003), S1(1000003)}, {S1(17), S1(17), S1(17)},
        {S1(1), S1(1), S1(1)},                   {S1(15), S0(), S1(15)},
        {S0(), S1(15), S1(15)},                  {S2(33, 17), S1(17), S2(33, 17)},
        {S1(17), S2(33, 17), S2(33, 17)},        {S2(33, 17), S2(33, 1), S2(33, 17)},
        {S2(33, 1), S2(33, 17), S2(33, 17)},     {S3(4, 1, 5), S2(3, 1), S3(4, 3, 5)},
        {S4(2, 3, 4, 5), S4(1, 3, 1, 5), S4(2, 3, 4, 5)}, {S0(), S0(), S0()},
        {S1(1), S1(7), S1(7)},                   {S2(300, 400), S1(400), S2(300, 400)},
        {S2(400, 300), S2(400, 1), S2(400, 300)}, {S3(3, 1, 50000), S3(1, 2, 1), S3(3, 2, 50000)},
    };
    sn_op ops[] = {SN_OP_ADD, SN_OP_SUB, SN_OP_MUL, SN_OP_DIV};
    const char *names[] = {"add", "sub", "mul", "div"};
    for (size_t o = 0; o < 4; o++)
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
            tcall t;
            tc_init(&t, ops[o], SN_F32, sh[s].o);
            tc_in(&t, SN_F32, sh[s].a, FILL_UNIFORM, -3, 3);
            tc_in(&t, SN_F32, sh[s].b, FILL_UNIFORM, ops[o] == SN_OP_DIV ? 0.5 : -3, 3);
            char w[96], b1[48], b2[48];
            snprintf(w, sizeof w, "%s %s %s", names[o], sn_shape_str(&sh[s].a, b1, sizeof b1),
                     sn_shape_str(&sh[s].b, b2, sizeof b2));
            check_call(w, &t, true, false);
            tc_free(&t);
        }
    /* In place (out == a), as the planner may arrange. */
    tcall t;
    tc_init(&t, SN_OP_MUL, SN_F32, S2(33, 17));
    float *a = tc_in(&t, SN_F32, S2(33, 17), FILL_UNIFORM, -3, 3);
    float *b = tc_in(&t, SN_F32, S1(17), FILL_UNIFORM, -3, 3);
    float want[33 * 17];
    for (int i = 0; i < 33 * 17; i++) want[i] = a[i] * b[i % 17];
    t.c.out = a;
    run_kernel(sn_kernel_select(&fast, &t.c), &t.c);
    if (memcmp(a, want, sizeof want) != 0) FAIL("mul in place: wrong result");
    tc_free(&t);

    struct { sn_shape x, b; } bs[] = {{S2(32, 128), S1(128)}, {S4(5, 7, 9, 16), S1(16)},
                                      {S2(3, 1), S1(1)}};
    for (size_t s = 0; s < 3; s++) {
        tc_init(&t, SN_OP_BIAS_ADD, SN_F32, bs[s].x);
        tc_in(&t, SN_F32, bs[s].x, FILL_UNIFORM, -3, 3);
        tc_in(&t, SN_F32, bs[s].b, FILL_UNIFORM, -3, 3);
        check_call("bias_add", &t, true, false);
        tc_free(&t);
    }
    struct { sn_shape x, o; } bt[] = {{S1(17), S2(33, 17)}, {S2(33, 1), S2(33, 17)},
                                      {S0(), S1(15)},      {S3(1, 3, 1), S3(2, 3, 4)},
                                      {S1(5), S1(5)}};
    for (size_t s = 0; s < 5; s++) {
        tc_init(&t, SN_OP_BROADCAST_TO, SN_F32, bt[s].o);
        tc_in(&t, SN_F32, bt[s].x, FILL_UNIFORM, -3, 3);
        check_call("broadcast_to", &t, true, true);
        tc_free(&t);
    }
    /* bf16 operands are not handled here: the reference must take them. */
    tc_init(&t, SN_OP_ADD, SN_BF16, S1(9));
    tc_in(&t, SN_BF16, S1(9), FILL_UNIFORM, -3, 3);
    tc_in(&t, SN_BF16, S1(9), FILL_UNIFORM, -3, 3);
    check_call("add bf16 (falls back)", &t, false, false);
    tc_free(&t);
}

static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.7f, 88.75f, 89.0f,
                                 -87.5f, -100.0f, -104.5f, 1e-40f, -1e-40f, 1e-30f, 0.6249f,
                                 0.626f, -0.62f, 20.0f, -20.0f, 1e-6f, 3.4e38f, 1.0f};

static void test_unary(void) {
    struct { sn_op op; const char *name; double lo, hi; } u[] = {
        {SN_OP_RELU, "relu", -3, 3},        {SN_OP_SIGMOID, "sigmoid", -20, 20},
        {SN_OP_TANH, "tanh", -6, 6},        {SN_OP_TANH, "tanh small", -0.7, 0.7},
        {SN_OP_EXP, "exp", -87, 88},        {SN_OP_EXP, "exp small", -1, 1},
        {SN_OP_LOG, "log", 1e-30, 1e3},     {SN_OP_LOG, "log near 1", 0.5, 2},
        {SN_OP_SQRT, "sqrt", 0, 1e4},       {SN_OP_NEG, "neg", -3, 3},
    };
    int64_t sizes[] = {1, 15, 17, 1000, 1000003};
    for (size_t k = 0; k < sizeof u / sizeof u[0]; k++)
        for (size_t s = 0; s < 5; s++) {
            tcall t;
            tc_init(&t, u[k].op, SN_F32, S1(sizes[s]));
            tc_in(&t, SN_F32, S1(sizes[s]), FILL_UNIFORM, u[k].lo, u[k].hi);
            char w[64];
            snprintf(w, sizeof w, "%s [%lld]", u[k].name, (long long)sizes[s]);
            check_call(w, &t, true, false);
            tc_free(&t);
        }
    /* Special values: NaN, infinities, zeros, denormals, overflow edges. */
    int64_t ns = (int64_t)(sizeof specials / sizeof specials[0]);
    sn_op sp[] = {SN_OP_RELU, SN_OP_SIGMOID, SN_OP_TANH, SN_OP_EXP, SN_OP_LOG, SN_OP_SQRT, SN_OP_NEG};
    for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++) {
        tcall t;
        tc_init(&t, sp[k], SN_F32, S1(ns));
        float *x = tc_in(&t, SN_F32, S1(ns), FILL_ZERO, 0, 0);
        memcpy(x, specials, sizeof specials);
        char w[64];
        snprintf(w, sizeof w, "op %d special values", (int)sp[k]);
        check_call(w, &t, true, false);
        tc_free(&t);
    }
    /* Pointwise gradients. */
    struct { sn_op op; const char *name; double lo, hi; } g[] = {
        {SN_OP_RELU_GRAD, "relu_grad", -3, 3},
        {SN_OP_SIGMOID_GRAD, "sigmoid_grad", 0, 1},
        {SN_OP_TANH_GRAD, "tanh_grad", -1, 1},
    };
    for (size_t k = 0; k < 3; k++)
        for (size_t s = 0; s < 5; s++) {
            tcall t;
            tc_init(&t, g[k].op, SN_F32, S1(sizes[s]));
            tc_in(&t, SN_F32, S1(sizes[s]), FILL_UNIFORM, g[k].lo, g[k].hi);
            tc_in(&t, SN_F32, S1(sizes[s]), FILL_UNIFORM, -3, 3);
            check_call(g[k].name, &t, true, false);
            tc_free(&t);
        }
}

static void test_cast(void) {
    int64_t sizes[] = {1, 17, 1000003};
    for (size_t s = 0; s < 3; s++) {
        tcall t;
        tc_init(&t, SN_OP_CAST, SN_BF16, S1(sizes[s]));
        float *x = tc_in(&t, SN_F32, S1(sizes[s]), FILL_UNIFORM, -1e3, 1e3);
        if (sizes[s] >= 17) {
            /* halfway cases (ties to even both ways), NaN, inf, the largest finite values */
            const uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xff800001u,
                                     0x7f800000u, 0x7f7fffffu, 0xff7fffffu, 0x00000001u,
                                     0x80008000u, 0x3f7fffffu};
            memcpy(x, bits, sizeof bits);
        }
        check_call("cast f32->bf16", &t, true, true);
        tc_free(&t);
        tc_init(&t, SN_OP_CAST, SN_F32, S1(sizes[s]));
        tc_in(&t, SN_BF16, S1(sizes[s]), FILL_UNIFORM, -1e3, 1e3);
        check_call("cast bf16->f32", &t, true, true);
        tc_free(&t);
        tc_init(&t, SN_OP_CAST, SN_F32, S1(sizes[s]));
        tc_in(&t, SN_U8, S1(sizes[s]), FILL_INTS, 0, 256);
        check_call("cast u8->f32", &t, true, true);
        tc_free(&t);
        tc_init(&t, SN_OP_CAST, SN_F32, S1(sizes[s]));
        int32_t *iv = tc_in(&t, SN_I32, S1(sizes[s]), FILL_INTS, -100000, 100000);
        iv[0] = 16777217; /* rounds in f32 */
        check_call("cast i32->f32", &t, true, true);
        tc_free(&t);
    }
}

static void test_dropout(void) {
    int64_t sizes[] = {1, 15, 17, 1000003};
    for (size_t s = 0; s < 4; s++)
        for (int g = 0; g < 2; g++) {
            tcall t;
            tc_init(&t, g ? SN_OP_DROPOUT_GRAD : SN_OP_DROPOUT, SN_F32, S1(sizes[s]));
            t.c.step = 7; /* part of the mask's counter */
            t.attr.dropout.rate = 0.3;
            t.attr.dropout.seed = 1234;
            t.attr.dropout.mask_node = 5;
            tc_in(&t, SN_F32, S1(sizes[s]), FILL_UNIFORM, -3, 3);
            check_call(g ? "dropout_grad" : "dropout", &t, true, true);
            /* the same bits on 1 and 2 threads */
            if (sizes[s] > 100000) {
                sn_set_num_threads(1);
                float *a = run_fast(&t);
                sn_set_num_threads(2);
                float *b = run_fast(&t);
                if (memcmp(a, b, (size_t)sizes[s] * 4) != 0) FAIL("dropout: 1 vs 2 threads differ");
                free(a);
                free(b);
            }
            tc_free(&t);
        }
    tcall t;
    tc_init(&t, SN_OP_DROPOUT, SN_F32, S1(1000));
    t.c.step = 7;
    t.attr.dropout.rate = 0.0;
    tc_in(&t, SN_F32, S1(1000), FILL_UNIFORM, -3, 3);
    check_call("dropout rate 0", &t, true, true);
    tc_free(&t);
}

/* ---- reductions ------------------------------------------------------------------------- */

static sn_shape reduced_shape(sn_shape x, uint32_t mask, bool keepdims) {
    sn_shape o = {0};
    for (int d = 0; d < x.ndim; d++) {
        if (mask & (1u << d)) {
            if (keepdims) o.dim[o.ndim++] = 1;
        } else {
            o.dim[o.ndim++] = x.dim[d];
        }
    }
    return o;
}

static void test_reduce(void) {
    struct { sn_shape x; uint32_t mask; bool supported; } rc[] = {
        {S1(1000003), 1, true},   {S1(1), 1, true},          {S1(17), 1, true},
        {S2(33, 17), 1, true},    {S2(33, 17), 2, true},     {S2(33, 17), 3, true},
        {S4(4, 5, 6, 7), 6, true}, {S2(200, 784), 1, true},  {S2(1000, 40), 1, true},
        {S2(3, 50000), 2, true},  {S3(2, 1, 3), 2, true},    {S2(32, 128), 1, true},
        {S4(20, 7, 7, 2000), 6, true}, {S3(4, 5, 6), 5, false}, {S2(2000, 3000), 1, true},
        {S2(5, 0), 2, false},
    };
    sn_op ops[] = {SN_OP_REDUCE_SUM, SN_OP_REDUCE_MEAN, SN_OP_REDUCE_MAX};
    const char *names[] = {"reduce_sum", "reduce_mean", "reduce_max"};
    for (size_t o = 0; o < 3; o++)
        for (size_t s = 0; s < sizeof rc / sizeof rc[0]; s++)
            for (int keep = 0; keep < 2; keep++) {
                tcall t;
                tc_init(&t, ops[o], SN_F32, reduced_shape(rc[s].x, rc[s].mask, keep));
                t.attr.reduce.mask = rc[s].mask;
                t.attr.reduce.keepdims = keep;
                /* positive values for sums: a relative tolerance then means something */
                tc_in(&t, SN_F32, rc[s].x, FILL_UNIFORM, o == 2 ? -3 : 0, 3);
                char w[96], b[48];
                snprintf(w, sizeof w, "%s %s mask %u keepdims %d", names[o],
                         sn_shape_str(&rc[s].x, b, sizeof b), rc[s].mask, keep);
                check_call(w, &t, rc[s].supported, false);
                tc_free(&t);
            }
    /* NaN propagates through max, as in the reference. */
    tcall t;
    tc_init(&t, SN_OP_REDUCE_MAX, SN_F32, S1(3));
    t.attr.reduce.mask = 2;
    float *x = tc_in(&t, SN_F32, S2(3, 40), FILL_UNIFORM, -3, 3);
    x[5] = NAN;
    x[40 + 39] = NAN;
    x[80] = INFINITY;
    check_call("reduce_max NaN", &t, true, false);
    tc_free(&t);

    /* Same bits for 1 and 2 threads: rows, one long row, columns with row blocks, columns. */
    struct { sn_shape x; uint32_t mask; } dc[] = {
        {S1(1000003), 1}, {S2(300000, 7), 1}, {S2(7, 300000), 2}, {S3(3, 20000, 40), 2},
        {S2(50, 40000), 1},
    };
    for (size_t s = 0; s < 5; s++)
        for (size_t o = 0; o < 3; o++) {
            tc_init(&t, ops[o], SN_F32, reduced_shape(dc[s].x, dc[s].mask, false));
            t.attr.reduce.mask = dc[s].mask;
            tc_in(&t, SN_F32, dc[s].x, FILL_UNIFORM, -3, 3);
            sn_set_num_threads(1);
            void *a = run_fast(&t);
            sn_set_num_threads(2);
            void *b = run_fast(&t);
            sn_set_num_threads(3); /* more threads than cores: still the same order */
            void *c = run_fast(&t);
            sn_set_num_threads(2);
            size_t nb = bytes_of(SN_F32, &t.c.y.shape);
            char bs[48];
            if (memcmp(a, b, nb) != 0 || memcmp(a, c, nb) != 0)
                FAIL("%s %s: results differ between 1, 2 and 3 threads", names[o],
                     sn_shape_str(&dc[s].x, bs, sizeof bs));
            free(a);
            free(b);
            free(c);
            tc_free(&t);
            cases++;
        }
}

/* ---- softmax family --------------------------------------------------------------------- */

static void test_softmax(void) {
    struct { sn_shape x; int axis; bool supported; } sc[] = {
        {S2(32, 10), 1, true}, {S2(7, 1000), 1, true}, {S2(3, 17), 1, true},
        {S3(4, 5, 1), 1, true}, {S2(4, 5), 0, false}, {S2(1, 1), 1, true},
        {S2(5000, 33), 1, true},
    };
    sn_op ops[] = {SN_OP_SOFTMAX, SN_OP_LOG_SOFTMAX, SN_OP_SOFTMAX_GRAD, SN_OP_LOG_SOFTMAX_GRAD};
    const char *names[] = {"softmax", "log_softmax", "softmax_grad", "log_softmax_grad"};
    for (size_t o = 0; o < 4; o++)
        for (size_t s = 0; s < sizeof sc / sizeof sc[0]; s++) {
            tcall t;
            tc_init(&t, ops[o], SN_F32, sc[s].x);
            t.attr.axis.axis = sc[s].axis;
            if (o < 2) {
                tc_in(&t, SN_F32, sc[s].x, FILL_UNIFORM, -10, 10);
            } else {
                /* y: a softmax (or log-softmax) output, computed by the reference */
                float *y = tc_in(&t, SN_F32, sc[s].x, FILL_UNIFORM, -5, 5);
                tcall f;
                tc_init(&f, o == 2 ? SN_OP_SOFTMAX : SN_OP_LOG_SOFTMAX, SN_F32, sc[s].x);
                f.attr.axis.axis = sc[s].axis;
                tc_in(&f, SN_F32, sc[s].x, FILL_ZERO, 0, 0);
                memcpy(f.data[0], y, bytes_of(SN_F32, &sc[s].x));
                f.c.out = y;
                run_kernel(sn_ref_kernels()->k[f.c.op], &f.c);
                tc_free(&f);
                tc_in(&t, SN_F32, sc[s].x, FILL_UNIFORM, -3, 3);
            }
            char w[96], b[48];
            snprintf(w, sizeof w, "%s %s axis %d", names[o], sn_shape_str(&sc[s].x, b, sizeof b),
                     sc[s].axis);
            check_call(w, &t, sc[s].supported, false);
            tc_free(&t);
        }
    /* Rows with large values, -inf, +inf and NaN. */
    for (int o = 0; o < 2; o++) {
        tcall t;
        tc_init(&t, ops[o], SN_F32, S2(5, 4));
        t.attr.axis.axis = 1;
        float *x = tc_in(&t, SN_F32, S2(5, 4), FILL_UNIFORM, -3, 3);
        x[0] = 1000.0f;
        x[1] = 999.0f;
        x[4] = -INFINITY;
        x[8] = INFINITY;
        x[12] = NAN;
        for (int j = 16; j < 20; j++) x[j] = -INFINITY;
        check_call(o ? "log_softmax specials" : "softmax specials", &t, true, false);
        tc_free(&t);
    }
}

static void test_losses(void) {
    struct { int64_t n, c; } lc[] = {{32, 10}, {5, 1000}, {1, 1}, {3000, 17}, {17, 3}};
    for (size_t s = 0; s < sizeof lc / sizeof lc[0]; s++) {
        sn_shape ls = S2(lc[s].n, lc[s].c), ns = S1(lc[s].n);
        tcall t;
        for (int o = 0; o < 3; o++) {
            sn_op op = o == 0 ? SN_OP_SPARSE_XENT : o == 1 ? SN_OP_SPARSE_XENT_GRAD : SN_OP_SPARSE_ACCURACY;
            tc_init(&t, op, SN_F32, o == 1 ? ls : ns);
            tc_in(&t, SN_F32, ls, o == 2 ? FILL_INTS : FILL_UNIFORM, -8, 8);
            tc_in(&t, SN_I32, ns, FILL_LABELS, (double)lc[s].c, 0);
            if (o == 1) tc_in(&t, SN_F32, ns, FILL_UNIFORM, -1, 1);
            char w[64];
            snprintf(w, sizeof w, "sparse op %d [%lld, %lld]", (int)op, (long long)lc[s].n,
                     (long long)lc[s].c);
            check_call(w, &t, true, o == 2);
            tc_free(&t);
        }
        tc_init(&t, SN_OP_ARGMAX, SN_I32, ns);
        tc_in(&t, SN_F32, ls, FILL_INTS, -3, 3); /* ties: the first index must win */
        check_call("argmax", &t, true, true);
        tc_free(&t);
    }
    /* A label outside [0, C): the same status and message as the reference. */
    const char *opn[] = {"sparse_softmax_xent", "sparse_softmax_xent_grad", "sparse_accuracy"};
    for (int o = 0; o < 3; o++)
        for (int bad = 0; bad < 2; bad++) {
            sn_op op = o == 0 ? SN_OP_SPARSE_XENT : o == 1 ? SN_OP_SPARSE_XENT_GRAD : SN_OP_SPARSE_ACCURACY;
            tcall t;
            tc_init(&t, op, SN_F32, o == 1 ? S2(6, 10) : S1(6));
            tc_in(&t, SN_F32, S2(6, 10), FILL_UNIFORM, -1, 1);
            int32_t *lab = tc_in(&t, SN_I32, S1(6), FILL_LABELS, 10, 0);
            if (o == 1) tc_in(&t, SN_F32, S1(6), FILL_UNIFORM, -1, 1);
            lab[3] = bad ? -1 : 10;
            void *out = xmalloc(6 * 10 * 4);
            t.c.out = out;
            const sn_kernel *k = sn_kernel_select(&fast, &t.c);
            sn_status s = run_kernel(k, &t.c);
            char want[160];
            snprintf(want, sizeof want, "%s: label %d at example 3 is outside [0, 10)", opn[o],
                     bad ? -1 : 10);
            if (s != SN_ERR_INVALID || strcmp(sn_last_error(), want) != 0)
                FAIL("bad label: status %d, message '%s', want '%s' (kernel %s)", (int)s,
                     sn_last_error(), want, k->impl);
            free(out);
            tc_free(&t);
            cases++;
        }
}

/* ---- state ------------------------------------------------------------------------------ */

static void test_state(void) {
    int64_t sizes[] = {1, 17, 1000003};
    for (size_t s = 0; s < 3; s++)
        for (int add = 0; add < 2; add++)
            for (int scalar = 0; scalar < 2; scalar++) {
                tcall t;
                sn_shape vs = S1(sizes[s]);
                tc_init(&t, add ? SN_OP_ASSIGN_ADD : SN_OP_ASSIGN, SN_F32, vs);
                tc_in(&t, SN_F32, vs, FILL_UNIFORM, -3, 3);
                tc_in(&t, SN_F32, scalar ? S0() : vs, FILL_UNIFORM, -3, 3);
                check_call(add ? "assign_add" : "assign", &t, true, true);
                tc_free(&t);
            }
    tcall t;
    tc_init(&t, SN_OP_ASSIGN_ADD, SN_I32, S0());
    tc_in(&t, SN_I32, S0(), FILL_INTS, 0, 1000);
    tc_in(&t, SN_I32, S0(), FILL_INTS, 1, 2);
    check_call("assign_add i32 counter", &t, true, true);
    tc_free(&t);

    struct { sn_optimizer_kind kind; double mom; bool nesterov, centered; double wd; int slots;
             const char *name; } oc[] = {
        {SN_OPTIM_SGD, 0, false, false, 0, 0, "sgd"},
        {SN_OPTIM_SGD, 0.9, false, false, 0, 1, "sgd momentum"},
        {SN_OPTIM_SGD, 0.9, true, false, 0, 1, "sgd nesterov"},
        {SN_OPTIM_ADAM, 0, false, false, 0, 2, "adam"},
        {SN_OPTIM_ADAMW, 0, false, false, 0.004, 2, "adamw"},
        {SN_OPTIM_RMSPROP, 0, false, false, 0, 1, "rmsprop"},
        {SN_OPTIM_RMSPROP, 0.9, false, false, 0, 2, "rmsprop momentum"},
        {SN_OPTIM_RMSPROP, 0.5, false, true, 0, 3, "rmsprop centered momentum"},
        {SN_OPTIM_RMSPROP, 0, false, true, 0.01, 2, "rmsprop centered decay"},
    };
    for (size_t o = 0; o < sizeof oc / sizeof oc[0]; o++)
        for (size_t s = 0; s < 3; s++) {
            sn_shape vs = S1(sizes[s]);
            tc_init(&t, SN_OP_APPLY_OPTIMIZER, SN_F32, vs);
            sn_attrs *a = &t.attr;
            a->optim.kind = oc[o].kind;
            a->optim.lr = 0.01;
            a->optim.beta1 = 0.9;
            a->optim.beta2 = 0.999;
            a->optim.epsilon = 1e-7;
            a->optim.momentum = oc[o].mom;
            a->optim.rho = 0.9;
            a->optim.weight_decay = oc[o].wd;
            a->optim.nesterov = oc[o].nesterov;
            a->optim.centered = oc[o].centered;
            tc_in(&t, SN_F32, vs, FILL_UNIFORM, -1, 1);
            tc_in(&t, SN_F32, vs, FILL_UNIFORM, -1, 1);
            int32_t *it = tc_in(&t, SN_I32, S0(), FILL_ZERO, 0, 0);
            *it = 5;
            for (int k = 0; k < oc[o].slots; k++)
                /* second moments are positive and above the squared centered average (as EMAs
                 * of g^2 and g keep them); otherwise v - avg^2 + eps nears 0 and the update
                 * is ill-conditioned in any precision */
                tc_in(&t, SN_F32, vs, FILL_UNIFORM, k == 0 ? 0.02 : 0, k == 0 ? 1 : 0.1);
            char w[96];
            snprintf(w, sizeof w, "apply_optimizer %s [%lld]", oc[o].name, (long long)sizes[s]);
            check_call(w, &t, true, false);
            tc_free(&t);
        }
}

/* ---- the ISA variants agree bit for bit -------------------------------------------------- */

/* ---- slice and zero padding (cpu_shape.c) -------------------------------------------------- */

/* A window `small` at `begin` of `big`: the slice (big -> small) and the slice_grad (small ->
 * zeros of big, zero padding), fast against reference, bit for bit. The windows cover the run
 * lengths the fast kernel takes: the last axis partial (runs of part of C), the last axes
 * whole (runs of W x C: NHWC padded in H and W), everything but the batch whole, all whole. */
static void test_shape_moves(void) {
    struct {
        sn_shape big, small;
        int64_t begin[4];
    } cs[] = {
        {S4(2, 5, 6, 3), S4(1, 5, 6, 2), {1, 0, 0, 1}},
        {S4(2, 5, 6, 3), S4(2, 3, 4, 3), {0, 1, 2, 0}},
        {S4(2, 5, 6, 3), S4(2, 3, 2, 3), {0, 1, 2, 0}},
        {S4(2, 5, 6, 3), S4(2, 4, 6, 3), {0, 1, 0, 0}},
        {S4(3, 5, 6, 3), S4(1, 5, 6, 3), {2, 0, 0, 0}},
        {S4(2, 5, 6, 3), S4(2, 5, 6, 3), {0, 0, 0, 0}},
        {S4(4, 49, 49, 96), S4(4, 48, 48, 96), {0, 1, 0, 0}},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        for (int grad = 0; grad < 2; grad++) {
            char what[96];
            snprintf(what, sizeof what, "%s window %zu", grad ? "slice_grad" : "slice", i);
            tcall t;
            tc_init(&t, grad ? SN_OP_SLICE_GRAD : SN_OP_SLICE, SN_F32, grad ? cs[i].big : cs[i].small);
            for (int d = 0; d < 4; d++) t.attr.slice.begin[d] = cs[i].begin[d];
            t.attr.slice.in_shape = cs[i].big;
            tc_in(&t, SN_F32, grad ? cs[i].small : cs[i].big, FILL_UNIFORM, -3, 3);
            check_call(what, &t, true, true);
            tc_free(&t);
        }
}

static void register_fast(void) {
    fast = *sn_ref_kernels();
    sn_cpu_register_elementwise(&fast);
    sn_cpu_register_reduce(&fast);
    sn_cpu_register_softmax(&fast);
    sn_cpu_register_state(&fast);
    sn_cpu_register_shape(&fast);
}

/* ---- subnormal optimizer slots ---------------------------------------------------------- */

/* A slot whose gradient stays 0 decays geometrically into the subnormals, where every x86
 * operation on it costs a microcode assist (the tiny MLP's Adam update ran 10x slower after
 * ~700 steps). The update flushes them: a slot just above FLT_MIN that decays must come out
 * as 0 or stay normal, never subnormal, in every kernel (each ISA, on one thread and on the
 * team, and the reference), with the variable unchanged; and the caller's own FP mode must be
 * left as it was. (Adam's m += (g - m) * 0.1 in f32 stays at 1.2e-38: the decrement is what
 * flushes, as under TensorFlow; the reference, in double, stores 0.) */
static void test_subnormal_slots(void) {
    struct { sn_optimizer_kind kind; double mom; int slots; const char *name; } oc[] = {
        {SN_OPTIM_SGD, 0.9, 1, "sgd momentum"},
        {SN_OPTIM_ADAM, 0, 2, "adam"},
        {SN_OPTIM_RMSPROP, 0, 1, "rmsprop"},
    };
    const char *isas[] = {"avx512", "avx2", "generic", "ref"};
    const float small = 1.2e-38f; /* normal (FLT_MIN is 1.1755e-38); 0.9x of it is not */
    int64_t sizes[] = {17, 100000}; /* one thread; split over the team */
    for (size_t o = 0; o < sizeof oc / sizeof oc[0]; o++)
        for (size_t s = 0; s < 2; s++)
            for (int v = 0; v < 4; v++) {
                cases++;
                if (v < 3) setenv("SN_CPU_ISA", isas[v], 1);
                register_fast();
                sn_shape vs = S1(sizes[s]);
                tcall t;
                tc_init(&t, SN_OP_APPLY_OPTIMIZER, SN_F32, vs);
                sn_attrs *a = &t.attr;
                a->optim.kind = oc[o].kind;
                a->optim.lr = 0.001;
                a->optim.beta1 = 0.9;
                a->optim.beta2 = 0.999;
                a->optim.epsilon = 1e-7;
                a->optim.momentum = oc[o].mom;
                a->optim.rho = 0.9;
                float *w = tc_in(&t, SN_F32, vs, FILL_ZERO, 0, 0);
                tc_in(&t, SN_F32, vs, FILL_ZERO, 0, 0); /* the gradient: 0 */
                int32_t *it = tc_in(&t, SN_I32, S0(), FILL_ZERO, 0, 0);
                *it = 700;
                float *slot[2] = {0};
                for (int k = 0; k < oc[o].slots; k++) slot[k] = tc_in(&t, SN_F32, vs, FILL_ZERO, 0, 0);
                for (int64_t i = 0; i < sizes[s]; i++) {
                    w[i] = 0.5f;
                    slot[0][i] = small; /* SGD momentum, Adam m, RMSprop velocity */
                    if (slot[1]) slot[1][i] = 1.0f; /* Adam v */
                }
                t.c.out = w;
                const sn_kernel *k = v < 3 ? sn_kernel_select(&fast, &t.c)
                                           : sn_ref_kernels()->k[SN_OP_APPLY_OPTIMIZER];
                sn_status st = run_kernel(k, &t.c);
                char what[96];
                snprintf(what, sizeof what, "subnormal slots: %s [%lld], %s kernel (%s)",
                         oc[o].name, (long long)sizes[s], isas[v], k->impl);
                if (st != SN_OK) FAIL("%s: failed: %s", what, sn_last_error());
                int bad = 0;
                for (int64_t i = 0; i < sizes[s] && bad < 3; i++)
                    if (fpclassify(slot[0][i]) == FP_SUBNORMAL || fabsf(slot[0][i]) > small ||
                        w[i] != 0.5f) {
                        FAIL("%s: [%lld] slot %.9g (%s), var %.9g; want slot 0 or normal and "
                             "below 1.2e-38, var 0.5", what,
                             (long long)i, (double)slot[0][i],
                             fpclassify(slot[0][i]) == FP_SUBNORMAL ? "subnormal" : "normal",
                             (double)w[i]);
                        bad++;
                    }
                tc_free(&t);
            }
    unsetenv("SN_CPU_ISA");
    register_fast();
    /* The caller's thread still computes subnormals (the kernel put its mode back). */
    volatile float x = small, h = 0.5f;
    float y = x * h;
    cases++;
    if (fpclassify(y) != FP_SUBNORMAL)
        FAIL("after the optimizer kernels, 1.2e-38f * 0.5f gives %.9g on the caller's thread: the "
             "kernel left subnormals flushed there", (double)y);
}

/* No FMA contraction (ISO C mode) and fixed summation lanes: the AVX-512, AVX2 and baseline
 * variants must give the same bits, so results do not depend on the machine's ISA. */
static void test_isa_bits(void) {
    const char *isas[] = {"avx512", "avx2", "generic"};
    enum { NCASE = 8 };
    tcall t[NCASE];
    tc_init(&t[0], SN_OP_EXP, SN_F32, S1(1003));
    tc_in(&t[0], SN_F32, S1(1003), FILL_UNIFORM, -90, 90);
    tc_init(&t[1], SN_OP_TANH, SN_F32, S1(1003));
    tc_in(&t[1], SN_F32, S1(1003), FILL_UNIFORM, -3, 3);
    tc_init(&t[2], SN_OP_LOG, SN_F32, S1(1003));
    tc_in(&t[2], SN_F32, S1(1003), FILL_UNIFORM, 0, 10);
    tc_init(&t[3], SN_OP_REDUCE_SUM, SN_F32, S0());
    t[3].attr.reduce.mask = 1;
    tc_in(&t[3], SN_F32, S1(100003), FILL_UNIFORM, -1, 1);
    tc_init(&t[4], SN_OP_REDUCE_MEAN, SN_F32, S1(40));
    t[4].attr.reduce.mask = 1;
    tc_in(&t[4], SN_F32, S2(1000, 40), FILL_UNIFORM, -1, 1);
    tc_init(&t[5], SN_OP_SOFTMAX, SN_F32, S2(32, 37));
    t[5].attr.axis.axis = 1;
    tc_in(&t[5], SN_F32, S2(32, 37), FILL_UNIFORM, -5, 5);
    tc_init(&t[6], SN_OP_SPARSE_XENT_GRAD, SN_F32, S2(32, 37));
    tc_in(&t[6], SN_F32, S2(32, 37), FILL_UNIFORM, -5, 5);
    tc_in(&t[6], SN_I32, S1(32), FILL_LABELS, 37, 0);
    tc_in(&t[6], SN_F32, S1(32), FILL_UNIFORM, -1, 1);
    tc_init(&t[7], SN_OP_APPLY_OPTIMIZER, SN_F32, S1(1003));
    t[7].attr.optim.kind = SN_OPTIM_ADAM;
    t[7].attr.optim.lr = 0.001;
    t[7].attr.optim.beta1 = 0.9;
    t[7].attr.optim.beta2 = 0.999;
    t[7].attr.optim.epsilon = 1e-7;
    tc_in(&t[7], SN_F32, S1(1003), FILL_UNIFORM, -1, 1);
    tc_in(&t[7], SN_F32, S1(1003), FILL_UNIFORM, -1, 1);
    tc_in(&t[7], SN_I32, S0(), FILL_ZERO, 0, 0);
    tc_in(&t[7], SN_F32, S1(1003), FILL_UNIFORM, -1, 1);
    tc_in(&t[7], SN_F32, S1(1003), FILL_UNIFORM, 0, 1);
    void *first[NCASE] = {0};
    for (int v = 0; v < 3; v++) {
        setenv("SN_CPU_ISA", isas[v], 1);
        register_fast();
        for (int k = 0; k < NCASE; k++) {
            void *out;
            if (t[k].c.op == SN_OP_APPLY_OPTIMIZER) { /* in place: run on a copy of var */
                size_t nb = bytes_of(SN_F32, &t[k].c.y.shape);
                out = xmalloc(nb);
                memcpy(out, t[k].data[0], nb);
                void *m = xmalloc(nb), *vv = xmalloc(nb);
                memcpy(m, t[k].data[3], nb);
                memcpy(vv, t[k].data[4], nb);
                t[k].c.in[0] = out;
                t[k].c.in[3] = m;
                t[k].c.in[4] = vv;
                t[k].c.out = out;
                run_kernel(sn_kernel_select(&fast, &t[k].c), &t[k].c);
                for (int i = 0; i < t[k].c.n_in; i++) t[k].c.in[i] = t[k].data[i];
                free(m);
                free(vv);
            } else {
                out = run_fast(&t[k]);
            }
            if (v == 0) {
                first[k] = out;
                continue;
            }
            if (memcmp(first[k], out, bytes_of(SN_F32, &t[k].c.y.shape)) != 0)
                FAIL("op %d: variant %s differs from %s", (int)t[k].c.op, isas[v], isas[0]);
            free(out);
            cases++;
        }
    }
    for (int k = 0; k < NCASE; k++) {
        free(first[k]);
        tc_free(&t[k]);
    }
    unsetenv("SN_CPU_ISA");
    register_fast();
}

int main(void) {
    sn_rng_init(&rng, 42, 0);
    sn_set_num_threads(2);
    register_fast();
    printf("fast kernels: elementwise '%s', reduce '%s', softmax '%s', state '%s'\n",
           fast.k[SN_OP_EXP]->impl, fast.k[SN_OP_REDUCE_SUM]->impl, fast.k[SN_OP_SOFTMAX]->impl,
           fast.k[SN_OP_APPLY_OPTIMIZER]->impl);
    test_binary();
    test_unary();
    test_cast();
    test_dropout();
    test_reduce();
    test_softmax();
    test_losses();
    test_state();
    test_shape_moves();
    test_subnormal_slots();
    test_isa_bits();
    printf("%d cases, %d failures\n", cases, failures);
    return failures ? 1 : 0;
}
