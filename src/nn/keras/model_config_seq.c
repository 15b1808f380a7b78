/* Keras's Bidirectional config: {"merge_mode", "layer", "backward_layer"}, the two halves
 * serialised LSTM/GRU layers (keras/src/layers/rnn/bidirectional.py get_config), read and
 * written by the LSTM/GRU reader and writer of model_config_layers.c. merge_mode null (a list
 * of two outputs) is refused: a Sequential model passes one tensor on. */
#include <string.h>

#include "nn/keras/model_config.h"

static const char *const merge_names[] = {"concat", "sum", "mul", "ave"};

/* One half: a serialised LSTM or GRU. */
static sn_status read_half(const json_t *c, const char *key, sn_layer **out) {
    *out = NULL;
    const json_t *v = json_object_get(c, key);
    if (!v || json_is_null(v)) return SN_OK;
    char what[64];
    snprintf(what, sizeof what, "field '%s'", key);
    const char *cls;
    const json_t *cfg;
    SN_TRY(sn_cfg_object(v, what, "layers", &cls, &cfg));
    if (strcmp(cls, "LSTM") && strcmp(cls, "GRU"))
        return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is a %s; sinter's Bidirectional wraps "
                         "LSTM and GRU", key, cls);
    /* the halves' dtype policies are checked on their own (the wrapper's is the model's) */
    sn_cfg_state st = {0};
    sn_status s = sn_cfg_read_layer(cls, cfg, &st, out);
    return s == SN_OK ? SN_OK : sn_error_context(s, "field '%s' (%s)", key, cls);
}

sn_status sn_cfg_read_bidirectional(const json_t *c, sn_layer **out) {
    const char *mm = "concat";
    const json_t *mv = json_object_get(c, "merge_mode");
    if (mv && json_is_null(mv))
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'merge_mode' is null (two outputs); sinter "
                         "supports \"concat\", \"sum\", \"mul\" and \"ave\"");
    SN_TRY(sn_cfg_str(c, "merge_mode", false, &mm));
    int merge = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(mm, merge_names[i])) merge = i;
    if (merge < 0)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'merge_mode' is \"%s\"; sinter supports "
                         "\"concat\", \"sum\", \"mul\" and \"ave\"", mm);
    sn_layer *fwd = NULL, *bwd = NULL;
    SN_TRY(read_half(c, "layer", &fwd));
    if (!fwd) return sn_errorf(SN_ERR_FORMAT, "field 'layer' is missing");
    sn_status s = read_half(c, "backward_layer", &bwd);
    if (s != SN_OK) {
        sn_layer_destroy(fwd);
        return s;
    }
    /* Keras 3 always writes backward_layer; without one the copy is made as Keras makes it */
    *out = bwd ? sn_layer_bidirectional_ex(fwd, bwd, (sn_bidir_merge)merge)
               : sn_layer_bidirectional(fwd, (sn_bidir_merge)merge);
    return *out ? SN_OK : SN_ERR_INVALID;
}

/* A half as Keras serialises it inside the wrapper, with its build_config. */
static json_t *write_half(const sn_layer *h, const json_t *dtype) {
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(h->name));
    json_object_set_new(c, "trainable", json_true());
    json_object_set_new(c, "dtype", json_deep_copy(dtype));
    /* the LSTM/GRU writer, reached through the class table */
    json_t *full = sn_cfg_write_layer(h, false);
    const char *k;
    json_t *v;
    json_object_foreach(full, k, v) {
        if (strcmp(k, "name") && strcmp(k, "trainable") && strcmp(k, "dtype"))
            json_object_set(c, k, v);
    }
    json_decref(full);
    json_t *o = sn_cfg_keras_object("keras.layers", h->vt->class_name, c);
    json_t *shape = json_array();
    json_array_append_new(shape, json_null());
    for (int i = 0; i < h->in_shape.ndim; i++)
        json_array_append_new(shape, json_integer(h->in_shape.dim[i]));
    json_object_set_new(o, "build_config", json_pack("{s:o}", "input_shape", shape));
    return o;
}

void sn_cfg_write_bidirectional(const sn_layer *l, json_t *c) {
    const json_t *dtype = json_object_get(c, "dtype"); /* the wrapper's, already written */
    json_object_set_new(c, "merge_mode", json_string(merge_names[l->merge_mode]));
    json_object_set_new(c, "layer", write_half(l->inner[0], dtype));
    json_object_set_new(c, "backward_layer", write_half(l->inner[1], dtype));
}
