/* Bidirectional, go_backwards and Embedding(mask_zero=True) masks (layers_bidir.c,
 * layers_seq.c), and the 1D layers, ELU and Permute (layers_seq1d.c):
 * - finite-difference gradient checks in double of Bidirectional over LSTM and GRU (every
 *   merge mode, return_sequences both ways) and of go_backwards LSTMs, with and without a
 *   mask in front;
 * - the halves against plain layers: the forward half is the wrapped LSTM, the backward half
 *   the same LSTM over the time-reversed input;
 * - Keras's mask semantics against their definition: a masked step keeps the state and output,
 *   so a padded row (zeros anywhere, ends included) through Embedding(mask_zero) ->
 *   Bidirectional gives what the same weights give on the row with its zeros removed and no
 *   mask (return_sequences: at an unmasked step, that row's output at its compacted position;
 *   at a masked step zero, Keras's zero_output_for_mask); a row of only padding gives zeros;
 * - a mask reaching a layer that does not take one is an error naming it;
 * - gradient checks of Conv1D, the 1D pools, ELU, Permute and PReLU, and the masked average of
 *   GlobalAveragePooling1D against its definition.
 * The numbers against real Keras are tests/keras_models_interop.py's text classifier. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layer_test_util.h"

/* the shared fixture helpers this test does not use */
static void (*const unused_helpers[])(void) = {(void (*)(void))fx_plan, (void (*)(void))set_var,
                                             (void (*)(void))run, (void (*)(void))expect};

static sn_layer *lstm(int64_t u, bool seq, bool back) {
    sn_rnn_layer_opts o = sn_lstm_layer_defaults(u);
    o.return_sequences = seq;
    o.go_backwards = back;
    return sn_layer_lstm_ex(&o);
}

static sn_layer *gru(int64_t u, bool seq, bool reset_after) {
    sn_rnn_layer_opts o = sn_gru_layer_defaults(u);
    o.return_sequences = seq;
    o.reset_after = reset_after;
    return sn_layer_gru_ex(&o);
}

static void test_unmasked_gradients(void) {
    sn_shape in = S2(4, 3);
    grad_case("Bidirectional(LSTM) concat", sn_layer_bidirectional(lstm(3, false, false), SN_BIDIR_CONCAT), in, 2, false, 1e-6);
    grad_case("Bidirectional(LSTM seq) concat", sn_layer_bidirectional(lstm(3, true, false), SN_BIDIR_CONCAT), in, 2, false, 1e-6);
    grad_case("Bidirectional(GRU seq) sum", sn_layer_bidirectional(gru(2, true, true), SN_BIDIR_SUM), in, 2, false, 1e-6);
    grad_case("Bidirectional(GRU rb) mul", sn_layer_bidirectional(gru(2, false, false), SN_BIDIR_MUL), in, 2, false, 1e-6);
    grad_case("Bidirectional(LSTM seq) ave", sn_layer_bidirectional(lstm(2, true, false), SN_BIDIR_AVE), in, 2, false, 1e-6);
    grad_case("LSTM go_backwards seq", lstm(3, true, true), in, 2, false, 1e-6);
    grad_case("LSTM go_backwards", lstm(3, false, true), in, 2, false, 1e-6);
}

/* ---- models over ids: Embedding(mask_zero) -> layer ------------------------------------- */
enum { V = 7, E = 3, T = 6, B = 4 };

/* Rows with padding at the end, the start, inside, everywhere, and none. */
static const double ids_rows[B][T] = {
    {3, 1, 4, 0, 0, 0}, {0, 0, 5, 2, 6, 1}, {2, 0, 3, 0, 0, 4}, {0, 0, 0, 0, 0, 0}};

static sn_model *id_model(sn_layer *l, bool mask_zero, int64_t t, sn_dtype dt) {
    sn_model *m = sn_sequential_new("ids");
    sn_embedding_layer_opts eo = sn_embedding_layer_defaults(V, E);
    eo.mask_zero = mask_zero;
    m->dtype = dt;
    CHECK_OK(sn_model_add(m, sn_layer_embedding_ex(&eo)));
    CHECK_OK(sn_model_add(m, l));
    sn_shape in = S1(t);
    CHECK_OK(sn_model_build(m, &in, 5));
    return m;
}

/* Gradient check of every trainable variable of an id model with the mask on, over the first
 * `rows` of ids_rows. */
static void masked_grad_case_rows(const char *what, sn_layer *l, int rows) {
    sn_model *m = id_model(l, true, T, SN_F64);
    sn_graph *g = m->g;
    sn_node x = sn_input(g, "x", SN_F64, &(sn_shape)S2(rows, T)), y;
    sn_status s = sn_model_forward(m, x, false, NULL, &y);
    CHECK(s == SN_OK, "%s: forward: %s", what, sn_last_error());
    if (s != SN_OK) {
        sn_model_free(m);
        return;
    }
    sn_rng r;
    sn_rng_init(&r, 78, 0);
    sn_shape ys = sn_node_shape(g, y);
    int64_t ny = sn_shape_numel(&ys);
    double *rv = malloc(sizeof *rv * (size_t)ny);
    for (int64_t i = 0; i < ny; i++) rv[i] = sn_rng_normal(&r);
    sn_node loss = sn_reduce_sum(g, sn_mul(g, y, sn_const(g, SN_F64, &ys, rv)), 0, NULL, false);
    free(rv);
    sn_node wrt[2 * SN_LAYER_MAX_VARS], grads[2 * SN_LAYER_MAX_VARS];
    int nw = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int j = 0; j < m->layers[i]->n_vars; j++) wrt[nw++] = m->layers[i]->vars[j];
    sn_plan *p = NULL;
    sn_node t[1 + 2 * SN_LAYER_MAX_VARS] = {loss};
    s = sn_gradients(g, loss, nw, wrt, grads);
    for (int i = 0; i < nw; i++) t[1 + i] = grads[i];
    if (s == SN_OK) s = sn_plan_new(&p, g, 1 + nw, t, NULL);
    CHECK(s == SN_OK, "%s: gradients/plan: %s", what, sn_last_error());
    if (s == SN_OK) {
        memcpy(sn_plan_buffer(p, x), ids_rows, sizeof ids_rows[0] * (size_t)rows);
        for (int k = 0; k < nw; k++) {
            sn_shape vs = sn_node_shape(g, wrt[k]);
            double *d = sn_variable_data(g, wrt[k]);
            for (int64_t i = 0; i < sn_shape_numel(&vs); i++) d[i] += 0.3 * sn_rng_normal(&r);
        }
        loss_of(p, loss);
        double worst = 0;
        int bad = fd_check_all(g, p, loss, nw, wrt, grads, 0, 1e-6, &worst);
        CHECK(bad == 0, "%s: %d gradient entries off (worst %.3g)", what, bad, worst);
        if (bad == 0) printf("ok  grad %-40s worst relative error %.2e\n", what, worst);
    }
    sn_plan_free(p);
    sn_model_free(m);
}

static void masked_grad_case(const char *what, sn_layer *l) { masked_grad_case_rows(what, l, B); }

static void test_masked_gradients(void) {
    masked_grad_case("masked LSTM", lstm(3, false, false));
    masked_grad_case("masked LSTM seq", lstm(3, true, false));
    masked_grad_case("masked LSTM go_backwards seq", lstm(2, true, true));
    masked_grad_case("masked Bidirectional(LSTM)", sn_layer_bidirectional(lstm(3, false, false), SN_BIDIR_CONCAT));
    masked_grad_case("masked Bidirectional(LSTM seq)", sn_layer_bidirectional(lstm(2, true, false), SN_BIDIR_CONCAT));
    masked_grad_case("masked Bidirectional(GRU seq) ave", sn_layer_bidirectional(gru(2, true, true), SN_BIDIR_AVE));
    masked_grad_case("masked Bidirectional(GRU rb)", sn_layer_bidirectional(gru(2, false, false), SN_BIDIR_SUM));
}

/* Runs an id model (f64) on `rows` rows of `t` ids; the output is malloc'd. */
static double *run_ids(sn_model *m, int64_t rows, int64_t t, const double *ids, int64_t *ny) {
    sn_graph *g = m->g;
    sn_node x = sn_input(g, "x", SN_F64, &(sn_shape)S2(rows, t)), y;
    sn_plan *p = NULL;
    double *out = NULL;
    *ny = 0;
    if (sn_model_forward(m, x, false, NULL, &y) == SN_OK && sn_plan_new(&p, g, 1, &y, NULL) == SN_OK) {
        memcpy(sn_plan_buffer(p, x), ids, sizeof *ids * (size_t)(rows * t));
        if (sn_plan_run(p, 1, NULL, NULL) == SN_OK) {
            sn_shape ys = sn_node_shape(g, y);
            *ny = sn_shape_numel(&ys);
            out = malloc(sizeof *out * (size_t)*ny);
            memcpy(out, sn_plan_buffer(p, y), sizeof *out * (size_t)*ny);
        }
    }
    CHECK(out != NULL, "running an id model: %s", sn_last_error());
    sn_plan_free(p);
    return out;
}

/* Copies every variable of a into b (models of the same layers). */
static void copy_vars(sn_model *a, sn_model *b) {
    for (int i = 0; i < a->n_layers; i++)
        for (int j = 0; j < a->layers[i]->n_vars; j++) {
            sn_shape s = sn_node_shape(a->g, a->layers[i]->vars[j]);
            memcpy(sn_variable_data(b->g, b->layers[i]->vars[j]),
                   sn_variable_data(a->g, a->layers[i]->vars[j]),
                   sizeof(double) * (size_t)sn_shape_numel(&s));
        }
}

static sn_layer *bidir(bool seq, bool use_gru) {
    return sn_layer_bidirectional(use_gru ? gru(3, seq, true) : lstm(3, seq, false), SN_BIDIR_CONCAT);
}

/* The masked model on the padded rows against the unmasked one on each row's ids alone. */
static void check_semantics(bool seq, bool use_gru) {
    const char *what = seq ? (use_gru ? "masked GRU seq" : "masked LSTM seq")
                           : (use_gru ? "masked GRU" : "masked LSTM");
    sn_model *mm = id_model(bidir(seq, use_gru), true, T, SN_F64);
    int64_t ny;
    double *got = run_ids(mm, B, T, &ids_rows[0][0], &ny);
    int64_t C = 2 * 3, bad = 0;
    for (int b = 0; got && b < B; b++) {
        double ids[T];
        int n = 0, pos[T];
        for (int t = 0; t < T; t++) {
            pos[t] = ids_rows[b][t] != 0 ? n : -1;
            if (ids_rows[b][t] != 0) ids[n++] = ids_rows[b][t];
        }
        double *want = NULL;
        if (n > 0) {
            sn_model *pm = id_model(bidir(seq, use_gru), false, n, SN_F64);
            copy_vars(mm, pm);
            int64_t nw;
            want = run_ids(pm, 1, n, ids, &nw);
            sn_model_free(pm);
        }
        for (int t = 0; t < (seq ? T : 1); t++)
            for (int c = 0; c < C; c++) {
                double w = 0; /* a masked step, or a row of padding only */
                if (want && !seq) w = want[c];
                if (want && seq && pos[t] >= 0) w = want[pos[t] * C + c];
                double gv = got[(seq ? ((int64_t)b * T + t) * C : (int64_t)b * C) + c];
                if (!(fabs(gv - w) <= 1e-12) && bad++ < 4)
                    fprintf(stderr, "  %s row %d step %d [%d]: got %.15g, want %.15g\n", what, b, t, c, gv, w);
            }
        free(want);
    }
    CHECK(got && bad == 0, "%s: %lld values differ from the unpadded rows'", what, (long long)bad);
    if (got && bad == 0) printf("ok  %s: padded rows equal their unpadded ids\n", what);
    free(got);
    sn_model_free(mm);
}

/* Unmasked Bidirectional's halves: the forward one is the plain LSTM; the backward one the
 * same LSTM on reversed ids. */
static void test_halves(void) {
    sn_model *bm = id_model(sn_layer_bidirectional(lstm(3, true, false), SN_BIDIR_CONCAT), false, T, SN_F64);
    sn_model *fm = id_model(lstm(3, true, false), false, T, SN_F64);
    sn_model *km = id_model(lstm(3, true, false), false, T, SN_F64);
    /* embedding, then the halves' variables (forward 0-2, backward 3-5) */
    sn_layer *bl = bm->layers[1];
    for (int j = 0; j < 3; j++) {
        sn_shape s = sn_node_shape(bm->g, bl->vars[j]);
        size_t sz = sizeof(double) * (size_t)sn_shape_numel(&s);
        memcpy(sn_variable_data(fm->g, fm->layers[1]->vars[j]), sn_variable_data(bm->g, bl->vars[j]), sz);
        memcpy(sn_variable_data(km->g, km->layers[1]->vars[j]), sn_variable_data(bm->g, bl->vars[3 + j]), sz);
    }
    sn_shape es = sn_node_shape(bm->g, bm->layers[0]->vars[0]);
    size_t esz = sizeof(double) * (size_t)sn_shape_numel(&es);
    memcpy(sn_variable_data(fm->g, fm->layers[0]->vars[0]), sn_variable_data(bm->g, bm->layers[0]->vars[0]), esz);
    memcpy(sn_variable_data(km->g, km->layers[0]->vars[0]), sn_variable_data(bm->g, bm->layers[0]->vars[0]), esz);
    double rev[B][T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) rev[b][t] = ids_rows[(b + 1) % B][T - 1 - t];
    double fwd_ids[B][T];
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) fwd_ids[b][t] = ids_rows[(b + 1) % B][t];
    int64_t n1, n2, n3;
    double *yb = run_ids(bm, B, T, &fwd_ids[0][0], &n1);
    double *yf = run_ids(fm, B, T, &fwd_ids[0][0], &n2);
    double *yk = run_ids(km, B, T, &rev[0][0], &n3);
    int bad = 0;
    for (int b = 0; yb && yf && yk && b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < 3; c++) {
                double gf = yb[((b * T) + t) * 6 + c], gk = yb[((b * T) + t) * 6 + 3 + c];
                double wf = yf[((b * T) + t) * 3 + c], wk = yk[((b * T) + (T - 1 - t)) * 3 + c];
                if (!(fabs(gf - wf) <= 1e-12 && fabs(gk - wk) <= 1e-12) && bad++ < 4)
                    fprintf(stderr, "  row %d step %d [%d]: forward %.15g/%.15g backward %.15g/%.15g\n",
                            b, t, c, gf, wf, gk, wk);
            }
    CHECK(yb && yf && yk && bad == 0, "Bidirectional halves: %d values differ", bad);
    if (bad == 0) printf("ok  Bidirectional halves equal the LSTM forwards and on reversed input\n");
    free(yb);
    free(yf);
    free(yk);
    sn_model_free(bm);
    sn_model_free(fm);
    sn_model_free(km);
}

/* A mask into a layer that does not take one; Bidirectional's argument checks. */
static void test_refusals(void) {
    sn_model *m = sn_sequential_new("bad");
    sn_embedding_layer_opts eo = sn_embedding_layer_defaults(V, E);
    eo.mask_zero = true;
    CHECK_OK(sn_model_add(m, sn_layer_embedding_ex(&eo)));
    CHECK_OK(sn_model_add(m, sn_layer_flatten()));
    sn_shape in = S1(T);
    CHECK_OK(sn_model_build(m, &in, 1));
    sn_node x = sn_input(m->g, "x", SN_F32, &(sn_shape)S2(2, T)), y;
    sn_status s = sn_model_forward(m, x, false, NULL, &y);
    CHECK(s == SN_ERR_UNSUPPORTED && strstr(sn_last_error(), "'flatten'") &&
          strstr(sn_last_error(), "mask"), "Flatten after mask_zero: status %d, '%s'", s,
          sn_last_error());
    sn_model_free(m);
    CHECK(sn_layer_bidirectional(sn_layer_dense(2, SN_ACT_NONE), SN_BIDIR_CONCAT) == NULL &&
          strstr(sn_last_error(), "Dense"), "Bidirectional(Dense): '%s'", sn_last_error());
    CHECK(sn_layer_bidirectional_ex(lstm(2, false, false), lstm(2, false, false), SN_BIDIR_SUM) == NULL &&
          strstr(sn_last_error(), "go_backwards"), "same go_backwards: '%s'", sn_last_error());
    CHECK(sn_layer_bidirectional_ex(lstm(2, false, false), lstm(2, true, true), SN_BIDIR_SUM) == NULL &&
          strstr(sn_last_error(), "return_sequences"), "return_sequences differ: '%s'", sn_last_error());
}

/* A Functional model carries the mask along its edges as the Sequential one does: the same
 * stack built both ways gives the same outputs; a merge layer receiving a mask is refused. */
static sn_layer *masked_embedding(void) {
    sn_embedding_layer_opts eo = sn_embedding_layer_defaults(V, E);
    eo.mask_zero = true;
    return sn_layer_embedding_ex(&eo);
}

static void test_functional_masks(void) {
    sn_model *s = sn_sequential_new("seq");
    s->dtype = SN_F64;
    CHECK_OK(sn_model_add(s, masked_embedding()));
    CHECK_OK(sn_model_add(s, sn_layer_bidirectional(lstm(3, true, false), SN_BIDIR_SUM)));
    CHECK_OK(sn_model_add(s, sn_layer_dropout(0.2)));
    CHECK_OK(sn_model_add(s, sn_layer_bidirectional(gru(2, false, true), SN_BIDIR_CONCAT)));
    sn_shape in = S1(T);
    CHECK_OK(sn_model_build(s, &in, 9));
    sn_model *f = sn_functional_new("fn");
    f->dtype = SN_F64;
    sn_functional_input_opts io = sn_functional_input_defaults(&in);
    io.int_ids = true;
    sn_ftensor x, a, b, c, d;
    CHECK_OK(sn_functional_input(f, &io, &x));
    CHECK_OK(sn_layer_call(f, masked_embedding(), &x, 1, &a));
    CHECK_OK(sn_layer_call(f, sn_layer_bidirectional(lstm(3, true, false), SN_BIDIR_SUM), &a, 1, &b));
    CHECK_OK(sn_layer_call(f, sn_layer_dropout(0.2), &b, 1, &c));
    CHECK_OK(sn_layer_call(f, sn_layer_bidirectional(gru(2, false, true), SN_BIDIR_CONCAT), &c, 1, &d));
    CHECK_OK(sn_functional_set_outputs(f, &d, 1));
    CHECK_OK(sn_model_build(f, NULL, 9));
    copy_vars(s, f);
    int64_t n1, n2;
    double *y1 = run_ids(s, B, T, &ids_rows[0][0], &n1), *y2 = run_ids(f, B, T, &ids_rows[0][0], &n2);
    int bad = 0;
    for (int64_t i = 0; y1 && y2 && i < n1; i++)
        if (y1[i] != y2[i] && bad++ < 4) fprintf(stderr, "  [%lld]: %.17g vs %.17g\n", (long long)i, y1[i], y2[i]);
    CHECK(y1 && y2 && n1 == n2 && bad == 0, "Functional and Sequential masked stacks differ in %d values", bad);
    if (y1 && y2 && bad == 0) printf("ok  a Functional model carries masks as the Sequential one\n");
    free(y1);
    free(y2);
    sn_model_free(s);
    sn_model_free(f);

    /* Add takes masks (Keras's Merge: their OR); Concatenate, whose mask follows its axis,
     * is refused naming it */
    for (int cat = 0; cat < 2; cat++) {
        sn_model *m = sn_functional_new("merge");
        CHECK_OK(sn_functional_input(m, &io, &x));
        CHECK_OK(sn_layer_call(m, masked_embedding(), &x, 1, &a));
        sn_ftensor two[2] = {a, a};
        CHECK_OK(sn_layer_call(m, sn_layer_merge(cat ? SN_MERGE_CONCATENATE : SN_MERGE_ADD), two,
                               2, &b));
        CHECK_OK(sn_functional_set_outputs(m, &b, 1));
        CHECK_OK(sn_model_build(m, NULL, 1));
        sn_node xi = sn_input(m->g, "x", SN_F32, &(sn_shape)S2(2, T)), y;
        sn_status st = sn_model_forward(m, xi, false, NULL, &y);
        if (cat)
            CHECK(st == SN_ERR_UNSUPPORTED && strstr(sn_last_error(), "'concatenate'") &&
                      strstr(sn_last_error(), "mask"),
                  "a mask into Concatenate: status %d, '%s'", st, sn_last_error());
        else
            CHECK(st == SN_OK, "a mask into Add: status %d, '%s'", st, sn_last_error());
        sn_model_free(m);
    }
}

/* ---- 1D layers, ELU, Permute (layers_seq1d.c) ------------------------------------------- */
static void test_1d_gradients(void) {
    sn_conv1d_layer_opts same = sn_conv1d_layer_defaults(3, 3);
    same.padding = SN_PAD_SAME;
    same.stride = 2;
    same.activation = SN_ACT_TANH;
    int perm[2] = {2, 1};
    grad_case("Conv1D valid", sn_layer_conv1d_ex(&(sn_conv1d_layer_opts){.filters = 2, .kernel_size = 2, .stride = 1, .use_bias = true}), (sn_shape)S2(5, 3), 2, false, 1e-5);
    /* conv sums: ~1e-6 relative noise in the numeric estimate (test_layers.c's tolerance) */
    grad_case("Conv1D same stride 2 tanh", sn_layer_conv1d_ex(&same), (sn_shape)S2(6, 2), 2, false, 1e-5);
    grad_case("MaxPooling1D 2", sn_layer_pool1d(true, 2, 0, SN_PAD_VALID), (sn_shape)S2(6, 2), 2, false, 1e-7);
    grad_case("AveragePooling1D 3 stride 1 same", sn_layer_pool1d(false, 3, 1, SN_PAD_SAME), (sn_shape)S2(5, 2), 2, false, 1e-7);
    grad_case("GlobalMaxPooling1D", sn_layer_global_pool1d(true, false), (sn_shape)S2(5, 3), 2, false, 1e-7);
    grad_case("GlobalAveragePooling1D keepdims", sn_layer_global_pool1d(false, true), (sn_shape)S2(5, 3), 2, false, 1e-7);
    grad_case("ELU 0.7", sn_layer_elu(0.7), (sn_shape)S2(4, 3), 2, false, 1e-7);
    grad_case("Permute (2, 1)", sn_layer_permute(2, perm), (sn_shape)S2(4, 3), 2, false, 1e-7);
    sn_prelu_layer_opts po = {.n_shared_axes = 1, .shared_axes = {1}};
    grad_case("PReLU", sn_layer_prelu_ex(&(sn_prelu_layer_opts){0}), (sn_shape)S2(4, 3), 2, false, 1e-7);
    grad_case("PReLU shared over steps", sn_layer_prelu_ex(&po), (sn_shape)S2(4, 3), 2, false, 1e-7);
    /* not the row of padding only: Keras's average is 0/0 there */
    masked_grad_case_rows("masked GlobalAveragePooling1D", sn_layer_global_pool1d(false, false), 3);
}

/* Keras's masked average: the unmasked steps' mean (rows with some ids only). */
static void test_masked_average(void) {
    sn_model *m = id_model(sn_layer_global_pool1d(false, false), true, T, SN_F64);
    int64_t ny;
    double *got = run_ids(m, 3, T, &ids_rows[0][0], &ny);
    const double *tab = sn_variable_data(m->g, m->layers[0]->vars[0]);
    int bad = 0;
    for (int b = 0; got && b < 3; b++)
        for (int c = 0; c < E; c++) {
            double sum = 0;
            int n = 0;
            for (int t = 0; t < T; t++)
                if (ids_rows[b][t] != 0) {
                    sum += tab[(int)ids_rows[b][t] * E + c];
                    n++;
                }
            if (!(fabs(got[b * E + c] - sum / n) <= 1e-15) && bad++ < 4)
                fprintf(stderr, "  row %d [%d]: got %.17g, want %.17g\n", b, c, got[b * E + c], sum / n);
        }
    CHECK(got && bad == 0, "masked GlobalAveragePooling1D: %d values differ", bad);
    if (got && bad == 0) printf("ok  masked GlobalAveragePooling1D averages the unmasked steps\n");
    free(got);
    sn_model_free(m);
}

int main(void) {
    (void)unused_helpers;
    test_unmasked_gradients();
    test_masked_gradients();
    test_halves();
    check_semantics(false, false);
    check_semantics(true, false);
    check_semantics(false, true);
    check_semantics(true, true);
    test_refusals();
    test_functional_masks();
    test_1d_gradients();
    test_masked_average();
    return sn_test_finish("test_seq_mask");
}
