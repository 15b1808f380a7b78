/* Keras config readers and writers of the attention layers (LayerNormalization,
 * MultiHeadAttention), in their own file so that the class table of model_config_layers.c
 * only gains two rows. Fields as Keras 3's get_config writes them; what sinter does not
 * implement is refused naming the field (rms_scaling, axes other than the last, use_gate,
 * an output_shape of more than one dimension, sliding_window, attention_axes other than the
 * sequence's, constraints). Checked against what Keras 3.15.1 writes
 * (tests/test_attention_layers.c holds its configs). MultiHeadAttention's
 * use_causal_mask is an argument of Keras's call, not of the config: a Functional model's
 * call arguments set it on the layer (sn_mha_layer_opts.use_causal_mask). A call with a
 * query other than its value, a key other than the value or an attention_mask tensor makes
 * the layer the general call (sn_layer_mha_set_call). */
#include <math.h>
#include <string.h>

#include "nn/layers/layers_attention.h"
#include "nn/keras/model_config.h"

static void set(json_t *c, const char *k, json_t *v) { json_object_set_new(c, k, v); }

static sn_layer *made(sn_layer *l, sn_status *st) {
    *st = l ? SN_OK : SN_ERR_INVALID; /* the constructor recorded why */
    return l;
}

sn_status sn_cfg_read_layer_norm(const json_t *c, sn_layer **out) {
    static const char *const nk[] = {"beta_constraint", "gamma_constraint", NULL};
    sn_layer_norm_opts o = sn_layer_norm_defaults();
    SN_TRY(sn_cfg_axis_is_last(c, "axis -1"));
    bool rms = false;
    SN_TRY(sn_cfg_bool(c, "rms_scaling", false, &rms));
    if (rms)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'rms_scaling' is true; sinter supports false");
    SN_TRY(sn_cfg_num(c, "epsilon", false, 0, HUGE_VAL, &o.epsilon));
    SN_TRY(sn_cfg_bool(c, "center", false, &o.center));
    SN_TRY(sn_cfg_bool(c, "scale", false, &o.scale));
    SN_TRY(sn_cfg_initializer(c, "beta_initializer", &o.beta_initializer));
    SN_TRY(sn_cfg_initializer(c, "gamma_initializer", &o.gamma_initializer));
    SN_TRY(sn_cfg_regularizer(c, "beta_regularizer", &o.beta_regularizer));
    SN_TRY(sn_cfg_regularizer(c, "gamma_regularizer", &o.gamma_regularizer));
    SN_TRY(sn_cfg_nulls(c, nk));
    sn_status st;
    *out = made(sn_layer_layer_norm_ex(&o), &st);
    return st;
}

void sn_cfg_write_layer_norm(const sn_layer *l, json_t *c) {
    const sn_layer_norm_opts *o = &l->attn->ln;
    set(c, "axis", json_pack("[i]", -1));
    set(c, "epsilon", json_real(o->epsilon));
    set(c, "center", json_boolean(o->center));
    set(c, "scale", json_boolean(o->scale));
    set(c, "rms_scaling", json_false());
    set(c, "beta_initializer", sn_cfg_init_json(&o->beta_initializer, SN_INIT_ZEROS));
    set(c, "gamma_initializer", sn_cfg_init_json(&o->gamma_initializer, SN_INIT_ONES));
    set(c, "beta_regularizer", sn_cfg_reg_json(&o->beta_regularizer));
    set(c, "gamma_regularizer", sn_cfg_reg_json(&o->gamma_regularizer));
    set(c, "beta_constraint", json_null());
    set(c, "gamma_constraint", json_null());
}

sn_status sn_cfg_read_mha(const json_t *c, sn_layer **out) {
    static const char *const nk[] = {"sliding_window", "activity_regularizer",
                                     "kernel_constraint", "bias_constraint", NULL};
    int64_t heads = 0, key_dim = 0, value_dim = 0;
    SN_TRY(sn_cfg_int(c, "num_heads", true, 1, INT32_MAX, &heads));
    SN_TRY(sn_cfg_int(c, "key_dim", true, 1, INT32_MAX, &key_dim));
    sn_mha_layer_opts o = sn_mha_layer_defaults((int)heads, key_dim);
    SN_TRY(sn_cfg_int(c, "value_dim", false, 1, INT32_MAX, &value_dim));
    o.value_dim = value_dim;
    SN_TRY(sn_cfg_num(c, "dropout", false, 0, 1, &o.dropout));
    if (o.dropout >= 1)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'dropout' is %g; expected [0, 1)",
                         o.dropout);
    /* output_shape: Keras writes an int given to it as [n]; a tuple of more than one
     * dimension (an output [B, T, n1, n2, ...]) is not implemented */
    const json_t *os = json_object_get(c, "output_shape");
    if (json_is_array(os) && json_array_size(os) == 1) os = json_array_get(os, 0);
    if (os && !json_is_null(os)) {
        if (!json_is_integer(os) || json_integer_value(os) < 1) {
            char b[64];
            return sn_errorf(SN_ERR_UNSUPPORTED, "field 'output_shape' is %s; sinter supports "
                             "null, an int > 0 or [int]",
                             sn_cfg_show(json_object_get(c, "output_shape"), b, sizeof b));
        }
        o.output_dim = json_integer_value(os);
    }
    SN_TRY(sn_cfg_bool(c, "use_bias", false, &o.use_bias));
    SN_TRY(sn_cfg_kernel_bias(c, &o.kernel_initializer, &o.bias_initializer,
                              &o.kernel_regularizer, &o.bias_regularizer));
    SN_TRY(sn_cfg_nulls(c, nk));
    /* Keras writes the attention axes it built with: [1] for [B, T, d] inputs (null before
     * build); attention over other axes is not implemented. */
    const json_t *ax = json_object_get(c, "attention_axes");
    if (ax && !json_is_null(ax) &&
        !(json_is_array(ax) && json_array_size(ax) == 1 &&
          json_is_integer(json_array_get(ax, 0)) && json_integer_value(json_array_get(ax, 0)) == 1) &&
        !(json_is_integer(ax) && json_integer_value(ax) == 1)) {
        char b[64];
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'attention_axes' is %s; sinter attends over "
                         "the sequence axis only ([1] or null)", sn_cfg_show(ax, b, sizeof b));
    }
    bool gate = false;
    SN_TRY(sn_cfg_bool(c, "use_gate", false, &gate));
    if (gate)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'use_gate' is true; sinter supports false "
                         "(gated attention is not implemented)");
    /* flash_attention (Keras 3.5+) only picks Keras's backend kernel: sinter picks its own
     * (the fused one unless value_dim differs or dropout applies), so any value reads the
     * same. seed (Keras's dropout seed) is not read: sinter's dropout masks come from the
     * model's seed and cannot match Keras's random stream anyway. */
    sn_status st;
    *out = made(sn_layer_mha_ex(&o), &st);
    return st;
}

void sn_cfg_write_mha(const sn_layer *l, json_t *c) {
    const sn_mha_layer_opts *o = &l->attn->mha;
    set(c, "num_heads", json_integer(o->num_heads));
    set(c, "key_dim", json_integer(o->key_dim));
    set(c, "value_dim", json_integer(o->value_dim ? o->value_dim : o->key_dim));
    set(c, "dropout", json_real(o->dropout));
    set(c, "use_bias", json_boolean(o->use_bias));
    set(c, "use_gate", json_false());
    set(c, "output_shape", o->output_dim ? json_pack("[I]", (json_int_t)o->output_dim)
                                         : json_null());
    set(c, "attention_axes", json_pack("[i]", 1));
    set(c, "sliding_window", json_null());
    sn_cfg_write_kernel_bias(c, &o->kernel_initializer, &o->bias_initializer,
                             &o->kernel_regularizer, &o->bias_regularizer);
    set(c, "activity_regularizer", json_null());
    set(c, "kernel_constraint", json_null());
    set(c, "bias_constraint", json_null());
    set(c, "seed", json_null());
}

sn_status sn_cfg_mha_kwarg(sn_layer *l, int call, const char *key, const json_t *v) {
    char b[64];
    if ((!strcmp(key, "attention_mask") || !strcmp(key, "key")) && json_is_null(v)) return SN_OK;
    if (!strcmp(key, "use_causal_mask") && json_is_boolean(v)) {
        bool causal = json_is_true(v);
        if (call == 0) {
            l->attn->mha.use_causal_mask = causal;
        } else if (l->attn->mha.use_causal_mask != causal) {
            return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' is called with use_causal_mask=%s "
                             "in call %d but %s in call 0; sinter's layer holds one setting",
                             l->name, causal ? "true" : "false", call, causal ? "false" : "true");
        }
        return SN_OK;
    }
    return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' (MultiHeadAttention) is called with keyword "
                     "argument %s=%s; sinter supports use_causal_mask, key and attention_mask",
                     l->name, key, sn_cfg_show(v, b, sizeof b));
}

int sn_cfg_mha_causal(const sn_layer *l) {
    if (!l || strcmp(l->vt->class_name, "MultiHeadAttention")) return -1;
    return l->attn->mha.use_causal_mask ? 1 : 0;
}
