/* Sequence ops and layers: finite-difference gradient checks in double for the LSTM, GRU (both
 * reset_after variants) and embedding (gather) ops; the fast f32 CPU kernels against the reference kernels (forward and
 * gradients, both thread splits); an out-of-range id failing with its value named; and an
 * Embedding -> LSTM -> Dense model learning a tiny corpus (loss well below log(vocab)). */
#include <stdlib.h>

#include "graph/op_rnn.h"
#include "sinter/nn.h"
#include "fd_test_util.h"
#include "sn_test.h"

static sn_rng rng;

typedef struct gc_in {
    sn_shape shape;
    bool wrt;      /* differentiate with respect to it */
    bool indices;  /* int32 ids in [0, range) */
    int64_t range;
} gc_in;

typedef sn_node (*gc_build)(sn_graph *g, const sn_node *in);

/* loss = sum(build(...) * random projection); checks d loss / d every wrt input. */
static void gradcheck(const char *name, int n, const gc_in *ins, gc_build build, double tol) {
    sn_graph *g = sn_graph_new();
    sn_node in[6], wrt[6], grads[6];
    int nw = 0, wi[6];
    for (int i = 0; i < n; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "in%d", i);
        in[i] = sn_input(g, nm, ins[i].indices ? SN_I32 : SN_F64, &ins[i].shape);
        if (ins[i].wrt) {
            wi[nw] = i;
            wrt[nw++] = in[i];
        }
    }
    sn_node y = build(g, in);
    sn_shape ys = sn_node_shape(g, y);
    int64_t ny = sn_shape_numel(&ys);
    double *r = malloc(sizeof *r * (size_t)ny);
    for (int64_t i = 0; i < ny; i++) r[i] = sn_rng_normal(&rng);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F64, &ys, r)), 0, NULL, false);
    free(r);
    CHECK_OK(sn_gradients(g, loss, nw, wrt, grads));
    sn_node targets[7] = {loss};
    for (int i = 0; i < nw; i++) targets[1 + i] = grads[i];
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 1 + nw, targets, NULL));
    if (!p) {
        sn_graph_free(g);
        return;
    }
    for (int i = 0; i < n; i++) {
        int64_t k = sn_shape_numel(&ins[i].shape);
        void *buf = sn_plan_buffer(p, in[i]);
        for (int64_t j = 0; j < k; j++) {
            if (ins[i].indices) ((int32_t *)buf)[j] = (int32_t)sn_rng_below(&rng, (uint64_t)ins[i].range);
            else ((double *)buf)[j] = 0.7 * sn_rng_normal(&rng);
        }
    }
    fd_loss(p, loss);
    int bad = 0;
    double worst = 0;
    for (int k = 0; k < nw; k++) {
        int64_t cnt = sn_shape_numel(&ins[wi[k]].shape);
        double *x = sn_plan_buffer(p, in[wi[k]]);
        double *ga = malloc(sizeof *ga * (size_t)cnt);
        fd_loss(p, loss); /* the gradients at the unperturbed point (the last run moved it) */
        memcpy(ga, sn_plan_buffer(p, grads[k]), sizeof *ga * (size_t)cnt);
        char what[96];
        snprintf(what, sizeof what, "%s: d/d input %d", name, wi[k]);
        bad += fd_check(p, loss, x, ga, cnt, tol, what, &worst);
        free(ga);
    }
    CHECK(bad == 0, "%s: %d gradient entries off by more than %g (worst %.3g)", name, bad, tol,
          worst);
    if (bad == 0) printf("ok  %-28s worst relative error %.2e\n", name, worst);
    sn_plan_free(p);
    sn_graph_free(g);
}

enum { B = 2, T = 4, U = 3 };

/* Every output the layers use: the h sequence, the last h and the last c. */
static sn_node b_lstm(sn_graph *g, const sn_node *x) {
    sn_node ws = sn_lstm_seq(g, x[0], x[1], x[2], x[3]);
    sn_node hs = sn_reshape(g, sn_rnn_slot_seq(g, ws, U, SN_LSTM_H),
                            &(sn_shape){.ndim = 2, .dim = {B, T * U}});
    return sn_concat(g, 3, (sn_node[]){hs, sn_rnn_slot_last(g, ws, U, SN_LSTM_H),
                                       sn_rnn_slot_last(g, ws, U, SN_LSTM_C)}, 1);
}

static sn_node b_gru(sn_graph *g, const sn_node *x) {
    sn_node ws = sn_gru_seq(g, x[0], x[1], x[2], x[3]);
    sn_node hs = sn_reshape(g, sn_rnn_slot_seq(g, ws, U, SN_GRU_H),
                            &(sn_shape){.ndim = 2, .dim = {B, T * U}});
    return sn_concat(g, 2, (sn_node[]){hs, sn_rnn_slot_last(g, ws, U, SN_GRU_H)}, 1);
}

static sn_node b_gru_rb(sn_graph *g, const sn_node *x) {
    sn_node ws = sn_gru_rb_seq(g, x[0], x[1], x[2]);
    sn_node hs = sn_reshape(g, sn_rnn_slot_seq(g, ws, U, SN_GRU_H),
                            &(sn_shape){.ndim = 2, .dim = {B, T * U}});
    return sn_concat(g, 2, (sn_node[]){hs, sn_rnn_slot_last(g, ws, U, SN_GRU_H)}, 1);
}

static sn_node b_gather(sn_graph *g, const sn_node *x) { return sn_gather(g, x[0], x[1]); }

/* The whole-layer op (x, w, r, b, h0, c0): the h sequence and the last h, and with keep_c the
 * last c, whose gradient enters the backward pass as the final cell state's. */
static sn_node lstm_layer_outputs(sn_graph *g, const sn_node *x, bool keep_c) {
    sn_node y = sn_lstm_layer(g, x[0], x[1], x[2], x[3], x[4], x[5], keep_c);
    sn_node hs = sn_reshape(g, sn_rnn_layer_seq(g, y), &(sn_shape){.ndim = 2, .dim = {B, T * U}});
    sn_node parts[3] = {hs, sn_rnn_layer_last_h(g, y), keep_c ? sn_rnn_layer_last_c(g, y) : 0};
    return sn_concat(g, keep_c ? 3 : 2, parts, 1);
}
/* gru_layer (x, w, r, b [2, 3U] mapped, h0): the h sequence and the last h. */
static sn_node b_gru_layer(sn_graph *g, const sn_node *x) {
    sn_node y = sn_gru_layer(g, x[0], x[1], x[2], sn_gru_layer_bias(g, x[3]), x[4]);
    sn_node hs = sn_reshape(g, sn_rnn_layer_seq(g, y), &(sn_shape){.ndim = 2, .dim = {B, T * U}});
    return sn_concat(g, 2, (sn_node[]){hs, sn_rnn_layer_last_h(g, y)}, 1);
}

/* The same GRU on the loop's ops: x @ w + input bias, gru (recurrent bias), h0. */
static sn_node b_gru_loop(sn_graph *g, const sn_node *x) {
    sn_shape xs = sn_node_shape(g, x[0]);
    int64_t D = xs.dim[2];
    sn_node bin = sn_reshape(g, sn_slice(g, x[3], (int64_t[]){0, 0}, (int64_t[]){1, 3 * U}),
                             &(sn_shape){.ndim = 1, .dim = {3 * U}});
    sn_node brec = sn_reshape(g, sn_slice(g, x[3], (int64_t[]){1, 0}, (int64_t[]){1, 3 * U}),
                              &(sn_shape){.ndim = 1, .dim = {3 * U}});
    sn_node xw = sn_bias_add(g, sn_matmul(g, sn_reshape(g, x[0], &(sn_shape){.ndim = 2, .dim = {B * T, D}}),
                                          x[1], false, false), bin);
    xw = sn_reshape(g, xw, &(sn_shape){.ndim = 3, .dim = {B, T, 3 * U}});
    sn_node ws = sn_gru_seq(g, xw, x[2], brec, x[4]);
    sn_node hs = sn_reshape(g, sn_rnn_slot_seq(g, ws, U, SN_GRU_H),
                            &(sn_shape){.ndim = 2, .dim = {B, T * U}});
    return sn_concat(g, 2, (sn_node[]){hs, sn_rnn_slot_last(g, ws, U, SN_GRU_H)}, 1);
}

/* gru_layer against the loop's GRU ops in double (reference kernels): outputs and the
 * gradients of x, w, r and Keras's bias, which go through the bias mapping. */
static void test_gru_layer_vs_loop(void) {
    enum { D = 2 };
    sn_shape sh[5] = {{.ndim = 3, .dim = {B, T, D}}, {.ndim = 2, .dim = {D, 3 * U}},
                      {.ndim = 2, .dim = {U, 3 * U}}, {.ndim = 2, .dim = {2, 3 * U}},
                      {.ndim = 2, .dim = {B, U}}};
    double res[2][4][64], out[2][B * (T + 1) * U];
    sn_rng r0 = rng;
    for (int k = 0; k < 2; k++) {
        sn_rng r = r0; /* the same inputs for both */
        sn_graph *g = sn_graph_new();
        sn_node in[5];
        for (int i = 0; i < 5; i++) {
            int64_t n = sn_shape_numel(&sh[i]);
            double v[64];
            for (int64_t j = 0; j < n; j++) v[j] = 0.7 * sn_rng_normal(&r);
            in[i] = sn_const(g, SN_F64, &sh[i], v);
        }
        sn_node y = k ? b_gru_layer(g, in) : b_gru_loop(g, in);
        sn_node loss = sn_reduce_sum(g, sn_mul(g, y, y), 0, NULL, false), grads[4];
        CHECK_OK(sn_gradients(g, loss, 4, in, grads));
        sn_plan *p = NULL;
        CHECK_OK(sn_plan_new(&p, g, 5, (sn_node[]){y, grads[0], grads[1], grads[2], grads[3]}, NULL));
        CHECK_OK(sn_plan_run(p, 1, NULL, NULL));
        memcpy(out[k], sn_plan_buffer(p, y), sizeof(double) * B * (T + 1) * U);
        for (int i = 0; i < 4; i++)
            memcpy(res[k][i], sn_plan_buffer(p, grads[i]), sizeof(double) * (size_t)sn_shape_numel(&sh[i]));
        sn_plan_free(p);
        sn_graph_free(g);
    }
    double worst = 0;
    for (int j = 0; j < B * (T + 1) * U; j++) worst = fmax(worst, fabs(out[0][j] - out[1][j]));
    for (int i = 0; i < 4; i++)
        for (int64_t j = 0; j < sn_shape_numel(&sh[i]); j++)
            worst = fmax(worst, fabs(res[0][i][j] - res[1][i][j]));
    CHECK(worst < 1e-12, "gru_layer vs the loop's GRU: outputs or gradients differ by %.3g", worst);
    if (worst < 1e-12) printf("ok  gru_layer = loop GRU        max difference %.2e\n", worst);
}

static sn_node b_lstm_layer(sn_graph *g, const sn_node *x) { return lstm_layer_outputs(g, x, false); }
static sn_node b_lstm_layer_c(sn_graph *g, const sn_node *x) { return lstm_layer_outputs(g, x, true); }

static void test_gradchecks(void) {
    /* Initial states are inputs but get no gradient (op_rnn.h); their values still enter the
     * checked gradients (c0 in df, h0 in d r). */
    gc_in lstm[4] = {{.shape = {.ndim = 3, .dim = {B, T, 4 * U}}, .wrt = true},
                     {.shape = {.ndim = 2, .dim = {U, 4 * U}}, .wrt = true},
                     {.shape = {.ndim = 2, .dim = {B, U}}},
                     {.shape = {.ndim = 2, .dim = {B, U}}}};
    gradcheck("lstm", 4, lstm, b_lstm, 1e-7);
    enum { D = 2 };
    gc_in layer[6] = {{.shape = {.ndim = 3, .dim = {B, T, D}}, .wrt = true},
                      {.shape = {.ndim = 2, .dim = {D, 4 * U}}, .wrt = true},
                      {.shape = {.ndim = 2, .dim = {U, 4 * U}}, .wrt = true},
                      {.shape = {.ndim = 1, .dim = {4 * U}}, .wrt = true},
                      {.shape = {.ndim = 2, .dim = {B, U}}},
                      {.shape = {.ndim = 2, .dim = {B, U}}}};
    gradcheck("lstm_layer", 6, layer, b_lstm_layer, 1e-7);
    gradcheck("lstm_layer keep_c", 6, layer, b_lstm_layer_c, 1e-7);
    gc_in gl[5] = {{.shape = {.ndim = 3, .dim = {B, T, D}}, .wrt = true},
                   {.shape = {.ndim = 2, .dim = {D, 3 * U}}, .wrt = true},
                   {.shape = {.ndim = 2, .dim = {U, 3 * U}}, .wrt = true},
                   {.shape = {.ndim = 2, .dim = {2, 3 * U}}, .wrt = true},
                   {.shape = {.ndim = 2, .dim = {B, U}}}};
    gradcheck("gru_layer", 5, gl, b_gru_layer, 1e-7);
    gc_in gru[4] = {{.shape = {.ndim = 3, .dim = {B, T, 3 * U}}, .wrt = true},
                    {.shape = {.ndim = 2, .dim = {U, 3 * U}}, .wrt = true},
                    {.shape = {.ndim = 1, .dim = {3 * U}}, .wrt = true},
                    {.shape = {.ndim = 2, .dim = {B, U}}}};
    gradcheck("gru", 4, gru, b_gru, 1e-7);
    gc_in gru_rb[3] = {{.shape = {.ndim = 3, .dim = {B, T, 3 * U}}, .wrt = true},
                       {.shape = {.ndim = 2, .dim = {U, 3 * U}}, .wrt = true},
                       {.shape = {.ndim = 2, .dim = {B, U}}}};
    gradcheck("gru reset_after=False", 3, gru_rb, b_gru_rb, 1e-7);
    /* ids repeat (12 draws from 5 rows), so the scatter-add accumulates */
    gc_in emb[2] = {{.shape = {.ndim = 2, .dim = {5, 3}}, .wrt = true},
                    {.shape = {.ndim = 2, .dim = {3, 4}}, .indices = true, .range = 5}};
    gradcheck("embedding (gather)", 2, emb, b_gather, 1e-7);
}

/* ---- fast kernels against the reference --------------------------------------------------- */

/* Runs the op and the gradients of sum(out * r) w.r.t. its float inputs on `kernels` ("ref" or
 * the CPU table); writes every result, concatenated, into *res. */
enum { K_LSTM, K_GRU, K_GRU_RB }; /* the op run_f32 checks (K_GRU_RB: reset_after=False) */

static int64_t run_f32(int kind, int64_t b, int64_t t, int64_t u, int64_t d, bool ref, float **res) {
    bool gru = kind != K_LSTM;
    if (ref) setenv("SN_KERNELS", "ref", 1);
    else unsetenv("SN_KERNELS");
    sn_rng r;
    sn_rng_init(&r, 7, 0);
    sn_graph *g = sn_graph_new();
    int64_t G = (gru ? 3 : 4) * u;
    sn_shape xs = {.ndim = 3, .dim = {b, t, d}}, ks = {.ndim = 2, .dim = {d, G}},
             rs = {.ndim = 2, .dim = {u, G}}, hs = {.ndim = 2, .dim = {b, u}},
             bs = {.ndim = 1, .dim = {G}};
    sn_shape shapes[5] = {xs, ks, rs, hs, gru ? bs : hs};
    sn_node in[5];
    for (int i = 0; i < 5; i++) {
        int64_t n = sn_shape_numel(&shapes[i]);
        float *v = malloc(sizeof *v * (size_t)n);
        double sc = i == 1 || i == 2 ? 1.0 / sqrt((double)(i == 1 ? d : u)) : 0.5;
        for (int64_t j = 0; j < n; j++) v[j] = (float)(sc * sn_rng_normal(&r));
        in[i] = sn_const(g, SN_F32, &shapes[i], v);
        free(v);
    }
    sn_node xw = sn_reshape(g, sn_matmul(g, sn_reshape(g, in[0], &(sn_shape){.ndim = 2, .dim = {b * t, d}}), in[1], false, false),
                            &(sn_shape){.ndim = 3, .dim = {b, t, G}});
    sn_node ws = kind == K_GRU_RB ? sn_gru_rb_seq(g, xw, in[2], in[3])
                 : gru            ? sn_gru_seq(g, xw, in[2], in[4], in[3])
                                  : sn_lstm_seq(g, xw, in[2], in[3], in[4]);
    sn_shape wss = sn_node_shape(g, ws);
    int64_t nw = sn_shape_numel(&wss);
    float *pr = malloc(sizeof *pr * (size_t)nw);
    for (int64_t j = 0; j < nw; j++) pr[j] = (float)sn_rng_normal(&r);
    /* only the output slots (h, and c for the LSTM) carry gradient, as in the layers */
    sn_node hsq = sn_rnn_slot_seq(g, ws, u, 0);
    sn_shape hss = sn_node_shape(g, hsq);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, hsq, sn_const(g, SN_F32, &hss, pr)), 0, NULL, false);
    if (!gru) {
        sn_node cl = sn_rnn_slot_last(g, ws, u, SN_LSTM_C);
        loss = sn_add(g, loss, sn_reduce_sum(g, sn_mul(g, cl, cl), 0, NULL, false));
    }
    free(pr);
    sn_node wrt[3] = {in[1], in[2], in[4]}, grads[3];
    int nwrt = kind == K_GRU ? 3 : 2;
    CHECK_OK(sn_gradients(g, loss, nwrt, wrt, grads));
    sn_node targets[4] = {ws, grads[0], grads[1], grads[2]};
    sn_plan *p = NULL;
    CHECK_OK(sn_plan_new(&p, g, 1 + nwrt, targets, NULL));
    int64_t total = 0;
    *res = NULL;
    if (p && sn_plan_run(p, 1, NULL, NULL) == SN_OK) {
        for (int i = 0; i <= nwrt; i++) {
            sn_shape s = sn_node_shape(g, targets[i]);
            total += sn_shape_numel(&s);
        }
        *res = malloc(sizeof(float) * (size_t)total);
        int64_t at = 0;
        for (int i = 0; i <= nwrt; i++) {
            sn_shape s = sn_node_shape(g, targets[i]);
            memcpy(*res + at, sn_plan_buffer(p, targets[i]), sizeof(float) * (size_t)sn_shape_numel(&s));
            at += sn_shape_numel(&s);
        }
    } else {
        CHECK(0, "run failed: %s", sn_last_error());
    }
    sn_plan_free(p);
    sn_graph_free(g);
    unsetenv("SN_KERNELS");
    return total;
}

static void compare_fast(const char *name, int gru, int64_t b, int64_t t, int64_t u, int64_t d) {
    float *fast = NULL, *ref = NULL;
    int64_t n1 = run_f32(gru, b, t, u, d, false, &fast);
    int64_t n2 = run_f32(gru, b, t, u, d, true, &ref);
    CHECK(n1 == n2 && n1 > 0, "%s: result sizes %lld vs %lld", name, (long long)n1, (long long)n2);
    double worst = 0;
    for (int64_t i = 0; fast && ref && i < n1 && n1 == n2; i++) {
        double e = fabs((double)fast[i] - ref[i]) / fmax(1.0, fabs((double)ref[i]));
        if (e > worst || e != e) worst = e != e ? INFINITY : e;
    }
    /* f32 polynomial sigmoid/tanh and a different summation order against double: a few ulp
     * per step, growing slowly along the sequence */
    CHECK(worst < 2e-4, "%s: fast vs reference worst relative error %.3g", name, worst);
    printf("ok  %-28s fast vs ref worst relative error %.2e\n", name, worst);
    free(fast);
    free(ref);
}

static void test_fast_vs_ref(void) {
    compare_fast("lstm rows split", K_LSTM, 5, 7, 6, 4);
    compare_fast("lstm units split (B=1)", K_LSTM, 1, 3, 200, 5);
    compare_fast("lstm rows, GEMV (B=2)", K_LSTM, 2, 4, 37, 5);
    compare_fast("gru", K_GRU, 5, 7, 6, 4);
    compare_fast("gru B=1", K_GRU, 1, 5, 9, 3);
    compare_fast("gru reset_before", K_GRU_RB, 5, 7, 6, 4);
    compare_fast("gru reset_before B=1 (GEMV)", K_GRU_RB, 1, 5, 9, 3);
    compare_fast("gru reset_before B=3", K_GRU_RB, 3, 6, 40, 7);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void test_bad_id(void) {
    sn_graph *g = sn_graph_new();
    float tab[6] = {1, 2, 3, 4, 5, 6};
    int32_t ids[3] = {0, 3, 1};
    sn_node t = sn_const(g, SN_F32, &(sn_shape){.ndim = 2, .dim = {3, 2}}, tab);
    sn_node ix = sn_const(g, SN_I32, &(sn_shape){.ndim = 1, .dim = {3}}, ids);
    sn_tensor *out = NULL;
    CHECK_ERR(sn_eval(g, sn_gather(g, t, ix), "cpu:0", &out), SN_ERR_INVALID, "index 3 at position 1");
    sn_tensor_free(out);
    sn_graph_free(g);
    CHECK(sn_layer_lstm(0, false) == NULL && strstr(sn_last_error(), "units is 0"),
          "LSTM(0) accepted: %s", sn_last_error());
    sn_rnn_layer_opts o = sn_lstm_layer_defaults(4);
    o.return_state = true;
    CHECK(sn_layer_lstm_ex(&o) == NULL && strstr(sn_last_error(), "return_state"),
          "return_state in Sequential accepted: %s", sn_last_error());
}

/* ---- learning ------------------------------------------------------------------------------ */

static sn_model *tiny_model(int64_t vocab) {
    sn_model *m = sn_sequential_new("tiny_char");
    sn_model_add(m, sn_layer_embedding(vocab, 8));
    sn_model_add(m, sn_layer_lstm(32, true));
    sn_model_add(m, sn_layer_dense(vocab, SN_ACT_NONE));
    return m;
}

/* The stepper's logits at the last of L ids (fed at once, then one per call after a reset)
 * against predict's distribution at that position; then sampling checks. */
static void check_stepper(sn_model *m, sn_stepper *st, const float *xd, int64_t L, int64_t vocab,
                          const char *what) {
    sn_tensor *x1 = NULL, *p = NULL;
    CHECK_OK(sn_tensor_new(&x1, SN_F32, &(sn_shape){.ndim = 2, .dim = {1, L}}));
    if (!x1) return;
    memcpy(sn_tensor_data(x1), xd, sizeof(float) * (size_t)L);
    CHECK_OK(sn_model_predict(m, x1, &p));
    const float *lg = NULL;
    int64_t nc = 0;
    double worst_all = 0, worst_one = 0;
    if (p) {
        const float *pp = (const float *)sn_tensor_data(p) + (L - 1) * vocab;
        /* pass 2 moves the carried states between plans, as generation does (the prompt at
         * once, then one id per call): a ids, 1, b ids (the first plan again when a == b),
         * 1; each plan reads them where the last run left them */
        for (int pass = 0; pass < 3; pass++) {
            sn_stepper_reset(st);
            if (pass == 0) {
                CHECK_OK(sn_stepper_run(st, xd, L, &lg, &nc));
            } else if (pass == 1) {
                for (int64_t j = 0; j < L; j++) CHECK_OK(sn_stepper_run(st, xd + j, 1, &lg, &nc));
            } else {
                int64_t a = (L - 2) / 2, b = L - 2 - a;
                CHECK_OK(sn_stepper_run(st, xd, a, &lg, &nc));
                CHECK_OK(sn_stepper_run(st, xd + a, 1, &lg, &nc));
                CHECK_OK(sn_stepper_run(st, xd + a + 1, b, &lg, &nc));
                CHECK_OK(sn_stepper_run(st, xd + L - 1, 1, &lg, &nc));
            }
            CHECK(nc == vocab, "stepper classes %lld, expected %lld", (long long)nc, (long long)vocab);
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < vocab; k++) mx = fmax(mx, lg[k]);
            for (int64_t k = 0; k < vocab; k++) sum += exp(lg[k] - mx);
            for (int64_t k = 0; k < vocab; k++) {
                double e = fabs(exp(lg[k] - mx) / sum - pp[k]);
                double *w = pass == 0 ? &worst_all : &worst_one; /* passes 1, 2: several calls */
                if (e > *w) *w = e;
            }
        }
        CHECK(worst_all < 1e-5 && worst_one < 1e-5, "%s: stepper vs predict: %.3g (one call), "
              "%.3g (one step per call)", what, worst_all, worst_one);
        if (worst_all < 1e-5 && worst_one < 1e-5)
            printf("ok  stepper vs predict, %s: %.2e / %.2e\n", what, worst_all, worst_one);
        int32_t a = -1, b = -2, c2 = -3;
        CHECK_OK(sn_sample_logits(lg, vocab, 1.0, 9, 5, &a));
        CHECK_OK(sn_sample_logits(lg, vocab, 1.0, 9, 5, &b));
        CHECK(a == b && a >= 0 && a < vocab, "sampling not deterministic: %d then %d", a, b);
        /* a near-zero temperature is greedy */
        CHECK_OK(sn_sample_logits(lg, vocab, 1e-6, 1, 1, &c2));
        int32_t best = 0;
        for (int64_t k = 1; k < vocab; k++) if (lg[k] > lg[best]) best = (int32_t)k;
        CHECK(c2 == best, "temperature 1e-6 drew %d, argmax %d", c2, best);
        CHECK_ERR(sn_sample_logits(lg, vocab, 0.0, 1, 1, &c2), SN_ERR_INVALID, "temperature 0");
    }
    sn_tensor_free(x1);
    sn_tensor_free(p);
}

static void test_learns(void) {
    const char *text = "hello world, hello sinter. ";
    int64_t len = (int64_t)strlen(text), L = 12, N = 64, vocab = 0;
    int map[256];
    memset(map, -1, sizeof map);
    for (int64_t i = 0; i < len; i++)
        if (map[(unsigned char)text[i]] < 0) map[(unsigned char)text[i]] = (int)vocab++;
    sn_tensor *x = NULL, *y = NULL;
    CHECK_OK(sn_tensor_new(&x, SN_F32, &(sn_shape){.ndim = 2, .dim = {N, L}}));
    CHECK_OK(sn_tensor_new(&y, SN_I32, &(sn_shape){.ndim = 2, .dim = {N, L}}));
    if (!x || !y) return;
    float *xd = sn_tensor_data(x);
    int32_t *yd = sn_tensor_data(y);
    for (int64_t s = 0; s < N; s++)
        for (int64_t j = 0; j < L; j++) {
            int64_t at = (s * 5 + j) % len;
            xd[s * L + j] = (float)map[(unsigned char)text[at]];
            yd[s * L + j] = map[(unsigned char)text[(at + 1) % len]];
        }
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&ds, 2, (sn_tensor *[]){x, y}));
    CHECK_OK(sn_dataset_batch(&ds, 16, true));
    sn_model *m = tiny_model(vocab);
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {L}}, 3));
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer.learning_rate = 0.02;
    CHECK_OK(sn_model_compile(m, &co));
    sn_fit_opts fo = sn_fit_defaults();
    fo.epochs = 40;
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, ds, &fo, &h));
    double first = sn_history_get(h, "loss", 0), last = sn_history_get(h, "loss", 39);
    /* the text is deterministic given a few characters of context: the loss must fall far
     * below the uniform guess log(vocab) */
    CHECK(last < 0.25 * log((double)vocab) && first > last,
          "loss went from %.4f to %.4f (log(vocab) = %.4f)", first, last, log((double)vocab));
    printf("ok  tiny corpus: loss %.4f -> %.4f, log(vocab) %.4f\n", first, last, log((double)vocab));
    sn_history_free(h);

    /* The stepper: the first sequence fed at once, or one id per call from carried states,
     * gives predict's next-character distribution at its last position. */
    sn_stepper *st = NULL;
    CHECK_OK(sn_stepper_new(m, 1, &st));
    if (st) check_stepper(m, st, xd, L, vocab, "trained");
    /* New weights (the embeddings scaled by 1.5): after sn_stepper_reset the stepper's
     * projection table of the Embedding rows is recomputed, so it follows predict again. */
    sn_node ev;
    if (sn_model_layer_variables(m, 0, &ev, 1) == 1) {
        sn_shape es = sn_node_shape(sn_model_graph(m), ev);
        float *e = sn_variable_data(sn_model_graph(m), ev);
        for (int64_t i = 0; i < sn_shape_numel(&es); i++) e[i] *= 1.5f;
    }
    if (st) check_stepper(m, st, xd, L, vocab, "new embeddings");
    sn_stepper_free(st);
    sn_model_free(m);
    sn_dataset_free(ds);
    sn_tensor_free(x);
    sn_tensor_free(y);
}

int main(void) {
    sn_rng_init(&rng, 42, 0);
    test_gradchecks();
    test_gru_layer_vs_loop();
    test_fast_vs_ref();
    test_bad_id();
    test_learns();
    return sn_test_finish("test_rnn");
}
