/* Readers and writers of Keras's 1D layers, ELU, Permute and PReLU (layers_seq1d.c), in the fields
 * and order Keras 3.15 writes them; registered in model_config_layers.c's class table. Fields
 * sinter does not implement (causal padding, dilation, groups, channels_first, constraints)
 * are refused by name. */
#include <string.h>

#include "nn/keras/model_config.h"

static void set(json_t *c, const char *k, json_t *v) { json_object_set_new(c, k, v); }

static json_t *one(int64_t a) { return json_pack("[I]", (json_int_t)a); }

static sn_status made(sn_layer *l, sn_layer **out) {
    *out = l;
    return l ? SN_OK : SN_ERR_INVALID; /* the constructor recorded why */
}

sn_status sn_cfg_read_conv1d(const json_t *c, sn_layer **out) {
    static const char *const nulls[] = {"activity_regularizer", "kernel_constraint",
                                        "bias_constraint", "lora_rank", NULL};
    int64_t filters = 0, k = 0, s = 1, d = 1, groups = 1;
    SN_TRY(sn_cfg_int(c, "filters", true, 1, INT32_MAX, &filters));
    SN_TRY(sn_cfg_ints(c, "kernel_size", true, 1, 1, &k));
    sn_conv1d_layer_opts o = sn_conv1d_layer_defaults(filters, (int)k);
    SN_TRY(sn_cfg_ints(c, "strides", false, 1, 1, &s));
    o.stride = (int)s;
    SN_TRY(sn_cfg_padding(c, &o.padding));
    SN_TRY(sn_cfg_channels_last(c));
    SN_TRY(sn_cfg_ints(c, "dilation_rate", false, 1, 1, &d));
    if (d != 1)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'dilation_rate' is [%lld]; sinter supports "
                         "only [1]", (long long)d);
    SN_TRY(sn_cfg_int(c, "groups", false, 1, 1, &groups));
    SN_TRY(sn_cfg_activation(c, "activation", &o.activation));
    SN_TRY(sn_cfg_bool(c, "use_bias", false, &o.use_bias));
    SN_TRY(sn_cfg_kernel_bias(c, &o.kernel_initializer, &o.bias_initializer,
                              &o.kernel_regularizer, &o.bias_regularizer));
    for (int i = 0; nulls[i]; i++)
        SN_TRY(sn_cfg_must(c, nulls[i], NULL, "only null (not implemented in sinter)"));
    return made(sn_layer_conv1d_ex(&o), out);
}

void sn_cfg_write_conv1d(const sn_layer *l, json_t *c) {
    const sn_conv1d_layer_opts *o = &l->conv1d;
    set(c, "filters", json_integer(o->filters));
    set(c, "kernel_size", one(o->kernel_size));
    set(c, "strides", one(o->stride));
    set(c, "padding", json_string(o->padding == SN_PAD_SAME ? "same" : "valid"));
    set(c, "data_format", json_string("channels_last"));
    set(c, "dilation_rate", one(1));
    set(c, "groups", json_integer(1));
    set(c, "activation", json_string(sn_activation_name(o->activation)));
    set(c, "use_bias", json_boolean(o->use_bias));
    sn_cfg_write_kernel_bias(c, &o->kernel_initializer, &o->bias_initializer,
                             &o->kernel_regularizer, &o->bias_regularizer);
    set(c, "activity_regularizer", json_null());
    set(c, "kernel_constraint", json_null());
    set(c, "bias_constraint", json_null());
}

static sn_status read_pool1d(const json_t *c, bool max, sn_layer **out) {
    int64_t p = 2, s = 0; /* strides null: the pool size */
    SN_TRY(sn_cfg_ints(c, "pool_size", false, 1, 1, &p));
    SN_TRY(sn_cfg_ints(c, "strides", false, 1, 1, &s));
    sn_padding pad = SN_PAD_VALID;
    SN_TRY(sn_cfg_padding(c, &pad));
    SN_TRY(sn_cfg_channels_last(c));
    return made(sn_layer_pool1d(max, (int)p, (int)s, pad), out);
}
sn_status sn_cfg_read_max_pool1d(const json_t *c, sn_layer **out) { return read_pool1d(c, true, out); }
sn_status sn_cfg_read_avg_pool1d(const json_t *c, sn_layer **out) { return read_pool1d(c, false, out); }

void sn_cfg_write_pool1d(const sn_layer *l, json_t *c) {
    set(c, "pool_size", one(l->pool.pool_w));
    set(c, "padding", json_string(l->pool.padding == SN_PAD_SAME ? "same" : "valid"));
    set(c, "strides", one(l->pool.stride_w));
    set(c, "data_format", json_string("channels_last"));
}

static sn_status read_gpool1d(const json_t *c, bool max, sn_layer **out) {
    bool keepdims = false;
    SN_TRY(sn_cfg_channels_last(c));
    SN_TRY(sn_cfg_bool(c, "keepdims", false, &keepdims));
    return made(sn_layer_global_pool1d(max, keepdims), out);
}
sn_status sn_cfg_read_gmp1d(const json_t *c, sn_layer **out) { return read_gpool1d(c, true, out); }
sn_status sn_cfg_read_gap1d(const json_t *c, sn_layer **out) { return read_gpool1d(c, false, out); }

void sn_cfg_write_gpool1d(const sn_layer *l, json_t *c) {
    set(c, "data_format", json_string("channels_last"));
    set(c, "keepdims", json_boolean(l->keepdims));
}

sn_status sn_cfg_read_elu(const json_t *c, sn_layer **out) {
    double alpha = 1.0;
    SN_TRY(sn_cfg_num(c, "alpha", false, -1e30, 1e30, &alpha));
    return made(sn_layer_elu(alpha), out);
}

void sn_cfg_write_elu(const sn_layer *l, json_t *c) { set(c, "alpha", json_real(l->alpha)); }

sn_status sn_cfg_read_permute(const json_t *c, sn_layer **out) {
    const json_t *v = json_object_get(c, "dims");
    if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) >= SN_MAX_DIMS) {
        char b[96];
        return sn_errorf(SN_ERR_FORMAT, "field 'dims' is %s, expected a list of 1 to %d axes",
                         sn_cfg_show(v, b, sizeof b), SN_MAX_DIMS - 1);
    }
    int n = (int)json_array_size(v), dims[SN_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, (size_t)i);
        if (!json_is_integer(e))
            return sn_errorf(SN_ERR_FORMAT, "field 'dims' item %d is %s, expected an integer", i,
                             sn_cfg_type(e));
        dims[i] = (int)json_integer_value(e);
    }
    return made(sn_layer_permute(n, dims), out);
}

void sn_cfg_write_permute(const sn_layer *l, json_t *c) {
    json_t *d = json_array();
    for (int i = 0; i < l->n_perm; i++) json_array_append_new(d, json_integer(l->perm[i]));
    set(c, "dims", d);
}

sn_status sn_cfg_read_prelu(const json_t *c, sn_layer **out) {
    sn_prelu_layer_opts o = {0};
    SN_TRY(sn_cfg_initializer(c, "alpha_initializer", &o.alpha_initializer));
    SN_TRY(sn_cfg_regularizer(c, "alpha_regularizer", &o.alpha_regularizer));
    SN_TRY(sn_cfg_must(c, "alpha_constraint", NULL, "only null (not implemented in sinter)"));
    const json_t *v = json_object_get(c, "shared_axes");
    if (v && !json_is_null(v)) {
        if (json_is_integer(v)) {
            o.n_shared_axes = 1;
            o.shared_axes[0] = (int)json_integer_value(v);
        } else if (json_is_array(v) && json_array_size(v) < SN_MAX_DIMS) {
            o.n_shared_axes = (int)json_array_size(v);
            for (int i = 0; i < o.n_shared_axes; i++) {
                const json_t *e = json_array_get(v, (size_t)i);
                if (!json_is_integer(e))
                    return sn_errorf(SN_ERR_FORMAT, "field 'shared_axes' item %d is %s, "
                                     "expected an integer", i, sn_cfg_type(e));
                o.shared_axes[i] = (int)json_integer_value(e);
            }
        } else {
            char b[96];
            return sn_errorf(SN_ERR_FORMAT, "field 'shared_axes' is %s, expected null, an axis "
                             "or a list of axes", sn_cfg_show(v, b, sizeof b));
        }
    }
    return made(sn_layer_prelu_ex(&o), out);
}

void sn_cfg_write_prelu(const sn_layer *l, json_t *c) {
    const sn_prelu_layer_opts *o = &l->prelu;
    set(c, "alpha_initializer", sn_cfg_init_json(&o->alpha_initializer, SN_INIT_ZEROS));
    set(c, "alpha_regularizer", sn_cfg_reg_json(&o->alpha_regularizer));
    set(c, "alpha_constraint", json_null());
    json_t *a = json_null();
    if (o->n_shared_axes > 0) {
        a = json_array();
        for (int i = 0; i < o->n_shared_axes; i++)
            json_array_append_new(a, json_integer(o->shared_axes[i]));
    }
    set(c, "shared_axes", a);
}
