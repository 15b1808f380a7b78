/* A Functional model from C, as keras.Model(inputs, outputs) is built in Python:
 *
 *     inp = keras.Input((8, 8, 3))
 *     x = layers.Conv2D(8, 3, padding="same", use_bias=False)(inp)
 *     x = layers.BatchNormalization()(x)
 *     x = layers.ReLU()(x)
 *     y = layers.Conv2D(8, 3, padding="same")(x)
 *     x = layers.Add()([x, y])
 *     x = layers.GlobalAveragePooling2D()(x)
 *     model = keras.Model(inp, layers.Dense(3)(x), name="residual")
 *
 * then its summary (Keras's table with "Connected to"), a few epochs on random images whose
 * class is their brightest colour channel (on average), and the model saved as residual.keras,
 * which keras.models.load_model opens. Usage: functional_residual [out.keras] */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sinter/data.h"
#include "sinter/nn.h"

#define TRY(x)                                                     \
    do {                                                           \
        if ((x) != SN_OK) {                                        \
            fprintf(stderr, "functional_residual: %s\n", sn_last_error()); \
            return 1;                                              \
        }                                                          \
    } while (0)

static sn_status call(sn_model *m, sn_layer *l, sn_ftensor *args, int n, sn_ftensor *out) {
    return sn_layer_call(m, l, args, n, out);
}

static int build(sn_model *m) {
    sn_ftensor x, y;
    TRY(sn_functional_input(m, &(sn_functional_input_opts){.shape = {3, {8, 8, 3}}}, &x));
    sn_conv2d_layer_opts c = sn_conv2d_layer_defaults(8, 3, 3);
    c.padding = SN_PAD_SAME;
    c.use_bias = false; /* BatchNormalization's mean takes a bias away */
    TRY(call(m, sn_layer_conv2d_ex(&c), &x, 1, &x));
    TRY(call(m, sn_layer_batch_norm(), &x, 1, &x));
    sn_relu_layer_opts r = sn_relu_layer_defaults();
    TRY(call(m, sn_layer_relu_ex(&r), &x, 1, &x));
    c.use_bias = true;
    TRY(call(m, sn_layer_conv2d_ex(&c), &x, 1, &y));
    TRY(call(m, sn_layer_merge(SN_MERGE_ADD), (sn_ftensor[]){x, y}, 2, &x));
    TRY(call(m, sn_layer_global_pool2d(false, false), &x, 1, &x));
    TRY(call(m, sn_layer_dense(3, SN_ACT_NONE), &x, 1, &x));
    TRY(sn_functional_set_outputs(m, &x, 1));
    return 0;
}

int main(int argc, char **argv) {
    const char *out = argc > 1 ? argv[1] : "residual.keras";
    sn_model *m = sn_functional_new("residual");
    if (!m || build(m) != 0) return 1;
    TRY(sn_model_build(m, NULL, 1));
    TRY(sn_model_summary(m, stdout));

    enum { N = 512 };
    sn_tensor *x = NULL, *y = NULL;
    TRY(sn_tensor_new(&x, SN_F32, &(sn_shape){4, {N, 8, 8, 3}}));
    TRY(sn_tensor_new(&y, SN_I32, &(sn_shape){1, {N}}));
    float *xd = sn_tensor_data(x);
    int32_t *yd = sn_tensor_data(y);
    uint64_t seed = 7;
    for (int i = 0; i < N; i++) {
        double sum[3] = {0, 0, 0};
        for (int p = 0; p < 64 * 3; p++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull; /* an LCG */
            xd[i * 192 + p] = (float)(seed >> 40) / (float)(1 << 24);
            sum[p % 3] += xd[i * 192 + p];
        }
        yd[i] = sum[0] > sum[1] ? (sum[0] > sum[2] ? 0 : 2) : (sum[1] > sum[2] ? 1 : 2);
    }
    sn_dataset *ds = NULL;
    TRY(sn_dataset_from_tensors(&ds, 2, (sn_tensor *[]){x, y}));
    TRY(sn_dataset_shuffle(&ds, N, 1, true));
    TRY(sn_dataset_batch(&ds, 32, true));
    sn_compile_opts co = sn_compile_defaults(); /* Adam, sparse categorical cross-entropy */
    co.from_logits = true;
    TRY(sn_model_compile(m, &co));
    sn_fit_opts fo = sn_fit_defaults();
    fo.epochs = 10;
    sn_callback *bar = sn_callback_progress_bar(stdout, 1);
    fo.callbacks = &bar;
    fo.n_callbacks = 1;
    TRY(sn_model_fit(m, ds, &fo, NULL));
    TRY(sn_model_save(m, out));
    printf("saved %s (keras.models.load_model opens it)\n", out);
    sn_callback_free(bar);
    sn_dataset_free(ds);
    sn_tensor_free(x);
    sn_tensor_free(y);
    sn_model_free(m);
    return 0;
}
