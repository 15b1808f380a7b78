/* One reader and one writer per Keras layer class (model_config.h). The readers take the
 * `config` object Keras 3 writes (keras/src/layers/...: get_config) and call the layer
 * constructors of sinter/nn.h; every field Keras writes is either mapped, checked to hold the
 * one value sinter implements (data_format channels_last, dilation_rate 1, groups 1, no
 * constraints, ...), or refused. The writers produce the same fields, so that Keras's
 * from_config builds the same layer. */
#include <math.h>
#include <string.h>

#include "nn/keras/model_config.h"

/* Fields every layer config has. */
#define COMMON_KEYS "name", "trainable", "dtype"

static sn_status must_str(const json_t *c, const char *key, const char *value) {
    const json_t *v = json_object_get(c, key);
    if (!v || json_is_null(v) || (json_is_string(v) && !strcmp(json_string_value(v), value)))
        return SN_OK;
    char b[96], sup[96];
    snprintf(sup, sizeof sup, "only \"%s\"", value);
    return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %s; sinter supports %s", key,
                     sn_cfg_show(v, b, sizeof b), sup);
}

static sn_layer *made(sn_layer *l, sn_status *st) {
    *st = l ? SN_OK : SN_ERR_INVALID; /* the constructor recorded why */
    return l;
}

/* ---- readers ----------------------------------------------------------------------------- */

static sn_status read_dense(const json_t *c, sn_layer **out) {
    static const char *const nulls[] = {"activity_regularizer", "kernel_constraint",
                                        "bias_constraint", "quantization_config", "lora_rank",
                                        NULL};
    int64_t units = 0;
    SN_TRY(sn_cfg_int(c, "units", true, 1, INT32_MAX, &units));
    sn_dense_layer_opts o = sn_dense_layer_defaults(units);
    SN_TRY(sn_cfg_activation(c, "activation", &o.activation));
    SN_TRY(sn_cfg_bool(c, "use_bias", false, &o.use_bias));
    SN_TRY(sn_cfg_kernel_bias(c, &o.kernel_initializer, &o.bias_initializer,
                              &o.kernel_regularizer, &o.bias_regularizer));
    SN_TRY(sn_cfg_nulls(c, nulls));
    sn_status st;
    *out = made(sn_layer_dense_ex(&o), &st);
    return st;
}

static sn_status read_conv2d(const json_t *c, sn_layer **out) {
    static const char *const nulls[] = {"activity_regularizer", "kernel_constraint",
                                        "bias_constraint", "lora_rank", NULL};
    int64_t filters = 0, k[2] = {0, 0}, s[2] = {1, 1}, d[2] = {1, 1}, groups = 1;
    SN_TRY(sn_cfg_int(c, "filters", true, 1, INT32_MAX, &filters));
    SN_TRY(sn_cfg_ints(c, "kernel_size", true, 2, 1, k));
    sn_conv2d_layer_opts o = sn_conv2d_layer_defaults(filters, (int)k[0], (int)k[1]);
    SN_TRY(sn_cfg_ints(c, "strides", false, 2, 1, s));
    o.stride_h = (int)s[0];
    o.stride_w = (int)s[1];
    SN_TRY(sn_cfg_padding(c, &o.padding));
    SN_TRY(must_str(c, "data_format", "channels_last"));
    SN_TRY(sn_cfg_ints(c, "dilation_rate", false, 2, 1, d));
    if (d[0] != 1 || d[1] != 1)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'dilation_rate' is [%lld, %lld]; sinter "
                         "supports only [1, 1]", (long long)d[0], (long long)d[1]);
    SN_TRY(sn_cfg_int(c, "groups", false, 1, 1, &groups));
    SN_TRY(sn_cfg_activation(c, "activation", &o.activation));
    SN_TRY(sn_cfg_bool(c, "use_bias", false, &o.use_bias));
    SN_TRY(sn_cfg_kernel_bias(c, &o.kernel_initializer, &o.bias_initializer,
                              &o.kernel_regularizer, &o.bias_regularizer));
    SN_TRY(sn_cfg_nulls(c, nulls));
    sn_status st;
    *out = made(sn_layer_conv2d_ex(&o), &st);
    return st;
}

static sn_status read_pool(const json_t *c, bool max, sn_layer **out) {
    int64_t p[2] = {2, 2}, s[2] = {0, 0};
    SN_TRY(sn_cfg_ints(c, "pool_size", false, 2, 1, p));
    SN_TRY(sn_cfg_ints(c, "strides", false, 2, 1, s)); /* null: the pool size */
    sn_pool2d_opts o = {.pool_h = (int)p[0], .pool_w = (int)p[1], .stride_h = (int)s[0],
                        .stride_w = (int)s[1]};
    SN_TRY(sn_cfg_padding(c, &o.padding));
    SN_TRY(must_str(c, "data_format", "channels_last"));
    sn_status st;
    *out = made(max ? sn_layer_max_pool2d_ex(&o) : sn_layer_avg_pool2d_ex(&o), &st);
    return st;
}
static sn_status read_max_pool(const json_t *c, sn_layer **out) { return read_pool(c, true, out); }
static sn_status read_avg_pool(const json_t *c, sn_layer **out) { return read_pool(c, false, out); }

static sn_status read_gap(const json_t *c, sn_layer **out) {
    SN_TRY(must_str(c, "data_format", "channels_last"));
    bool keep = false;
    SN_TRY(sn_cfg_bool(c, "keepdims", false, &keep));
    sn_status st;
    *out = made(sn_layer_global_pool2d(false, keep), &st);
    return st;
}

static sn_status read_flatten(const json_t *c, sn_layer **out) {
    SN_TRY(must_str(c, "data_format", "channels_last"));
    sn_status st;
    *out = made(sn_layer_flatten(), &st);
    return st;
}

static sn_status read_reshape(const json_t *c, sn_layer **out) {
    const json_t *t = json_object_get(c, "target_shape");
    char b[96];
    if (!json_is_array(t) || json_array_size(t) < 1 || json_array_size(t) >= SN_MAX_DIMS)
        return sn_errorf(SN_ERR_FORMAT, "field 'target_shape' is %s, expected a list of 1 to %d "
                         "integers", sn_cfg_show(t, b, sizeof b), SN_MAX_DIMS - 1);
    sn_shape s = {.ndim = (int)json_array_size(t)};
    for (int i = 0; i < s.ndim; i++) {
        const json_t *x = json_array_get(t, (size_t)i);
        if (!json_is_integer(x))
            return sn_errorf(SN_ERR_FORMAT, "field 'target_shape' is %s: element %d is %s, "
                             "expected an integer", sn_cfg_show(t, b, sizeof b), i,
                             sn_cfg_type(x));
        s.dim[i] = json_integer_value(x);
    }
    sn_status st;
    *out = made(sn_layer_reshape(&s), &st);
    return st;
}

static sn_status read_dropout(const json_t *c, sn_layer **out) {
    double rate = 0;
    int64_t seed = -1;
    SN_TRY(sn_cfg_num(c, "rate", true, 0, 1, &rate));
    /* sinter keys every dropout mask by the model seed and the layer; a seed in the config
     * would reproduce Keras's RNG stream, which sinter does not implement anyway. */
    SN_TRY(sn_cfg_int(c, "seed", false, 0, INT64_MAX, &seed));
    SN_TRY(sn_cfg_must(c, "noise_shape", NULL, "only null (the full input shape)"));
    sn_status st;
    *out = made(sn_layer_dropout(rate), &st);
    return st;
}

static sn_status read_activation(const json_t *c, sn_layer **out) {
    sn_activation a = SN_ACT_NONE;
    if (!json_object_get(c, "activation"))
        return sn_errorf(SN_ERR_FORMAT, "field 'activation' is missing (expected a Keras "
                         "activation name)");
    SN_TRY(sn_cfg_activation(c, "activation", &a));
    sn_status st;
    *out = made(sn_layer_activation(a), &st);
    return st;
}

static sn_status read_bn(const json_t *c, sn_layer **out) {
    static const char *const nulls[] = {"beta_constraint", "gamma_constraint",
                                        "renorm_clipping", NULL};
    sn_batch_norm_layer_opts o = sn_batch_norm_layer_defaults();
    SN_TRY(sn_cfg_axis_is_last(c, "axis -1, channels_last"));
    SN_TRY(sn_cfg_num(c, "momentum", false, 0, 1, &o.momentum));
    SN_TRY(sn_cfg_num(c, "epsilon", false, 0, HUGE_VAL, &o.epsilon));
    SN_TRY(sn_cfg_bool(c, "center", false, &o.center));
    SN_TRY(sn_cfg_bool(c, "scale", false, &o.scale));
    SN_TRY(sn_cfg_initializer(c, "beta_initializer", &o.beta_initializer));
    SN_TRY(sn_cfg_initializer(c, "gamma_initializer", &o.gamma_initializer));
    SN_TRY(sn_cfg_initializer(c, "moving_mean_initializer", &o.moving_mean_initializer));
    SN_TRY(sn_cfg_initializer(c, "moving_variance_initializer", &o.moving_variance_initializer));
    SN_TRY(sn_cfg_regularizer(c, "beta_regularizer", &o.beta_regularizer));
    SN_TRY(sn_cfg_regularizer(c, "gamma_regularizer", &o.gamma_regularizer));
    bool sync = false, renorm = false;
    SN_TRY(sn_cfg_bool(c, "synchronized", false, &sync));
    SN_TRY(sn_cfg_bool(c, "renorm", false, &renorm));
    if (sync || renorm)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is true; sinter supports false",
                         sync ? "synchronized" : "renorm");
    double rm = 0;
    SN_TRY(sn_cfg_num(c, "renorm_momentum", false, 0, 1, &rm)); /* unused without renorm */
    SN_TRY(sn_cfg_nulls(c, nulls));
    sn_status st;
    *out = made(sn_layer_batch_norm_ex(&o), &st);
    return st;
}

/* Embedding: mask_zero carries its mask to the recurrent layers (layers_seq.c, layers_bidir.c); sparse
 * gradients of the table are not implemented
 * (Keras 3.15 writes no `sparse`); `input_length` (Keras 2) is accepted only as null. */
static sn_status read_embedding(const json_t *c, sn_layer **out) {
    static const char *const nulls[] = {"activity_regularizer", "embeddings_constraint",
                                        "quantization_config", "lora_rank", "input_length",
                                        NULL};
    int64_t in_dim = 0, out_dim = 0;
    SN_TRY(sn_cfg_int(c, "input_dim", true, 1, INT32_MAX, &in_dim));
    SN_TRY(sn_cfg_int(c, "output_dim", true, 1, INT32_MAX, &out_dim));
    sn_embedding_layer_opts o = sn_embedding_layer_defaults(in_dim, out_dim);
    SN_TRY(sn_cfg_initializer(c, "embeddings_initializer", &o.embeddings_initializer));
    SN_TRY(sn_cfg_regularizer(c, "embeddings_regularizer", &o.embeddings_regularizer));
    SN_TRY(sn_cfg_bool(c, "mask_zero", false, &o.mask_zero));
    SN_TRY(sn_cfg_nulls(c, nulls));
    sn_status st;
    *out = made(sn_layer_embedding_ex(&o), &st);
    return st;
}

/* A boolean field that must be false: what sinter's recurrent layers do not implement. */
static sn_status must_false(const json_t *c, const char *key, const char *why) {
    bool v = false;
    SN_TRY(sn_cfg_bool(c, key, false, &v));
    if (v) return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is true; sinter supports false (%s)",
                            key, why);
    return SN_OK;
}

/* LSTM and GRU. return_state and stateful are passed on: the constructor says why it refuses
 * them. Dropout inside the cell is not implemented; `seed` only keys that dropout. */
static sn_status read_rnn(const json_t *c, bool gru, sn_layer **out) {
    static const char *const nulls[] = {"activity_regularizer", "kernel_constraint",
                                        "recurrent_constraint", "bias_constraint", NULL};
    int64_t units = 0, seed = -1;
    SN_TRY(sn_cfg_int(c, "units", true, 1, INT32_MAX, &units));
    sn_rnn_layer_opts o = gru ? sn_gru_layer_defaults(units) : sn_lstm_layer_defaults(units);
    SN_TRY(sn_cfg_activation(c, "activation", &o.activation));
    SN_TRY(sn_cfg_activation(c, "recurrent_activation", &o.recurrent_activation));
    SN_TRY(sn_cfg_bool(c, "use_bias", false, &o.use_bias));
    SN_TRY(sn_cfg_bool(c, "return_sequences", false, &o.return_sequences));
    SN_TRY(sn_cfg_bool(c, "return_state", false, &o.return_state));
    SN_TRY(sn_cfg_bool(c, "stateful", false, &o.stateful));
    if (gru) SN_TRY(sn_cfg_bool(c, "reset_after", false, &o.reset_after));
    else SN_TRY(sn_cfg_bool(c, "unit_forget_bias", false, &o.unit_forget_bias));
    SN_TRY(sn_cfg_bool(c, "go_backwards", false, &o.go_backwards));
    SN_TRY(must_false(c, "unroll", "a symbolic loop; unrolling does not change the result, "
                      "re-save with unroll=False"));
    SN_TRY(sn_cfg_bool(c, "zero_output_for_mask", false, &o.zero_output_for_mask));
    SN_TRY(sn_cfg_initializer(c, "kernel_initializer", &o.kernel_initializer));
    SN_TRY(sn_cfg_initializer(c, "recurrent_initializer", &o.recurrent_initializer));
    SN_TRY(sn_cfg_initializer(c, "bias_initializer", &o.bias_initializer));
    SN_TRY(sn_cfg_regularizer(c, "kernel_regularizer", &o.kernel_regularizer));
    SN_TRY(sn_cfg_regularizer(c, "recurrent_regularizer", &o.recurrent_regularizer));
    SN_TRY(sn_cfg_regularizer(c, "bias_regularizer", &o.bias_regularizer));
    const char *const rates[] = {"dropout", "recurrent_dropout"};
    for (int i = 0; i < 2; i++) {
        double r = 0;
        SN_TRY(sn_cfg_num(c, rates[i], false, 0, 1, &r));
        if (r != 0)
            return sn_errorf(SN_ERR_UNSUPPORTED, "field '%s' is %g; sinter supports only 0 "
                             "(dropout inside the recurrent cell is not implemented; put a "
                             "Dropout layer before or after it)", rates[i], r);
    }
    SN_TRY(sn_cfg_int(c, "seed", false, 0, INT64_MAX, &seed)); /* keys the cell's dropout */
    SN_TRY(sn_cfg_nulls(c, nulls));
    sn_status st;
    *out = made(gru ? sn_layer_gru_ex(&o) : sn_layer_lstm_ex(&o), &st);
    return st;
}
static sn_status read_lstm(const json_t *c, sn_layer **out) { return read_rnn(c, false, out); }
static sn_status read_gru(const json_t *c, sn_layer **out) { return read_rnn(c, true, out); }

/* ---- writers ----------------------------------------------------------------------------- */

/* Initializers and regularizers as Keras serialises them: model_config_util.c, shared with
 * model_config_attention.c. */
static json_t *init_json(const sn_initializer *in, sn_initializer_type dflt) {
    return sn_cfg_init_json(in, dflt);
}
static json_t *reg_json(const sn_regularizer *r) { return sn_cfg_reg_json(r); }

static void set(json_t *c, const char *k, json_t *v) { json_object_set_new(c, k, v); }

static json_t *pair(int64_t a, int64_t b) { return json_pack("[I, I]", (json_int_t)a, (json_int_t)b); }

static void write_dense(const sn_layer *l, json_t *c) {
    const sn_dense_layer_opts *o = &l->dense;
    set(c, "units", json_integer(o->units));
    set(c, "activation", json_string(sn_activation_name(o->activation)));
    set(c, "use_bias", json_boolean(o->use_bias));
    sn_cfg_write_kernel_bias(c, &o->kernel_initializer, &o->bias_initializer,
                             &o->kernel_regularizer, &o->bias_regularizer);
    set(c, "kernel_constraint", json_null());
    set(c, "bias_constraint", json_null());
    set(c, "quantization_config", json_null());
}

static void write_conv2d(const sn_layer *l, json_t *c) {
    const sn_conv2d_layer_opts *o = &l->conv;
    set(c, "filters", json_integer(o->filters));
    set(c, "kernel_size", pair(o->kernel_h, o->kernel_w));
    set(c, "strides", pair(o->stride_h, o->stride_w));
    set(c, "padding", json_string(o->padding == SN_PAD_SAME ? "same" : "valid"));
    set(c, "data_format", json_string("channels_last"));
    set(c, "dilation_rate", pair(1, 1));
    set(c, "groups", json_integer(1));
    set(c, "activation", json_string(sn_activation_name(o->activation)));
    set(c, "use_bias", json_boolean(o->use_bias));
    sn_cfg_write_kernel_bias(c, &o->kernel_initializer, &o->bias_initializer,
                             &o->kernel_regularizer, &o->bias_regularizer);
    set(c, "activity_regularizer", json_null());
    set(c, "kernel_constraint", json_null());
    set(c, "bias_constraint", json_null());
}

static void write_pool(const sn_layer *l, json_t *c) {
    const sn_pool2d_opts *o = &l->pool;
    set(c, "pool_size", pair(o->pool_h, o->pool_w));
    set(c, "padding", json_string(o->padding == SN_PAD_SAME ? "same" : "valid"));
    set(c, "strides", pair(o->stride_h ? o->stride_h : o->pool_h,
                           o->stride_w ? o->stride_w : o->pool_w));
    set(c, "data_format", json_string("channels_last"));
}

static void write_gap(const sn_layer *l, json_t *c) {
    set(c, "data_format", json_string("channels_last"));
    set(c, "keepdims", json_boolean(l->keepdims));
}

static void write_flatten(const sn_layer *l, json_t *c) {
    set(c, "data_format", json_string("channels_last"));
}

static void write_reshape(const sn_layer *l, json_t *c) {
    json_t *t = json_array();
    for (int i = 0; i < l->reshape_target.ndim; i++)
        json_array_append_new(t, json_integer(l->reshape_target.dim[i]));
    set(c, "target_shape", t);
}

static void write_dropout(const sn_layer *l, json_t *c) {
    set(c, "rate", json_real(l->rate));
    set(c, "seed", json_null());
    set(c, "noise_shape", json_null());
}

static void write_activation(const sn_layer *l, json_t *c) {
    set(c, "activation", json_string(sn_activation_name(l->act)));
}

static void write_bn(const sn_layer *l, json_t *c) {
    const sn_batch_norm_layer_opts *o = &l->bn;
    set(c, "axis", json_integer(-1));
    set(c, "momentum", json_real(o->momentum));
    set(c, "epsilon", json_real(o->epsilon));
    set(c, "center", json_boolean(o->center));
    set(c, "scale", json_boolean(o->scale));
    set(c, "beta_initializer", init_json(&o->beta_initializer, SN_INIT_ZEROS));
    set(c, "gamma_initializer", init_json(&o->gamma_initializer, SN_INIT_ONES));
    set(c, "moving_mean_initializer", init_json(&o->moving_mean_initializer, SN_INIT_ZEROS));
    set(c, "moving_variance_initializer", init_json(&o->moving_variance_initializer, SN_INIT_ONES));
    set(c, "beta_regularizer", reg_json(&o->beta_regularizer));
    set(c, "gamma_regularizer", reg_json(&o->gamma_regularizer));
    set(c, "beta_constraint", json_null());
    set(c, "gamma_constraint", json_null());
    set(c, "synchronized", json_false());
}

static void write_embedding(const sn_layer *l, json_t *c) {
    const sn_embedding_layer_opts *o = &l->embedding;
    set(c, "input_dim", json_integer(o->input_dim));
    set(c, "output_dim", json_integer(o->output_dim));
    set(c, "embeddings_initializer", init_json(&o->embeddings_initializer,
                                               SN_INIT_RANDOM_UNIFORM));
    set(c, "embeddings_regularizer", reg_json(&o->embeddings_regularizer));
    set(c, "activity_regularizer", json_null());
    set(c, "embeddings_constraint", json_null());
    set(c, "mask_zero", json_boolean(o->mask_zero));
    set(c, "quantization_config", json_null());
}

/* In the order Keras 3.15 writes them (LSTM and GRU differ in unit_forget_bias/reset_after). */
static void write_lstm_gru(const sn_layer *l, json_t *c) {
    const sn_rnn_layer_opts *o = &l->rnn;
    const bool gru = !strcmp(l->vt->class_name, "GRU");
    set(c, "return_sequences", json_boolean(o->return_sequences));
    set(c, "return_state", json_boolean(o->return_state));
    set(c, "go_backwards", json_boolean(o->go_backwards));
    set(c, "stateful", json_boolean(o->stateful));
    set(c, "unroll", json_false());
    set(c, "zero_output_for_mask", json_boolean(o->zero_output_for_mask));
    set(c, "units", json_integer(o->units));
    set(c, "activation", json_string(sn_activation_name(o->activation)));
    set(c, "recurrent_activation", json_string(sn_activation_name(o->recurrent_activation)));
    set(c, "use_bias", json_boolean(o->use_bias));
    set(c, "kernel_initializer", init_json(&o->kernel_initializer, SN_INIT_GLOROT_UNIFORM));
    set(c, "recurrent_initializer", init_json(&o->recurrent_initializer, SN_INIT_ORTHOGONAL));
    set(c, "bias_initializer", init_json(&o->bias_initializer, SN_INIT_ZEROS));
    if (!gru) set(c, "unit_forget_bias", json_boolean(o->unit_forget_bias));
    set(c, "kernel_regularizer", reg_json(&o->kernel_regularizer));
    set(c, "recurrent_regularizer", reg_json(&o->recurrent_regularizer));
    set(c, "bias_regularizer", reg_json(&o->bias_regularizer));
    set(c, "activity_regularizer", json_null());
    set(c, "kernel_constraint", json_null());
    set(c, "recurrent_constraint", json_null());
    set(c, "bias_constraint", json_null());
    set(c, "dropout", json_real(0.0));
    set(c, "recurrent_dropout", json_real(0.0));
    if (gru) set(c, "reset_after", json_boolean(o->reset_after));
    set(c, "seed", json_null());
}

/* ---- merge layers and layer-form activations (layers_merge.c) ---------------------------- */

static sn_status read_merge_op(sn_merge_op op, sn_layer **out) {
    sn_status st;
    *out = made(sn_layer_merge(op), &st);
    return st;
}
static sn_status read_add(const json_t *c, sn_layer **out) { (void)c; return read_merge_op(SN_MERGE_ADD, out); }
static sn_status read_subtract(const json_t *c, sn_layer **out) { (void)c; return read_merge_op(SN_MERGE_SUBTRACT, out); }
static sn_status read_multiply(const json_t *c, sn_layer **out) { (void)c; return read_merge_op(SN_MERGE_MULTIPLY, out); }
static sn_status read_average(const json_t *c, sn_layer **out) { (void)c; return read_merge_op(SN_MERGE_AVERAGE, out); }
static sn_status read_maximum(const json_t *c, sn_layer **out) { (void)c; return read_merge_op(SN_MERGE_MAXIMUM, out); }
static sn_status read_minimum(const json_t *c, sn_layer **out) { (void)c; return read_merge_op(SN_MERGE_MINIMUM, out); }

static sn_status read_zero_padding(const json_t *c, sn_layer **out) {
    SN_TRY(must_str(c, "data_format", "channels_last"));
    int64_t p[4] = {1, 1, 1, 1};
    SN_TRY(sn_cfg_sides_2d(c, "padding", p));
    sn_status st;
    *out = made(sn_layer_zero_padding2d((int)p[0], (int)p[1], (int)p[2], (int)p[3]), &st);
    return st;
}

static sn_status read_concatenate(const json_t *c, sn_layer **out) {
    int64_t axis = -1;
    SN_TRY(sn_cfg_int(c, "axis", false, -SN_MAX_DIMS, SN_MAX_DIMS, &axis));
    sn_status st;
    *out = made(sn_layer_concatenate((int)axis), &st);
    return st;
}

static sn_status read_relu(const json_t *c, sn_layer **out) {
    sn_relu_layer_opts o = sn_relu_layer_defaults();
    const json_t *mv = json_object_get(c, "max_value");
    if (mv && !json_is_null(mv)) SN_TRY(sn_cfg_num(c, "max_value", true, 0, HUGE_VAL, &o.max_value));
    SN_TRY(sn_cfg_num(c, "negative_slope", false, 0, HUGE_VAL, &o.negative_slope));
    SN_TRY(sn_cfg_num(c, "threshold", false, -HUGE_VAL, HUGE_VAL, &o.threshold));
    sn_status st;
    *out = made(sn_layer_relu_ex(&o), &st);
    return st;
}

static sn_status read_leaky_relu(const json_t *c, sn_layer **out) {
    double a = 0.3;
    SN_TRY(sn_cfg_num(c, "negative_slope", false, 0, HUGE_VAL, &a));
    sn_status st;
    *out = made(sn_layer_leaky_relu(a), &st);
    return st;
}

static sn_status read_softmax(const json_t *c, sn_layer **out) {
    int64_t axis = -1;
    SN_TRY(sn_cfg_int(c, "axis", false, -SN_MAX_DIMS, SN_MAX_DIMS, &axis));
    sn_status st;
    *out = made(sn_layer_softmax((int)axis), &st);
    return st;
}

static sn_status read_rescaling(const json_t *c, sn_layer **out) {
    double scale = 1, offset = 0;
    SN_TRY(sn_cfg_num(c, "scale", true, -HUGE_VAL, HUGE_VAL, &scale));
    SN_TRY(sn_cfg_num(c, "offset", false, -HUGE_VAL, HUGE_VAL, &offset));
    sn_status st;
    *out = made(sn_layer_rescaling(scale, offset), &st);
    return st;
}

static sn_status read_normalization(const json_t *c, sn_layer **out) {
    SN_TRY(sn_cfg_axis_is_last(c, "axis -1"));
    bool invert = false;
    SN_TRY(sn_cfg_bool(c, "invert", false, &invert));
    if (invert)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'invert' is true; sinter's Normalization "
                         "normalises (invert false)");
    /* mean and variance given in the config (not as weights) are not read */
    static const char *const nulls[] = {"mean", "variance", NULL};
    SN_TRY(sn_cfg_nulls(c, nulls));
    sn_status st;
    *out = made(sn_layer_normalization(), &st);
    return st;
}

static sn_status read_gmp(const json_t *c, sn_layer **out) {
    SN_TRY(must_str(c, "data_format", "channels_last"));
    bool keep = false;
    SN_TRY(sn_cfg_bool(c, "keepdims", false, &keep));
    sn_status st;
    *out = made(sn_layer_global_pool2d(true, keep), &st);
    return st;
}

static void write_nothing(const sn_layer *l, json_t *c) {
    (void)l;
    (void)c;
}
static void write_concatenate(const sn_layer *l, json_t *c) {
    json_object_set_new(c, "axis", json_integer(l->merge.axis));
}
static void write_relu(const sn_layer *l, json_t *c) {
    json_object_set_new(c, "max_value", l->relu.max_value < 0 ? json_null()
                                                              : json_real(l->relu.max_value));
    json_object_set_new(c, "negative_slope", json_real(l->relu.negative_slope));
    json_object_set_new(c, "threshold", json_real(l->relu.threshold));
}
static void write_leaky_relu(const sn_layer *l, json_t *c) {
    json_object_set_new(c, "negative_slope", json_real(l->relu.negative_slope));
}
static void write_softmax(const sn_layer *l, json_t *c) {
    json_object_set_new(c, "axis", json_integer(l->relu.axis));
}
static void write_zero_padding(const sn_layer *l, json_t *c) {
    json_object_set_new(c, "padding", json_pack("[[i, i], [i, i]]", l->pad[0], l->pad[1],
                                                l->pad[2], l->pad[3]));
    json_object_set_new(c, "data_format", json_string("channels_last"));
}
static void write_normalization(const sn_layer *l, json_t *c) {
    (void)l;
    json_object_set_new(c, "axis", json_pack("[i]", -1));
    json_object_set_new(c, "invert", json_false());
    json_object_set_new(c, "mean", json_null());
    json_object_set_new(c, "variance", json_null());
}
static void write_rescaling(const sn_layer *l, json_t *c) {
    json_object_set_new(c, "scale", json_real(l->scale));
    json_object_set_new(c, "offset", json_real(l->offset));
}

static const char *const merge_keys[] = {COMMON_KEYS, NULL};
static const char *const concatenate_keys[] = {COMMON_KEYS, "axis", NULL};
static const char *const relu_keys[] = {COMMON_KEYS, "max_value", "negative_slope", "threshold",
                                        NULL};
static const char *const leaky_relu_keys[] = {COMMON_KEYS, "negative_slope", NULL};
static const char *const softmax_keys[] = {COMMON_KEYS, "axis", NULL};
static const char *const rescaling_keys[] = {COMMON_KEYS, "scale", "offset", NULL};
static const char *const normalization_keys[] = {COMMON_KEYS, "axis", "invert", "mean",
                                                 "variance", NULL};
static const char *const zero_padding_keys[] = {COMMON_KEYS, "padding", "data_format", NULL};

/* ---- Bidirectional: {"merge_mode", "layer", "backward_layer"}, the two halves serialised
 * LSTM/GRU layers (keras/src/layers/rnn/bidirectional.py get_config), read and written by the
 * LSTM/GRU reader and writer above through sn_cfg_read_layer / sn_cfg_write_layer. merge_mode
 * null (a list of two outputs) is refused: a Sequential model passes one tensor on. ------- */

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
    json_object_set_new(c, "trainable", json_boolean(!h->frozen));
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

/* ---- the table --------------------------------------------------------------------------- */

typedef struct cls_entry {
    const char *cls;
    const char *const *keys; /* every field Keras 3 writes for the class */
    sn_status (*read)(const json_t *cfg, sn_layer **out);
    void (*write)(const sn_layer *l, json_t *cfg);
} cls_entry;

static const char *const dense_keys[] = {COMMON_KEYS, "units", "activation", "use_bias",
    "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
    "activity_regularizer", "kernel_constraint", "bias_constraint", "quantization_config",
    "lora_rank", "lora_alpha", NULL};
static const char *const conv_keys[] = {COMMON_KEYS, "filters", "kernel_size", "strides",
    "padding", "data_format", "dilation_rate", "groups", "activation", "use_bias",
    "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
    "activity_regularizer", "kernel_constraint", "bias_constraint", "lora_rank", "lora_alpha",
    NULL};
static const char *const pool_keys[] = {COMMON_KEYS, "pool_size", "padding", "strides",
                                        "data_format", NULL};
static const char *const gap_keys[] = {COMMON_KEYS, "data_format", "keepdims", NULL};
static const char *const flatten_keys[] = {COMMON_KEYS, "data_format", NULL};
static const char *const reshape_keys[] = {COMMON_KEYS, "target_shape", NULL};
static const char *const dropout_keys[] = {COMMON_KEYS, "rate", "seed", "noise_shape", NULL};
static const char *const activation_keys[] = {COMMON_KEYS, "activation", NULL};
static const char *const bn_keys[] = {COMMON_KEYS, "axis", "momentum", "epsilon", "center",
    "scale", "beta_initializer", "gamma_initializer", "moving_mean_initializer",
    "moving_variance_initializer", "beta_regularizer", "gamma_regularizer", "beta_constraint",
    "gamma_constraint", "synchronized", "renorm", "renorm_clipping", "renorm_momentum", NULL};

static const char *const embedding_keys[] = {COMMON_KEYS, "input_dim", "output_dim",
    "embeddings_initializer", "embeddings_regularizer", "activity_regularizer",
    "embeddings_constraint", "mask_zero", "quantization_config", "lora_rank", "lora_alpha",
    "input_length", NULL};
#define RNN_KEYS "return_sequences", "return_state", "go_backwards", "stateful", "unroll", \
    "zero_output_for_mask", "units", "activation", "recurrent_activation", "use_bias", \
    "kernel_initializer", "recurrent_initializer", "bias_initializer", "kernel_regularizer", \
    "recurrent_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint", \
    "recurrent_constraint", "bias_constraint", "dropout", "recurrent_dropout", "seed"
static const char *const lstm_keys[] = {COMMON_KEYS, RNN_KEYS, "unit_forget_bias", NULL};
static const char *const bidirectional_keys[] = {COMMON_KEYS, SN_CFG_BIDIRECTIONAL_KEYS, NULL};
static const char *const conv1d_keys[] = {COMMON_KEYS, SN_CFG_CONV1D_KEYS, NULL};
static const char *const elu_keys[] = {COMMON_KEYS, "alpha", NULL};
static const char *const permute_keys[] = {COMMON_KEYS, "dims", NULL};
static const char *const prelu_keys[] = {COMMON_KEYS, "alpha_initializer", "alpha_regularizer",
                                         "alpha_constraint", "shared_axes", NULL};
static const char *const gru_keys[] = {COMMON_KEYS, RNN_KEYS, "reset_after", NULL};

/* The attention layers' readers and writers (model_config_attention.c). */
static const char *const layer_norm_keys[] = {COMMON_KEYS, SN_CFG_LAYER_NORM_KEYS, NULL};
static const char *const mha_keys[] = {COMMON_KEYS, SN_CFG_MHA_KEYS, NULL};
/* The convolution family's (model_config_conv.c). */
static const char *const depthwise_keys[] = {COMMON_KEYS, SN_CFG_DEPTHWISE_KEYS, NULL};
static const char *const separable_keys[] = {COMMON_KEYS, SN_CFG_SEPARABLE_KEYS, NULL};
static const char *const conv_transpose_keys[] = {COMMON_KEYS, SN_CFG_CONV_TRANSPOSE_KEYS, NULL};
static const char *const upsampling_keys[] = {COMMON_KEYS, SN_CFG_UPSAMPLING_KEYS, NULL};
static const char *const cropping_keys[] = {COMMON_KEYS, SN_CFG_CROPPING_KEYS, NULL};

static const cls_entry classes[] = {
    {"Dense", dense_keys, read_dense, write_dense},
    {"Conv2D", conv_keys, read_conv2d, write_conv2d},
    {"MaxPooling2D", pool_keys, read_max_pool, write_pool},
    {"AveragePooling2D", pool_keys, read_avg_pool, write_pool},
    {"GlobalAveragePooling2D", gap_keys, read_gap, write_gap},
    {"Flatten", flatten_keys, read_flatten, write_flatten},
    {"Reshape", reshape_keys, read_reshape, write_reshape},
    {"Dropout", dropout_keys, read_dropout, write_dropout},
    {"Activation", activation_keys, read_activation, write_activation},
    {"BatchNormalization", bn_keys, read_bn, write_bn},
    {"Embedding", embedding_keys, read_embedding, write_embedding},
    {"LSTM", lstm_keys, read_lstm, write_lstm_gru},
    {"GRU", gru_keys, read_gru, write_lstm_gru},
    {"Bidirectional", bidirectional_keys, sn_cfg_read_bidirectional, sn_cfg_write_bidirectional},
    /* 1D layers, ELU, Permute (model_config_seq.c) */
    {"Conv1D", conv1d_keys, sn_cfg_read_conv1d, sn_cfg_write_conv1d},
    {"MaxPooling1D", pool_keys, sn_cfg_read_max_pool1d, sn_cfg_write_pool1d},
    {"AveragePooling1D", pool_keys, sn_cfg_read_avg_pool1d, sn_cfg_write_pool1d},
    {"GlobalMaxPooling1D", gap_keys, sn_cfg_read_gmp1d, sn_cfg_write_gpool1d},
    {"GlobalAveragePooling1D", gap_keys, sn_cfg_read_gap1d, sn_cfg_write_gpool1d},
    {"ELU", elu_keys, sn_cfg_read_elu, sn_cfg_write_elu},
    {"Permute", permute_keys, sn_cfg_read_permute, sn_cfg_write_permute},
    {"PReLU", prelu_keys, sn_cfg_read_prelu, sn_cfg_write_prelu},
    {"LayerNormalization", layer_norm_keys, sn_cfg_read_layer_norm, sn_cfg_write_layer_norm},
    {"MultiHeadAttention", mha_keys, sn_cfg_read_mha, sn_cfg_write_mha},
    /* merge layers and layer-form activations (issue 23, Functional models) */
    {"Add", merge_keys, read_add, write_nothing},
    {"Subtract", merge_keys, read_subtract, write_nothing},
    {"Multiply", merge_keys, read_multiply, write_nothing},
    {"Average", merge_keys, read_average, write_nothing},
    {"Maximum", merge_keys, read_maximum, write_nothing},
    {"Minimum", merge_keys, read_minimum, write_nothing},
    {"Concatenate", concatenate_keys, read_concatenate, write_concatenate},
    {"ReLU", relu_keys, read_relu, write_relu},
    {"LeakyReLU", leaky_relu_keys, read_leaky_relu, write_leaky_relu},
    {"Softmax", softmax_keys, read_softmax, write_softmax},
    {"Rescaling", rescaling_keys, read_rescaling, write_rescaling},
    {"Normalization", normalization_keys, read_normalization, write_normalization},
    {"GlobalMaxPooling2D", gap_keys, read_gmp, write_gap},
    {"ZeroPadding2D", zero_padding_keys, read_zero_padding, write_zero_padding},
    /* the convolution family (issue 23, MobileNetV2, Xception, U-Net) */
    {"DepthwiseConv2D", depthwise_keys, sn_cfg_read_depthwise, sn_cfg_write_sepconv},
    {"SeparableConv2D", separable_keys, sn_cfg_read_separable, sn_cfg_write_sepconv},
    {"Conv2DTranspose", conv_transpose_keys, sn_cfg_read_conv_transpose,
     sn_cfg_write_conv_transpose},
    {"UpSampling2D", upsampling_keys, sn_cfg_read_upsampling, sn_cfg_write_upsampling},
    {"Cropping2D", cropping_keys, sn_cfg_read_cropping, sn_cfg_write_cropping},
};
#define N_CLASSES ((int)(sizeof classes / sizeof classes[0]))

static const cls_entry *find_class(const char *cls) {
    for (int i = 0; i < N_CLASSES; i++)
        if (!strcmp(classes[i].cls, cls)) return &classes[i];
    return NULL;
}

/* The layer dtype policy: a serialised DTypePolicy, or its name as a string. */
sn_status sn_cfg_policy(const json_t *c, sn_cfg_state *s) {
    const json_t *v = json_object_get(c, "dtype");
    if (!v || json_is_null(v)) return SN_OK;
    const char *name = NULL;
    if (json_is_string(v)) {
        name = json_string_value(v);
    } else {
        const char *cls;
        const json_t *pc;
        SN_TRY(sn_cfg_object(v, "field 'dtype'", "", &cls, &pc));
        if (strcmp(cls, "DTypePolicy") && strcmp(cls, "FloatDTypePolicy"))
            return sn_errorf(SN_ERR_UNSUPPORTED, "field 'dtype' is a %s; sinter supports the "
                             "DTypePolicy float32 or mixed_bfloat16", cls);
        if (!pc || sn_cfg_str(pc, "name", true, &name) != SN_OK)
            return sn_error_context(SN_ERR_FORMAT, "field 'dtype' (%s)", cls);
    }
    bool mixed;
    if (!strcmp(name, "float32")) mixed = false;
    else if (!strcmp(name, "mixed_bfloat16")) mixed = true;
    else
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'dtype' is the policy \"%s\"; sinter "
                         "supports \"float32\" and \"mixed_bfloat16\" (its bf16 precision)",
                         name);
    if (s->policy_seen && mixed != s->mixed_bfloat16)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'dtype' is \"%s\" but an earlier layer's is "
                         "\"%s\"; sinter runs one policy for the whole model", name,
                         s->mixed_bfloat16 ? "mixed_bfloat16" : "float32");
    s->policy_seen = true;
    s->mixed_bfloat16 = mixed;
    return SN_OK;
}

sn_status sn_cfg_read_layer(const char *cls, const json_t *cfg, sn_cfg_state *s, sn_layer **out) {
    *out = NULL;
    const cls_entry *e = find_class(cls);
    if (!e) {
        char list[1024] = "InputLayer";
        size_t n = strlen(list);
        for (int i = 0; i < N_CLASSES && n < sizeof list; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, ", %s", classes[i].cls);
        return sn_errorf(SN_ERR_UNSUPPORTED, "layer class '%s' is not supported; sinter reads %s",
                         cls, list);
    }
    if (!cfg) return sn_errorf(SN_ERR_FORMAT, "the layer has no config object");
    SN_TRY(sn_cfg_known_keys(cfg, cls, e->keys));
    const char *name = NULL;
    SN_TRY(sn_cfg_str(cfg, "name", false, &name));
    bool trainable = true;
    SN_TRY(sn_cfg_bool(cfg, "trainable", false, &trainable));
    SN_TRY(sn_cfg_policy(cfg, s));
    sn_layer *l = NULL;
    SN_TRY(e->read(cfg, &l));
    sn_layer_set_trainable(l, trainable);
    if (name) {
        sn_status st = sn_layer_set_name(l, name);
        if (st != SN_OK) {
            /* Not yet owned by a model: free it as sn_model_add would. */
            sn_model *tmp = sn_sequential_new("tmp");
            if (tmp) {
                sn_model_add(tmp, l);
                sn_model_free(tmp);
            }
            return st;
        }
    }
    *out = l;
    return SN_OK;
}

json_t *sn_cfg_write_layer(const sn_layer *l, bool mixed_bfloat16) {
    const cls_entry *e = find_class(l->vt->class_name);
    if (!e) {
        sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' (%s): sinter cannot write this class to a "
                  "Keras config", l->name, l->vt->class_name);
        return NULL;
    }
    json_t *c = json_object();
    if (!c) {
        sn_errorf(SN_ERR_NOMEM, "writing a config: out of memory");
        return NULL;
    }
    set(c, "name", json_string(l->name));
    set(c, "trainable", json_boolean(!l->frozen));
    set(c, "dtype", sn_cfg_dtype_policy(mixed_bfloat16));
    e->write(l, c);
    return c;
}
