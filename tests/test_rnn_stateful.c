/* Stateful LSTM/GRU through fit, evaluate and predict (Keras 3's semantics, layers_seq.c):
 *
 *  - two streams of 12 ids cut into 3 chunks of 4 and fed as 3 batches of 2 rows (row b of
 *    batch k = chunk k of stream b) to a stateful model: fit's loss with a zero learning rate
 *    equals a non-stateful twin evaluated on the whole 12-step streams, and differs from the
 *    same chunks each started from zeros (so the test fails when no state is carried);
 *  - the state persists into the next epoch (Keras 3's fit does not reset it; checked with
 *    Keras 3.15: its epoch losses differ at a zero learning rate): epoch 2 gives the second
 *    half of the streams repeated twice; after sn_model_reset_states evaluate gives the
 *    twin's loss again;
 *  - predict, chunk after chunk, gives the twin's probabilities at the same positions;
 *  - a batch of another size, stateful without a batch size, and a strategy are refused.
 * For LSTM and both GRU variants. */
#include <stdlib.h>

#include "core/core.h"
#include "sinter/dist.h"
#include "sinter/nn.h"
#include "sn_test.h"

enum { V = 5, NB = 2, CH = 4, NCH = 3, LEN = CH * NCH };
enum { K_LSTM, K_GRU, K_GRU_RB };
static const char *const kind_name[] = {"LSTM", "GRU", "GRU reset_after=False"};

static sn_model *make(int kind, int64_t steps, bool stateful) {
    sn_model *m = sn_sequential_new("stateful_test");
    sn_model_add(m, sn_layer_embedding(V, 3));
    sn_rnn_layer_opts o = kind == K_LSTM ? sn_lstm_layer_defaults(4) : sn_gru_layer_defaults(4);
    o.return_sequences = true;
    o.reset_after = kind != K_GRU_RB;
    o.stateful = stateful;
    o.batch_size = stateful ? NB : 0;
    sn_model_add(m, kind == K_LSTM ? sn_layer_lstm_ex(&o) : sn_layer_gru_ex(&o));
    sn_model_add(m, sn_layer_dense(V, SN_ACT_NONE));
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {steps}}, 5));
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer = sn_optimizer_defaults(SN_SGD);
    /* too small to move a weight (0 is refused): the losses compare one computation */
    co.optimizer.learning_rate = 1e-30;
    CHECK_OK(sn_model_compile(m, &co));
    return m;
}

/* dst's variables = src's (the same layers; the step count does not enter their shapes). */
static void copy_weights(sn_model *dst, sn_model *src) {
    for (int i = 0; i < 3; i++) {
        sn_node a[8], b[8];
        int na = sn_model_layer_variables(dst, i, a, 8);
        int nb = sn_model_layer_variables(src, i, b, 8);
        CHECK(na == nb, "layer %d: %d vs %d variables", i, na, nb);
        for (int k = 0; k < na && k < nb; k++) {
            sn_shape s = sn_node_shape(sn_model_graph(src), b[k]);
            memcpy(sn_variable_data(sn_model_graph(dst), a[k]),
                   sn_variable_data(sn_model_graph(src), b[k]),
                   sizeof(float) * (size_t)sn_shape_numel(&s));
        }
    }
}

/* rows x cols ids (f32) and labels (i32) as a dataset batched by `batch`. */
static sn_dataset *dataset(const float *x, const int32_t *y, int64_t rows, int64_t cols,
                           int64_t batch) {
    sn_tensor *tx = NULL, *ty = NULL;
    sn_dataset *ds = NULL;
    CHECK_OK(sn_tensor_new(&tx, SN_F32, &(sn_shape){.ndim = 2, .dim = {rows, cols}}));
    CHECK_OK(sn_tensor_new(&ty, SN_I32, &(sn_shape){.ndim = 2, .dim = {rows, cols}}));
    if (tx && ty) {
        memcpy(sn_tensor_data(tx), x, sizeof(float) * (size_t)(rows * cols));
        memcpy(sn_tensor_data(ty), y, sizeof(int32_t) * (size_t)(rows * cols));
        CHECK_OK(sn_dataset_from_tensors(&ds, 2, (sn_tensor *[]){tx, ty}));
        if (ds) CHECK_OK(sn_dataset_batch(&ds, batch, true));
    }
    sn_tensor_free(tx);
    sn_tensor_free(ty);
    return ds;
}

static double fit_loss(sn_model *m, sn_dataset *ds) {
    sn_fit_opts fo = sn_fit_defaults();
    sn_history *h = NULL;
    CHECK_OK(sn_model_fit(m, ds, &fo, &h));
    double l = h ? sn_history_get(h, "loss", 0) : NAN;
    sn_history_free(h);
    return l;
}

static double eval_loss(sn_model *m, sn_dataset *ds) {
    double v[4] = {NAN};
    int n = 0;
    CHECK_OK(sn_model_evaluate(m, ds, 0, v, 4, &n));
    return v[0];
}

static bool close_to(double a, double b) { return fabs(a - b) <= 1e-5 * fmax(1.0, fabs(b)); }

static void test_kind(int kind, sn_rng *rng) {
    const char *kn = kind_name[kind];
    float xs[NB][LEN], xc[NCH * NB][CH];
    int32_t ys[NB][LEN], yc[NCH * NB][CH];
    for (int b = 0; b < NB; b++)
        for (int t = 0; t < LEN; t++) {
            xs[b][t] = (float)sn_rng_below(rng, V);
            ys[b][t] = (int32_t)sn_rng_below(rng, V);
            xc[(t / CH) * NB + b][t % CH] = xs[b][t];
            yc[(t / CH) * NB + b][t % CH] = ys[b][t];
        }
    /* the streams twice over: what two epochs of the stateful model see */
    float x2[NB][2 * LEN];
    int32_t y2[NB][2 * LEN];
    for (int b = 0; b < NB; b++)
        for (int t = 0; t < 2 * LEN; t++) {
            x2[b][t] = xs[b][t % LEN];
            y2[b][t] = ys[b][t % LEN];
        }
    sn_model *st = make(kind, CH, true), *twin = make(kind, LEN, false),
             *fresh = make(kind, CH, false), *twin2 = make(kind, 2 * LEN, false);
    sn_dataset *chunks = dataset(&xc[0][0], &yc[0][0], NCH * NB, CH, NB),
               *whole = dataset(&xs[0][0], &ys[0][0], NB, LEN, NB),
               *twice = dataset(&x2[0][0], &y2[0][0], NB, 2 * LEN, NB);
    if (!st || !twin || !fresh || !twin2 || !chunks || !whole || !twice) goto done;
    /* larger weights than the initializers' (x3): the state then moves the loss clearly */
    for (int i = 0; i < 3; i++) {
        sn_node v[8];
        int nv = sn_model_layer_variables(st, i, v, 8);
        for (int k = 0; k < nv; k++) {
            sn_shape s = sn_node_shape(sn_model_graph(st), v[k]);
            float *d = sn_variable_data(sn_model_graph(st), v[k]);
            for (int64_t j = 0; j < sn_shape_numel(&s); j++) d[j] *= 3.0f;
        }
    }
    copy_weights(twin, st);
    copy_weights(fresh, st);
    copy_weights(twin2, st);
    CHECK(sn_model_param_count(st, false) == sn_model_param_count(twin, false),
          "%s: the carried states were counted as parameters", kn);

    double want = eval_loss(twin, whole), zeros = eval_loss(fresh, chunks);
    double e1 = fit_loss(st, chunks);
    CHECK(close_to(e1, want), "%s: stateful fit loss %.8f, the whole streams give %.8f", kn, e1,
          want);
    CHECK(!close_to(zeros, want) && fabs(zeros - want) > 1e-4,
          "%s: chunks from zero states give %.8f, too close to %.8f to tell", kn, zeros, want);
    /* epoch 2 starts from epoch 1's final states: the second half of the doubled streams,
     * whose mean over 2 * LEN positions is (epoch 1 + epoch 2) / 2 */
    double e2 = fit_loss(st, chunks), w2 = 2 * eval_loss(twin2, twice) - want;
    CHECK(fabs(e2 - w2) <= 3e-5 * fmax(1.0, fabs(w2)) && fabs(e2 - e1) > 1e-4,
          "%s: epoch 2 loss %.8f, the doubled streams' second half gives %.8f (epoch 1 %.8f)",
          kn, e2, w2, e1);
    sn_model_reset_states(st);
    double ev = eval_loss(st, chunks);
    CHECK(close_to(ev, want), "%s: evaluate after reset %.8f, expected %.8f", kn, ev, want);
    if (close_to(e1, want) && close_to(ev, want))
        printf("ok  %-22s fit %.6f = whole streams %.6f (chunks from zeros %.6f); epoch 2 %.6f = "
           "%.6f; after reset %.6f\n", kn, e1, want, zeros, e2, w2, ev);

    /* predict, one chunk after another, against the twin's probabilities */
    sn_model_reset_states(st);
    sn_tensor *xw = NULL, *pw = NULL;
    CHECK_OK(sn_tensor_new(&xw, SN_F32, &(sn_shape){.ndim = 2, .dim = {NB, LEN}}));
    if (xw) {
        memcpy(sn_tensor_data(xw), xs, sizeof xs);
        CHECK_OK(sn_model_predict(twin, xw, &pw));
    }
    double worst = 0;
    for (int k = 0; pw && k < NCH; k++) {
        sn_tensor *xk = NULL, *pk = NULL;
        CHECK_OK(sn_tensor_new(&xk, SN_F32, &(sn_shape){.ndim = 2, .dim = {NB, CH}}));
        if (!xk) break;
        memcpy(sn_tensor_data(xk), xc[k * NB], sizeof(float) * NB * CH);
        CHECK_OK(sn_model_predict(st, xk, &pk));
        for (int b = 0; pk && b < NB; b++)
            for (int t = 0; t < CH; t++)
                for (int v = 0; v < V; v++) {
                    float a = ((const float *)sn_tensor_data(pk))[(b * CH + t) * V + v];
                    float e = ((const float *)sn_tensor_data(pw))[(b * LEN + k * CH + t) * V + v];
                    worst = fmax(worst, fabs((double)a - e));
                }
        sn_tensor_free(xk);
        sn_tensor_free(pk);
    }
    CHECK(pw && worst < 1e-6, "%s: predict chunk by chunk vs the whole streams: %.3g", kn, worst);
    sn_tensor_free(xw);
    sn_tensor_free(pw);

    /* a batch of 3 rows for a layer of batch size 2 */
    sn_dataset *threes = dataset(&xc[0][0], &yc[0][0], NCH * NB, CH, 3);
    sn_fit_opts fo = sn_fit_defaults();
    if (threes)
        CHECK_ERR(sn_model_fit(st, threes, &fo, NULL), SN_ERR_SHAPE,
                  "stateful with batch size 2, got a batch of 3");
    sn_dataset_free(threes);
done:
    sn_dataset_free(chunks);
    sn_dataset_free(whole);
    sn_dataset_free(twice);
    sn_model_free(twin2);
    sn_model_free(st);
    sn_model_free(twin);
    sn_model_free(fresh);
}

static void test_refusals(void) {
    sn_rnn_layer_opts o = sn_lstm_layer_defaults(4);
    o.stateful = true;
    sn_model *m = sn_sequential_new("no_batch");
    sn_model_add(m, sn_layer_lstm_ex(&o));
    CHECK_ERR(sn_model_build(m, &(sn_shape){.ndim = 2, .dim = {3, 2}}, 1), SN_ERR_INVALID,
              "stateful=True needs a fixed batch size, got batch_size 0");
    sn_model_free(m);

    /* under a strategy: refused before any replica is built */
    m = make(K_LSTM, CH, true);
    sn_strategy *s = NULL;
    CHECK_OK(sn_strategy_one_device(NULL, &s));
    float x[NB * CH] = {0};
    int32_t y[NB * CH] = {0};
    sn_dataset *ds = dataset(x, y, NB, CH, NB);
    if (m && s && ds) {
        CHECK_OK(sn_model_set_strategy(m, s));
        sn_fit_opts fo = sn_fit_defaults();
        CHECK_ERR(sn_model_fit(m, ds, &fo, NULL), SN_ERR_UNSUPPORTED, "is stateful");
        sn_model_set_strategy(m, NULL);
    }
    sn_dataset_free(ds);
    sn_model_free(m);
    sn_strategy_free(s);
}

int main(void) {
    sn_rng rng;
    sn_rng_init(&rng, 17, 0);
    for (int k = K_LSTM; k <= K_GRU_RB; k++) test_kind(k, &rng);
    test_refusals();
    return sn_test_finish("test_rnn_stateful");
}
