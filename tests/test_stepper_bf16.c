/* The stepper's bf16 precision (sn_stepper_set_precision, backend/cpu/cpu_lstm_step.c) on
 * Embedding -> LSTM -> Dense models of a few sizes (units a multiple of 16, odd, and large):
 *   - the f32 path is unchanged: at precision f32 the stepper's next-character probabilities
 *     equal predict's over the whole sequence (1e-5, as tests/test_rnn.c);
 *   - bf16 follows f32: the probabilities at every one of 160 steps differ by at most
 *     BF16_TOL (absolute, per character; the measured worst is printed);
 *   - bf16 gives the same bits on 1, 2 and 3 threads, and again after a reset; so does f32;
 *   - after the weights change and a reset, bf16 follows the new weights;
 *   - refusals: batch 2, a GRU model, an id outside the vocabulary;
 *   - the op the stepper's bf16 plan runs (lstm_dense_step) at the kernel level: the CPU table
 *     picks the bf16 kernel only under bf16_compute at batch 1; it gives the bits of the bf16
 *     step called directly (what the stepper called before it ran a plan), follows the double
 *     reference within BF16_STEP_TOL, and packs the weights again when vars_version moves.
 * Skipped (77) on CPUs without AVX512-BF16. */
#include <stdlib.h>

#include "backend/cpu/cpu_lstm_step.h"
#include "backend/kernel.h"
#include "sinter/nn.h"
#include "sn_test.h"

/* bf16 keeps 8 significant bits: R and h each rounded by up to 2^-9 relative. Over U-term
 * sums and 160 carried steps that moves a probability by about 1e-3 here (printed); 5e-3
 * leaves room and still fails if a gate or a block were misplaced (those give errors of the
 * size of the probabilities themselves, 0.1-0.9). */
#define BF16_TOL 5e-3
#define STEPS 160

static sn_rng rng;

static void fill(sn_model *m, int layer, int var, double lo, double hi) {
    sn_node v[4];
    int n = sn_model_layer_variables(m, layer, v, 4);
    if (var >= n) return;
    sn_graph *g = sn_model_graph(m);
    sn_shape s = sn_node_shape(g, v[var]);
    float *d = sn_variable_data(g, v[var]);
    for (int64_t i = 0; i < sn_shape_numel(&s); i++)
        d[i] = (float)(lo + (hi - lo) * sn_rng_uniform(&rng));
}

/* Embedding(vocab, 16) -> LSTM(units) -> Dense(vocab), built for sequences of L, with weights
 * large enough that the probabilities are far from uniform (the check would be weak there). */
static sn_model *char_model(int64_t vocab, int64_t units, int64_t L) {
    sn_model *m = sn_sequential_new("char_bf16");
    sn_rnn_layer_opts lo = sn_lstm_layer_defaults(units);
    lo.return_sequences = true;
    lo.recurrent_initializer = (sn_initializer){.type = SN_INIT_ZEROS};
    sn_model_add(m, sn_layer_embedding(vocab, 16));
    sn_model_add(m, sn_layer_lstm_ex(&lo));
    sn_model_add(m, sn_layer_dense(vocab, SN_ACT_NONE));
    if (sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {L}}, 5) != SN_OK) {
        sn_model_free(m);
        return NULL;
    }
    double r = 1.5 / sqrt((double)units);
    fill(m, 0, 0, -1.0, 1.0);  /* embeddings */
    fill(m, 1, 1, -r, r);      /* recurrent kernel */
    fill(m, 1, 2, -0.5, 0.5);  /* bias */
    fill(m, 2, 0, -16 * r, 16 * r); /* Dense kernel */
    fill(m, 2, 1, -1.0, 1.0);  /* Dense bias */
    return m;
}

static void softmax(const float *lg, int64_t n, double *p) {
    double mx = -INFINITY, sum = 0;
    for (int64_t k = 0; k < n; k++) mx = fmax(mx, lg[k]);
    for (int64_t k = 0; k < n; k++) sum += (p[k] = exp(lg[k] - mx));
    for (int64_t k = 0; k < n; k++) p[k] /= sum;
}

/* Runs the ids one per call from a reset; logits of every step into out [STEPS, vocab]. */
static bool run_steps(sn_stepper *st, const float *ids, int64_t vocab, float *out) {
    sn_stepper_reset(st);
    for (int64_t t = 0; t < STEPS; t++) {
        const float *lg = NULL;
        int64_t nc = 0;
        sn_status s = sn_stepper_run(st, ids + t, 1, &lg, &nc);
        CHECK(s == SN_OK && nc == vocab, "step %lld: %s", (long long)t, sn_last_error());
        if (s != SN_OK || nc != vocab) return false;
        memcpy(out + t * vocab, lg, sizeof(float) * (size_t)vocab);
    }
    return true;
}

static double worst_prob_diff(const float *a, const float *b, int64_t vocab, double *entropy) {
    double worst = 0, pa[512], pb[512], h = 0;
    for (int64_t t = 0; t < STEPS; t++) {
        softmax(a + t * vocab, vocab, pa);
        softmax(b + t * vocab, vocab, pb);
        for (int64_t k = 0; k < vocab; k++) {
            worst = fmax(worst, fabs(pa[k] - pb[k]));
            if (pa[k] > 0) h -= pa[k] * log(pa[k]);
        }
    }
    *entropy = h / STEPS;
    return worst;
}

/* f32 stepper vs predict at the last of the first L ids, fed at once and one per call. */
static void check_f32_vs_predict(sn_model *m, sn_stepper *st, const float *ids, int64_t L,
                                 int64_t vocab) {
    sn_tensor *x = NULL, *p = NULL;
    CHECK_OK(sn_tensor_new(&x, SN_F32, &(sn_shape){.ndim = 2, .dim = {1, L}}));
    if (!x) return;
    memcpy(sn_tensor_data(x), ids, sizeof(float) * (size_t)L);
    CHECK_OK(sn_model_predict(m, x, &p));
    double worst = 0, q[512], pp[512];
    for (int pass = 0; p && pass < 2; pass++) {
        const float *lg = NULL;
        sn_stepper_reset(st);
        if (pass == 0) CHECK_OK(sn_stepper_run(st, ids, L, &lg, NULL));
        for (int64_t j = 0; pass == 1 && j < L; j++) CHECK_OK(sn_stepper_run(st, ids + j, 1, &lg, NULL));
        if (!lg) break;
        softmax(lg, vocab, q);
        softmax((const float *)sn_tensor_data(p) + (L - 1) * vocab, vocab, pp);
        for (int64_t k = 0; k < vocab; k++) worst = fmax(worst, fabs(q[k] - pp[k]));
    }
    CHECK(worst < 1e-5, "f32 stepper vs predict: %.3g", worst);
    sn_tensor_free(x);
    sn_tensor_free(p);
}

/* Last probabilities into out after: a reset, the first h of n ids under precision p1 (at
 * once when `once`, else one per call), then the rest one per call under p2. */
static bool run_switch(sn_stepper *st, const float *ids, int64_t h, int64_t n, bool once,
                       sn_dtype p1, sn_dtype p2, int64_t vocab, double *out) {
    const float *lg = NULL;
    sn_stepper_reset(st);
    CHECK_OK(sn_stepper_set_precision(st, p1));
    for (int64_t j = 0; j < h; j += once ? h : 1)
        if (sn_stepper_run(st, ids + j, once ? h : 1, &lg, NULL) != SN_OK) return false;
    CHECK_OK(sn_stepper_set_precision(st, p2));
    for (int64_t j = h; j < n; j++)
        if (sn_stepper_run(st, ids + j, 1, &lg, NULL) != SN_OK) return false;
    softmax(lg, vocab, out);
    return true;
}

/* The carried states follow the precision switched mid-sequence, both ways: they live in
 * the buffers of the plan that ran last (the f32 plan of h ids, the one-step f32 plan or the
 * bf16 plan) and move when another plan runs. The same switch after h ids fed one per call
 * or at once gives the same probabilities two ids after the switch (the two f32 paths agree
 * to 1e-5, as against predict), and these differ from those two ids run from zero states
 * (the LSTM forgets: many ids later the states would not matter). */
static void check_switch(sn_stepper *st, const float *ids, int64_t vocab, int64_t units) {
    const int64_t h = STEPS / 2;
    double a[512], b[512], z[512];
    for (int dir = 0; dir < 2; dir++) {
        sn_dtype p1 = dir ? SN_BF16 : SN_F32, p2 = dir ? SN_F32 : SN_BF16;
        if (!run_switch(st, ids, h, h + 2, false, p1, p2, vocab, a) ||
            !run_switch(st, ids, h, h + 2, true, p1, p2, vocab, b) ||
            !run_switch(st, ids + h, 0, 2, false, p1, p2, vocab, z)) {
            CHECK(0, "units %lld: switching precision: %s", (long long)units, sn_last_error());
            return;
        }
        double same = 0, apart = 0;
        for (int64_t k = 0; k < vocab; k++) {
            same = fmax(same, fabs(a[k] - b[k]));
            apart = fmax(apart, fabs(a[k] - z[k]));
        }
        CHECK(same < 1e-5 && apart > 1e-3, "units %lld, %s then %s: per call vs at once %.3g "
              "(bound 1e-5), vs from zero states %.3g (expected > 1e-3)", (long long)units,
              sn_dtype_name(p1), sn_dtype_name(p2), same, apart);
        printf("ok  units %lld, %s then %s mid-sequence: per call vs at once %.2e, from zero "
               "states %.2e apart\n", (long long)units, sn_dtype_name(p1), sn_dtype_name(p2),
               same, apart);
    }
}

static void check_size(int64_t units) {
    const int64_t vocab = 65, L = 40;
    sn_model *m = char_model(vocab, units, L);
    CHECK(m != NULL, "building units %lld: %s", (long long)units, sn_last_error());
    if (!m) return;
    float ids[STEPS];
    for (int t = 0; t < STEPS; t++) ids[t] = (float)sn_rng_below(&rng, (uint64_t)vocab);
    size_t bytes = sizeof(float) * (size_t)(STEPS * vocab);
    float *f = malloc(bytes), *b1 = malloc(bytes), *b2 = malloc(bytes), *b3 = malloc(bytes);
    sn_stepper *st = NULL;
    CHECK_OK(sn_stepper_new(m, 1, &st));
    if (!st || !f || !b1 || !b2 || !b3) goto done;
    CHECK(sn_stepper_precision(st) == SN_F32, "default precision %s",
          sn_dtype_name(sn_stepper_precision(st)));
    CHECK_OK(sn_stepper_set_precision(st, SN_F32));
    check_f32_vs_predict(m, st, ids, L, vocab);
    int threads = sn_num_threads();
    if (!run_steps(st, ids, vocab, f)) goto done;
    CHECK_OK(sn_stepper_set_precision(st, SN_BF16));
    CHECK(sn_stepper_precision(st) == SN_BF16, "precision not bf16");
    sn_set_num_threads(2);
    if (!run_steps(st, ids, vocab, b2)) goto done;
    CHECK(memcmp(f, b2, bytes) != 0, "units %lld: bf16 gave f32's exact logits: not used?",
          (long long)units);
    double ent = 0, worst = worst_prob_diff(f, b2, vocab, &ent);
    CHECK(worst < BF16_TOL, "units %lld: bf16 vs f32 probabilities differ by %.3g", (long long)units, worst);
    printf("ok  units %lld: bf16 vs f32, worst probability difference over %d steps %.2e "
           "(bound %.0e; mean entropy %.2f nats, uniform %.2f)\n", (long long)units, STEPS,
           worst, BF16_TOL, ent, log((double)vocab));
    sn_set_num_threads(1);
    run_steps(st, ids, vocab, b1);
    sn_set_num_threads(3);
    run_steps(st, ids, vocab, b3);
    sn_set_num_threads(threads);
    CHECK(memcmp(b1, b2, bytes) == 0 && memcmp(b3, b2, bytes) == 0,
          "units %lld: bf16 logits differ between 1, 2 and 3 threads", (long long)units);
    run_steps(st, ids, vocab, b1); /* after a reset (which repacks): the same bits */
    CHECK(memcmp(b1, b2, bytes) == 0, "units %lld: bf16 not deterministic", (long long)units);
    /* f32 too: the step plans (the table's matmul, the LSTM, the Dense) on 1 and 3 threads
     * give the bits f gave on the default count. */
    CHECK_OK(sn_stepper_set_precision(st, SN_F32));
    sn_set_num_threads(1);
    run_steps(st, ids, vocab, b1);
    sn_set_num_threads(3);
    run_steps(st, ids, vocab, b3);
    sn_set_num_threads(threads);
    CHECK(memcmp(b1, f, bytes) == 0 && memcmp(b3, f, bytes) == 0,
          "units %lld: f32 logits differ between 1, %d and 3 threads", (long long)units, threads);
    CHECK_OK(sn_stepper_set_precision(st, SN_BF16));
    /* New weights: after the reset that run_steps does, bf16 follows them. */
    fill(m, 1, 1, -1.5 / sqrt((double)units), 1.5 / sqrt((double)units));
    fill(m, 2, 0, -20 / sqrt((double)units), 20 / sqrt((double)units));
    run_steps(st, ids, vocab, b1);
    CHECK_OK(sn_stepper_set_precision(st, SN_F32));
    run_steps(st, ids, vocab, f);
    worst = worst_prob_diff(f, b1, vocab, &ent);
    CHECK(worst < BF16_TOL, "units %lld, new weights: bf16 vs f32 differ by %.3g", (long long)units, worst);
    CHECK(memcmp(b1, b2, bytes) != 0, "units %lld: bf16 ignored the new weights", (long long)units);
    check_switch(st, ids, vocab, units);
    float bad = (float)vocab;
    const float *lg = NULL;
    CHECK_OK(sn_stepper_set_precision(st, SN_BF16));
    CHECK_ERR(sn_stepper_run(st, &bad, 1, &lg, NULL), SN_ERR_INVALID, "input id 65");
done:
    sn_stepper_free(st);
    sn_model_free(m);
    free(f);
    free(b1);
    free(b2);
    free(b3);
}

static void check_refusals(void) {
    sn_model *m = char_model(10, 32, 8);
    sn_stepper *st = NULL;
    if (m) CHECK_OK(sn_stepper_new(m, 2, &st));
    if (st) CHECK_ERR(sn_stepper_set_precision(st, SN_BF16), SN_ERR_UNSUPPORTED, "batch 2");
    if (st) CHECK(sn_stepper_precision(st) == SN_F32, "a refused bf16 changed the precision");
    if (st) CHECK_ERR(sn_stepper_set_precision(st, SN_I32), SN_ERR_INVALID, "expected f32 or bf16");
    sn_stepper_free(st);
    /* Where the kernel table has no bf16 step (here: SN_KERNELS=ref), bf16 is refused, and
     * asking again adds nothing to the model's graph. */
    st = NULL;
    if (m) CHECK_OK(sn_stepper_new(m, 1, &st));
    setenv("SN_KERNELS", "ref", 1);
    if (st) CHECK_ERR(sn_stepper_set_precision(st, SN_BF16), SN_ERR_UNSUPPORTED, "AVX512-BF16");
    int nodes = m ? sn_graph_node_count(sn_model_graph(m)) : 0;
    if (st) CHECK_ERR(sn_stepper_set_precision(st, SN_BF16), SN_ERR_UNSUPPORTED, "AVX512-BF16");
    CHECK(!m || sn_graph_node_count(sn_model_graph(m)) == nodes,
          "a second refused bf16 grew the graph from %d nodes", nodes);
    unsetenv("SN_KERNELS");
    if (st) CHECK_OK(sn_stepper_set_precision(st, SN_BF16));
    sn_stepper_free(st);
    sn_model_free(m);
    m = sn_sequential_new("char_gru");
    sn_model_add(m, sn_layer_embedding(10, 4));
    sn_model_add(m, sn_layer_gru(32, true));
    sn_model_add(m, sn_layer_dense(10, SN_ACT_NONE));
    st = NULL;
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {8}}, 1));
    CHECK_OK(sn_stepper_new(m, 1, &st));
    if (st) CHECK_ERR(sn_stepper_set_precision(st, SN_BF16), SN_ERR_UNSUPPORTED,
                      "not Embedding -> LSTM -> Dense");
    sn_stepper_free(st);
    sn_model_free(m);
}

/* One step from random weights (U 40: a padded block and 20 row pairs), h, c in [-1, 1]: h and
 * R rounded to bf16 move a pre-activation by at most about sum |h R| 2^-8, 0.03 here; gates and
 * states move less (slopes <= 1), the logits by |wd| times that over U terms. */
#define BF16_STEP_TOL 0.05

static void check_step_kernel(void) {
    enum { U = 40, V = 23 };
    static float xw[4 * U], r[U * 4 * U], h[U], c[U], wd[U * V], bd[V];
    static float ref[2 * U + V], got[2 * U + V], direct[2 * U + V];
    float *in[6] = {xw, r, h, c, wd, bd};
    int64_t n[6] = {4 * U, U * 4 * U, U, U, U * V, V};
    for (int k = 0; k < 6; k++)
        for (int64_t i = 0; i < n[k]; i++)
            in[k][i] = (float)((k == 1 ? 0.3 : k == 4 ? 0.2 : 1.0) * (2 * sn_rng_uniform(&rng) - 1));
    sn_attrs attr;
    memset(&attr, 0, sizeof attr);
    sn_kcall call = {.op = SN_OP_LSTM_DENSE_STEP, .attr = &attr, .n_in = 6,
                     .y = {.dtype = SN_F32, .shape = {.ndim = 2, .dim = {1, 2 * U + V}}}};
    sn_shape sh[6] = {{.ndim = 2, .dim = {1, 4 * U}}, {.ndim = 2, .dim = {U, 4 * U}},
                      {.ndim = 2, .dim = {1, U}},     {.ndim = 2, .dim = {1, U}},
                      {.ndim = 2, .dim = {U, V}},     {.ndim = 1, .dim = {V}}};
    for (int k = 0; k < 6; k++) {
        call.x[k] = (sn_tdesc){.dtype = SN_F32, .shape = sh[k]};
        call.in[k] = in[k];
    }
    const sn_kernel *kf = sn_kernel_select(sn_cpu_kernels(), &call);
    CHECK(kf && strcmp(kf->impl, "ref") == 0, "lstm_dense_step without bf16_compute: kernel %s, "
          "expected the f32 reference", kf ? kf->impl : "none");
    call.out = ref;
    CHECK_OK(sn_ref_kernels()->k[SN_OP_LSTM_DENSE_STEP]->run(&call));
    call.bf16 = true;
    const sn_kernel *kb = sn_kernel_select(sn_cpu_kernels(), &call);
    CHECK(kb && strcmp(kb->impl, "avx512_bf16") == 0, "lstm_dense_step under bf16_compute: "
          "kernel %s, expected avx512_bf16", kb ? kb->impl : "none");
    if (!kb || strcmp(kb->impl, "avx512_bf16") != 0) return;
    size_t scratch = 0;
    CHECK_OK(kb->prepare(&call, &scratch));
    call.out = got;
    call.vars_version = 1;
    CHECK_OK(kb->run(&call));
    double worst = 0;
    for (int i = 0; i < 2 * U + V; i++) worst = fmax(worst, fabs((double)got[i] - ref[i]));
    CHECK(worst < BF16_STEP_TOL, "lstm_dense_step bf16 vs reference: %.3g", worst);
    /* The direct call, as the stepper made it before: the same bits. */
    sn_lstm_step *ds = NULL;
    CHECK_OK(sn_lstm_step_new(r, U, wd, bd, V, &ds));
    memcpy(direct, h, sizeof h);
    memcpy(direct + U, c, sizeof c);
    if (ds) sn_lstm_step_run(ds, xw, direct, direct + U, direct + 2 * U);
    sn_lstm_step_free(ds);
    CHECK(memcmp(direct, got, sizeof got) == 0, "lstm_dense_step bf16 kernel differs from the "
          "direct bf16 step");
    /* New weights: packed again when the version moves, not before. */
    for (int64_t i = 0; i < U * 4 * U; i++) r[i] = -r[i];
    float again[2 * U + V];
    call.out = again;
    CHECK_OK(kb->run(&call));
    CHECK(memcmp(again, got, sizeof got) == 0, "the kernel repacked with vars_version unchanged");
    call.vars_version = 2;
    CHECK_OK(kb->run(&call));
    CHECK(memcmp(again, got, sizeof got) != 0, "the kernel kept old weights after vars_version moved");
    call.bf16 = false;
    call.out = ref;
    CHECK_OK(sn_ref_kernels()->k[SN_OP_LSTM_DENSE_STEP]->run(&call));
    worst = 0;
    for (int i = 0; i < 2 * U + V; i++) worst = fmax(worst, fabs((double)again[i] - ref[i]));
    CHECK(worst < BF16_STEP_TOL, "lstm_dense_step bf16 vs reference, new weights: %.3g", worst);
    if (kb->release) kb->release(&call);
}

int main(void) {
    sn_rng_init(&rng, 7, 0);
    if (!sn_lstm_step_bf16_supported()) {
        sn_test_skip("this CPU has no AVX512-BF16: the bf16 step is not used here");
        return sn_test_finish("test_stepper_bf16");
    }
    check_size(48);   /* a multiple of 16 */
    check_size(37);   /* odd, and a padded last block */
    check_size(512);  /* large: long sums */
    check_refusals();
    check_step_kernel();
    return sn_test_finish("test_stepper_bf16");
}
