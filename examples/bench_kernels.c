/* Measures the candidate CPU kernels for the heavy ops on the seed CNN's shapes (batch 200,
 * 28x28x1 input, conv 3x3 1->256, conv 3x3 256->256, dense 147456->256->128->10) plus a big
 * sgemm for the practical peak, and prints ms and GFLOP/s per implementation. The results
 * and the choice per op are in docs/kernels.md.
 *
 *   SN_NUM_THREADS=2 build/examples/bench_kernels [filter] [reps]
 *
 * filter: run only cases whose name contains it ("conv2", "dense1", "peak"; "all"; "sweep"
 * for the channel sweep); reps: timed runs per case, at least (small cases run for about a
 * second); the best run and the median are printed. Uses internal headers: this is a developer tool,
 * not an example of the public API. */
#include <stdio.h>
#include <string.h>

#include "../src/backend/cpu/cpu_blas.h"
#include "../src/backend/kernel.h"

typedef struct bench {
    sn_attrs attr; /* call.attr points here */
    sn_kcall call;
    float *buf[3]; /* inputs, output */
} bench;

static void fill(float *p, int64_t n, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = (float)((double)(s >> 11) * (1.0 / 9007199254740992.0) - 0.5);
    }
}

static int setup(bench *b, sn_op op, int n_in, const sn_shape *in, const sn_shape *out) {
    memset(b, 0, sizeof *b);
    b->call.op = op;
    b->call.y.dtype = SN_F32;
    b->call.y.shape = *out;
    b->call.attr = &b->attr;
    b->call.n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        b->call.x[i].dtype = SN_F32;
        b->call.x[i].shape = in[i];
        int64_t n = sn_shape_numel(&in[i]);
        b->buf[i] = sn_malloc_aligned((size_t)n * sizeof(float));
        if (!b->buf[i]) return -1;
        fill(b->buf[i], n, (uint64_t)i + 7);
        b->call.in[i] = b->buf[i];
    }
    b->buf[2] = sn_malloc_aligned((size_t)sn_shape_numel(out) * sizeof(float));
    if (!b->buf[2]) return -1;
    memset(b->buf[2], 0, (size_t)sn_shape_numel(out) * sizeof(float));
    b->call.out = b->buf[2];
    return 0;
}

static void teardown(bench *b) {
    for (int i = 0; i < 3; i++) sn_free_aligned(b->buf[i]);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Prepares, runs once to warm up, then reps timed runs; prints the best run (the machine is
 * shared: the minimum is the steady-state figure, the median shows the noise). */
static void measure(const char *name, bench *b, const sn_kernel *k, double flops, int reps) {
    if (!k || (k->supports && !k->supports(&b->call))) {
        printf("%-24s %-12s unsupported\n", name, k ? k->impl : "-");
        return;
    }
    size_t scratch = 0;
    b->call.state = NULL;
    if (k->prepare && k->prepare(&b->call, &scratch) != SN_OK) {
        printf("%-24s %-12s prepare failed: %s\n", name, k->impl, sn_last_error());
        return;
    }
    b->call.scratch = scratch ? sn_malloc_aligned(scratch) : NULL;
    b->call.scratch_bytes = scratch;
    double t[256];
    double t0 = sn_now();
    sn_status st = k->run(&b->call);
    /* Small cases repeat until about a second has passed: the best of many runs is what an
     * unloaded machine gives. */
    double first = sn_now() - t0;
    if (first > 0 && reps < (int)(1.0 / first)) reps = (int)(1.0 / first);
    if (reps > 256) reps = 256;
    for (int r = 0; r < reps && st == SN_OK; r++) {
        t0 = sn_now();
        st = k->run(&b->call);
        t[r] = sn_now() - t0;
    }
    if (st != SN_OK) {
        printf("%-24s %-12s run failed: %s\n", name, k->impl, sn_last_error());
    } else {
        qsort(t, (size_t)reps, sizeof t[0], cmp_double);
        double med = t[reps / 2];
        printf("%-24s %-12s %9.2f ms %7.1f GFLOP/s  (median %.2f ms, scratch %.1f MiB)\n", name,
               k->impl, t[0] * 1e3, flops / t[0] * 1e-9, med * 1e3, (double)scratch / 1048576.0);
    }
    fflush(stdout);
    if (k->release) k->release(&b->call);
    sn_free_aligned(b->call.scratch);
}

static bool want(const char *filter, const char *name) {
    return !filter || strstr(name, filter) != NULL;
}

/* y[M,N] = a[M,K] b[K,N] with optional transposes, a and b given in their stored shapes. */
static void bench_matmul(const char *filter, const char *name, int64_t m, int64_t n, int64_t k,
                         bool ta, bool tb, int reps) {
    if (!want(filter, name)) return;
    sn_shape in[2] = {ta ? sn_shape_make(2, k, m) : sn_shape_make(2, m, k),
                      tb ? sn_shape_make(2, n, k) : sn_shape_make(2, k, n)};
    sn_shape out = sn_shape_make(2, m, n);
    bench b;
    if (setup(&b, SN_OP_MATMUL, 2, in, &out) != 0) {
        printf("%s: out of memory\n", name);
        return;
    }
    b.attr.matmul.ta = ta;
    b.attr.matmul.tb = tb;
    const char *impls[] = {"openblas", "dnnl"};
    for (int i = 0; i < 2; i++)
        measure(name, &b, sn_cpu_matmul_impl(impls[i]), 2.0 * (double)m * (double)n * (double)k,
                reps);
    teardown(&b);
}

/* Valid 3x3 stride-1 convolution x [N,H,W,C] -> [N,H-2,W-2,F], the three conv ops. */
static void bench_conv(const char *filter, const char *tag, int64_t N, int64_t H, int64_t W,
                       int64_t C, int64_t F, int reps) {
    const int64_t KH = 3, KW = 3, OH = H - KH + 1, OW = W - KW + 1;
    sn_shape xs = sn_shape_make(4, N, H, W, C), ws = sn_shape_make(4, KH, KW, C, F),
             ys = sn_shape_make(4, N, OH, OW, F);
    double flops = 2.0 * (double)(N * OH * OW * F) * (double)(KH * KW * C);
    struct {
        const char *suffix;
        sn_op op;
        sn_shape in[2], out;
    } ops[3] = {{"fwd", SN_OP_CONV2D, {xs, ws}, ys},
                {"bwd_data", SN_OP_CONV2D_BWD_DATA, {ys, ws}, xs},
                {"bwd_filter", SN_OP_CONV2D_BWD_FILTER, {xs, ys}, ws}};
    /* "dnnl" (the registered kernel) is one of the two oneDNN layouts, chosen by C. */
    const char *impls[] = {"dnnl_blocked", "dnnl_plain", "openblas"};
    for (int o = 0; o < 3; o++) {
        char name[64];
        snprintf(name, sizeof name, "%s_%s", tag, ops[o].suffix);
        if (!want(filter, name)) continue;
        bench b;
        if (setup(&b, ops[o].op, 2, ops[o].in, &ops[o].out) != 0) {
            printf("%s: out of memory\n", name);
            continue;
        }
        b.attr.conv.stride_h = b.attr.conv.stride_w = 1;
        b.attr.conv.x_shape = xs;
        b.attr.conv.w_shape = ws;
        for (int i = 0; i < 3; i++) measure(name, &b, sn_cpu_conv_impl(ops[o].op, impls[i]), flops, reps);
        teardown(&b);
    }
}

/* Dense layer [B, IN] -> [B, OUT]: forward x.W, backward data dY.W^T, backward weights X^T.dY. */
static void bench_dense(const char *filter, const char *tag, int64_t B, int64_t IN, int64_t OUT,
                        int reps) {
    char name[64];
    snprintf(name, sizeof name, "%s_fwd", tag);
    bench_matmul(filter, name, B, OUT, IN, false, false, reps);
    snprintf(name, sizeof name, "%s_bwd_data", tag);
    bench_matmul(filter, name, B, IN, OUT, false, true, reps);
    snprintf(name, sizeof name, "%s_bwd_weights", tag);
    bench_matmul(filter, name, IN, OUT, B, true, false, reps);
}

/* 2x2 stride-2 pools on [N,H,W,C] (memory-bound: GB/s of x + y traffic is the figure). */
static void bench_pool(const char *filter, int64_t N, int64_t H, int64_t W, int64_t C, int reps) {
    sn_shape xs = sn_shape_make(4, N, H, W, C), ys = sn_shape_make(4, N, H / 2, W / 2, C);
    struct {
        const char *name;
        sn_op op;
        int n_in;
        sn_shape in[2], out;
    } ops[4] = {{"pool_max_fwd", SN_OP_MAX_POOL2D, 1, {xs}, ys},
                {"pool_max_grad", SN_OP_MAX_POOL2D_GRAD, 2, {xs, ys}, xs},
                {"pool_avg_fwd", SN_OP_AVG_POOL2D, 1, {xs}, ys},
                {"pool_avg_grad", SN_OP_AVG_POOL2D_GRAD, 1, {ys}, xs}};
    for (int o = 0; o < 4; o++) {
        if (!want(filter, ops[o].name)) continue;
        bench b;
        if (setup(&b, ops[o].op, ops[o].n_in, ops[o].in, &ops[o].out) != 0) continue;
        b.attr.pool.pool_h = b.attr.pool.pool_w = 2;
        b.attr.pool.stride_h = b.attr.pool.stride_w = 2;
        b.attr.pool.x_shape = xs;
        /* "GFLOP/s" column: GB moved per second (x or dx once, y or dy once, x again for the
         * max gradient). */
        double bytes = 4.0 * (double)(sn_shape_numel(&xs) + sn_shape_numel(&ys)) +
                       (ops[o].op == SN_OP_MAX_POOL2D_GRAD ? 4.0 * (double)sn_shape_numel(&xs) : 0);
        measure(ops[o].name, &b, sn_cpu_pool_impl(ops[o].op), bytes, reps);
        teardown(&b);
    }
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 && strcmp(argv[1], "all") != 0 ? argv[1] : NULL;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1) reps = 1;
    printf("threads %d, avx512f %d, reps %d (best run shown)\n", sn_num_threads(),
           sn_cpu()->avx512f, reps);
    bench_matmul(filter, "peak_sgemm_2048", 2048, 2048, 2048, false, false, reps);
    bench_conv(filter, "conv1", 200, 28, 28, 1, 256, reps);
    bench_conv(filter, "conv2", 200, 26, 26, 256, 256, reps);
    bench_dense(filter, "dense1", 200, 147456, 256, reps);
    bench_dense(filter, "dense2", 200, 256, 128, reps);
    bench_dense(filter, "dense3", 200, 128, 10, reps);
    bench_pool(filter, 200, 24, 24, 256, reps);
    /* Where oneDNN's blocked weights start to pay (the threshold in cpu_conv.c): only with
     * the filter "sweep". */
    if (filter && strcmp(filter, "sweep") == 0) {
        const int64_t cs[] = {1, 3, 4, 8, 16, 32, 64};
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
            char tag[32];
            snprintf(tag, sizeof tag, "sweep_c%lld", (long long)cs[i]);
            bench_conv(NULL, tag, 64, 32, 32, cs[i], 64, reps);
        }
    }
    return 0;
}
