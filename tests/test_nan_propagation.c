/* NaN and Inf propagate as in TensorFlow and PyTorch (docs/reliability.md, "NaN and Inf")
 * through every max/min-style kernel, on every kernel path this machine has: the program runs
 * itself once per path (SN_CPU_ISA=avx512, avx2, generic where the CPU has them, and
 * SN_KERNELS=ref), and each run checks, through plans of small graphs:
 *   - relu, relu6, leaky_relu, elu, gelu, silu and bias_add + relu (fused by the planner):
 *     NaN in gives NaN out, at vector-body and tail positions; +-Inf give relu's, relu6's and
 *     leaky_relu's limits; their gradients keep a NaN dy NaN where x <= 0 too (TensorFlow's
 *     dy * (x > 0));
 *   - max-pool: a window holding a NaN (in its first, a middle or its last cell) pools to
 *     NaN, one holding +Inf to +Inf; the gradient goes to the NaN's cell; a NaN dy reaches
 *     dx;
 *   - reduce_max and softmax rows holding a NaN give NaN;
 *   - small_cnn's first layer (conv with one input channel + bias + relu + max-pool, the
 *     fused kernels of cpu_conv_fused.c and cpu_pool_fused.c) and a three-channel one (the
 *     pool gradient fused with relu's): one NaN pixel makes the pooled output NaN where its
 *     windows reach, the loss NaN, and the filter and bias gradients NaN. */
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "sn_test.h"

extern char **environ;

static const char *path_name = "?";

static float *xmalloc_f(int64_t n) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!p) abort();
    return p;
}

/* Runs the plan of targets t[0..nt) with input x set to xd; copies each target to out[i]
 * (malloc'd). False when planning or running failed (recorded). */
static bool run_plan(sn_graph *g, sn_node x, const float *xd, int nt, const sn_node *t,
                     float **out) {
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, nt, t, NULL));
    if (!p) return false;
    if (x >= 0) {
        sn_shape xs = sn_node_shape(g, x);
        CHECK_OK(sn_plan_set_input(p, x, xd, sizeof(float) * (size_t)sn_shape_numel(&xs)));
    }
    sn_status s = sn_plan_run(p, 1, NULL, NULL);
    CHECK(s == SN_OK, "[%s] plan run: %s", path_name, sn_last_error());
    for (int i = 0; i < nt; i++) {
        sn_shape ts = sn_node_shape(g, t[i]);
        int64_t n = sn_shape_numel(&ts);
        out[i] = xmalloc_f(n);
        const float *b = sn_plan_buffer(p, t[i]);
        if (b) memcpy(out[i], b, sizeof(float) * (size_t)n);
    }
    sn_plan_free(p);
    return s == SN_OK;
}

/* ---- pointwise activations and their gradients ------------------------------------------ */

#define PW_N 37 /* a 32-lane body and a tail of 5 */

typedef enum { PW_RELU, PW_RELU6, PW_LEAKY, PW_ELU, PW_GELU, PW_SILU, PW_BIAS_RELU } pw_kind;
static const char *pw_names[] = {"relu", "relu6", "leaky_relu", "elu", "gelu", "silu",
                                 "bias_add+relu"};

static sn_node pw_apply(sn_graph *g, pw_kind k, sn_node v, sn_node b) {
    switch (k) {
    case PW_RELU: return sn_relu(g, v);
    case PW_RELU6: return sn_relu6(g, v);
    case PW_LEAKY: return sn_leaky_relu(g, v, 0.2);
    case PW_ELU: return sn_elu(g, v, 1.0);
    case PW_GELU: return sn_gelu(g, v);
    case PW_SILU: return sn_silu(g, v);
    case PW_BIAS_RELU: return sn_relu(g, sn_bias_add(g, v, b));
    }
    return v;
}

/* x: NaN at 0, 17 (body) and 36 (tail), +Inf at 3 and 33, -Inf at 5 and 35, -2 at 8 and 20
 * (where the loss weight k is NaN), finite values elsewhere. */
static void check_pointwise(pw_kind kind) {
    float xd[PW_N], kd[PW_N];
    for (int i = 0; i < PW_N; i++) {
        xd[i] = (float)((i * 7) % 11) - 4.5f;
        kd[i] = 1.0f;
    }
    xd[0] = xd[17] = xd[36] = NAN;
    xd[3] = xd[33] = INFINITY;
    xd[5] = xd[35] = -INFINITY;
    xd[8] = xd[20] = -2.0f;
    kd[8] = kd[20] = NAN;
    sn_graph *g = sn_graph_new();
    sn_shape s = sn_shape_make(2, (int64_t)1, (int64_t)PW_N);
    sn_node v = sn_variable(g, "x", SN_F32, &s, true);
    memcpy(sn_variable_data(g, v), xd, sizeof xd);
    sn_shape bs = sn_shape_make(1, (int64_t)PW_N);
    sn_node b = sn_const(g, SN_F32, &bs, (float[PW_N]){0});
    sn_node y = pw_apply(g, kind, v, b);
    /* the gradient part: loss = sum(y * k) with k NaN at x = -2: dy NaN where x <= 0 */
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F32, &s, kd)), 0, NULL, false);
    sn_node dx;
    CHECK_OK(sn_gradients(g, loss, 1, &v, &dx));
    float *out[2] = {NULL, NULL};
    sn_node t[2] = {y, dx};
    const char *name = pw_names[kind];
    if (run_plan(g, -1, NULL, 2, t, out)) {
        const float *o = out[0], *d = out[1];
        for (int i = 0; i < PW_N; i++)
            if (xd[i] != xd[i])
                CHECK(isnan(o[i]), "[%s] %s(NaN) at %d gave %g, expected NaN", path_name, name,
                      i, (double)o[i]);
        double inf_want[] = {INFINITY, 6, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY};
        double ninf_want[] = {0, 0, -INFINITY, -1, 0, 0, 0};
        if (kind != PW_GELU && kind != PW_SILU) { /* gelu(-inf), silu(-inf): -inf * 0 */
            CHECK(o[3] == inf_want[kind] && o[33] == inf_want[kind],
                  "[%s] %s(+inf) gave %g, %g, expected %g", path_name, name, (double)o[3],
                  (double)o[33], inf_want[kind]);
            CHECK(o[5] == ninf_want[kind] && o[35] == ninf_want[kind],
                  "[%s] %s(-inf) gave %g, %g, expected %g", path_name, name, (double)o[5],
                  (double)o[35], ninf_want[kind]);
        }
        CHECK(isnan(d[8]) && isnan(d[20]),
              "[%s] %s gradient at x = -2 with dy NaN gave %g, %g, expected NaN", path_name,
              name, (double)d[8], (double)d[20]);
        bool finite = true;
        for (int i = 0; i < PW_N; i++)
            if (isfinite(xd[i]) && kd[i] == 1.0f && !isfinite(o[i])) finite = false;
        CHECK(finite, "[%s] %s: a finite input gave a non-finite output", path_name, name);
    }
    free(out[0]);
    free(out[1]);
    sn_graph_free(g);
}

/* ---- max-pool ------------------------------------------------------------------------------ */

/* x [1, 4, 4, C], 2x2/2: channel ch holds a NaN in window ch % 4 at cell (ch / 4) % 4 of it
 * (row-major), and channel ch holds +Inf in window (ch + 2) % 4 when ch % 3 == 0. The
 * gradient's k is NaN at window (ch + 1) % 4 of channels ch % 5 == 0. */
static void check_pool(int64_t C) {
    sn_graph *g = sn_graph_new();
    sn_shape xs = sn_shape_make(4, (int64_t)1, (int64_t)4, (int64_t)4, C);
    sn_node v = sn_variable(g, "x", SN_F32, &xs, true);
    float *xd = sn_variable_data(g, v);
    for (int64_t i = 0; i < 16 * C; i++) xd[i] = (float)((i * 13) % 17) - 8.0f;
    for (int64_t ch = 0; ch < C; ch++) {
        int w = (int)(ch % 4), q = (int)((ch / 4) % 4);
        int64_t r = 2 * (w / 2) + q / 2, c = 2 * (w % 2) + q % 2;
        xd[(r * 4 + c) * C + ch] = NAN;
        if (ch % 3 == 0) {
            int wi = (int)((ch + 2) % 4);
            xd[((2 * (wi / 2)) * 4 + 2 * (wi % 2) + 1) * C + ch] = INFINITY;
        }
    }
    sn_pool2d_opts po = sn_pool2d_opts_defaults();
    sn_node p = sn_max_pool2d(g, v, &po);
    sn_shape ps = sn_node_shape(g, p);
    float *kd = xmalloc_f(4 * C);
    for (int64_t i = 0; i < 4 * C; i++) kd[i] = 1.0f;
    for (int64_t ch = 0; ch < C; ch += 5) kd[((ch + 1) % 4) * C + ch] = NAN;
    sn_node loss = sn_reduce_sum(g, sn_mul(g, p, sn_const(g, SN_F32, &ps, kd)), 0, NULL, false);
    sn_node dx;
    CHECK_OK(sn_gradients(g, loss, 1, &v, &dx));
    float *out[2] = {NULL, NULL};
    sn_node t[2] = {p, dx};
    if (run_plan(g, -1, NULL, 2, t, out)) {
        int bad_nan = 0, bad_inf = 0, bad_grad = 0, bad_dy = 0;
        for (int64_t ch = 0; ch < C; ch++) {
            int w = (int)(ch % 4), q = (int)((ch / 4) % 4);
            if (!isnan(out[0][w * C + ch])) bad_nan++;
            if (ch % 3 == 0 && out[0][((ch + 2) % 4) * C + ch] != INFINITY) bad_inf++;
            int64_t r = 2 * (w / 2) + q / 2, c = 2 * (w % 2) + q % 2;
            /* the NaN cell is the window's maximum: its gradient is the window's k */
            float want = kd[w * C + ch], got = out[1][(r * 4 + c) * C + ch];
            if (!(got == want || (isnan(got) && isnan(want)))) bad_grad++;
            if (ch % 5 == 0) { /* a NaN dy reaches some cell of its window */
                int wi = (int)((ch + 1) % 4);
                bool any = false;
                for (int qq = 0; qq < 4; qq++) {
                    int64_t rr = 2 * (wi / 2) + qq / 2, cc = 2 * (wi % 2) + qq % 2;
                    any |= isnan(out[1][(rr * 4 + cc) * C + ch]) != 0;
                }
                if (!any) bad_dy++;
            }
        }
        CHECK(bad_nan == 0, "[%s] max-pool, %lld channels: %d windows holding a NaN did not "
              "pool to NaN", path_name, (long long)C, bad_nan);
        CHECK(bad_inf == 0, "[%s] max-pool, %lld channels: %d windows holding +inf did not pool "
              "to +inf", path_name, (long long)C, bad_inf);
        CHECK(bad_grad == 0, "[%s] max-pool gradient, %lld channels: %d NaN cells did not get "
              "their window's dy", path_name, (long long)C, bad_grad);
        CHECK(bad_dy == 0, "[%s] max-pool gradient, %lld channels: %d NaN dy were lost",
              path_name, (long long)C, bad_dy);
    }
    free(kd);
    free(out[0]);
    free(out[1]);
    sn_graph_free(g);
}

/* ---- reductions --------------------------------------------------------------------------- */

static void check_rows(void) {
    sn_graph *g = sn_graph_new();
    sn_shape s = sn_shape_make(2, (int64_t)3, (int64_t)37);
    sn_node x = sn_input(g, "x", SN_F32, &s);
    int ax = 1;
    sn_node t[2] = {sn_reduce_max(g, x, 1, &ax, false), sn_softmax(g, x, 1)};
    float xd[3 * 37];
    for (int i = 0; i < 3 * 37; i++) xd[i] = (float)(i % 5);
    xd[0] = NAN;      /* row 0: first */
    xd[37 + 20] = NAN; /* row 1: middle */
    xd[2 * 37 + 36] = NAN; /* row 2: tail */
    float *out[2] = {NULL, NULL};
    if (run_plan(g, x, xd, 2, t, out)) {
        for (int r = 0; r < 3; r++) {
            CHECK(isnan(out[0][r]), "[%s] reduce_max of row %d (a NaN) gave %g", path_name, r,
                  (double)out[0][r]);
            CHECK(isnan(out[1][r * 37 + 1]), "[%s] softmax of row %d (a NaN) gave %g",
                  path_name, r, (double)out[1][r * 37 + 1]);
        }
    }
    free(out[0]);
    free(out[1]);
    sn_graph_free(g);
}

/* ---- a first layer: conv -> bias -> relu -> max-pool -> loss ----------------------------- */

static void check_layer(int64_t cin, int F) {
    sn_graph *g = sn_graph_new();
    sn_shape xs = sn_shape_make(4, (int64_t)2, (int64_t)10, (int64_t)10, cin);
    sn_shape ws = sn_shape_make(4, (int64_t)3, (int64_t)3, cin, (int64_t)F);
    sn_shape bs = sn_shape_make(1, (int64_t)F);
    sn_node x = sn_input(g, "x", SN_F32, &xs);
    sn_node w = sn_variable(g, "w", SN_F32, &ws, true), b = sn_variable(g, "b", SN_F32, &bs, true);
    float *wd = sn_variable_data(g, w), *bd = sn_variable_data(g, b);
    for (int64_t i = 0; i < sn_shape_numel(&ws); i++) wd[i] = (float)((i * 5) % 7) * 0.1f - 0.3f;
    for (int i = 0; i < F; i++) bd[i] = 0.01f * (float)i;
    sn_conv2d_opts co = sn_conv2d_opts_defaults();
    sn_pool2d_opts po = sn_pool2d_opts_defaults();
    sn_node pool = sn_max_pool2d(g, sn_relu(g, sn_bias_add(g, sn_conv2d(g, x, w, &co), b)), &po);
    /* sum(pool^2): dloss/dpool = 2 pool is NaN where the pool is, as a real loss's gradient
     * (sum(pool) would give a finite dy, and TensorFlow's relu gradient dy * (x > 0) is then
     * finite at the NaN too) */
    sn_node loss = sn_reduce_sum(g, sn_mul(g, pool, pool), 0, NULL, false);
    sn_node wrt[2] = {w, b}, grads[2];
    CHECK_OK(sn_gradients(g, loss, 2, wrt, grads));
    int64_t nx = sn_shape_numel(&xs);
    float *xd = xmalloc_f(nx);
    for (int64_t i = 0; i < nx; i++) xd[i] = (float)((i * 3) % 10) * 0.1f;
    /* image 0, pixel (4, 5), channel 0: the conv windows over it reach pool cells (1, 1..2) */
    xd[(4 * 10 + 5) * cin] = NAN;
    sn_node t[4] = {pool, loss, grads[0], grads[1]};
    float *out[4] = {NULL, NULL, NULL, NULL};
    char what[64];
    snprintf(what, sizeof what, "conv %lld->%d + relu + pool", (long long)cin, F);
    if (run_plan(g, x, xd, 4, t, out)) {
        CHECK(isnan(out[0][(1 * 4 + 1) * F]) && isnan(out[0][(1 * 4 + 2) * F]),
              "[%s] %s: the pool cells over a NaN pixel gave %g, %g, expected NaN", path_name,
              what, (double)out[0][(1 * 4 + 1) * F], (double)out[0][(1 * 4 + 2) * F]);
        sn_shape ps = sn_node_shape(g, pool);
        int64_t half = sn_shape_numel(&ps) / 2;
        bool finite = true;
        for (int64_t i = half; i < 2 * half; i++) finite &= isfinite(out[0][i]) != 0;
        CHECK(finite, "[%s] %s: image 1 (no NaN) gave a non-finite pool value", path_name, what);
        CHECK(isnan(out[1][0]), "[%s] %s: the loss is %g, expected NaN", path_name, what,
              (double)out[1][0]);
        CHECK(isnan(out[2][0]) && isnan(out[3][0]),
              "[%s] %s: filter and bias gradients %g, %g, expected NaN", path_name, what,
              (double)out[2][0], (double)out[3][0]);
    }
    for (int i = 0; i < 4; i++) free(out[i]);
    free(xd);
    sn_graph_free(g);
}

static int child(void) {
    const char *isa = getenv("SN_CPU_ISA"), *k = getenv("SN_KERNELS");
    path_name = k && strcmp(k, "ref") == 0 ? "ref" : isa ? isa : "default";
    for (int kind = PW_RELU; kind <= PW_BIAS_RELU; kind++) check_pointwise((pw_kind)kind);
    check_pool(35); /* two 16-lane vectors and a tail */
    check_pool(1);
    check_rows();
    check_layer(1, 32); /* small_cnn's first layer: the fused conv and pool kernels */
    check_layer(1, 16);
    check_layer(3, 16); /* the pool gradient fused with relu's; the conv on its own */
    return sn_test_finish(path_name);
}

/* Runs this program again with one extra environment variable; its exit status. */
static int run_self(const char *var, const char *value) {
    setenv(var, value, 1);
    setenv("SN_NAN_TEST_CHILD", "1", 1);
    char *argv[] = {(char *)"test_nan_propagation", NULL};
    pid_t pid;
    int st = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ);
    unsetenv(var);
    unsetenv("SN_NAN_TEST_CHILD");
    if (st != 0) return -1;
    if (waitpid(pid, &st, 0) < 0) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void) {
    if (getenv("SN_NAN_TEST_CHILD")) return child();
    const sn_cpu_features *f = sn_cpu();
    struct {
        const char *var, *value;
        bool have;
    } paths[] = {
        {"SN_CPU_ISA", "avx512", f->avx512f && f->avx512bw && f->avx512vl},
        {"SN_CPU_ISA", "avx2", f->avx2 && f->fma},
        {"SN_CPU_ISA", "generic", true},
        {"SN_KERNELS", "ref", true},
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        if (!paths[i].have) {
            char why[96];
            snprintf(why, sizeof why, "%s=%s: this CPU lacks it", paths[i].var, paths[i].value);
            sn_test_skip(why);
            continue;
        }
        fflush(stdout);
        int rc = run_self(paths[i].var, paths[i].value);
        CHECK(rc == 0, "%s=%s: the checks exited %d", paths[i].var, paths[i].value, rc);
    }
    return sn_test_finish("test_nan_propagation");
}
