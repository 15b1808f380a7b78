/* The CPU kernels of the whole-layer recurrent ops against sinter's reference: oneDNN's LSTM
 * and LBR-GRU primitives (backend/cpu/cpu_rnn_dnnl.c, cpu_rnn_layer.c), and, in builds without
 * oneDNN or under SN_RNN=loop (CTest's test_rnn_dnnl_loop), the same ops on the loop's kernels
 * (cpu_rnn_layer_loop.c), through the graph ops and their linked gradient calls.
 *
 * oneDNN's LSTM primitives against sinter's reference: the
 * outputs (y, final h and c) and every gradient (x, kernel, recurrent kernel, bias, initial h
 * and c) of loss = sum(y * P) + sum(h_T * Q) + sum(c_T * S), in f32 and, where oneDNN has it
 * on this CPU, bf16. The reference is the LSTM graph in double on the reference kernels
 * (SN_KERNELS=ref): x @ W + b, lstm, and sinter's autodiff; the initial states get no gradient
 * there (op_rnn.h), so theirs are central differences of the same double graph.
 *
 * The zero-initial-state cases are the ones oneDNN 2.6.3 got wrong when no src_iter was passed
 * (the recurrent-kernel gradient taken from the step's own output, nonzero even for T = 1);
 * the wrapper always passes the states now, and these cases fail if it stops doing so. Builds
 * without oneDNN check that the wrapper says so, and skip the rest. */
#include <stdlib.h>

#include "backend/cpu/cpu_rnn_dnnl.h"
#include "backend/kernel.h"
#include "core/core.h"
#include "graph/op_rnn.h"
#include "graph/plan_impl.h"
#include "sinter/graph.h"
#include "sn_test.h"

/* The kernel the graph ops must run on: "dnnl", or "loop" (no oneDNN, or SN_RNN=loop). */
static const char *want_impl = "dnnl";

typedef struct lstm_case {
    int64_t B, T, D, U;
    bool zero_states; /* the wrapper is given no h0 / c0 (the reference uses zeros) */
    bool no_c_loss;   /* the loss has no c_T term (S = 0): the graph op without keep_c */
} lstm_case;

/* One problem's data (f32, as the wrapper takes it) and the reference results (double). */
typedef struct problem {
    lstm_case c;
    float *x, *w, *r, *b, *h0, *c0, *P, *Q, *S;
    double *y, *hT, *cT, *dx, *dw, *dr, *db, *dh0, *dc0;
} problem;

static float *randv(sn_rng *g, int64_t n, double scale) {
    float *v = malloc(sizeof *v * (size_t)n);
    for (int64_t i = 0; v && i < n; i++) v[i] = (float)(scale * sn_rng_normal(g));
    return v;
}

static double *dalloc(int64_t n) { return calloc((size_t)n, sizeof(double)); }

/* The double graph: inputs x, w, r, b, h0, c0; targets loss, y, hT, cT, dx, dw, dr, db. */
typedef struct ref_graph {
    sn_graph *g;
    sn_plan *p;
    sn_node in[6], loss, y, hT, cT, grads[4];
} ref_graph;

static bool ref_build(ref_graph *rg, const problem *pb) {
    int64_t B = pb->c.B, T = pb->c.T, D = pb->c.D, U = pb->c.U, G = 4 * U;
    sn_graph *g = rg->g = sn_graph_new();
    sn_shape sh[6] = {{.ndim = 3, .dim = {B, T, D}}, {.ndim = 2, .dim = {D, G}},
                      {.ndim = 2, .dim = {U, G}},    {.ndim = 1, .dim = {G}},
                      {.ndim = 2, .dim = {B, U}},    {.ndim = 2, .dim = {B, U}}};
    const char *names[6] = {"x", "w", "r", "b", "h0", "c0"};
    for (int i = 0; i < 6; i++) rg->in[i] = sn_input(g, names[i], SN_F64, &sh[i]);
    sn_node xw = sn_bias_add(g, sn_matmul(g, sn_reshape(g, rg->in[0], &(sn_shape){.ndim = 2, .dim = {B * T, D}}),
                                          rg->in[1], false, false), rg->in[3]);
    xw = sn_reshape(g, xw, &(sn_shape){.ndim = 3, .dim = {B, T, G}});
    sn_node ws = sn_lstm_seq(g, xw, rg->in[2], rg->in[4], rg->in[5]);
    rg->y = sn_rnn_slot_seq(g, ws, U, SN_LSTM_H);
    rg->hT = sn_rnn_slot_last(g, ws, U, SN_LSTM_H);
    rg->cT = sn_rnn_slot_last(g, ws, U, SN_LSTM_C);
    double *P = dalloc(B * T * U), *Q = dalloc(B * U), *S = dalloc(B * U);
    for (int64_t i = 0; P && i < B * T * U; i++) P[i] = pb->P[i];
    for (int64_t i = 0; Q && S && i < B * U; i++) Q[i] = pb->Q[i], S[i] = pb->S[i];
    if (!P || !Q || !S) return false;
    sn_shape ys = {.ndim = 3, .dim = {B, T, U}}, hs = {.ndim = 2, .dim = {B, U}};
    sn_node l1 = sn_reduce_sum(g, sn_mul(g, rg->y, sn_const(g, SN_F64, &ys, P)), 0, NULL, false);
    sn_node l2 = sn_reduce_sum(g, sn_mul(g, rg->hT, sn_const(g, SN_F64, &hs, Q)), 0, NULL, false);
    sn_node l3 = sn_reduce_sum(g, sn_mul(g, rg->cT, sn_const(g, SN_F64, &hs, S)), 0, NULL, false);
    free(P), free(Q), free(S);
    rg->loss = sn_add(g, sn_add(g, l1, l2), l3);
    CHECK_OK(sn_gradients(g, rg->loss, 4, rg->in, rg->grads));
    sn_node targets[8] = {rg->loss, rg->y, rg->hT, rg->cT,
                          rg->grads[0], rg->grads[1], rg->grads[2], rg->grads[3]};
    rg->p = NULL;
    CHECK_OK(sn_plan_new(&rg->p, g, 8, targets, NULL));
    if (!rg->p) return false;
    const float *src[6] = {pb->x, pb->w, pb->r, pb->b, pb->h0, pb->c0};
    for (int i = 0; i < 6; i++) {
        double *d = sn_plan_buffer(rg->p, rg->in[i]);
        int64_t n = sn_shape_numel(&sh[i]);
        for (int64_t j = 0; j < n; j++) d[j] = src[i] ? src[i][j] : 0.0;
    }
    return true;
}

static double ref_loss(ref_graph *rg) {
    if (sn_plan_run(rg->p, 1, NULL, NULL) != SN_OK) {
        fprintf(stderr, "reference run failed: %s\n", sn_last_error());
        return NAN;
    }
    return *(double *)sn_plan_buffer(rg->p, rg->loss);
}

static void copy_out(ref_graph *rg, sn_node n, double *to, int64_t cnt) {
    memcpy(to, sn_plan_buffer(rg->p, n), sizeof(double) * (size_t)cnt);
}

/* Fills the reference results of pb. */
static bool reference(problem *pb) {
    int64_t B = pb->c.B, T = pb->c.T, D = pb->c.D, U = pb->c.U, G = 4 * U;
    setenv("SN_KERNELS", "ref", 1);
    ref_graph rg = {0};
    bool ok = ref_build(&rg, pb) && !isnan(ref_loss(&rg));
    if (ok) {
        copy_out(&rg, rg.y, pb->y, B * T * U);
        copy_out(&rg, rg.hT, pb->hT, B * U);
        copy_out(&rg, rg.cT, pb->cT, B * U);
        copy_out(&rg, rg.grads[0], pb->dx, B * T * D);
        copy_out(&rg, rg.grads[1], pb->dw, D * G);
        copy_out(&rg, rg.grads[2], pb->dr, U * G);
        copy_out(&rg, rg.grads[3], pb->db, G);
        /* the initial states: central differences (the loss is smooth; in double an eps of
         * 1e-6 leaves ~1e-9 of error) */
        for (int k = 0; k < 2; k++) {
            double *v = sn_plan_buffer(rg.p, rg.in[4 + k]), *out = k ? pb->dc0 : pb->dh0;
            for (int64_t j = 0; j < B * U; j++) {
                const double eps = 1e-6, v0 = v[j];
                v[j] = v0 + eps;
                double lp = ref_loss(&rg);
                v[j] = v0 - eps;
                double lm = ref_loss(&rg);
                v[j] = v0;
                out[j] = (lp - lm) / (2 * eps);
            }
        }
    }
    sn_plan_free(rg.p);
    sn_graph_free(rg.g);
    unsetenv("SN_KERNELS");
    return ok;
}

static bool problem_new(problem *pb, lstm_case c, uint64_t seed) {
    memset(pb, 0, sizeof *pb);
    pb->c = c;
    int64_t B = c.B, T = c.T, D = c.D, U = c.U, G = 4 * U;
    sn_rng g;
    sn_rng_init(&g, seed, 0);
    pb->x = randv(&g, B * T * D, 1.0);
    pb->w = randv(&g, D * G, 1.0 / sqrt((double)D));
    pb->r = randv(&g, U * G, 1.0 / sqrt((double)U));
    pb->b = randv(&g, G, 0.3);
    if (!c.zero_states) {
        pb->h0 = randv(&g, B * U, 0.5);
        pb->c0 = randv(&g, B * U, 0.5);
    }
    pb->P = randv(&g, B * T * U, 1.0);
    pb->Q = randv(&g, B * U, 1.0);
    pb->S = randv(&g, B * U, c.no_c_loss ? 0.0 : 1.0);
    pb->y = dalloc(B * T * U);
    pb->hT = dalloc(B * U);
    pb->cT = dalloc(B * U);
    pb->dx = dalloc(B * T * D);
    pb->dw = dalloc(D * G);
    pb->dr = dalloc(U * G);
    pb->db = dalloc(G);
    pb->dh0 = dalloc(B * U);
    pb->dc0 = dalloc(B * U);
    if (!pb->x || !pb->w || !pb->r || !pb->b || !pb->P || !pb->Q || !pb->S || !pb->y ||
        !pb->hT || !pb->cT || !pb->dx || !pb->dw || !pb->dr || !pb->db || !pb->dh0 || !pb->dc0 ||
        (!c.zero_states && (!pb->h0 || !pb->c0)))
        return false;
    return reference(pb);
}

static void problem_free(problem *pb) {
    float *f[] = {pb->x, pb->w, pb->r, pb->b, pb->h0, pb->c0, pb->P, pb->Q, pb->S};
    double *d[] = {pb->y, pb->hT, pb->cT, pb->dx, pb->dw, pb->dr, pb->db, pb->dh0, pb->dc0};
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) free(f[i]);
    for (size_t i = 0; i < sizeof d / sizeof *d; i++) free(d[i]);
}

/* max |got - want| / max(1, max |want|): the error relative to the tensor's scale (gradient
 * entries near zero carry the absolute error of the large ones) */
static double scaled_err(const float *got, const double *want, int64_t n) {
    double e = 0, m = 1;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        e = d > e || d != d ? (d != d ? INFINITY : d) : e;
        m = fmax(m, fabs(want[i]));
    }
    return e / m;
}

/* Runs the wrapper (forward + backward, `runs` times on one handle: the weight gradients
 * must be overwritten, not accumulated) and compares everything with the reference. */
static void check_case(const char *name, lstm_case c, bool bf16, double tol) {
    problem pb;
    bool ok = problem_new(&pb, c, 11 + (uint64_t)c.T * 7 + (uint64_t)c.U);
    CHECK(ok, "%s: reference failed: %s", name, sn_last_error());
    int64_t B = c.B, T = c.T, D = c.D, U = c.U, G = 4 * U;
    sn_dnnl_rnn *l = NULL;
    sn_status s = ok ? sn_dnnl_lstm_new(&l, B, T, D, U, bf16) : SN_ERR_INVALID;
    if (ok && bf16 && s == SN_ERR_UNSUPPORTED) {
        char why[300];
        snprintf(why, sizeof why, "%s: %s", name, sn_last_error());
        sn_test_skip(why);
        problem_free(&pb);
        return;
    }
    if (ok) CHECK(s == SN_OK, "%s: sn_dnnl_rnn_new: %s", name, sn_last_error());
    float *out = l ? malloc(sizeof(float) * (size_t)(B * T * U + 2 * B * U + B * T * D + D * G +
                                                     U * G + G + 2 * B * U))
                   : NULL;
    if (out) {
        float *y = out, *hT = y + B * T * U, *cT = hT + B * U, *dx = cT + B * U,
              *dw = dx + B * T * D, *dr = dw + D * G, *db = dr + U * G, *dh0 = db + G,
              *dc0 = dh0 + B * U;
        sn_dnnl_rnn_fwd f = {pb.x, pb.w, pb.r, pb.b, pb.h0, pb.c0, y, hT, cT};
        sn_dnnl_rnn_bwd g = {pb.P, pb.Q, pb.S, dx, dw, dr, db, dh0, dc0};
        for (int run = 0; run < 2; run++) {
            CHECK_OK(sn_dnnl_rnn_forward(l, &f));
            CHECK_OK(sn_dnnl_rnn_backward(l, &f, &g));
            struct { const char *what; const float *got; const double *want; int64_t n; } t[] = {
                {"y", y, pb.y, B * T * U},       {"h_T", hT, pb.hT, B * U},
                {"c_T", cT, pb.cT, B * U},       {"dx", dx, pb.dx, B * T * D},
                {"dW", dw, pb.dw, D * G},        {"dR", dr, pb.dr, U * G},
                {"db", db, pb.db, G},            {"dh0", dh0, pb.dh0, B * U},
                {"dc0", dc0, pb.dc0, B * U}};
            double worst = 0;
            for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
                double e = scaled_err(t[i].got, t[i].want, t[i].n);
                CHECK(e <= tol, "%s (run %d): %s differs from the reference by %.3g of its "
                      "scale (tolerance %.3g)", name, run + 1, t[i].what, e, tol);
                worst = fmax(worst, e);
            }
            if (run == 1 && worst <= tol)
                printf("ok  %-34s worst scaled error %.2e (%s)\n", name, worst,
                       sn_dnnl_rnn_impl(l));
        }
    }
    free(out);
    sn_dnnl_rnn_free(l);
    problem_free(&pb);
}

/* The calls of op (the forward, node fwd) and of op's gradient in plan p: both on want_impl,
 * and the gradient's call linked to the forward's (sn_kcall.fwd), whose workspace it reads
 * instead of running the forward again. */
static void check_dnnl_linked(const char *name, const sn_plan *p, const sn_graph *g,
                              const char *op, sn_node fwd) {
    char grad_op[64];
    snprintf(grad_op, sizeof grad_op, "%s_grad", op);
    const char *impl[2] = {"", ""};
    int calls[2] = {-1, -1};
    for (int cl = 0; sn_plan_profile_entry(p, cl, NULL, NULL, NULL); cl++) {
        sn_node nd;
        const char *im;
        sn_plan_profile_entry(p, cl, &nd, &im, NULL);
        const char *o = sn_node_op_name(g, nd);
        int which = strcmp(o, op) == 0 ? 0 : strcmp(o, grad_op) == 0 ? 1 : -1;
        if (which >= 0) impl[which] = im, calls[which] = cl;
    }
    for (int k = 0; k < 2; k++)
        CHECK(strcmp(impl[k], want_impl) == 0, "%s: %s runs on '%s', expected %s", name,
              k ? grad_op : op, impl[k], want_impl);
    CHECK(calls[1] >= 0 && p->calls[calls[1]].fwd && p->calls[calls[1]].fwd->id == fwd,
          "%s: the gradient's call is not linked to the forward's (node %d)", name, (int)fwd);
}

/* The graph op lstm_layer on the CPU kernels (oneDNN) against the same reference: a plan
 * of the forward and the gradients of x, w, r, b, run twice (the weight gradients must be
 * overwritten), with keep_c (the final c read from row T) or without (the loss has no c term).
 * Checks that both calls run on oneDNN and that the planner linked the gradient's call to the
 * forward's (sn_kcall.fwd), whose workspace it reads instead of running the forward again. */
static void check_layer_op(const char *name, lstm_case c, double tol) {
    c.no_c_loss = !c.zero_states; /* given states: without keep_c; zero states: with it */
    bool keep_c = !c.no_c_loss;
    problem pb;
    bool ok = problem_new(&pb, c, 5 + (uint64_t)c.T * 3 + (uint64_t)c.U);
    CHECK(ok, "%s: reference failed: %s", name, sn_last_error());
    if (!ok) {
        problem_free(&pb);
        return;
    }
    int64_t B = c.B, T = c.T, D = c.D, U = c.U, G = 4 * U;
    sn_graph *g = sn_graph_new();
    sn_shape sh[6] = {{.ndim = 3, .dim = {B, T, D}}, {.ndim = 2, .dim = {D, G}},
                      {.ndim = 2, .dim = {U, G}},    {.ndim = 1, .dim = {G}},
                      {.ndim = 2, .dim = {B, U}},    {.ndim = 2, .dim = {B, U}}};
    const float *src[6] = {pb.x, pb.w, pb.r, pb.b, pb.h0, pb.c0};
    sn_node in[6];
    for (int i = 0; i < 6; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "in%d", i);
        in[i] = sn_input(g, nm, SN_F32, &sh[i]);
    }
    sn_node y = sn_lstm_layer(g, in[0], in[1], in[2], in[3], in[4], in[5], keep_c);
    sn_node seq = sn_rnn_layer_seq(g, y), hT = sn_rnn_layer_last_h(g, y);
    sn_node cT = keep_c ? sn_rnn_layer_last_c(g, y) : SN_NONE;
    sn_shape ys = {.ndim = 3, .dim = {B, T, U}}, hs = {.ndim = 2, .dim = {B, U}};
    sn_node loss = sn_add(g, sn_reduce_sum(g, sn_mul(g, seq, sn_const(g, SN_F32, &ys, pb.P)), 0, NULL, false),
                          sn_reduce_sum(g, sn_mul(g, hT, sn_const(g, SN_F32, &hs, pb.Q)), 0, NULL, false));
    if (keep_c)
        loss = sn_add(g, loss, sn_reduce_sum(g, sn_mul(g, cT, sn_const(g, SN_F32, &hs, pb.S)), 0,
                                             NULL, false));
    sn_node grads[4];
    CHECK_OK(sn_gradients(g, loss, 4, in, grads));
    sn_node targets[7] = {seq, hT, grads[0], grads[1], grads[2], grads[3], keep_c ? cT : seq};
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 7, targets, NULL));
    for (int i = 0; p && i < 6; i++) {
        float *d = sn_plan_buffer(p, in[i]);
        int64_t n = sn_shape_numel(&sh[i]);
        for (int64_t j = 0; j < n; j++) d[j] = src[i] ? src[i][j] : 0.0f;
    }
    for (int run = 0; p && run < 2; run++) {
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        struct { const char *what; sn_node n; const double *want; int64_t cnt; } t[] = {
            {"y", seq, pb.y, B * T * U},       {"h_T", hT, pb.hT, B * U},
            {"c_T", cT, pb.cT, B * U},         {"dx", grads[0], pb.dx, B * T * D},
            {"dW", grads[1], pb.dw, D * G},    {"dR", grads[2], pb.dr, U * G},
            {"db", grads[3], pb.db, G}};
        double worst = 0;
        for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
            if (t[i].n == SN_NONE) continue;
            double e = scaled_err(sn_plan_buffer(p, t[i].n), t[i].want, t[i].cnt);
            CHECK(e <= tol, "%s (run %d): %s differs from the reference by %.3g of its scale "
                  "(tolerance %.3g)", name, run + 1, t[i].what, e, tol);
            worst = fmax(worst, e);
        }
        if (run == 1 && worst <= tol) printf("ok  %-34s worst scaled error %.2e\n", name, worst);
    }
    if (p) check_dnnl_linked(name, p, g, "lstm_layer", y);
    sn_plan_free(p);
    sn_graph_free(g);
    problem_free(&pb);
}

/* The gradient kernel called alone, with no forward call to read (sn_kcall.fwd NULL): it runs
 * the forward itself and must give what the linked pair gives. */
static void check_grad_alone(void) {
    lstm_case c = {3, 4, 5, 6, false, false};
    problem pb;
    bool ok = problem_new(&pb, c, 99);
    CHECK(ok, "grad alone: reference failed: %s", sn_last_error());
    int64_t B = c.B, T = c.T, D = c.D, U = c.U, G = 4 * U;
    sn_attrs a = {.lstm = {.keep_c = true}};
    sn_kcall k = {.op = SN_OP_LSTM_LAYER_GRAD, .attr = &a, .n_in = 8};
    sn_shape sh[8] = {{.ndim = 3, .dim = {B, T, D}}, {.ndim = 2, .dim = {D, G}},
                      {.ndim = 2, .dim = {U, G}},    {.ndim = 1, .dim = {G}},
                      {.ndim = 2, .dim = {B, U}},    {.ndim = 2, .dim = {B, U}},
                      {.ndim = 3, .dim = {B, T + 1, U}}, {.ndim = 3, .dim = {B, T + 1, U}}};
    int64_t n_out = B * T * D + D * G + U * G + G;
    k.y = (sn_tdesc){.dtype = SN_F32, .shape = {.ndim = 1, .dim = {n_out}}};
    float *dy = calloc((size_t)(B * (T + 1) * U), sizeof *dy), *out = malloc(sizeof *out * (size_t)n_out);
    /* d loss / d output: P on the h rows, plus Q on the last (h_T is that row), S on c_T's */
    for (int64_t b = 0; dy && b < B; b++)
        for (int64_t t = 0; t <= T; t++)
            for (int64_t j = 0; j < U; j++)
                dy[(b * (T + 1) + t) * U + j] =
                    t < T ? pb.P[(b * T + t) * U + j] + (t == T - 1 ? pb.Q[b * U + j] : 0.0f)
                          : pb.S[b * U + j];
    const void *bufs[8] = {pb.x, pb.w, pb.r, pb.b, pb.h0, pb.c0, NULL, dy};
    for (int i = 0; i < 8; i++) k.x[i] = (sn_tdesc){.dtype = SN_F32, .shape = sh[i]}, k.in[i] = bufs[i];
    k.out = out;
    const sn_kernel *kern = sn_kernel_select(sn_cpu_kernels(), &k);
    CHECK(kern && strcmp(kern->impl, want_impl) == 0, "grad alone: kernel %s, expected %s",
          kern ? kern->impl : "none", want_impl);
    size_t scratch = 0;
    bool ready = ok && dy && out && kern && kern->prepare && kern->prepare(&k, &scratch) == SN_OK;
    CHECK(ready, "grad alone: prepare failed: %s", sn_last_error());
    void *scratch_buf = ready && scratch ? malloc(scratch) : NULL;
    k.scratch = scratch_buf;
    k.scratch_bytes = scratch;
    ready = ready && (!scratch || scratch_buf);
    if (ready) {
        CHECK_OK(kern->run(&k));
        const float *got = out;
        struct { const char *what; const double *want; int64_t n; } t[] = {
            {"dx", pb.dx, B * T * D}, {"dW", pb.dw, D * G}, {"dR", pb.dr, U * G}, {"db", pb.db, G}};
        for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
            double e = scaled_err(got, t[i].want, t[i].n);
            CHECK(e <= 1e-4, "grad alone: %s differs from the reference by %.3g of its scale",
                  t[i].what, e);
            got += t[i].n;
        }
        printf("ok  lstm_layer_grad alone (forward rerun)\n");
    }
    if (kern && kern->release) kern->release(&k);
    free(scratch_buf);
    free(dy);
    free(out);
    problem_free(&pb);
}

/* The graph op gru_layer (Keras's reset_after=True = oneDNN's LBR-GRU) on the CPU kernels
 * against the same graph in double on the reference kernels (backend/ref/ref_rnn_layer.c,
 * itself checked against the loop's GRU ops and by finite differences in test_rnn.c): y and
 * the gradients of x, w, r and the 4-part bias, twice per plan; both calls on oneDNN, linked. */
static void check_gru_layer_op(const char *name, int64_t B, int64_t T, int64_t D, int64_t U) {
    int64_t G = 3 * U;
    sn_shape sh[6] = {{.ndim = 3, .dim = {B, T, D}}, {.ndim = 2, .dim = {D, G}},
                      {.ndim = 2, .dim = {U, G}},    {.ndim = 1, .dim = {4 * U}},
                      {.ndim = 2, .dim = {B, U}},    {.ndim = 3, .dim = {B, T, U}}};
    double sc[6] = {1.0, 1.0 / sqrt((double)D), 1.0 / sqrt((double)U), 0.3, 0.5, 1.0};
    sn_rng rg;
    sn_rng_init(&rg, 1234, 0);
    float *v[6];
    for (int i = 0; i < 6; i++) v[i] = randv(&rg, sn_shape_numel(&sh[i]), sc[i]);
    double *want[5] = {0};
    float *got[5] = {0};
    bool ok = true;
    for (int k = 0; k < 2 && ok; k++) { /* 0: double on the reference kernels, 1: f32 */
        sn_graph *g = sn_graph_new();
        sn_node in[5];
        for (int i = 0; i < 5; i++) {
            int64_t n = sn_shape_numel(&sh[i]);
            double *d = malloc(sizeof *d * (size_t)n);
            for (int64_t j = 0; j < n; j++) d[j] = v[i][j];
            in[i] = k ? sn_const(g, SN_F32, &sh[i], v[i]) : sn_const(g, SN_F64, &sh[i], d);
            free(d);
        }
        sn_node y = sn_gru_layer(g, in[0], in[1], in[2], in[3], in[4]);
        sn_node P = k ? sn_const(g, SN_F32, &sh[5], v[5]) : sn_cast(g, sn_const(g, SN_F32, &sh[5], v[5]), SN_F64);
        sn_node loss = sn_reduce_sum(g, sn_mul(g, y, P), 0, NULL, false), grads[4];
        CHECK_OK(sn_gradients(g, loss, 4, in, grads));
        sn_node tg[5] = {y, grads[0], grads[1], grads[2], grads[3]};
        sn_plan *p = NULL;
        CHECK_OK(sn_plan_new(&p, g, 5, tg, NULL));
        ok = p != NULL;
        for (int run = 0; ok && run < 1 + k; run++) CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        int64_t cnt[5] = {B * T * U, B * T * D, D * G, U * G, 4 * U};
        for (int i = 0; ok && i < 5; i++) {
            size_t bytes = (size_t)cnt[i] * (k ? sizeof(float) : sizeof(double));
            void *dst = malloc(bytes);
            memcpy(dst, sn_plan_buffer(p, tg[i]), bytes);
            if (k) got[i] = dst;
            else want[i] = dst;
        }
        if (ok && k) check_dnnl_linked(name, p, g, "gru_layer", y);
        sn_plan_free(p);
        sn_graph_free(g);
    }
    const char *what[5] = {"y", "dx", "dW", "dR", "db"};
    int64_t cnt[5] = {B * T * U, B * T * D, D * G, U * G, 4 * U};
    double worst = 0;
    for (int i = 0; ok && i < 5; i++) {
        double e = scaled_err(got[i], want[i], cnt[i]);
        CHECK(e <= 1e-4, "%s: %s differs from the reference by %.3g of its scale", name, what[i], e);
        worst = fmax(worst, e);
    }
    if (ok && worst <= 1e-4) printf("ok  %-34s worst scaled error %.2e\n", name, worst);
    for (int i = 0; i < 6; i++) free(v[i]);
    for (int i = 0; i < 5; i++) free(want[i]), free(got[i]);
}

int main(void) {
    const char *rnn = sn_env(SN_ENV_RNN);
    bool loop = rnn && strcmp(rnn, "loop") == 0;
    sn_dnnl_rnn *l = NULL;
    sn_status s = sn_dnnl_lstm_new(&l, 2, 3, 4, 5, false);
    if (s == SN_ERR_UNSUPPORTED) { /* no oneDNN: its wrapper says so, the loop's kernels run */
        CHECK(l == NULL && strstr(sn_last_error(), "no oneDNN"), "unsupported, but: %s",
              sn_last_error());
        printf("this build has no oneDNN: the whole-layer ops on the loop's kernels\n");
        loop = true;
    } else {
        CHECK_OK(s);
        sn_dnnl_rnn_free(l);
        l = NULL;
        CHECK_ERR(sn_dnnl_lstm_new(&l, 0, 3, 4, 5, false), SN_ERR_INVALID, "B=0");
    }
    want_impl = loop ? "loop" : "dnnl";
    /* f32 against double: f32 GEMMs and exp/tanh leave ~1e-6 */
    const double f32_tol = 1e-4;
    /* bf16: 8 significant bits in the GEMMs' operands (and the saved activations): ~1e-2 */
    const double bf16_tol = 5e-2;
    if (!loop) { /* the oneDNN wrapper itself */
        check_case("f32 given states", (lstm_case){3, 5, 4, 6, false, false}, false, f32_tol);
        check_case("f32 zero states, T=1", (lstm_case){3, 1, 4, 6, true, false}, false, f32_tol);
        check_case("f32 zero states, T=5", (lstm_case){3, 5, 4, 6, true, false}, false, f32_tol);
        check_case("f32 B=16 T=6 D=24 U=40", (lstm_case){16, 6, 24, 40, true, false}, false,
                   f32_tol);
        check_case("bf16 given states", (lstm_case){3, 5, 4, 6, false, false}, true, bf16_tol);
        check_case("bf16 B=16 T=6 D=24 U=40", (lstm_case){16, 6, 24, 40, true, false}, true,
                   bf16_tol);
    }
    check_layer_op("graph op, given states", (lstm_case){3, 5, 4, 6, false, false}, f32_tol);
    check_layer_op("graph op keep_c, zero states", (lstm_case){16, 6, 24, 40, true, false}, f32_tol);
    check_layer_op("graph op keep_c, T=1", (lstm_case){4, 1, 3, 5, true, false}, f32_tol);
    check_grad_alone();
    check_gru_layer_op("gru graph op B=3 T=5 D=4 U=6", 3, 5, 4, 6);
    check_gru_layer_op("gru graph op B=16 T=6 D=24 U=40", 16, 6, 24, 40);
    check_gru_layer_op("gru graph op B=2 T=1 D=3 U=17", 2, 1, 3, 17);
    return sn_test_finish("test_rnn_dnnl");
}
