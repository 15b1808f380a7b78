/* Plans that take turns with one memory (graph.h: sn_plan_memory): their arenas and scratch
 * share blocks sized for the largest plan, each plan still computes its own values when its
 * inputs are fed before its run, a plan made later that needs more moves the blocks and the
 * earlier plans follow them, the creator may free its reference before the plans, and a plan
 * on another device is refused with both devices named. And the planner's early optimizer
 * updates (plan.c, early_updates): an update runs once its variable's last reader has, so its
 * gradient's buffer is free for the rest of the backward pass, with the same bits as an
 * update at the step's end. And a kernel's scratch lives in the arena for its call alone
 * (plan_arena.c): it takes the bytes of a value dead by then, not bytes of its own. */
#include <math.h>
#include <string.h>

#include "core/core.h"
#include "graph/graph_impl.h"
#include "nn/train/train_impl.h"
#include "plan_check.h"

#include "sinter/device.h"
#include "sinter/graph.h"
#include "sn_test.h"

/* y = relu(x * 2 + 1) * x over n values: a few intermediate values, so an arena. */
static sn_node chain(sn_graph *g, const char *name, int n, sn_node *in) {
    sn_shape s = {.ndim = 1, .dim = {n}};
    *in = sn_input(g, name, SN_F32, &s);
    sn_node t = sn_add(g, sn_mul(g, *in, sn_scalar(g, SN_F32, 2.0)), sn_scalar(g, SN_F32, 1.0));
    return sn_mul(g, sn_relu(g, t), *in);
}

static float expect(float x) { return fmaxf(x * 2.0f + 1.0f, 0.0f) * x; }

/* Feeds n values (a ramp offset by `off`) to the plan, runs it and checks its output. */
static void run_check(sn_plan *p, sn_node in, sn_node out, int n, float off, const char *what) {
    float *x = malloc(sizeof *x * (size_t)n);
    for (int i = 0; i < n; i++) x[i] = off + (float)(i % 97) * 0.25f - 12.0f;
    CHECK_OK(sn_plan_set_input(p, in, x, sizeof *x * (size_t)n));
    CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
    const float *y = sn_plan_buffer(p, out);
    int bad = 0;
    for (int i = 0; y && i < n; i++)
        if (y[i] != expect(x[i]) && !bad++)
            CHECK(false, "%s: y[%d] = %g, expected %g", what, i, (double)y[i], (double)expect(x[i]));
    CHECK(y != NULL, "%s: no output buffer", what);
    free(x);
}


/* Two Dense layers without biases, Adam: x [16, 512] -> W0 [512, 512] -> W1 [512, 2048] ->
 * sum of squares. W1's gradient (4 MiB) is made first in the backward pass; W0's (1 MiB)
 * after. With W1's update early, the two never live together. `pin`: a side effect reads W1
 * (an assign of it to another variable), so W1's update keeps its place at the step's end. */
typedef struct {
    sn_graph *g;
    sn_plan *p;
    sn_node w[2], grad[2], upd[3];
} two_dense;

static void two_dense_make(two_dense *t, bool pin) {
    enum { B = 16, D = 512, M = 2048 };
    sn_graph *g = t->g = sn_graph_new();
    sn_shape sx = {.ndim = 2, .dim = {B, D}}, s0 = {.ndim = 2, .dim = {D, D}},
             s1 = {.ndim = 2, .dim = {D, M}}, sc = {.ndim = 0};
    static float xv[B * D];
    for (int i = 0; i < B * D; i++) xv[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    sn_node x = sn_const(g, SN_F32, &sx, xv);
    t->w[0] = sn_variable(g, "w0", SN_F32, &s0, true);
    t->w[1] = sn_variable(g, "w1", SN_F32, &s1, true);
    for (int k = 0; k < 2; k++) {
        float *w = sn_variable_data(g, t->w[k]);
        int64_t n = k ? (int64_t)D * M : (int64_t)D * D;
        for (int64_t i = 0; w && i < n; i++) w[i] = (float)((i * 53 + k) % 97) / 970.0f - 0.05f;
    }
    sn_node y = sn_matmul(g, sn_matmul(g, x, t->w[0], false, false), t->w[1], false, false);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, y), 0, NULL, false);
    sn_optimizer_opts o;
    CHECK_OK(sn_optimizer_from_name("adam", &o));
    sn_node slots[2 * SN_OPTIM_MAX_SLOTS];
    CHECK_OK(sn_gradients(g, loss, 2, t->w, t->grad));
    CHECK_OK(sn_optimizer_create_slots(g, &o, 2, t->w, slots));
    sn_node it = sn_variable(g, "iterations", SN_I32, &sc, false);
    CHECK_OK(sn_optimizer_apply(g, &o, 2, t->w, t->grad, slots, it, t->upd));
    sn_node targets[4] = {t->upd[0], t->upd[1], t->upd[2]};
    int nt = 3;
    if (pin) targets[nt++] = sn_assign(g, sn_variable(g, "copy", SN_F32, &s1, false), t->w[1]);
    CHECK(sn_graph_status(g) == SN_OK, "two_dense graph: %s", sn_last_error());
    t->p = NULL;
    CHECK_OK(sn_plan_new(&t->p, g, nt, targets, NULL));
}

static void test_early_updates(void) {
    two_dense e, l;
    two_dense_make(&e, false);
    two_dense_make(&l, true);
    if (!e.p || !l.p) return;
    plan_check_arena(e.p, "early updates");
    plan_check_arena(l.p, "updates at the end");
    size_t g1 = 512 * 2048 * 4, g0 = 512 * 512 * 4;
    int u1 = sn_plan_call_of(e.p, e.upd[1]), m0 = sn_plan_call_of(e.p, e.grad[0]);
    CHECK(u1 >= 0 && m0 >= 0 && u1 < m0, "W1's update (call %d) runs before W0's gradient is "
          "made (call %d)", u1, m0);
    CHECK(sn_plan_call_of(e.p, e.upd[2]) == sn_plan_node_count(e.p) - 1,
          "the iteration count still runs last");
    CHECK(sn_plan_call_of(l.p, l.upd[1]) > sn_plan_call_of(l.p, l.grad[0]),
          "an update whose variable a side effect reads keeps its place at the end");
    CHECK(sn_plan_peak_bytes(e.p) < g1 + g0 && sn_plan_peak_bytes(l.p) >= g1 + g0,
          "arena with early updates %zu bytes (expected < both gradients, %zu), at the end %zu",
          sn_plan_peak_bytes(e.p), g1 + g0, sn_plan_peak_bytes(l.p));
    for (int step = 0; step < 3; step++) {
        CHECK_OK(sn_plan_run(e.p, 1, NULL, NULL));
        CHECK_OK(sn_plan_run(l.p, 1, NULL, NULL));
    }
    for (int k = 0; k < 2; k++) {
        size_t bytes = k ? g1 : g0;
        CHECK(memcmp(sn_variable_data(e.g, e.w[k]), sn_variable_data(l.g, l.w[k]), bytes) == 0,
              "w%d after 3 Adam steps: early and end-of-step updates give the same bits", k);
    }
    sn_plan_free(e.p);
    sn_plan_free(l.p);
    sn_graph_free(e.g);
    sn_graph_free(l.g);
}

/* x [4096, 64] (1 MB, an input: live all step); big = x * x (1 MB) dies at its sum; then
 * BatchNormalization's statistics of x, whose kernel asks for ~35 KB of scratch (a partial sum
 * per chunk of rows), and its output y (1 MB). The values need x + max(big, y) + a few small
 * ones; the statistics' scratch fits where big was, so the arena grows by no more than the
 * normalisation's 2 KB of coefficients (it runs while x and y are both live). */
static void test_scratch_in_arena(void) {
    const int M = 4096, C = 64;
    sn_graph *g = sn_graph_new();
    sn_shape xs = {.ndim = 2, .dim = {M, C}}, cs = {.ndim = 1, .dim = {C}};
    sn_node x = sn_input(g, "x", SN_F32, &xs);
    sn_node total = sn_reduce_sum(g, sn_mul(g, x, x), 0, NULL, false);
    sn_node gamma = sn_variable(g, "gamma", SN_F32, &cs, true);
    sn_node beta = sn_variable(g, "beta", SN_F32, &cs, true);
    sn_node y = sn_batch_norm_train(g, x, gamma, beta, 1e-3, NULL);
    CHECK_OK(sn_graph_status(g));
    float *ga = sn_variable_data(g, gamma), *be = sn_variable_data(g, beta);
    for (int j = 0; ga && be && j < C; j++) {
        ga[j] = 1.0f;
        be[j] = 0.0f;
    }
    sn_plan_opts o = sn_plan_opts_defaults();
    o.device = "cpu:0";
    sn_plan *p = NULL;
    sn_node targets[] = {total, y};
    CHECK_OK(sn_plan_new(&p, g, 2, targets, &o));
    if (!p) {
        sn_graph_free(g);
        return;
    }
    size_t most = 0;
    for (int c = 0; c < p->n_calls; c++)
        if (p->scratch_need[c] > most) most = p->scratch_need[c];
    const size_t mb = (size_t)M * C * sizeof(float);
    CHECK(most >= 16384, "the statistics' kernel asks for %zu bytes of scratch, expected at "
          "least 16 KB for the test to mean anything", most);
    CHECK(sn_plan_peak_bytes(p) < 2 * mb + 8192,
          "the arena takes %zu bytes; the values need %zu and a few small ones, and the %zu "
          "bytes of scratch fit where the dead x * x was", sn_plan_peak_bytes(p), 2 * mb, most);
    plan_check_arena(p, "scratch in the arena");
    /* the statistics are right with their scratch where x * x was */
    float *xv = malloc(sizeof *xv * (size_t)M * C);
    for (int i = 0; xv && i < M * C; i++) xv[i] = (float)((i * 7919) % 1000) * 0.01f + (float)(i % C);
    if (xv) CHECK_OK(sn_plan_set_input(p, x, xv, mb));
    CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
    const float *yv = sn_plan_buffer(p, y);
    int bad = 0;
    for (int j = 0; yv && j < C && !bad; j++) {
        double s = 0, q = 0;
        for (int r = 0; r < M; r++) {
            s += yv[(size_t)r * C + j];
            q += (double)yv[(size_t)r * C + j] * yv[(size_t)r * C + j];
        }
        double mean = s / M, var = q / M - mean * mean;
        if (fabs(mean) > 1e-4 || fabs(var - 1.0) > 1e-2) {
            bad = 1;
            CHECK(false, "channel %d normalised to mean %g, variance %g", j, mean, var);
        }
    }
    free(xv);
    sn_plan_free(p);
    sn_graph_free(g);
}

int main(void) {
    CHECK_OK(sn_device_configure_cpu(2));
    sn_graph *g = sn_graph_new();
    sn_node xa, xb, xc;
    sn_node ya = chain(g, "a", 64, &xa), yb = chain(g, "b", 4096, &xb);
    sn_node yc = chain(g, "c", 65536, &xc);
    sn_plan_memory *m = sn_plan_memory_new();
    CHECK(m && sn_plan_memory_size(m) == 0, "a new plan memory holds nothing");
    sn_plan_opts o = sn_plan_opts_defaults();
    o.device = "cpu:0";
    o.memory = m;
    sn_plan *a = NULL, *b = NULL, *c = NULL, *own = NULL;
    CHECK_OK(sn_plan_new(&a, g, 1, &ya, &o));
    CHECK_OK(sn_plan_new(&b, g, 1, &yb, &o));
    sn_plan_opts solo = sn_plan_opts_defaults();
    solo.device = "cpu:0";
    CHECK_OK(sn_plan_new(&own, g, 1, &yb, &solo));
    if (!a || !b || !own) return sn_test_finish("test_plan_memory");
    size_t pa = sn_plan_peak_bytes(a), pb = sn_plan_peak_bytes(b);
    size_t shared = sn_plan_memory_size(m);
    CHECK(pa > 0 && pb > pa, "the plans' own needs: %zu and %zu bytes", pa, pb);
    CHECK(shared >= pb && shared < pa + pb,
          "two plans in one memory take %zu bytes, expected the larger need (%zu), not the "
          "sum (%zu)", shared, pb, pa + pb);
    CHECK(sn_plan_peak_bytes(own) == pb, "the same plan with its own memory needs %zu, not %zu",
          sn_plan_peak_bytes(own), pb);

    /* turns: each run feeds its own inputs first */
    run_check(a, xa, ya, 64, 0.0f, "plan a");
    run_check(b, xb, yb, 4096, 3.0f, "plan b after a");
    run_check(a, xa, ya, 64, -5.0f, "plan a after b");

    /* a larger plan moves the blocks; the earlier plans follow them */
    CHECK_OK(sn_plan_new(&c, g, 1, &yc, &o));
    CHECK(sn_plan_memory_size(m) >= sn_plan_peak_bytes(c) && sn_plan_memory_size(m) > shared,
          "the memory grew to %zu bytes for a plan that needs %zu", sn_plan_memory_size(m),
          sn_plan_peak_bytes(c));
    /* the owner lets go first: the plans keep the blocks alive */
    sn_plan_memory_free(m);
    run_check(a, xa, ya, 64, 1.0f, "plan a after the blocks moved");
    if (c) run_check(c, xc, yc, 65536, 2.0f, "plan c");
    run_check(b, xb, yb, 4096, -1.0f, "plan b after c");

    /* one device per memory */
    sn_plan_memory *m2 = sn_plan_memory_new();
    sn_plan *d0 = NULL, *d1 = NULL;
    o.memory = m2;
    CHECK_OK(sn_plan_new(&d0, g, 1, &ya, &o));
    o.device = "cpu:1";
    CHECK_ERR(sn_plan_new(&d1, g, 1, &ya, &o), SN_ERR_INVALID, "must be on one device");
    CHECK(!d1, "a refused plan is not returned");
    sn_plan_free(d0);
    sn_plan_memory_free(m2);

    sn_plan_free(a);
    sn_plan_free(b);
    sn_plan_free(c);
    sn_plan_free(own);
    sn_graph_free(g);
    test_early_updates();
    test_scratch_in_arena();
    return sn_test_finish("test_plan_memory");
}
