/* Keras model config -> built Sequential model, and compile_config -> sn_compile_opts
 * (model_config.h). A Sequential config's layers are read in order; a Functional config is
 * accepted when its graph is a single chain from one InputLayer to one output, which is what
 * Keras writes for keras.Model(inputs, outputs) over a straight stack of layers. */
#include <math.h>
#include <string.h>

#include "nn/model_config.h"

/* ---- input shape ------------------------------------------------------------------------- */

/* [null, d1, ...] -> (d1, ...) without the batch. */
static sn_status batch_shape(const json_t *v, const char *field, sn_shape *out) {
    char b[128];
    if (!json_is_array(v) || json_array_size(v) < 2 || json_array_size(v) > SN_MAX_DIMS)
        return sn_errorf(SN_ERR_FORMAT, "field '%s' is %s, expected [null, d1, ...] with 1 to %d "
                         "dimensions after the batch", field, sn_cfg_show(v, b, sizeof b),
                         SN_MAX_DIMS - 1);
    sn_shape s = {.ndim = (int)json_array_size(v) - 1};
    for (int i = 0; i < s.ndim; i++) {
        const json_t *d = json_array_get(v, (size_t)i + 1);
        if (!json_is_integer(d) || json_integer_value(d) <= 0)
            return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s: dimension %d is %s; sinter "
                             "builds static shapes (every dimension but the batch a positive "
                             "integer)", field, sn_cfg_show(v, b, sizeof b), i + 1,
                             sn_cfg_show(d, b + 64, 64));
        s.dim[i] = json_integer_value(d);
    }
    *out = s;
    return SN_OK;
}

static sn_status read_input_layer(const json_t *c, sn_shape *shape) {
    static const char *const keys[] = {"batch_shape", "dtype", "sparse", "ragged", "name",
                                       "optional", NULL};
    if (!c) return sn_errorf(SN_ERR_FORMAT, "InputLayer has no config");
    SN_TRY(sn_cfg_known_keys(c, "InputLayer", keys));
    const json_t *bs = json_object_get(c, "batch_shape");
    if (!bs) return sn_errorf(SN_ERR_FORMAT, "field 'batch_shape' is missing");
    SN_TRY(batch_shape(bs, "batch_shape", shape));
    const char *dt = "float32";
    SN_TRY(sn_cfg_str(c, "dtype", false, &dt));
    /* Integer inputs feed Embedding; sinter carries them in float32 (exact below 2^24). */
    if (strcmp(dt, "float32") && strcmp(dt, "int32") && strcmp(dt, "int64"))
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'dtype' is \"%s\"; sinter "
                         "supports float32, int32 and int64 inputs", dt);
    bool sparse = false, ragged = false, optional = false;
    SN_TRY(sn_cfg_bool(c, "sparse", false, &sparse));
    SN_TRY(sn_cfg_bool(c, "ragged", false, &ragged));
    SN_TRY(sn_cfg_bool(c, "optional", false, &optional));
    if (sparse || ragged || optional)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is true; sinter supports "
                         "dense inputs only", sparse ? "sparse" : ragged ? "ragged" : "optional");
    return SN_OK;
}

/* ---- layers ------------------------------------------------------------------------------ */

typedef struct reader {
    sn_model *m;
    sn_cfg_state cs;
    bool have_input;
    sn_shape input;
    int64_t batch; /* the InputLayer's fixed batch size (stateful layers need one), 0: null */
} reader;

/* One entry of config.layers: {"module", "class_name", "config", ...}. */
static sn_status read_entry(reader *r, const json_t *e, int index, bool functional) {
    const char *cls = NULL;
    const json_t *cfg = NULL;
    char what[64];
    snprintf(what, sizeof what, "layer %d", index);
    SN_TRY(sn_cfg_object(e, what, "layers", &cls, &cfg));
    static const char *const seq_keys[] = {"module", "class_name", "config", "registered_name",
                                           "build_config", NULL};
    static const char *const fn_keys[] = {"module", "class_name", "config", "registered_name",
                                          "build_config", "name", "inbound_nodes", NULL};
    const char *lname = NULL;
    if (cfg) sn_cfg_str(cfg, "name", false, &lname);
    sn_status st = sn_cfg_known_keys(e, "a layer entry", functional ? fn_keys : seq_keys);
    if (st == SN_OK && !strcmp(cls, "InputLayer")) {
        if (r->have_input || sn_model_layer_count(r->m) > 0)
            st = sn_errorf(SN_ERR_UNSUPPORTED, "an InputLayer after other layers; sinter "
                           "supports one input, first");
        else
            st = read_input_layer(cfg, &r->input);
        r->have_input = st == SN_OK;
        const json_t *b0 = cfg ? json_array_get(json_object_get(cfg, "batch_shape"), 0) : NULL;
        r->batch = json_is_integer(b0) && json_integer_value(b0) > 0 ? json_integer_value(b0) : 0;
    } else if (st == SN_OK) {
        sn_layer *l = NULL;
        st = sn_cfg_read_layer(cls, cfg, &r->cs, &l);
        if (st == SN_OK) st = sn_model_add(r->m, l);
    }
    if (st != SN_OK)
        return sn_error_context(st, "layer %d '%s' (%s)", index, lname ? lname : "?", cls);
    return SN_OK;
}

/* The one tensor argument of a Functional layer call: keras_history [layer, 0, 0]. */
static sn_status inbound_of(const json_t *e, const char *name, const char **from) {
    const json_t *nodes = json_object_get(e, "inbound_nodes");
    *from = NULL;
    if (!json_is_array(nodes))
        return sn_errorf(SN_ERR_FORMAT, "layer '%s': field 'inbound_nodes' is %s, expected a "
                         "list", name, sn_cfg_type(nodes));
    if (json_array_size(nodes) == 0) return SN_OK; /* an input */
    if (json_array_size(nodes) > 1)
        return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' is called %zu times (a shared layer); "
                         "sinter supports Functional models whose graph is a single chain",
                         name, json_array_size(nodes));
    const json_t *node = json_array_get(nodes, 0);
    const json_t *args = json_object_get(node, "args"), *kwargs = json_object_get(node, "kwargs");
    /* Keras records training=false for layers that take `training` (Dropout, BN) when the
     * graph is traced; Functional.call passes the real mode at run time, so it is no
     * argument of the model's. Anything else is. */
    bool plain = json_is_object(kwargs) &&
                 (json_object_size(kwargs) == 0 ||
                  (json_object_size(kwargs) == 1 && json_object_get(kwargs, "training")));
    if (kwargs && !plain) {
        char b[96];
        return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' is called with keyword arguments %s; "
                         "sinter supports plain calls layer(x)", name,
                         sn_cfg_show(kwargs, b, sizeof b));
    }
    const json_t *t = json_is_array(args) && json_array_size(args) == 1 ? json_array_get(args, 0)
                                                                        : NULL;
    const json_t *cfg = t ? json_object_get(t, "config") : NULL;
    const json_t *h = cfg ? json_object_get(cfg, "keras_history") : NULL;
    if (!json_is_object(t) || !json_is_array(h) || json_array_size(h) != 3 ||
        !json_is_string(json_array_get(h, 0))) {
        char b[128];
        return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' takes %s; sinter supports Functional "
                         "models whose graph is a single chain (each layer called once on "
                         "one tensor)", name, sn_cfg_show(args, b, sizeof b));
    }
    *from = json_string_value(json_array_get(h, 0));
    return SN_OK;
}

/* Orders a Functional config's layers as a chain; `order` receives entry indices. */
static sn_status functional_chain(const json_t *layers, size_t n, size_t *order) {
    const char **from = sn_calloc(n ? n : 1, sizeof *from);
    const char **names = sn_calloc(n ? n : 1, sizeof *names);
    if (!from || !names) {
        free(from);
        free(names);
        return SN_ERR_NOMEM;
    }
    sn_status st = SN_OK;
    size_t start = n;
    for (size_t i = 0; i < n && st == SN_OK; i++) {
        const json_t *e = json_array_get(layers, i);
        names[i] = json_string_value(json_object_get(e, "name"));
        if (!names[i]) {
            st = sn_errorf(SN_ERR_FORMAT, "layer %zu of the Functional model has no 'name'", i);
            break;
        }
        st = inbound_of(e, names[i], &from[i]);
        if (st == SN_OK && !from[i]) {
            if (start != n)
                st = sn_errorf(SN_ERR_UNSUPPORTED, "the Functional model has two inputs ('%s' "
                               "and '%s'); sinter supports one input and a single chain",
                               names[start], names[i]);
            start = i;
        }
    }
    if (st == SN_OK && start == n)
        st = sn_errorf(SN_ERR_FORMAT, "the Functional model has no input layer");
    /* Walk: each layer must feed exactly one next layer. */
    size_t cur = start, k = 0;
    while (st == SN_OK) {
        order[k++] = cur;
        size_t next = n;
        for (size_t i = 0; i < n && st == SN_OK; i++) {
            if (!from[i] || strcmp(from[i], names[cur])) continue;
            if (next != n)
                st = sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' feeds both '%s' and '%s' (a "
                               "branch); sinter supports Functional models whose graph is a "
                               "single chain", names[cur], names[next], names[i]);
            next = i;
        }
        if (st != SN_OK || next == n) break;
        if (k >= n) {
            st = sn_errorf(SN_ERR_FORMAT, "the Functional model's layers form a cycle");
            break;
        }
        cur = next;
    }
    if (st == SN_OK && k != n) {
        for (size_t i = 0; i < n; i++) {
            bool used = false;
            for (size_t j = 0; j < k && !used; j++) used = order[j] == i;
            if (!used) {
                st = sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' (input '%s') is not on the chain "
                               "from the input '%s'; sinter supports Functional models whose "
                               "graph is a single chain", names[i], from[i] ? from[i] : "none",
                               names[start]);
                break;
            }
        }
    }
    free(from);
    free(names);
    return st;
}

/* ["name", 0, 0] or [["name", 0, 0]]: the one input or output of a Functional config. */
static sn_status endpoint(const json_t *cfg, const char *key, const char **name) {
    const json_t *v = json_object_get(cfg, key);
    if (json_is_array(v) && json_array_size(v) == 1 && json_is_array(json_array_get(v, 0)))
        v = json_array_get(v, 0);
    if (!json_is_array(v) || json_array_size(v) != 3 || !json_is_string(json_array_get(v, 0))) {
        char b[96];
        return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s; sinter supports one input and "
                         "one output ([\"name\", 0, 0])", key, sn_cfg_show(v, b, sizeof b));
    }
    *name = json_string_value(json_array_get(v, 0));
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
        {"MeanSquaredError", SN_LOSS_MEAN_SQUARED_ERROR}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(n, names[i].name)) {
            *t = names[i].t;
            return SN_OK;
        }
    return sn_errorf(SN_ERR_UNSUPPORTED, "loss '%s' is not supported; sinter supports "
                     "sparse_categorical_crossentropy, categorical_crossentropy, "
                     "binary_crossentropy and mean_squared_error (mse)", n);
}

static sn_status read_loss(const json_t *v, sn_compile_opts *o) {
    o->from_logits = false; /* Keras's default for a loss given by name */
    if (json_is_string(v)) return loss_by_name(json_string_value(v), &o->loss);
    const char *cls;
    const json_t *c;
    SN_TRY(sn_cfg_object(v, "loss", "losses", &cls, &c));
    SN_TRY(loss_by_name(cls, &o->loss));
    if (!c) return SN_OK;
    static const char *const keys[] = {"name", "reduction", "from_logits", "ignore_class",
                                       "label_smoothing", "axis", "dtype", NULL};
    sn_status st = sn_cfg_known_keys(c, cls, keys);
    if (st == SN_OK) st = sn_cfg_bool(c, "from_logits", false, &o->from_logits);
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
    return st == SN_OK ? SN_OK : sn_error_context(st, "loss %s", cls);
}

static sn_status read_metrics(const json_t *v, sn_compile_opts *o) {
    o->n_metrics = 0;
    if (!v || json_is_null(v)) return SN_OK;
    if (!json_is_array(v))
        return sn_errorf(SN_ERR_FORMAT, "field 'metrics' is %s, expected a list", sn_cfg_type(v));
    size_t i;
    const json_t *m;
    json_array_foreach(v, i, m) {
        const char *n = NULL;
        if (json_is_string(m)) {
            n = json_string_value(m);
        } else {
            const json_t *c;
            SN_TRY(sn_cfg_object(m, "metric", "metrics", &n, &c));
        }
        sn_metric_type t;
        if (!strcmp(n, "accuracy") || !strcmp(n, "acc")) t = SN_METRIC_ACCURACY;
        else if (!strcmp(n, "sparse_categorical_accuracy") || !strcmp(n, "SparseCategoricalAccuracy"))
            t = SN_METRIC_SPARSE_CATEGORICAL_ACCURACY;
        else
            return sn_errorf(SN_ERR_UNSUPPORTED, "metric '%s' is not supported; sinter supports "
                             "accuracy and sparse_categorical_accuracy", n);
        if (o->n_metrics == SN_MAX_METRICS)
            return sn_errorf(SN_ERR_UNSUPPORTED, "more than %d metrics", SN_MAX_METRICS);
        o->metrics[o->n_metrics++] = t;
    }
    return SN_OK;
}

static sn_status read_compile(const json_t *c, sn_compile_opts *o) {
    static const char *const keys[] = {"optimizer", "loss", "loss_weights", "metrics",
        "weighted_metrics", "run_eagerly", "steps_per_execution", "jit_compile", "auto_scale_loss",
        NULL};
    SN_TRY(sn_cfg_known_keys(c, "compile_config", keys));
    const json_t *opt = json_object_get(c, "optimizer"), *loss = json_object_get(c, "loss");
    if (opt && !json_is_null(opt)) SN_TRY(read_optimizer(opt, &o->optimizer));
    if (loss && !json_is_null(loss)) SN_TRY(read_loss(loss, o));
    SN_TRY(read_metrics(json_object_get(c, "metrics"), o));
    SN_TRY(sn_cfg_must(c, "loss_weights", NULL, "only null (one output)"));
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
    if (!trainable)
        return sn_errorf(SN_ERR_UNSUPPORTED, "model field 'trainable' is false; sinter trains "
                         "every layer");
    const json_t *layers = json_object_get(cfg, "layers");
    if (!json_is_array(layers))
        return sn_errorf(SN_ERR_FORMAT, "the model's field 'layers' is %s, expected a list",
                         sn_cfg_type(layers));
    size_t n = json_array_size(layers);
    size_t *order = sn_calloc(n ? n : 1, sizeof *order);
    if (!order) return SN_ERR_NOMEM;
    sn_status st = SN_OK;
    for (size_t i = 0; i < n; i++) order[i] = i;
    if (functional) {
        st = functional_chain(layers, n, order);
        const char *in = NULL, *outn = NULL;
        if (st == SN_OK) st = endpoint(cfg, "input_layers", &in);
        if (st == SN_OK) st = endpoint(cfg, "output_layers", &outn);
        if (st == SN_OK && n > 0) {
            const char *first = json_string_value(json_object_get(json_array_get(layers, order[0]), "name"));
            const char *last = json_string_value(json_object_get(json_array_get(layers, order[n - 1]), "name"));
            if (strcmp(in, first) || strcmp(outn, last))
                st = sn_errorf(SN_ERR_UNSUPPORTED, "the model's input is '%s' and output '%s', "
                               "but its chain runs from '%s' to '%s'", in, outn, first, last);
        }
    }
    reader r = {.m = sn_sequential_new(name)};
    if (st == SN_OK && !r.m) st = SN_ERR_NOMEM;
    for (size_t i = 0; i < n && st == SN_OK; i++)
        st = read_entry(&r, json_array_get(layers, order[i]), (int)order[i], functional);
    if (st == SN_OK && !functional) {
        /* Without an InputLayer, Keras records the shape the model was built for. */
        const json_t *bis = json_object_get(cfg, "build_input_shape");
        const json_t *bc = json_object_get(root, "build_config");
        const json_t *bci = bc ? json_object_get(bc, "input_shape") : NULL;
        if (!r.have_input && bis && !json_is_null(bis)) {
            st = batch_shape(bis, "build_input_shape", &r.input);
            r.have_input = st == SN_OK;
        } else if (!r.have_input && bci && !json_is_null(bci)) {
            st = batch_shape(bci, "build_config.input_shape", &r.input);
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
            st = read_compile(cc, &co);
            if (st != SN_OK) st = sn_error_context(st, "compile_config");
            has_compile = st == SN_OK;
        }
    }
    co.mixed_bfloat16 = r.cs.mixed_bfloat16;
    if (st == SN_OK && !has_compile) co.from_logits = !ends_in_probabilities(r.m);
    free(order);
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
