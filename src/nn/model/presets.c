/* Named Sequential models (unbuilt): the CNN of TensorFlow's "Use TPUs" guide, a small CNN
 * and an MLP, all for 28x28x1 images and 10 classes (Fashion-MNIST) but buildable for any
 * input they fit. */
#include <string.h>

#include "nn/nn_impl.h"

/* Adds the END-terminated list. sn_model_add owns each layer from the call on (a NULL one,
 * whose constructor failed, is reported), so every layer is handed over and none leaks; the
 * first error is returned. */
static sn_status add_all(sn_model *m, sn_layer **layers) {
    sn_status st = SN_OK;
    for (int i = 0; layers[i] != (sn_layer *)-1; i++) {
        sn_status s = sn_model_add(m, layers[i]);
        if (st == SN_OK) st = s;
    }
    return st;
}

#define END ((sn_layer *)-1)

/* The guide's create_model() puts regularizer = tf.keras.regularizers.L2(1e-5) on the kernel
 * (kernel_regularizer only, no bias_regularizer) of each of its five layers. */
static const sn_regularizer guide_l2 = {.l2 = 1e-5};

static sn_layer *guide_conv(int64_t filters) {
    sn_conv2d_layer_opts o = sn_conv2d_layer_defaults(filters, 3, 3);
    o.activation = SN_ACT_RELU;
    o.kernel_regularizer = guide_l2;
    return sn_layer_conv2d_ex(&o);
}

static sn_layer *guide_dense(int64_t units, sn_activation act) {
    sn_dense_layer_opts o = sn_dense_layer_defaults(units);
    o.activation = act;
    o.kernel_regularizer = guide_l2;
    return sn_layer_dense_ex(&o);
}

sn_status sn_model_preset(const char *name, sn_model **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_model_preset: out is NULL");
    *out = NULL;
    static const char *accepted = "'tpu_guide_cnn', 'small_cnn', 'mlp'";
    if (!name) return sn_errorf(SN_ERR_NOT_FOUND, "model preset is NULL; accepted: %s", accepted);
    sn_model *m = NULL;
    sn_status st;
    if (strcmp(name, "tpu_guide_cnn") == 0) {
        /* The guide's create_model(): 38,375,818 parameters on 28x28x1, L2(1e-5) kernels. */
        if (!(m = sn_sequential_new(name))) return SN_ERR_NOMEM;
        st = add_all(m, (sn_layer *[]){guide_conv(256), guide_conv(256), sn_layer_flatten(),
                                       guide_dense(256, SN_ACT_RELU),
                                       guide_dense(128, SN_ACT_RELU),
                                       guide_dense(10, SN_ACT_NONE), END});
    } else if (strcmp(name, "small_cnn") == 0) {
        if (!(m = sn_sequential_new(name))) return SN_ERR_NOMEM;
        st = add_all(m, (sn_layer *[]){sn_layer_conv2d(32, 3, 3, SN_ACT_RELU),
                                       sn_layer_max_pool2d(2, 2),
                                       sn_layer_conv2d(64, 3, 3, SN_ACT_RELU),
                                       sn_layer_max_pool2d(2, 2),
                                       sn_layer_flatten(),
                                       sn_layer_dense(128, SN_ACT_RELU),
                                       sn_layer_dense(10, SN_ACT_NONE), END});
    } else if (strcmp(name, "mlp") == 0) {
        if (!(m = sn_sequential_new(name))) return SN_ERR_NOMEM;
        st = add_all(m, (sn_layer *[]){sn_layer_flatten(),
                                       sn_layer_dense(128, SN_ACT_RELU),
                                       sn_layer_dense(10, SN_ACT_NONE), END});
    } else if (strcmp(name, "char_lstm") == 0 || strcmp(name, "char_lstm_small") == 0) {
        return sn_errorf(SN_ERR_INVALID, "model preset '%s' is sized by the vocabulary: build it "
                         "with sn_model_preset_text (sinter train --data TEXT does)", name);
    } else {
        return sn_errorf(SN_ERR_NOT_FOUND, "unknown model preset '%s'; accepted: %s", name,
                         accepted);
    }
    if (st != SN_OK) {
        sn_model_free(m);
        return st;
    }
    *out = m;
    return SN_OK;
}
