/* Built Sequential model -> the config Keras 3 writes (model_config.h): module, class_name,
 * config (with an InputLayer first and every layer's full config), registered_name,
 * build_config, and compile_config when the model is compiled, so that
 * keras.models.load_model rebuilds and recompiles the same model. */
#include <string.h>

#include "nn/model_config.h"
#include "nn/train_impl.h"

/* [batch, d1, ...]: batch null, or the fixed batch a stateful RNN needs (> 0). */
static json_t *shape_json(const sn_shape *s, int64_t batch) {
    json_t *a = json_array();
    json_array_append_new(a, batch > 0 ? json_integer(batch) : json_null());
    for (int i = 0; i < s->ndim; i++) json_array_append_new(a, json_integer(s->dim[i]));
    return a;
}

static json_t *optimizer_json(const sn_optimizer_opts *o) {
    static const char *cls[] = {"SGD", "Adam", "AdamW", "RMSprop"};
    static const char *name[] = {"sgd", "adam", "adamw", "rmsprop"};
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(name[o->type]));
    json_object_set_new(c, "learning_rate", json_real(o->learning_rate));
    json_object_set_new(c, "weight_decay",
                        o->type == SN_ADAMW ? json_real(o->weight_decay) : json_null());
    json_object_set_new(c, "clipnorm", json_null());
    json_object_set_new(c, "global_clipnorm", json_null());
    json_object_set_new(c, "clipvalue", json_null());
    json_object_set_new(c, "use_ema", json_false());
    json_object_set_new(c, "ema_momentum", json_real(0.99));
    json_object_set_new(c, "ema_overwrite_frequency", json_null());
    json_object_set_new(c, "loss_scale_factor", json_null());
    json_object_set_new(c, "gradient_accumulation_steps", json_null());
    switch (o->type) {
    case SN_SGD:
        json_object_set_new(c, "momentum", json_real(o->momentum));
        json_object_set_new(c, "nesterov", json_boolean(o->nesterov));
        break;
    case SN_ADAM: case SN_ADAMW:
        json_object_set_new(c, "beta_1", json_real(o->beta_1));
        json_object_set_new(c, "beta_2", json_real(o->beta_2));
        json_object_set_new(c, "epsilon", json_real(o->epsilon));
        json_object_set_new(c, "amsgrad", json_false());
        break;
    case SN_RMSPROP:
        json_object_set_new(c, "rho", json_real(o->rho));
        json_object_set_new(c, "momentum", json_real(o->momentum));
        json_object_set_new(c, "epsilon", json_real(o->epsilon));
        json_object_set_new(c, "centered", json_false());
        break;
    }
    return sn_cfg_keras_object("keras.optimizers", cls[o->type], c);
}

static json_t *loss_json(const sn_compile_opts *o) {
    static const char *cls[] = {"SparseCategoricalCrossentropy", "CategoricalCrossentropy",
                                "BinaryCrossentropy", "MeanSquaredError"};
    static const char *name[] = {"sparse_categorical_crossentropy", "categorical_crossentropy",
                                 "binary_crossentropy", "mean_squared_error"};
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(name[o->loss]));
    json_object_set_new(c, "reduction", json_string("sum_over_batch_size"));
    if (o->loss != SN_LOSS_MEAN_SQUARED_ERROR)
        json_object_set_new(c, "from_logits", json_boolean(o->from_logits));
    if (o->loss == SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY) {
        json_object_set_new(c, "ignore_class", json_null());
    } else if (o->loss != SN_LOSS_MEAN_SQUARED_ERROR) {
        json_object_set_new(c, "label_smoothing", json_real(0.0));
        json_object_set_new(c, "axis", json_integer(-1));
    }
    return sn_cfg_keras_object("keras.losses", cls[o->loss], c);
}

static json_t *compile_json(const sn_compile_opts *o) {
    json_t *c = json_object();
    json_object_set_new(c, "optimizer", optimizer_json(&o->optimizer));
    json_object_set_new(c, "loss", loss_json(o));
    json_object_set_new(c, "loss_weights", json_null());
    json_t *ms = json_array();
    for (int i = 0; i < o->n_metrics; i++)
        json_array_append_new(ms, json_string(o->metrics[i] == SN_METRIC_ACCURACY
                                                  ? "accuracy" : "sparse_categorical_accuracy"));
    json_object_set_new(c, "metrics", ms);
    json_object_set_new(c, "weighted_metrics", json_null());
    json_object_set_new(c, "run_eagerly", json_false());
    json_object_set_new(c, "steps_per_execution", json_integer(o->steps_per_execution));
    json_object_set_new(c, "jit_compile", json_false());
    return c;
}

json_t *sn_model_to_config(sn_model *m) {
    if (!m || !m->built) {
        sn_errorf(SN_ERR_STATE, "writing a model config: the model %s", m ? "is not built" : "is NULL");
        return NULL;
    }
    const bool compiled = m->train && m->train->compiled;
    const bool bf16 = compiled && m->train->opts.mixed_bfloat16;
    json_t *layers = json_array();
    /* Integer ids feed an Embedding: Keras's Input then has dtype int32. */
    bool ids = m->n_layers > 0 && !strcmp(m->layers[0]->vt->class_name, "Embedding");
    int64_t batch = 0; /* a stateful layer's: Keras reads it from the shapes */
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->rnn.stateful) batch = m->layers[i]->rnn.batch_size;
    json_t *in = json_pack("{s:o, s:s, s:b, s:b, s:s, s:b}", "batch_shape",
                           shape_json(&m->input_shape, batch), "dtype", ids ? "int32" : "float32",
                           "sparse", 0, "ragged", 0, "name", "input_layer", "optional", 0);
    json_array_append_new(layers, sn_cfg_keras_object("keras.layers", "InputLayer", in));
    for (int i = 0; i < m->n_layers; i++) {
        const sn_layer *l = m->layers[i];
        json_t *c = sn_cfg_write_layer(l, bf16);
        if (!c) {
            json_decref(layers);
            return NULL;
        }
        json_t *e = sn_cfg_keras_object("keras.layers", l->vt->class_name, c);
        json_object_set_new(e, "build_config",
                            json_pack("{s:o}", "input_shape", shape_json(&l->in_shape, batch)));
        json_array_append_new(layers, e);
    }
    json_t *cfg = json_object();
    json_object_set_new(cfg, "name", json_string(m->name));
    json_object_set_new(cfg, "trainable", json_true());
    json_object_set_new(cfg, "dtype", sn_cfg_dtype_policy(bf16));
    json_object_set_new(cfg, "layers", layers);
    json_object_set_new(cfg, "build_input_shape", shape_json(&m->input_shape, batch));
    json_t *root = sn_cfg_keras_object("keras", "Sequential", cfg);
    if (!root) return NULL;
    json_object_set_new(root, "build_config",
                        json_pack("{s:o}", "input_shape", shape_json(&m->input_shape, batch)));
    if (compiled) json_object_set_new(root, "compile_config", compile_json(&m->train->opts));
    return root;
}
