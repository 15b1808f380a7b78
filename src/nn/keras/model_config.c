/* Keras model config -> built model, and compile_config -> sn_compile_opts (model_config.h).
 * A Sequential config's layers are read in order; a Functional config's graph of layer calls
 * by model_config_functional.c. */
#include <math.h>
#include <string.h>

#include "nn/keras/model_config.h"


/* ---- layers ------------------------------------------------------------------------------ */

typedef struct reader {
    sn_model *m;
    sn_cfg_state cs;
    bool have_input;
    sn_shape input;
    int64_t batch; /* the InputLayer's fixed batch size (stateful layers need one), 0: null */
} reader;

/* One entry of config.layers: {"module", "class_name", "config", ...}. */
static sn_status read_entry(reader *r, const json_t *e, int index) {
    const char *cls = NULL;
    const json_t *cfg = NULL;
    char what[64];
    snprintf(what, sizeof what, "layer %d", index);
    SN_TRY(sn_cfg_object(e, what, "layers", &cls, &cfg));
    static const char *const seq_keys[] = {"module", "class_name", "config", "registered_name",
                                           "build_config", NULL};
    const char *lname = NULL;
    bool ids = false;
    if (cfg) sn_cfg_str(cfg, "name", false, &lname);
    sn_status st = sn_cfg_known_keys(e, "a layer entry", seq_keys);
    if (st == SN_OK && !strcmp(cls, "InputLayer")) {
        if (r->have_input || sn_model_layer_count(r->m) > 0)
            st = sn_errorf(SN_ERR_UNSUPPORTED, "an InputLayer after other layers; sinter "
                           "supports one input, first");
        else
            st = sn_cfg_read_input(cfg, &r->input, &ids, &r->batch);
        r->have_input = st == SN_OK;
    } else if (st == SN_OK) {
        sn_layer *l = NULL;
        st = sn_cfg_read_layer(cls, cfg, &r->cs, &l);
        if (st == SN_OK) st = sn_model_add(r->m, l);
    }
    if (st != SN_OK)
        return sn_error_context(st, "layer %d '%s' (%s)", index, lname ? lname : "?", cls);
    return SN_OK;
}

/* ---- compile_config ---------------------------------------------------------------------- */

static sn_status read_optimizer(const json_t *v, sn_optimizer_opts *o) {
    if (json_is_string(v)) return sn_optimizer_from_name(json_string_value(v), o);
    const char *cls;
    const json_t *c;
    SN_TRY(sn_cfg_object(v, "optimizer", "optimizers", &cls, &c));
    static const struct { const char *cls; sn_optimizer_type t; } known[] = {
        {"SGD", SN_SGD}, {"Adam", SN_ADAM}, {"AdamW", SN_ADAMW}, {"RMSprop", SN_RMSPROP}};
    int k = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(cls, known[i].cls)) k = i;
    if (k < 0)
        return sn_errorf(SN_ERR_UNSUPPORTED, "optimizer '%s' is not supported; sinter supports "
                         "SGD, Adam, AdamW and RMSprop", cls);
    *o = sn_optimizer_defaults(known[k].t);
    if (!c) return SN_OK;
    static const char *const keys[] = {"name", "learning_rate", "weight_decay", "clipnorm",
        "global_clipnorm", "clipvalue", "use_ema", "ema_momentum", "ema_overwrite_frequency",
        "loss_scale_factor", "gradient_accumulation_steps", "beta_1", "beta_2", "epsilon",
        "amsgrad", "momentum", "nesterov", "rho", "centered", NULL};
    sn_status st = sn_cfg_known_keys(c, cls, keys);
    const json_t *lr = json_object_get(c, "learning_rate");
    if (st == SN_OK && json_is_object(lr)) {
        const char *lc = json_string_value(json_object_get(lr, "class_name"));
        st = sn_errorf(SN_ERR_UNSUPPORTED, "field 'learning_rate' is a schedule (%s); sinter "
                       "supports a constant learning rate (a number)", lc ? lc : "object");
    }
    if (st == SN_OK) st = sn_cfg_num(c, "learning_rate", false, 0, HUGE_VAL, &o->learning_rate);
    if (st == SN_OK && !(o->learning_rate > 0))
        st = sn_errorf(SN_ERR_UNSUPPORTED, "field 'learning_rate' is %g, expected > 0",
                       o->learning_rate);
    static const char *const nulls[] = {"clipnorm", "global_clipnorm", "clipvalue",
                                        "loss_scale_factor", "gradient_accumulation_steps", NULL};
    for (int i = 0; nulls[i] && st == SN_OK; i++)
        st = sn_cfg_must(c, nulls[i], NULL, "only null (not implemented in sinter)");
    bool flag = false;
    if (st == SN_OK) st = sn_cfg_bool(c, "use_ema", false, &flag);
    if (st == SN_OK && flag) st = sn_errorf(SN_ERR_UNSUPPORTED, "field 'use_ema' is true; sinter supports false");
    if (st == SN_OK) st = sn_cfg_bool(c, "amsgrad", false, &flag);
    if (st == SN_OK && flag) st = sn_errorf(SN_ERR_UNSUPPORTED, "field 'amsgrad' is true; sinter supports false");
    flag = false;
    if (st == SN_OK) st = sn_cfg_bool(c, "centered", false, &flag);
    if (st == SN_OK && flag) st = sn_errorf(SN_ERR_UNSUPPORTED, "field 'centered' is true; sinter supports false");
    if (st == SN_OK) {
        const json_t *wd = json_object_get(c, "weight_decay");
        if (o->type == SN_ADAMW) st = sn_cfg_num(c, "weight_decay", false, 0, HUGE_VAL, &o->weight_decay);
        else if (wd && !json_is_null(wd) && !(json_is_number(wd) && json_number_value(wd) == 0))
            st = sn_errorf(SN_ERR_UNSUPPORTED, "field 'weight_decay' is set for %s; sinter "
                           "supports weight decay with AdamW only", cls);
    }
    if (st == SN_OK) st = sn_cfg_num(c, "beta_1", false, 0, 1, &o->beta_1);
    if (st == SN_OK) st = sn_cfg_num(c, "beta_2", false, 0, 1, &o->beta_2);
    if (st == SN_OK) st = sn_cfg_num(c, "epsilon", false, 0, HUGE_VAL, &o->epsilon);
    if (st == SN_OK) st = sn_cfg_num(c, "momentum", false, 0, 1, &o->momentum);
    if (st == SN_OK) st = sn_cfg_num(c, "rho", false, 0, 1, &o->rho);
    if (st == SN_OK) st = sn_cfg_bool(c, "nesterov", false, &o->nesterov);
    return st == SN_OK ? SN_OK : sn_error_context(st, "optimizer %s", cls);
}

static sn_status loss_by_name(const char *n, sn_loss_type *t) {
    static const struct { const char *name; sn_loss_type t; } names[] = {
        {"sparse_categorical_crossentropy", SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY},
        {"SparseCategoricalCrossentropy", SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY},
        {"categorical_crossentropy", SN_LOSS_CATEGORICAL_CROSSENTROPY},
        {"CategoricalCrossentropy", SN_LOSS_CATEGORICAL_CROSSENTROPY},
        {"binary_crossentropy", SN_LOSS_BINARY_CROSSENTROPY},
        {"BinaryCrossentropy", SN_LOSS_BINARY_CROSSENTROPY},
        {"mean_squared_error", SN_LOSS_MEAN_SQUARED_ERROR},
        {"mse", SN_LOSS_MEAN_SQUARED_ERROR},
        {"MeanSquaredError", SN_LOSS_MEAN_SQUARED_ERROR},
        {"mean_absolute_error", SN_LOSS_MEAN_ABSOLUTE_ERROR},
        {"mae", SN_LOSS_MEAN_ABSOLUTE_ERROR},
        {"MeanAbsoluteError", SN_LOSS_MEAN_ABSOLUTE_ERROR},
        {"huber", SN_LOSS_HUBER},
        {"Huber", SN_LOSS_HUBER}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(n, names[i].name)) {
            *t = names[i].t;
            return SN_OK;
        }
    return sn_errorf(SN_ERR_UNSUPPORTED, "loss '%s' is not supported; sinter supports "
                     "sparse_categorical_crossentropy, categorical_crossentropy, "
                     "binary_crossentropy, mean_squared_error (mse), mean_absolute_error (mae) "
                     "and huber", n);
}

/* One loss: a name or a Keras loss object. delta: Huber's (Keras 3's Huber.get_config leaves
 * it out, so a saved Huber comes back with the default 1.0, as in Keras). */
static sn_status read_loss(const json_t *v, sn_loss_type *type, bool *from_logits,
                           double *delta) {
    *from_logits = false; /* Keras's default for a loss given by name */
    if (json_is_string(v)) return loss_by_name(json_string_value(v), type);
    const char *cls;
    const json_t *c;
    SN_TRY(sn_cfg_object(v, "loss", "losses", &cls, &c));
    SN_TRY(loss_by_name(cls, type));
    if (!c) return SN_OK;
    static const char *const keys[] = {"name", "reduction", "from_logits", "ignore_class",
                                       "label_smoothing", "axis", "dtype", "delta", NULL};
    sn_status st = sn_cfg_known_keys(c, cls, keys);
    if (st == SN_OK) st = sn_cfg_bool(c, "from_logits", false, from_logits);
    const char *red = "sum_over_batch_size";
    if (st == SN_OK) st = sn_cfg_str(c, "reduction", false, &red);
    if (st == SN_OK && strcmp(red, "sum_over_batch_size"))
        st = sn_errorf(SN_ERR_UNSUPPORTED, "field 'reduction' is \"%s\"; sinter supports "
                       "\"sum_over_batch_size\"", red);
    if (st == SN_OK) st = sn_cfg_must(c, "ignore_class", NULL, "only null");
    double ls = 0;
    if (st == SN_OK) st = sn_cfg_num(c, "label_smoothing", false, 0, 1, &ls);
    if (st == SN_OK && ls != 0)
        st = sn_errorf(SN_ERR_UNSUPPORTED, "field 'label_smoothing' is %g; sinter supports 0", ls);
    int64_t axis = -1;
    if (st == SN_OK) st = sn_cfg_int(c, "axis", false, -1, -1, &axis);
    if (st == SN_OK && json_object_get(c, "delta") && *type != SN_LOSS_HUBER)
        st = sn_errorf(SN_ERR_FORMAT, "field 'delta' is Huber's, not %s's", cls);
    if (st == SN_OK) st = sn_cfg_num(c, "delta", false, 1e-30, HUGE_VAL, delta);
    return st == SN_OK ? SN_OK : sn_error_context(st, "loss %s", cls);
}

/* One output's metrics: a list (or one entry) of names and Keras metric objects. */
static sn_status read_metrics(const json_t *v, int *n_out, sn_metric_type *out,
                              double *threshold) {
    *n_out = 0;
    if (!v || json_is_null(v)) return SN_OK;
    json_t *one = NULL;
    if (!json_is_array(v)) {
        if (!json_is_string(v) && !json_is_object(v))
            return sn_errorf(SN_ERR_FORMAT, "field 'metrics' is %s, expected a list",
                             sn_cfg_type(v));
        one = json_array();
        json_array_append(one, (json_t *)v);
        v = one;
    }
    size_t i;
    const json_t *m;
    sn_status st = SN_OK;
    json_array_foreach(v, i, m) {
        const char *n = NULL;
        const json_t *c = NULL;
        if (json_is_string(m)) n = json_string_value(m);
        else if ((st = sn_cfg_object(m, "metric", "metrics", &n, &c)) != SN_OK) break;
        sn_metric_type t;
        if (!strcmp(n, "accuracy") || !strcmp(n, "acc")) t = SN_METRIC_ACCURACY;
        else if (!strcmp(n, "sparse_categorical_accuracy") || !strcmp(n, "SparseCategoricalAccuracy"))
            t = SN_METRIC_SPARSE_CATEGORICAL_ACCURACY;
        else if (!strcmp(n, "binary_accuracy") || !strcmp(n, "BinaryAccuracy"))
            t = SN_METRIC_BINARY_ACCURACY;
        else if (!strcmp(n, "categorical_accuracy") || !strcmp(n, "CategoricalAccuracy"))
            t = SN_METRIC_CATEGORICAL_ACCURACY;
        else {
            st = sn_errorf(SN_ERR_UNSUPPORTED, "metric '%s' is not supported; sinter supports "
                           "accuracy, sparse_categorical_accuracy, binary_accuracy and "
                           "categorical_accuracy", n);
            break;
        }
        if (c && t == SN_METRIC_BINARY_ACCURACY)
            st = sn_cfg_num(c, "threshold", false, -HUGE_VAL, HUGE_VAL, threshold);
        if (st != SN_OK) break;
        if (*n_out == SN_MAX_METRICS) {
            st = sn_errorf(SN_ERR_UNSUPPORTED, "more than %d metrics", SN_MAX_METRICS);
            break;
        }
        out[(*n_out)++] = t;
    }
    json_decref(one);
    return st;
}

/* Keras's per-output forms: a list of one entry per output, or a dict by output layer name.
 * *e receives output k's entry (NULL when a dict leaves it out). */
static sn_status per_output(const sn_model *m, const json_t *v, const char *field, int k,
                            const json_t **e) {
    int n = sn_model_output_count(m);
    if (json_is_array(v)) {
        if ((int)json_array_size(v) != n)
            return sn_errorf(SN_ERR_FORMAT, "field '%s' has %zu entries but the model has %d "
                             "outputs", field, json_array_size(v), n);
        *e = json_array_get(v, (size_t)k);
        return SN_OK;
    }
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        bool found = false;
        for (int j = 0; j < n && !found; j++) {
            const sn_fnode *nd = m->fn ? &m->fn->nodes[m->fn->outputs[j]] : NULL;
            found = nd && nd->layer && !strcmp(nd->layer->name, key);
        }
        if (!found)
            return sn_errorf(SN_ERR_FORMAT, "field '%s' names '%s', which is not an output "
                             "layer of the model", field, key);
    }
    const sn_fnode *nd = m->fn ? &m->fn->nodes[m->fn->outputs[k]] : NULL;
    *e = nd && nd->layer ? json_object_get(v, nd->layer->name) : NULL;
    return SN_OK;
}

static sn_status read_compile(const json_t *c, const sn_model *m, sn_compile_opts *o) {
    static const char *const keys[] = {"optimizer", "loss", "loss_weights", "metrics",
        "weighted_metrics", "run_eagerly", "steps_per_execution", "jit_compile", "auto_scale_loss",
        NULL};
    SN_TRY(sn_cfg_known_keys(c, "compile_config", keys));
    const json_t *opt = json_object_get(c, "optimizer"), *loss = json_object_get(c, "loss");
    const json_t *lw = json_object_get(c, "loss_weights"), *ms = json_object_get(c, "metrics");
    if (opt && !json_is_null(opt)) SN_TRY(read_optimizer(opt, &o->optimizer));
    int n_out = sn_model_output_count(m);
    bool nested_loss = loss && (json_is_array(loss) ||
                                (json_is_object(loss) && !json_object_get(loss, "class_name")));
    if (n_out == 1 && !nested_loss && (!lw || json_is_null(lw)) &&
        (!ms || json_is_null(ms) || json_is_array(ms))) {
        if (loss && !json_is_null(loss))
            SN_TRY(read_loss(loss, &o->loss, &o->from_logits, &o->huber_delta));
        SN_TRY(read_metrics(ms, &o->n_metrics, o->metrics, &o->accuracy_threshold));
    } else {
        /* Several outputs (or a one-output model given Keras's per-output forms): one loss,
         * weight and metric list per output. */
        if (n_out > SN_MAX_OUTPUTS)
            return sn_errorf(SN_ERR_UNSUPPORTED, "the model has %d outputs; sinter trains at "
                             "most %d", n_out, SN_MAX_OUTPUTS);
        if (loss && !json_is_null(loss) && !nested_loss)
            SN_TRY(read_loss(loss, &o->loss, &o->from_logits, &o->huber_delta));
        o->n_outputs = n_out;
        o->n_metrics = 0;
        bool ms_nested = ms && (json_is_object(ms) || (json_is_array(ms) && n_out > 1));
        if (ms && !json_is_null(ms) && !ms_nested)
            return sn_errorf(SN_ERR_FORMAT, "field 'metrics' is %s, expected a list of one "
                             "entry per output or a dict by output name", sn_cfg_type(ms));
        if (lw && !json_is_null(lw) && !json_is_array(lw) && !json_is_object(lw))
            return sn_errorf(SN_ERR_UNSUPPORTED, "field 'loss_weights' is %s; sinter reads a "
                             "list or a dict", sn_cfg_type(lw));
        for (int k = 0; k < n_out; k++) {
            sn_output_loss *ol = &o->outputs[k];
            *ol = sn_output_loss_defaults(o->loss);
            ol->from_logits = o->from_logits;
            const json_t *e = NULL;
            if (nested_loss) {
                SN_TRY(per_output(m, loss, "loss", k, &e));
                if (!e || json_is_null(e))
                    return sn_errorf(SN_ERR_UNSUPPORTED, "field 'loss' gives output %d no "
                                     "loss; sinter trains every output", k);
                SN_TRY(sn_error_context(read_loss(e, &ol->loss, &ol->from_logits,
                                                  &o->huber_delta), "output %d", k));
            }
            if (lw && !json_is_null(lw)) {
                SN_TRY(per_output(m, lw, "loss_weights", k, &e));
                if (e && !json_is_number(e))
                    return sn_errorf(SN_ERR_FORMAT, "field 'loss_weights' entry %d is %s, "
                                     "expected a number", k, sn_cfg_type(e));
                if (e) ol->loss_weight = json_number_value(e);
            }
            if (ms_nested) {
                SN_TRY(per_output(m, ms, "metrics", k, &e));
                SN_TRY(sn_error_context(read_metrics(e, &ol->n_metrics, ol->metrics,
                                                     &o->accuracy_threshold), "output %d", k));
            }
        }
    }
    SN_TRY(sn_cfg_must(c, "weighted_metrics", NULL, "only null (no sample weights)"));
    int64_t spe = o->steps_per_execution;
    const json_t *sv = json_object_get(c, "steps_per_execution");
    if (!json_is_string(sv)) /* "auto" leaves sinter's choice */
        SN_TRY(sn_cfg_int(c, "steps_per_execution", false, 1, 1000000, &spe));
    o->steps_per_execution = (int)spe;
    return SN_OK;
}

/* True when the model's last layer applies softmax or sigmoid: its outputs are probabilities,
 * so a loss on them is not from logits. */
static bool ends_in_probabilities(const sn_model *m) {
    if (m->n_layers == 0) return false;
    const sn_layer *l = m->layers[m->n_layers - 1];
    if (m->fn) { /* the layer of the (first) output */
        l = m->fn->n_outputs ? m->fn->nodes[m->fn->outputs[0]].layer : NULL;
        if (!l) return false;
    }
    const char *c = l->vt->class_name;
    sn_activation a = !strcmp(c, "Activation") ? l->act
                      : !strcmp(c, "Dense")    ? l->dense.activation
                      : !strcmp(c, "Conv2D")   ? l->conv.activation
                                               : SN_ACT_NONE;
    return a == SN_ACT_SOFTMAX || a == SN_ACT_SIGMOID;
}

/* ---- whole model ------------------------------------------------------------------------- */

static sn_status read_model(const json_t *root, uint64_t seed, bool for_loading, sn_model **out,
                            sn_model_file_info *info) {
    const char *cls = NULL;
    const json_t *cfg = NULL;
    SN_TRY(sn_cfg_object(root, "the model", "models", &cls, &cfg));
    static const char *const top_keys[] = {"module", "class_name", "config", "registered_name",
                                           "build_config", "compile_config", NULL};
    SN_TRY(sn_cfg_known_keys(root, "a model config", top_keys));
    bool functional = !strcmp(cls, "Functional") || !strcmp(cls, "Model");
    if (!functional && strcmp(cls, "Sequential"))
        return sn_errorf(SN_ERR_UNSUPPORTED, "model class '%s' is not supported; sinter reads "
                         "Sequential models and Functional models that are a single chain", cls);
    if (!cfg) return sn_errorf(SN_ERR_FORMAT, "the %s model has no config", cls);
    static const char *const seq_keys[] = {"name", "trainable", "dtype", "layers",
                                           "build_input_shape", NULL};
    static const char *const fn_keys[] = {"name", "trainable", "layers", "input_layers",
                                          "output_layers", NULL};
    sn_status kst = sn_cfg_known_keys(cfg, cls, functional ? fn_keys : seq_keys);
    if (kst != SN_OK) return sn_error_context(kst, "model config");
    const char *name = "sequential";
    SN_TRY(sn_cfg_str(cfg, "name", false, &name));
    bool trainable = true;
    SN_TRY(sn_cfg_bool(cfg, "trainable", false, &trainable));
    const json_t *layers = json_object_get(cfg, "layers");
    if (!json_is_array(layers))
        return sn_errorf(SN_ERR_FORMAT, "the model's field 'layers' is %s, expected a list",
                         sn_cfg_type(layers));
    size_t n = json_array_size(layers);
    sn_status st = SN_OK;
    reader r = {0};
    if (functional) {
        st = sn_cfg_read_functional(cfg, name, &r.cs, &r.m, &r.batch);
        if (st == SN_OK) {
            r.have_input = true;
            r.input = r.m->fn->nodes[r.m->fn->inputs[0]].shape;
        }
    } else {
        r.m = sn_sequential_new(name);
        if (!r.m) st = SN_ERR_NOMEM;
    }
    for (size_t i = 0; !functional && i < n && st == SN_OK; i++)
        st = read_entry(&r, json_array_get(layers, i), (int)i);
    if (st == SN_OK && !functional) {
        /* Without an InputLayer, Keras records the shape the model was built for. */
        const json_t *bis = json_object_get(cfg, "build_input_shape");
        const json_t *bc = json_object_get(root, "build_config");
        const json_t *bci = bc ? json_object_get(bc, "input_shape") : NULL;
        if (!r.have_input && bis && !json_is_null(bis)) {
            st = sn_cfg_batch_shape(bis, "build_input_shape", &r.input);
            r.have_input = st == SN_OK;
        } else if (!r.have_input && bci && !json_is_null(bci)) {
            st = sn_cfg_batch_shape(bci, "build_config.input_shape", &r.input);
            r.have_input = st == SN_OK;
        }
        if (st == SN_OK) st = sn_cfg_policy(cfg, &r.cs);
    }
    if (st == SN_OK && !r.have_input)
        st = sn_errorf(SN_ERR_FORMAT, "the model has no input shape (no InputLayer and no "
                       "build_input_shape): build it in Keras with keras.Input(shape=...) first");
    if (st == SN_OK && sn_model_layer_count(r.m) == 0)
        st = sn_errorf(SN_ERR_FORMAT, "the model has no layers besides its input");
    /* Keras's stateful RNN takes its batch size from the Input (its build fails without) */
    for (int i = 0; st == SN_OK && i < r.m->n_layers; i++)
        if (r.m->layers[i]->rnn.stateful && r.m->layers[i]->rnn.batch_size == 0)
            r.m->layers[i]->rnn.batch_size = r.batch;
    /* model.trainable = False freezes every layer, as Keras's setter does */
    if (st == SN_OK && !trainable) st = sn_model_set_trainable(r.m, false);
    if (st == SN_OK)
        st = for_loading ? sn_model_build_for_loading(r.m, &r.input) : sn_model_build(r.m, &r.input, seed);
    sn_compile_opts co = sn_compile_defaults();
    bool has_compile = false;
    const json_t *cc = json_object_get(root, "compile_config");
    if (st == SN_OK && cc && !json_is_null(cc)) {
        if (!json_is_object(cc)) {
            st = sn_errorf(SN_ERR_FORMAT, "field 'compile_config' is %s, expected an object",
                           sn_cfg_type(cc));
        } else if (json_object_size(cc) > 0) { /* Keras writes {} for an uncompiled model */
            st = read_compile(cc, r.m, &co);
            if (st != SN_OK) st = sn_error_context(st, "compile_config");
            has_compile = st == SN_OK;
        }
    }
    co.mixed_bfloat16 = r.cs.mixed_bfloat16;
    if (st == SN_OK && !has_compile) co.from_logits = !ends_in_probabilities(r.m);
    if (st != SN_OK) {
        sn_model_free(r.m);
        return st;
    }
    if (info) {
        info->input_shape = r.input;
        info->has_compile = has_compile;
        info->compile = co;
    }
    *out = r.m;
    return SN_OK;
}

sn_status sn_model_from_config(const json_t *root, uint64_t seed, bool for_loading,
                               sn_model **out, sn_model_file_info *info) {
    if (!root || !out) return sn_errorf(SN_ERR_INVALID, "sn_model_from_config: NULL argument");
    *out = NULL;
    return read_model(root, seed, for_loading, out, info);
}
