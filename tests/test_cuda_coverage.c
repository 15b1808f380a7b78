/* Which ops of real training steps the CUDA kernel table runs, without a GPU: the training
 * plans (forward, gradients, optimizer, metric accumulators; unfused, as a GPU plan is) of the
 * built-in models and of sinter builds of the Sequential Keras models of the interop tests
 * (tests/keras_models_interop.py: bn_cnn, mlp_gelu, text_lstm, text_gru, text_gru_rb), each
 * call checked against sn_cuda_kernel_select with its real shapes and attributes.
 *
 * The output is the coverage table docs/cuda.md quotes. The gaps are stated below per model:
 * the test fails when the table changes (a new row closes a gap, or a row stops taking a call),
 * so the list and the docs are updated with it. A GPU plan with a gap is refused when it is
 * made, naming the op (graph/plan.c): never a host fallback. The functional interop models
 * (residual, two_in_two_out, layer_mix) are not built here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sn_test.h"

#ifndef SN_HAVE_CUDA
int main(void) {
    printf("SKIP: this build has no CUDA backend\n");
    return 77;
}
#else
#include "backend/cuda/cuda_table.h"
#include "graph/plan_impl.h"
#include "nn/nn_impl.h"
#include "nn/train/train_impl.h"
#include "sinter/nn.h"

typedef struct model_case {
    const char *name;
    const char *gaps; /* the ops without a CUDA row for this model's calls, sorted, ", " */
} model_case;

static sn_layer *conv_same_nobias(int64_t f) {
    sn_conv2d_layer_opts o = sn_conv2d_layer_defaults(f, 3, 3);
    o.padding = SN_PAD_SAME;
    o.use_bias = false;
    return sn_layer_conv2d_ex(&o);
}

static sn_layer *gru(int64_t units, bool seq, bool reset_after) {
    sn_rnn_layer_opts o = sn_gru_layer_defaults(units);
    o.return_sequences = seq;
    o.reset_after = reset_after;
    return sn_layer_gru_ex(&o);
}

/* The model `name`, built, with its input shape, label shape and loss. */
static sn_status make(const char *name, sn_model **out, sn_shape *y, sn_loss_type *loss) {
    sn_model *m = NULL;
    sn_shape in = {.ndim = 3, .dim = {28, 28, 1}};
    *y = (sn_shape){.ndim = 1, .dim = {8}};
    *loss = SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY;
    sn_status s = SN_OK;
    if (!strcmp(name, "tpu_guide_cnn") || !strcmp(name, "small_cnn") || !strcmp(name, "mlp")) {
        s = sn_model_preset(name, &m);
    } else if (!strncmp(name, "char_", 5)) {
        s = sn_model_preset_text(name, 65, &m);
        in = (sn_shape){.ndim = 1, .dim = {16}};
        *y = (sn_shape){.ndim = 2, .dim = {8, 16}};
    } else if (!strcmp(name, "bn_cnn")) {
        m = sn_sequential_new(name);
        sn_pool2d_opts ap = sn_pool2d_opts_defaults();
        ap.stride_h = ap.stride_w = 1;
        sn_layer *ls[] = {conv_same_nobias(8), sn_layer_batch_norm(), sn_layer_activation(SN_ACT_RELU),
                          sn_layer_max_pool2d(2, 2), sn_layer_conv2d(16, 3, 3, SN_ACT_RELU),
                          sn_layer_avg_pool2d_ex(&ap), sn_layer_global_avg_pool2d(),
                          sn_layer_dropout(0.3), sn_layer_dense(5, SN_ACT_SOFTMAX)};
        for (size_t i = 0; i < sizeof ls / sizeof ls[0] && s == SN_OK; i++) s = sn_model_add(m, ls[i]);
        in = (sn_shape){.ndim = 3, .dim = {12, 12, 3}};
    } else if (!strcmp(name, "mlp_gelu")) {
        m = sn_sequential_new(name);
        sn_shape r = {.ndim = 2, .dim = {4, 8}};
        sn_layer *ls[] = {sn_layer_dense(32, SN_ACT_GELU), sn_layer_dropout(0.2), sn_layer_reshape(&r),
                          sn_layer_flatten(), sn_layer_dense(4, SN_ACT_SOFTMAX)};
        for (size_t i = 0; i < sizeof ls / sizeof ls[0] && s == SN_OK; i++) s = sn_model_add(m, ls[i]);
        in = (sn_shape){.ndim = 1, .dim = {10}};
    } else { /* text_lstm, text_gru, text_gru_rb */
        m = sn_sequential_new(name);
        bool lstm = !strcmp(name, "text_lstm"), rb = !strcmp(name, "text_gru_rb");
        sn_layer *rnn = lstm ? sn_layer_lstm(16, true) : gru(12, rb, !rb);
        sn_layer *ls[] = {sn_layer_embedding(20, 8), rnn, sn_layer_dense(20, SN_ACT_NONE)};
        for (size_t i = 0; i < sizeof ls / sizeof ls[0] && s == SN_OK; i++) s = sn_model_add(m, ls[i]);
        in = (sn_shape){.ndim = 1, .dim = {10}};
        if (lstm || rb) *y = (sn_shape){.ndim = 2, .dim = {8, 10}};
    }
    if (s == SN_OK) s = sn_model_build(m, &in, 1);
    if (s != SN_OK) {
        sn_model_free(m);
        return s;
    }
    *out = m;
    return SN_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void check_model(const model_case *mc) {
    sn_model *m = NULL;
    sn_shape y;
    sn_loss_type loss;
    sn_status s = make(mc->name, &m, &y, &loss);
    CHECK(s == SN_OK, "%s: building: %s", mc->name, sn_last_error());
    if (s != SN_OK) return;
    sn_compile_opts co = sn_compile_defaults();
    co.loss = loss;
    bool softmax_out = !strcmp(mc->name, "bn_cnn") || !strcmp(mc->name, "mlp_gelu");
    co.from_logits = !softmax_out;
    CHECK_OK(sn_model_compile(m, &co));
    sn_cached_plan *cp = NULL;
    s = sn_train_plan(m, SN_PLAN_TRAIN, 8, &y, SN_I32, &cp);
    CHECK(s == SN_OK, "%s: training plan: %s", mc->name, sn_last_error());
    if (s != SN_OK) {
        sn_model_free(m);
        return;
    }
    const sn_plan *p = cp->plan;
    const char *missing[256];
    int nm = 0, covered = 0;
    for (int c = 0; c < p->n_calls; c++) {
        sn_kcall k = p->calls[c];
        k.fused = 0; /* a GPU plan is unfused: its table has no fused rows */
        k.relu = false;
        if (sn_cuda_kernel_select(&k)) {
            covered++;
            continue;
        }
        const char *op = sn_ops[k.op]->name;
        bool seen = false;
        for (int i = 0; i < nm; i++) seen = seen || !strcmp(missing[i], op);
        if (!seen && nm < 256) missing[nm++] = op;
    }
    qsort(missing, (size_t)nm, sizeof *missing, cmp_str);
    char got[1024] = "";
    for (int i = 0; i < nm; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? ", " : "", missing[i]);
    printf("| %s | %d | %d | %s |\n", mc->name, p->n_calls, covered, nm ? got : "none");
    CHECK(!strcmp(got, mc->gaps), "%s: ops without a CUDA row are '%s'; the test expects '%s' "
          "(update the list here and docs/cuda.md with the table)", mc->name, got, mc->gaps);
    sn_model_free(m);
}

int main(void) {
    /* unfused calls: the reference table has no fused rows, as the CUDA table */
    setenv("SN_KERNELS", "ref", 1);
    static const model_case cases[] = {
        {"tpu_guide_cnn", ""},
        {"small_cnn", ""},
        {"mlp", ""},
        {"bn_cnn", ""},
        {"mlp_gelu", ""},
        {"text_lstm", "gather, gather_grad, lstm_layer, lstm_layer_grad"},
        {"text_gru", "concat, gather, gather_grad, gru_layer, gru_layer_grad, slice_grad"},
        {"text_gru_rb", "concat, gather, gather_grad, gru_reset_before, gru_reset_before_grad, slice_grad"},
        {"char_lstm_small", "gather, gather_grad, lstm_layer, lstm_layer_grad"},
        {"char_transformer_small", "attention, attention_grad, gather, gather_grad, slice_grad"},
    };
    printf("| model | training calls | with a CUDA row | ops without one |\n| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_model(&cases[i]);
    return sn_test_finish("test_cuda_coverage");
}
#endif
