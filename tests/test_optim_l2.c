/* The L2 penalty's gradient fused into the sum with the data gradient (graph/plan_fuse.c,
 * SN_FUSED_ADD_L2; backend/cpu/cpu_elementwise.c) against the unfused plan of the same model
 * (SN_FUSE=relu keeps only the bias_add + relu fusion): after several fit steps every
 * variable (weights and slots) must be the same bits, for each optimizer (Adam; AdamW, whose
 * decay changes w; SGD with momentum; RMSprop with momentum).
 * The model has a kernel with L2 only, one with L1 and L2 (the L2 term's sum with the first
 * L1 term fuses, the rest stays) and a bias with L2: the training plan must hold exactly three
 * fused sums, each written over its data gradient's buffer (which dies there). */
#include <stdlib.h>
#include <string.h>

#include "graph/plan_impl.h"
#include "nn/nn_impl.h"
#include "nn/train/train_impl.h"
#include "plan_check.h"
#include "sn_test.h"

#define S1(a) {.ndim = 1, .dim = {a}}
#define S2(a, b) {.ndim = 2, .dim = {a, b}}

static sn_model *l2_model(sn_optimizer_opts opt) {
    sn_model *m = sn_sequential_new("l2");
    sn_dense_layer_opts a = sn_dense_layer_defaults(24), b = sn_dense_layer_defaults(3);
    a.activation = SN_ACT_RELU;
    a.kernel_regularizer.l2 = 0.01;
    a.bias_regularizer.l2 = 0.02;
    b.kernel_regularizer = (sn_regularizer){.l1 = 0.001, .l2 = 0.01};
    CHECK_OK(sn_model_add(m, sn_layer_dense_ex(&a)));
    CHECK_OK(sn_model_add(m, sn_layer_dense_ex(&b)));
    CHECK_OK(sn_model_build(m, &(sn_shape)S1(40), 7));
    /* a bias off zero, so that its penalty gradient is not trivially zero */
    float *bias = sn_variable_data(m->g, m->layers[0]->vars[1]);
    for (int i = 0; i < 24; i++) bias[i] = 0.05f * (float)(i - 12);
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer = opt;
    CHECK_OK(sn_model_compile(m, &co));
    return m;
}

/* Fused calls of SN_FUSED_ADD_L2 in the model's training plans; *inplace: those that write
 * the sum over the data gradient's buffer (the planner's take_over). */
static int fused_updates(const sn_model *m, int *inplace) {
    int n = 0;
    *inplace = 0;
    const sn_train_state *t = m->train;
    for (int i = 0; t && i < t->n_plans; i++) {
        const sn_plan *p = t->plans[i].plan;
        if (t->plans[i].kind != SN_PLAN_TRAIN || !p) continue;
        plan_check_arena(p, "l2 model's training plan");
        for (int c = 0; c < p->n_calls; c++) {
            n += p->calls[c].fused == SN_FUSED_ADD_L2;
            *inplace += p->calls[c].fused == SN_FUSED_ADD_L2 && p->calls[c].out &&
                        p->calls[c].out == p->calls[c].in[2];
        }
    }
    return n;
}

static void check_case(const char *name, sn_optimizer_opts opt, sn_dataset *ds) {
    sn_model *ms[2];
    int fused[2], inplace[2];
    for (int k = 0; k < 2; k++) {
        if (k == 1) setenv("SN_FUSE", "relu", 1);
        ms[k] = l2_model(opt);
        sn_fit_opts fo = sn_fit_defaults();
        fo.epochs = 3;
        sn_history *h = NULL;
        CHECK_OK(sn_model_fit(ms[k], ds, &fo, &h));
        sn_history_free(h);
        unsetenv("SN_FUSE");
        fused[k] = fused_updates(ms[k], &inplace[k]);
    }
    CHECK(fused[0] == 3 && fused[1] == 0, "%s: %d fused sums (want 3), %d unfused (want 0)",
          name, fused[0], fused[1]);
    CHECK(inplace[0] == 3, "%s: %d of the fused sums write over the data gradient (want 3: it "
          "has no other reader)", name, inplace[0]);
    size_t n0, n1;
    const unsigned char *v0 = sn_graph_variable_buffer(ms[0]->g, &n0);
    const unsigned char *v1 = sn_graph_variable_buffer(ms[1]->g, &n1);
    CHECK(n0 == n1, "%s: variable buffers of %zu and %zu bytes", name, n0, n1);
    size_t bad = 0, first = 0;
    for (size_t i = 0; n0 == n1 && i < n0; i += 4)
        if (memcmp(v0 + i, v1 + i, 4) != 0 && bad++ == 0) first = i / 4;
    CHECK(bad == 0, "%s: %zu of %zu variable floats differ from the unfused plan's (first: "
          "float %zu, %.9g vs %.9g)", name, bad, n0 / 4, first, ((const float *)v0)[first],
          ((const float *)v1)[first]);
    sn_model_free(ms[0]);
    sn_model_free(ms[1]);
}

int main(void) {
    enum { N = 32 };
    sn_tensor *x = NULL, *y = NULL;
    CHECK_OK(sn_tensor_new(&x, SN_F32, &(sn_shape)S2(N, 40)));
    CHECK_OK(sn_tensor_new(&y, SN_I32, &(sn_shape)S1(N)));
    sn_rng r;
    sn_rng_init(&r, 3, 0);
    for (int i = 0; i < N * 40; i++) ((float *)sn_tensor_data(x))[i] = (float)sn_rng_normal(&r);
    for (int i = 0; i < N; i++) ((int32_t *)sn_tensor_data(y))[i] = i % 3;
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&ds, 2, (sn_tensor *[]){x, y}));
    CHECK_OK(sn_dataset_batch(&ds, 8, false));

    check_case("adam", sn_optimizer_defaults(SN_ADAM), ds);
    check_case("adamw", sn_optimizer_defaults(SN_ADAMW), ds);
    sn_optimizer_opts sgd = sn_optimizer_defaults(SN_SGD);
    sgd.momentum = 0.9;
    check_case("sgd momentum", sgd, ds);
    sn_optimizer_opts rms = sn_optimizer_defaults(SN_RMSPROP);
    rms.momentum = 0.5;
    check_case("rmsprop momentum", rms, ds);

    sn_dataset_free(ds);
    sn_tensor_free(x);
    sn_tensor_free(y);
    return sn_test_finish("test_optim_l2");
}
