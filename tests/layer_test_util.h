/* Shared by the layer tests (test_layers.c, test_layers_more.c): one layer in a one-layer
 * model with a plan over its forward, value comparison, and the finite-difference gradient
 * check of a layer in double precision (see test_layers.c's header comment). */
#ifndef SN_LAYER_TEST_UTIL_H
#define SN_LAYER_TEST_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "nn/nn_impl.h"
#include "sn_test.h"

#define S1(a) {.ndim = 1, .dim = {a}}
#define S2(a, b) {.ndim = 2, .dim = {a, b}}
#define S3(a, b, c) {.ndim = 3, .dim = {a, b, c}}

/* One layer in a one-layer model, its forward for a batch, and a plan over it. */
typedef struct fixture {
    sn_model *m;
    sn_layer *l;
    sn_node x, y;
    sn_updates u;
    sn_plan *p;
} fixture;

static bool fx_build(fixture *f, sn_layer *l, sn_shape in, uint64_t seed, sn_dtype dt) {
    memset(f, 0, sizeof *f);
    f->m = sn_sequential_new("t");
    f->l = l;
    f->m->dtype = dt;
    sn_status s = sn_model_add(f->m, l);
    if (s == SN_OK) s = sn_model_build(f->m, &in, seed);
    CHECK(s == SN_OK, "build %s: %s", l ? l->vt->class_name : "?", sn_last_error());
    return s == SN_OK;
}

/* Adds the forward for batch b (training or not) and plans it (with the updates as targets). */
static bool fx_plan(fixture *f, int64_t b, bool training) {
    sn_graph *g = f->m->g;
    sn_shape xs = {.ndim = f->m->input_shape.ndim + 1, .dim = {b}};
    for (int i = 0; i < f->m->input_shape.ndim; i++) xs.dim[i + 1] = f->m->input_shape.dim[i];
    f->x = sn_input(g, "x", f->m->dtype, &xs);
    sn_status s = sn_model_forward(f->m, f->x, training, &f->u, &f->y);
    sn_node t[16] = {f->y};
    for (int i = 0; i < f->u.n && i < 15; i++) t[1 + i] = f->u.nodes[i];
    if (s == SN_OK) s = sn_plan_new(&f->p, g, 1 + f->u.n, t, NULL);
    CHECK(s == SN_OK, "forward/plan: %s", sn_last_error());
    return s == SN_OK;
}

static void fx_free(fixture *f) {
    sn_plan_free(f->p);
    sn_updates_free(&f->u);
    sn_model_free(f->m);
}

static void set_var(fixture *f, int j, const float *v) {
    sn_shape s = sn_node_shape(f->m->g, f->l->vars[j]);
    memcpy(sn_variable_data(f->m->g, f->l->vars[j]), v, sizeof(float) * (size_t)sn_shape_numel(&s));
}

static const float *run(fixture *f, const float *x) {
    sn_shape s = sn_node_shape(f->m->g, f->x);
    CHECK_OK(sn_plan_set_input(f->p, f->x, x, sizeof(float) * (size_t)sn_shape_numel(&s)));
    CHECK_OK(sn_plan_run(f->p, 1, NULL, NULL));
    return sn_plan_buffer(f->p, f->y);
}

static void expect(const char *what, const float *got, const float *want, int64_t n, double tol) {
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * fmax(1.0, fabs(want[i]))) && bad++ < 4)
            fprintf(stderr, "  %s[%lld]: got %.7g, want %.7g\n", what, (long long)i, got[i], want[i]);
    CHECK(bad == 0, "%s: %d of %lld values differ", what, bad, (long long)n);
}

/* ---- gradients by finite differences, f64 --------------------------------------------- */
static double loss_of(sn_plan *p, sn_node loss) {
    sn_plan_set_step(p, 0); /* dropout: the same mask on every evaluation */
    if (sn_plan_run(p, 1, NULL, NULL) != SN_OK) return NAN;
    return *(double *)sn_plan_buffer(p, loss);
}

static int fd_check(const char *what, sn_plan *p, sn_node loss, double *x, const double *ga,
                    int64_t n, double tol, double *worst) {
    int bad = 0;
    for (int64_t j = 0; j < n; j++) {
        const double eps = 1e-6;
        double x0 = x[j];
        x[j] = x0 + eps;
        double lp = loss_of(p, loss);
        x[j] = x0 - eps;
        double lm = loss_of(p, loss);
        x[j] = x0;
        double num = (lp - lm) / (2 * eps), err = fabs(num - ga[j]) / fmax(1.0, fmax(fabs(num), fabs(ga[j])));
        if (err > *worst) *worst = err;
        if (!(err <= tol) && bad++ < 3)
            fprintf(stderr, "  %s [%lld]: analytic %.10g numeric %.10g\n", what, (long long)j, ga[j], num);
    }
    return bad;
}

/* The analytic gradients grads[k] of loss with respect to wrt[k] against central differences:
 * the first n_inputs of wrt are the plan's inputs, the rest variables. Each gradient is read at
 * the unperturbed point (the check before it ran the plan last at a moved one). Returns the
 * number of entries off by more than tol; *worst gets the largest relative error. */
static int fd_check_all(sn_graph *g, sn_plan *p, sn_node loss, int nw, const sn_node *wrt,
                        const sn_node *grads, int n_inputs, double tol, double *worst) {
    int bad = 0;
    for (int k = 0; k < nw; k++) {
        sn_shape ws = sn_node_shape(g, wrt[k]);
        int64_t n = sn_shape_numel(&ws);
        double *ga = malloc(sizeof *ga * (size_t)n);
        loss_of(p, loss);
        memcpy(ga, sn_plan_buffer(p, grads[k]), sizeof *ga * (size_t)n);
        bool x = k < n_inputs;
        double *val = x ? sn_plan_buffer(p, wrt[k]) : sn_variable_data(g, wrt[k]);
        bad += fd_check(x ? "x" : sn_node_name(g, wrt[k]), p, loss, val, ga, n, tol, worst);
        free(ga);
    }
    return bad;
}

/* loss = sum(layer(x) * r) for a random r; d loss / d x and d loss / d each trainable variable
 * against central differences. */
static void grad_case(const char *what, sn_layer *l, sn_shape in, int64_t batch, bool training,
                      double tol) {
    fixture f;
    if (!fx_build(&f, l, in, 11, SN_F64)) {
        fx_free(&f);
        return;
    }
    sn_graph *g = f.m->g;
    sn_shape xs = {.ndim = in.ndim + 1, .dim = {batch}};
    for (int i = 0; i < in.ndim; i++) xs.dim[i + 1] = in.dim[i];
    f.x = sn_input(g, "x", SN_F64, &xs);
    sn_status s = sn_model_forward(f.m, f.x, training, NULL, &f.y);
    CHECK(s == SN_OK, "%s: forward: %s", what, sn_last_error());
    if (s != SN_OK) {
        fx_free(&f);
        return;
    }
    sn_rng r;
    sn_rng_init(&r, 77, 0);
    sn_shape ys = sn_node_shape(g, f.y);
    int64_t ny = sn_shape_numel(&ys);
    double *rv = malloc(sizeof *rv * (size_t)ny);
    for (int64_t i = 0; i < ny; i++) rv[i] = sn_rng_normal(&r);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, f.y, sn_const(g, SN_F64, &ys, rv)), 0, NULL, false);
    free(rv);
    sn_node wrt[1 + SN_LAYER_MAX_VARS] = {f.x}, grads[1 + SN_LAYER_MAX_VARS];
    int nw = 1;
    for (int j = 0; j < l->n_vars; j++)
        if (sn_node_at(g, l->vars[j])->flags & SN_NODE_TRAINABLE) wrt[nw++] = l->vars[j];
    s = sn_gradients(g, loss, nw, wrt, grads);
    sn_node t[1 + 1 + SN_LAYER_MAX_VARS] = {loss};
    for (int i = 0; i < nw; i++) t[1 + i] = grads[i];
    if (s == SN_OK) s = sn_plan_new(&f.p, g, 1 + nw, t, NULL);
    CHECK(s == SN_OK, "%s: gradients/plan: %s", what, sn_last_error());
    if (s != SN_OK) {
        fx_free(&f);
        return;
    }
    /* inputs kept away from 0 (relu kinks) and distinct (no max-pool ties); variables moved
     * off their initial values so that gamma = 1, beta = 0, bias = 0 test nothing special */
    double *xv = sn_plan_buffer(f.p, f.x);
    for (int64_t i = 0; i < sn_shape_numel(&xs); i++) {
        double v = sn_rng_normal(&r);
        xv[i] = (v < 0 ? -0.2 : 0.2) + v;
    }
    for (int k = 1; k < nw; k++) {
        sn_shape vs = sn_node_shape(g, wrt[k]);
        double *d = sn_variable_data(g, wrt[k]);
        for (int64_t i = 0; i < sn_shape_numel(&vs); i++) d[i] += 0.3 * sn_rng_normal(&r);
    }
    loss_of(f.p, loss);
    double worst = 0;
    int bad = fd_check_all(g, f.p, loss, nw, wrt, grads, 1, tol, &worst);
    CHECK(bad == 0, "%s: %d gradient entries off by more than %g (worst %.3g)", what, bad, tol, worst);
    if (bad == 0) printf("ok  grad %-34s worst relative error %.2e\n", what, worst);
    fx_free(&f);
}


#endif
