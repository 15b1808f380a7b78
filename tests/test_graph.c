/* Graph builder, registry, planner and executor: behaviour and bad inputs. */
#include <math.h>
#include <omp.h>

#include "graph/graph_impl.h"
#include "graph/plan_impl.h"
#include "sn_test.h"
#include "sinter/device.h"

static void test_registry_complete(void) {
    for (int op = 0; op < SN_OP_COUNT; op++)
        CHECK(sn_ops[op] && sn_ops[op]->name, "op %d has no registry row", op);
}

static void test_eager_matmul(void) {
    sn_graph *g = sn_graph_new();
    float a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 2, 3, 4, 5, 6};
    sn_shape sa = sn_shape_make(2, (int64_t)2, (int64_t)3), sb = sn_shape_make(2, (int64_t)3, (int64_t)2);
    sn_node c = sn_matmul(g, sn_const(g, SN_F32, &sa, a), sn_const(g, SN_F32, &sb, b), false, false);
    sn_tensor *t = NULL;
    CHECK_OK(sn_eval(g, c, "cpu:0", &t));
    if (t) {
        const float *r = sn_tensor_cdata(t);
        CHECK(r[0] == 22 && r[1] == 28 && r[2] == 49 && r[3] == 64, "got %g %g %g %g", r[0], r[1], r[2], r[3]);
        sn_tensor_free(t);
    }
    CHECK_ERR(sn_eval(g, c, "gpu:0", &t), SN_ERR_NOT_FOUND, "gpu:0");
    CHECK_ERR(sn_eval(g, c, "/device:CPU:7", &t), SN_ERR_NOT_FOUND, "CPU:7");
    CHECK_ERR(sn_eval(g, c, "tpu", &t), SN_ERR_NOT_FOUND, "unknown device 'tpu'");
    CHECK_OK(sn_eval(g, c, "/job:localhost/replica:0/task:0/device:CPU:0", &t));
    sn_tensor_free(t);
    sn_graph_free(g);
}

static void test_shape_errors(void) {
    sn_graph *g = sn_graph_new();
    sn_shape s23 = sn_shape_make(2, (int64_t)2, (int64_t)3), s45 = sn_shape_make(2, (int64_t)4, (int64_t)5);
    sn_node a = sn_input(g, "a", SN_F32, &s23), b = sn_input(g, "b", SN_F32, &s45);
    CHECK(sn_matmul(g, a, b, false, false) == SN_NONE, "mismatched matmul accepted");
    CHECK(sn_graph_status(g) == SN_ERR_SHAPE, "status %s", sn_status_name(sn_graph_status(g)));
    CHECK(strstr(sn_last_error(), "[2, 3]") && strstr(sn_last_error(), "[4, 5]"), "message: %s", sn_last_error());
    /* Sticky: later calls fail too and keep the first message. */
    CHECK(sn_relu(g, a) == SN_NONE, "call after an error succeeded");
    sn_graph_free(g);

    g = sn_graph_new();
    a = sn_input(g, "a", SN_F32, &s23);
    CHECK(sn_reduce_sum(g, a, 1, (int[]){5}, false) == SN_NONE, "axis 5 accepted");
    CHECK(strstr(sn_last_error(), "axis 5"), "message: %s", sn_last_error());
    sn_graph_free(g);

    g = sn_graph_new();
    a = sn_input(g, "a", SN_F32, &s23);
    CHECK(sn_zero_pad(g, a, (int64_t[]){0, -1}, (int64_t[]){0, 2}) == SN_NONE,
          "negative padding accepted");
    CHECK(strstr(sn_last_error(), "zero_pad: dimension 1: padding -1 before and 2 after"),
          "message: %s", sn_last_error());
    sn_graph_free(g);
    g = sn_graph_new();
    a = sn_input(g, "a", SN_F32, &s23);
    sn_node zp = sn_zero_pad(g, a, (int64_t[]){1, 0}, (int64_t[]){0, 2});
    sn_shape zs = sn_node_shape(g, zp);
    CHECK(zs.ndim == 2 && zs.dim[0] == 3 && zs.dim[1] == 5, "zero_pad [2, 3] -> [%lld, %lld]",
          (long long)zs.dim[0], (long long)zs.dim[1]);
    sn_graph_free(g);

    g = sn_graph_new();
    CHECK(sn_relu(g, 42) == SN_NONE, "invalid node accepted");
    CHECK(strstr(sn_last_error(), "not a node"), "message: %s", sn_last_error());
    sn_graph_free(g);

    CHECK(sn_relu(NULL, 0) == SN_NONE, "NULL graph accepted");
    CHECK(sn_graph_status(NULL) == SN_ERR_INVALID, "NULL graph status");
    sn_plan *p;
    CHECK_ERR(sn_plan_new(&p, NULL, 0, NULL, NULL), SN_ERR_INVALID, "graph is NULL");
    CHECK_ERR(sn_plan_run(NULL, 1, NULL, NULL), SN_ERR_INVALID, "plan is NULL");
    sn_tensor *t;
    CHECK_ERR(sn_tensor_new(&t, SN_F32, &(sn_shape){.ndim = 9}), SN_ERR_SHAPE, "rank 9");
}

/* A plan runs N steps in one call, feeding each; buffers are reused (peak < sum of sizes). */
typedef struct feed_ctx { sn_node x; int calls; } feed_ctx;
static sn_status feed_step(void *ctx, sn_plan *p, int64_t step) {
    feed_ctx *f = ctx;
    float *x = sn_plan_buffer(p, f->x);
    for (int i = 0; i < 4; i++) x[i] = (float)(step + 1);
    f->calls++;
    return SN_OK;
}

static void test_multi_step_and_reuse(void) {
    sn_graph *g = sn_graph_new();
    sn_shape s4 = sn_shape_make(1, (int64_t)4), s0 = {.ndim = 0};
    sn_node x = sn_input(g, "x", SN_F32, &s4);
    sn_node acc = sn_variable(g, "acc", SN_F32, &s0, false);
    /* A chain of elementwise ops: without reuse every value needs its own buffer. */
    sn_node y = x;
    for (int i = 0; i < 10; i++) y = sn_relu(g, sn_add(g, y, y));
    sn_node upd = sn_assign_add(g, acc, sn_reduce_sum(g, x, 0, NULL, false));
    CHECK_OK(sn_graph_status(g));
    sn_plan *p = NULL;
    sn_node targets[] = {y, upd};
    CHECK_OK(sn_plan_new(&p, g, 2, targets, NULL));
    if (!p) return;
    feed_ctx f = {x, 0};
    CHECK_OK(sn_plan_run(p, 5, feed_step, &f));
    CHECK(f.calls == 5, "feed called %d times", f.calls);
    float *a = sn_variable_data(g, acc);
    /* steps feed 1..5, each sums 4 elements: 4 * 15 = 60 */
    CHECK(a[0] == 60.0f, "accumulated %g, expected 60", a[0]);
    const float *yv = sn_plan_buffer(p, y);
    CHECK(yv[0] == 5.0f * 1024.0f, "y = %g", yv[0]);
    CHECK(sn_plan_step(p) == 5, "step %lld", (long long)sn_plan_step(p));
    /* 21 values of 16 bytes (64 after alignment): reuse keeps a handful alive. */
    CHECK(sn_plan_peak_bytes(p) <= 6 * 64, "peak %zu bytes", sn_plan_peak_bytes(p));
    sn_plan_opts o = sn_plan_opts_defaults();
    o.reuse_buffers = false;
    sn_plan *q = NULL;
    CHECK_OK(sn_plan_new(&q, g, 2, targets, &o));
    if (q) CHECK(sn_plan_peak_bytes(q) > sn_plan_peak_bytes(p), "no-reuse peak %zu <= %zu",
                 sn_plan_peak_bytes(q), sn_plan_peak_bytes(p));
    sn_plan_free(q);
    CHECK(sn_plan_buffer(p, 9999) == NULL, "bogus node has a buffer");
    CHECK_ERR(sn_plan_set_input(p, x, yv, 3), SN_ERR_SHAPE, "takes 16 bytes, got 3");
    sn_plan_free(p);
    sn_graph_free(g);
}

/* A plan stays valid when the graph grows after it was made (the node array and the variable
 * buffer move): fit makes an evaluation plan after the training plan, for instance. */
static void test_plan_survives_graph_growth(void) {
    sn_graph *g = sn_graph_new();
    sn_shape s3 = sn_shape_make(1, (int64_t)3);
    float one[3] = {1, 2, 3};
    sn_node v = sn_variable(g, "v", SN_F32, &s3, true);
    memcpy(sn_variable_data(g, v), one, sizeof one);
    sn_node y = sn_mul(g, sn_relu(g, v), sn_const(g, SN_F32, &s3, one));
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 1, &y, NULL));
    const sn_node_t *before = g->nodes;
    for (int i = 0; i < 500; i++) sn_variable(g, "more", SN_F32, &s3, false); /* grow both */
    CHECK(before != g->nodes, "the node array did not move; the test needs a bigger graph");
    CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
    const float *r = sn_plan_buffer(p, y);
    CHECK(r && r[0] == 1 && r[1] == 4 && r[2] == 9, "after growth got %g %g %g", r ? r[0] : -1,
          r ? r[1] : -1, r ? r[2] : -1);
    sn_plan_free(p);
    sn_graph_free(g);
}

/* A plan placed on a logical device runs its kernels with that device's share of the cores. */
static sn_status record_threads(void *ctx, sn_plan *p, int call, sn_node n) {
    *(int *)ctx = omp_get_max_threads();
    return SN_OK;
}

static void test_plan_threads_follow_device(void) {
    sn_set_num_threads(2);
    CHECK_OK(sn_device_configure_cpu(2));
    sn_graph *g = sn_graph_new();
    sn_node y = sn_relu(g, sn_scalar(g, SN_F32, 1.0));
    int seen[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        sn_plan_opts o = sn_plan_opts_defaults();
        o.device = d ? "cpu:1" : "cpu:0";
        sn_plan *p = NULL;
        CHECK_OK(sn_plan_new(&p, g, 1, &y, &o));
        if (!p) continue;
        sn_plan_set_node_hook(p, record_threads, &seen[d]);
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        sn_plan_free(p);
    }
    CHECK(seen[0] == 1 && seen[1] == 1, "2 cores over 2 devices: plans ran with %d and %d threads",
          seen[0], seen[1]);
    CHECK(omp_get_max_threads() == 2, "the caller's team is restored: %d", omp_get_max_threads());
    CHECK_OK(sn_device_configure_cpu(1));
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 1, &y, NULL));
    if (p) {
        sn_plan_set_node_hook(p, record_threads, &seen[0]);
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        CHECK(seen[0] == 2, "one device: plan ran with %d threads", seen[0]);
        sn_plan_free(p);
    }
    sn_graph_free(g);
}

/* bias_add -> relu runs as one fused call when nothing else reads the bias_add's output, with
 * the same values as the two calls (SN_FUSE=0), in training graphs too (relu's gradient reads
 * relu's output). */
static int plan_relu_graph(bool fuse, float *out, float *grad) {
    if (fuse) unsetenv("SN_FUSE");
    else setenv("SN_FUSE", "0", 1);
    sn_graph *g = sn_graph_new();
    sn_shape xs = sn_shape_make(2, (int64_t)3, (int64_t)5), bs = sn_shape_make(1, (int64_t)5);
    float x[15], bv[5] = {0.5f, -1.0f, 0.0f, 2.0f, -0.25f};
    for (int i = 0; i < 15; i++) x[i] = (float)(i % 7) - 3.0f;
    sn_node b = sn_variable(g, "b", SN_F32, &bs, true);
    memcpy(sn_variable_data(g, b), bv, sizeof bv);
    sn_node y = sn_relu(g, sn_bias_add(g, sn_const(g, SN_F32, &xs, x), b));
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, y), 0, NULL, false), db;
    CHECK_OK(sn_gradients(g, loss, 1, &b, &db));
    sn_node targets[2] = {y, db};
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 2, targets, NULL));
    int calls = p ? sn_plan_node_count(p) : -1;
    if (p && sn_plan_run(p, 1, NULL, NULL) == SN_OK) {
        memcpy(out, sn_plan_buffer(p, y), sizeof x);
        memcpy(grad, sn_plan_buffer(p, db), sizeof bv);
    }
    sn_plan_free(p);
    sn_graph_free(g);
    unsetenv("SN_FUSE");
    return calls;
}

static void test_bias_relu_fusion(void) {
    float y1[15], y0[15], g1[5], g0[5];
    int fused = plan_relu_graph(true, y1, g1), plain = plan_relu_graph(false, y0, g0);
    CHECK(fused == plain - 1, "fusion should save one call: %d calls fused, %d not", fused, plain);
    CHECK(!memcmp(y1, y0, sizeof y1) && !memcmp(g1, g0, sizeof g1),
          "fused bias_add+relu differs from the two separate ops");
    int zeros = 0;
    for (int i = 0; i < 15; i++) zeros += y1[i] == 0.0f;
    CHECK(zeros > 0 && zeros < 15, "relu did not clamp (zeros %d)", zeros);
}

/* relu(relu(v)) is relu(v)'s node (sn_relu folds it), with relu(v) also read elsewhere (as
 * the small Xception's first block reads it: a residual branch): the output is the bits of
 * the graph that keeps both relus (built with sn_graph_add), the gradient of v its values. */
static void relu_twice(bool fold, float *y, float *dv, int *nodes) {
    sn_graph *g = sn_graph_new();
    sn_shape s = sn_shape_make(1, (int64_t)8);
    float v0[8] = {-2.0f, -0.5f, 0.0f, 0.25f, 1.0f, 3.0f, -1e-30f, NAN};
    float r1[8] = {1, -2, 3, 0.5f, -1, 2, 4, -3}, r2[8] = {0.5f, 1, -1, 2, 3, -0.25f, 1, 2};
    sn_node v = sn_variable(g, "v", SN_F32, &s, true);
    memcpy(sn_variable_data(g, v), v0, sizeof v0);
    sn_node a = sn_relu(g, v);
    sn_node b = fold ? sn_relu(g, a) : sn_graph_add(g, SN_OP_RELU, 1, &a, NULL);
    if (fold) CHECK(b == a, "relu of a relu's output is a new node %d, not %d", (int)b, (int)a);
    sn_node loss = sn_add(g, sn_reduce_sum(g, sn_mul(g, b, sn_const(g, SN_F32, &s, r1)), 0, NULL, false),
                          sn_reduce_sum(g, sn_mul(g, a, sn_const(g, SN_F32, &s, r2)), 0, NULL, false));
    sn_node d;
    CHECK_OK(sn_gradients(g, loss, 1, &v, &d));
    *nodes = sn_graph_node_count(g);
    sn_node targets[2] = {b, d};
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 2, targets, NULL));
    if (p && sn_plan_run(p, 1, NULL, NULL) == SN_OK) {
        memcpy(y, sn_plan_buffer(p, b), sizeof v0);
        memcpy(dv, sn_plan_buffer(p, d), sizeof v0);
    }
    sn_plan_free(p);
    sn_graph_free(g);
}

static void test_relu_idempotent(void) {
    float y1[8], y0[8], d1[8], d0[8];
    int n1 = 0, n0 = 0;
    relu_twice(true, y1, d1, &n1);
    relu_twice(false, y0, d0, &n0);
    CHECK(n1 < n0, "folding relu(relu) left %d nodes, %d without", n1, n0);
    /* the gradient's masked entries may differ in the sign of their zero: relu_grad keeps
     * dy's sign there, and dy reaches the inner relu unmasked once folded */
    int same = 1;
    for (int i = 0; i < 8; i++) same &= d1[i] == d0[i];
    CHECK(!memcmp(y1, y0, sizeof y1) && same,
          "relu(relu(v)) folded differs from the two relus (output or gradient)");
    CHECK(y1[0] == 0.0f && y1[5] == 3.0f && d1[5] == 1.75f && d1[0] == 0.0f,
          "relu(relu(v)): output %g %g, gradient %g %g (expected 0 3, 1.75 0)", y1[0], y1[5],
          d1[5], d1[0]);
}

static void test_devices(void) {
    int idx = -1;
    CHECK_OK(sn_device_find("cpu:0", &idx));
    CHECK(idx == 0, "idx %d", idx);
    sn_device_info d;
    CHECK_OK(sn_device_get(0, &d));
    CHECK(!strcmp(d.name, "/job:localhost/replica:0/task:0/device:CPU:0"), "name %s", d.name);
    CHECK_ERR(sn_device_get(5, &d), SN_ERR_INVALID, "outside");
}

/* all_reduce under a stand-in collective that doubles its input (two replicas holding the
 * same value) and records the order of its calls: a hoisted node runs right after its input
 * exists, before nodes created earlier than it; hoisted nodes keep their creation order; a
 * wait node writes in place and runs where it was created. */
typedef struct fake_comm {
    sn_allreduce_comm base;
    int calls, phases[8];
} fake_comm;

static sn_status fake_run(sn_allreduce_comm *c, int replica, int phase, const float *in,
                          float *out, size_t n, void *stream) {
    fake_comm *f = (fake_comm *)c;
    (void)replica;
    (void)stream;
    if (f->calls < 8) f->phases[f->calls] = phase;
    f->calls++;
    if (phase == SN_ALLREDUCE_WAIT) {
        if (in != out) return sn_errorf(SN_ERR_INVALID, "wait phase not in place");
        return SN_OK;
    }
    for (size_t i = 0; i < n; i++) out[i] = 2 * in[i];
    return SN_OK;
}

static void test_all_reduce_hoisting(void) {
    static const sn_allreduce_vt vt = {.name = "fake", .run = fake_run};
    fake_comm fc = {.base = {.vt = &vt}};
    sn_graph *g = sn_graph_new();
    sn_shape s = {.ndim = 1, .dim = {4}};
    float v[4] = {1, -2, 3, -4};
    sn_node x = sn_const(g, SN_F32, &s, v);
    sn_node a = sn_relu(g, x);                  /* the "gradient" made first */
    sn_node b = sn_exp(g, sn_neg(g, x));        /* the rest of the "backward pass" */
    sn_node c = sn_sqrt(g, sn_exp(g, b));
    sn_node s1 = sn_all_reduce(g, a, &fc.base, 0, SN_ALLREDUCE_START, true);
    sn_node s2 = sn_all_reduce(g, c, &fc.base, 0, SN_ALLREDUCE_START, true);
    sn_node w1 = sn_all_reduce(g, s1, &fc.base, 0, SN_ALLREDUCE_WAIT, false);
    sn_node w2 = sn_all_reduce(g, s2, &fc.base, 0, SN_ALLREDUCE_WAIT, false);
    sn_node out = sn_add(g, w1, w2);
    CHECK_OK(sn_graph_status(g));
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 1, &out, NULL));
    if (!p) {
        sn_graph_free(g);
        return;
    }
    int ca = sn_plan_call_of(p, a), cb = sn_plan_call_of(p, b), cs1 = sn_plan_call_of(p, s1),
        cs2 = sn_plan_call_of(p, s2), cc = sn_plan_call_of(p, c), cw1 = sn_plan_call_of(p, w1);
    CHECK(cs1 == ca + 1 && cs1 < cb, "hoisted start at call %d: its input at %d, the next node "
          "created before it at %d", cs1, ca, cb);
    CHECK(cs2 == cc + 1 && cs2 < cw1, "second start at %d (input at %d, first wait at %d)", cs2, cc,
          cw1);
    CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
    const float *r = sn_plan_buffer(p, out);
    bool ok = r != NULL;
    for (int i = 0; ok && i < 4; i++) {
        double want = 2.0 * (v[i] > 0 ? v[i] : 0) + 2.0 * sqrt(exp(exp(-(double)v[i])));
        ok = fabs(r[i] - want) < 1e-5 * fabs(want);
    }
    CHECK(ok, "all_reduce result");
    CHECK(fc.calls == 4 && fc.phases[0] == SN_ALLREDUCE_START && fc.phases[1] == SN_ALLREDUCE_START &&
          fc.phases[2] == SN_ALLREDUCE_WAIT && fc.phases[3] == SN_ALLREDUCE_WAIT,
          "%d collective calls, starts before waits", fc.calls);
    /* no gradient rule, f32 only */
    sn_shape si = {.ndim = 0};
    sn_node xi = sn_input(g, "i", SN_I32, &si);
    CHECK(sn_all_reduce(g, xi, &fc.base, 0, SN_ALLREDUCE_WHOLE, false) == SN_NONE,
          "all_reduce of int32 accepted");
    sn_plan_free(p);
    sn_graph_free(g);
}

/* sn_kcall.vars_version (a kernel's cue to remake its copy of a weight): steady across runs
 * and steps of a plan without side effects, new after a caller takes a variable's storage,
 * new at every step of a plan whose side effects write a variable. */
static uint64_t seen_version[8];
static int n_seen;
static sn_status record_version(void *ctx, sn_plan *p, int call, sn_node n) {
    (void)ctx, (void)n;
    if (call == 0 && n_seen < 8) seen_version[n_seen++] = p->calls[0].vars_version;
    return SN_OK;
}

static void test_vars_version(void) {
    sn_graph *g = sn_graph_new();
    sn_shape s = {.ndim = 1, .dim = {4}};
    sn_node w = sn_variable(g, "w", SN_F32, &s, true);
    sn_node x = sn_input(g, "x", SN_F32, &s);
    sn_node y = sn_mul(g, x, w);
    sn_node up = sn_assign_add(g, w, x);
    sn_plan *pure = NULL, *writes = NULL;
    sn_plan_opts po = sn_plan_opts_defaults();
    CHECK_OK(sn_plan_new(&pure, g, 1, &y, &po));
    CHECK_OK(sn_plan_new(&writes, g, 1, &up, &po));
    if (!pure || !writes) goto done;
    sn_plan_set_node_hook(pure, record_version, NULL);
    sn_plan_set_node_hook(writes, record_version, NULL);
    n_seen = 0;
    CHECK_OK(sn_plan_run(pure, 2, NULL, NULL));
    CHECK_OK(sn_plan_run(pure, 1, NULL, NULL));
    CHECK(n_seen == 3 && seen_version[0] == seen_version[1] && seen_version[1] == seen_version[2],
          "a plan without side effects moved the version: %llu %llu %llu",
          (unsigned long long)seen_version[0], (unsigned long long)seen_version[1],
          (unsigned long long)seen_version[2]);
    ((float *)sn_variable_data(g, w))[0] = 1.0f;
    CHECK_OK(sn_plan_run(pure, 1, NULL, NULL));
    CHECK(n_seen == 4 && seen_version[3] != seen_version[2],
          "writing a variable through sn_variable_data left the version at %llu",
          (unsigned long long)seen_version[3]);
    n_seen = 0;
    CHECK_OK(sn_plan_run(writes, 2, NULL, NULL));
    CHECK_OK(sn_plan_run(pure, 1, NULL, NULL));
    CHECK(n_seen == 3 && seen_version[0] != seen_version[1] && seen_version[1] != seen_version[2],
          "steps of a plan with side effects: versions %llu %llu, then %llu",
          (unsigned long long)seen_version[0], (unsigned long long)seen_version[1],
          (unsigned long long)seen_version[2]);
done:
    sn_plan_free(pure);
    sn_plan_free(writes);
    sn_graph_free(g);
}

int main(void) {
    test_registry_complete();
    test_eager_matmul();
    test_shape_errors();
    test_multi_step_and_reuse();
    test_plan_survives_graph_growth();
    test_bias_relu_fusion();
    test_relu_idempotent();
    test_devices();
    test_plan_threads_follow_device();
    test_all_reduce_hoisting();
    test_vars_version();
    return sn_test_finish("test_graph");
}
