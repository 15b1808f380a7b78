/* Plans that take turns with one memory (graph.h: sn_plan_memory): their arenas and scratch
 * share blocks sized for the largest plan, each plan still computes its own values when its
 * inputs are fed before its run, a plan made later that needs more moves the blocks and the
 * earlier plans follow them, the creator may free its reference before the plans, and a plan
 * on another device is refused with both devices named. */
#include <math.h>

#include "core/core.h"

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
    return sn_test_finish("test_plan_memory");
}
