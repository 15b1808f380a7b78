/* A model placed on a device through its compile options (sn_compile_opts.device, the
 * library side of `--device NAME`): every accepted form of a name resolves to the same
 * device; an unknown name and a GPU where there is none fail at compile with the reason
 * ("no GPU: ..."), not at the first step; the training plans land on the named device and
 * give the same bits as the default placement; fp32_strict changes nothing on the CPU. The
 * GPU half (a model trained on gpu:0) is scripts/gpu_check.sh's, on a machine with one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/gpu.h"
#include "graph/plan_impl.h"
#include "nn/nn_impl.h"
#include "nn/train/train_impl.h"
#include "sinter/data.h"
#include "sinter/device.h"
#include "sinter/nn.h"
#include "sn_test.h"

static const char *const cpu0 = "/job:localhost/replica:0/task:0/device:CPU:0";

static void test_names(void) {
    const char *forms[] = {"cpu:0", "CPU:0", "/device:CPU:0", "/cpu:0", cpu0,
                           "/job:localhost/replica:0/task:0/device:cpu:0"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        int idx = -1;
        CHECK_OK(sn_device_find(forms[i], &idx));
        CHECK(idx == 0, "'%s' is device %d, want 0", forms[i], idx);
    }
    int idx;
    CHECK_ERR(sn_device_find("tpu:0", &idx), SN_ERR_NOT_FOUND, "unknown device 'tpu:0'");
    CHECK_ERR(sn_device_find("gpu:x", &idx), SN_ERR_NOT_FOUND, "unknown device");
    CHECK_ERR(sn_device_find("cpu:7", &idx), SN_ERR_NOT_FOUND, "does not exist");
    if (sn_gpu_count() == 0) {
        const char *gpus[] = {"gpu:0", "GPU:0", "/device:GPU:0",
                              "/job:localhost/replica:0/task:0/device:GPU:0"};
        for (size_t i = 0; i < sizeof gpus / sizeof gpus[0]; i++) {
            CHECK_ERR(sn_device_find(gpus[i], &idx), SN_ERR_NOT_FOUND, "no GPU: ");
            CHECK(strstr(sn_last_error(), sn_gpu_none_reason()) != NULL,
                  "'%s': the message does not say why there is no GPU: %s", gpus[i],
                  sn_last_error());
        }
    } else {
        printf("this machine has %d GPU(s): the no-GPU messages are not checked\n", sn_gpu_count());
    }
}

static sn_model *small_model(void) {
    sn_model *m = sn_sequential_new("placed");
    CHECK_OK(sn_model_add(m, sn_layer_conv2d(4, 3, 3, SN_ACT_RELU)));
    CHECK_OK(sn_model_add(m, sn_layer_max_pool2d(2, 2)));
    CHECK_OK(sn_model_add(m, sn_layer_flatten()));
    CHECK_OK(sn_model_add(m, sn_layer_dense(5, SN_ACT_NONE)));
    CHECK_OK(sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {8, 8, 1}}, 3));
    return m;
}

static sn_dataset *data(void) {
    enum { N = 64 };
    sn_tensor *xy[2] = {NULL, NULL};
    CHECK_OK(sn_tensor_new(&xy[0], SN_F32, &(sn_shape){.ndim = 4, .dim = {N, 8, 8, 1}}));
    CHECK_OK(sn_tensor_new(&xy[1], SN_I32, &(sn_shape){.ndim = 1, .dim = {N}}));
    float *x = sn_tensor_data(xy[0]);
    int32_t *y = sn_tensor_data(xy[1]);
    for (int i = 0; i < N * 64; i++) x[i] = (float)((i * 37) % 17) / 17.0f - 0.4f;
    for (int i = 0; i < N; i++) y[i] = (i * 7) % 5;
    sn_dataset *ds = NULL;
    CHECK_OK(sn_dataset_from_tensors(&ds, 2, xy));
    CHECK_OK(sn_dataset_batch(&ds, 16, true));
    sn_tensor_free(xy[0]);
    sn_tensor_free(xy[1]);
    return ds;
}

/* Trains 2 epochs with the given device and precision; returns the variables (malloc'ed). */
static unsigned char *train(const char *device, bool strict, size_t *bytes, char *plan_dev) {
    sn_model *m = small_model();
    sn_compile_opts c = sn_compile_defaults();
    c.steps_per_execution = 3;
    c.fp32_strict = strict;
    if (device) snprintf(c.device, sizeof c.device, "%s", device);
    CHECK_OK(sn_model_compile(m, &c));
    sn_dataset *ds = data();
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 2;
    CHECK_OK(sn_model_fit(m, ds, &f, NULL));
    plan_dev[0] = '\0';
    sn_train_state *t = m->train;
    for (int i = 0; t && i < t->n_plans; i++)
        if (t->plans[i].kind == SN_PLAN_TRAIN && t->plans[i].plan)
            snprintf(plan_dev, 96, "%s", sn_plan_device(t->plans[i].plan));
    size_t n = 0;
    const void *buf = sn_graph_variable_buffer(sn_model_graph(m), &n);
    unsigned char *copy = malloc(n ? n : 1);
    if (copy) memcpy(copy, buf, n);
    *bytes = n;
    sn_dataset_free(ds);
    sn_model_free(m);
    return copy;
}

static void test_compile_device(void) {
    size_t n0, n1, n2;
    char d0[96], d1[96], d2[96];
    unsigned char *w0 = train(NULL, false, &n0, d0);
    unsigned char *w1 = train(cpu0, false, &n1, d1);
    unsigned char *w2 = train("/device:CPU:0", true, &n2, d2);
    CHECK(!strcmp(d0, cpu0) && !strcmp(d1, cpu0) && !strcmp(d2, cpu0),
          "training plans on %s, %s, %s; want %s", d0, d1, d2, cpu0);
    CHECK(w0 && w1 && n0 == n1 && !memcmp(w0, w1, n0), "placed on %s: different weights", cpu0);
    CHECK(w0 && w2 && n0 == n2 && !memcmp(w0, w2, n0), "fp32_strict changed the CPU's bits");
    free(w0);
    free(w1);
    free(w2);

    sn_model *m = small_model();
    sn_compile_opts c = sn_compile_defaults();
    snprintf(c.device, sizeof c.device, "tpu:0");
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_NOT_FOUND, "compile: unknown device 'tpu:0'");
    if (sn_gpu_count() == 0) {
        snprintf(c.device, sizeof c.device, "gpu:0");
        CHECK_ERR(sn_model_compile(m, &c), SN_ERR_NOT_FOUND, "no GPU: device 'gpu:0'");
    }
    memset(c.device, 'x', sizeof c.device); /* no terminator */
    CHECK_ERR(sn_model_compile(m, &c), SN_ERR_INVALID, "not NUL-terminated");
    sn_model_free(m);
}

int main(void) {
    test_names();
    test_compile_device();
    return sn_test_finish("test_device_placement");
}
