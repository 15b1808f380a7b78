/* Keras config readers and writers of the convolution family beyond Conv2D (DepthwiseConv2D,
 * SeparableConv2D, Conv2DTranspose, UpSampling2D, Cropping2D), in their own file so that the
 * class table of model_config_layers.c only gains rows. Fields in the order Keras 3.15.1's
 * get_config writes them; what sinter does not implement is refused naming the field and
 * the value: data_format other than channels_last, dilation_rate other than 1,
 * output_padding, interpolation other than "nearest", constraints and activity
 * regularizers. */
#include <math.h>
#include <string.h>

#include "nn/keras/model_config.h"

static void set(json_t *c, const char *k, json_t *v) { json_object_set_new(c, k, v); }
static json_t *pair(int64_t a, int64_t b) { return json_pack("[I, I]", (json_int_t)a, (json_int_t)b); }

static sn_layer *made(sn_layer *l, sn_status *st) {
    *st = l ? SN_OK : SN_ERR_INVALID; /* the constructor recorded why */
    return l;
}

/* kernel_size (required), strides, padding, data_format, dilation_rate 1. */
static sn_status window(const json_t *c, int *kh, int *kw, int *sh, int *sw, sn_padding *pad) {
    int64_t k[2] = {0, 0}, s[2] = {1, 1}, d[2] = {1, 1};
    SN_TRY(sn_cfg_ints(c, "kernel_size", true, 2, 1, k));
    SN_TRY(sn_cfg_ints(c, "strides", false, 2, 1, s));
    SN_TRY(sn_cfg_padding(c, pad));
    SN_TRY(sn_cfg_channels_last(c));
    SN_TRY(sn_cfg_ints(c, "dilation_rate", false, 2, 1, d));
    if (d[0] != 1 || d[1] != 1)
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'dilation_rate' is [%lld, %lld]; sinter "
                         "supports only [1, 1]", (long long)d[0], (long long)d[1]);
    *kh = (int)k[0], *kw = (int)k[1], *sh = (int)s[0], *sw = (int)s[1];
    return SN_OK;
}

/* ---- DepthwiseConv2D, SeparableConv2D --------------------------------------------------- */

static sn_status read_sep(const json_t *c, bool separable, sn_layer **out) {
    static const char *const nk_dw[] = {"activity_regularizer", "depthwise_constraint",
                                        "bias_constraint", NULL};
    static const char *const nk_sep[] = {"activity_regularizer", "depthwise_constraint",
                                         "pointwise_constraint", "bias_constraint", NULL};
    int64_t filters = 0, mult = 1;
    if (separable) SN_TRY(sn_cfg_int(c, "filters", true, 1, INT32_MAX, &filters));
    sn_sepconv2d_layer_opts o = sn_sepconv2d_layer_defaults(filters, 1, 1);
    SN_TRY(window(c, &o.kernel_h, &o.kernel_w, &o.stride_h, &o.stride_w, &o.padding));
    SN_TRY(sn_cfg_int(c, "depth_multiplier", false, 1, INT32_MAX, &mult));
    o.depth_multiplier = (int)mult;
    SN_TRY(sn_cfg_activation(c, "activation", &o.activation));
    SN_TRY(sn_cfg_bool(c, "use_bias", false, &o.use_bias));
    SN_TRY(sn_cfg_initializer(c, "depthwise_initializer", &o.depthwise_initializer));
    SN_TRY(sn_cfg_initializer(c, "bias_initializer", &o.bias_initializer));
    SN_TRY(sn_cfg_regularizer(c, "depthwise_regularizer", &o.depthwise_regularizer));
    SN_TRY(sn_cfg_regularizer(c, "bias_regularizer", &o.bias_regularizer));
    if (separable) {
        SN_TRY(sn_cfg_initializer(c, "pointwise_initializer", &o.pointwise_initializer));
        SN_TRY(sn_cfg_regularizer(c, "pointwise_regularizer", &o.pointwise_regularizer));
    }
    SN_TRY(sn_cfg_nulls(c, separable ? nk_sep : nk_dw));
    sn_status st;
    *out = made(separable ? sn_layer_separable_conv2d_ex(&o) : sn_layer_depthwise_conv2d_ex(&o),
                &st);
    return st;
}
sn_status sn_cfg_read_depthwise(const json_t *c, sn_layer **out) { return read_sep(c, false, out); }
sn_status sn_cfg_read_separable(const json_t *c, sn_layer **out) { return read_sep(c, true, out); }

void sn_cfg_write_sepconv(const sn_layer *l, json_t *c) {
    const sn_sepconv2d_layer_opts *o = &l->sep;
    const bool separable = !strcmp(l->vt->class_name, "SeparableConv2D");
    set(c, "depth_multiplier", json_integer(o->depth_multiplier));
    if (separable) set(c, "filters", json_integer(o->filters));
    set(c, "kernel_size", pair(o->kernel_h, o->kernel_w));
    set(c, "strides", pair(o->stride_h, o->stride_w));
    set(c, "padding", json_string(o->padding == SN_PAD_SAME ? "same" : "valid"));
    set(c, "data_format", json_string("channels_last"));
    set(c, "dilation_rate", pair(1, 1));
    set(c, "activation", json_string(sn_activation_name(o->activation)));
    set(c, "use_bias", json_boolean(o->use_bias));
    set(c, "depthwise_initializer", sn_cfg_init_json(&o->depthwise_initializer,
                                                     SN_INIT_GLOROT_UNIFORM));
    if (separable)
        set(c, "pointwise_initializer", sn_cfg_init_json(&o->pointwise_initializer,
                                                         SN_INIT_GLOROT_UNIFORM));
    set(c, "bias_initializer", sn_cfg_init_json(&o->bias_initializer, SN_INIT_ZEROS));
    set(c, "depthwise_regularizer", sn_cfg_reg_json(&o->depthwise_regularizer));
    if (separable) set(c, "pointwise_regularizer", sn_cfg_reg_json(&o->pointwise_regularizer));
    set(c, "bias_regularizer", sn_cfg_reg_json(&o->bias_regularizer));
    set(c, "activity_regularizer", json_null());
    set(c, "depthwise_constraint", json_null());
    if (separable) set(c, "pointwise_constraint", json_null());
    set(c, "bias_constraint", json_null());
}

/* ---- Conv2DTranspose -------------------------------------------------------------------- */

sn_status sn_cfg_read_conv_transpose(const json_t *c, sn_layer **out) {
    static const char *const nk[] = {"activity_regularizer", "kernel_constraint",
                                     "bias_constraint", NULL};
    int64_t filters = 0;
    SN_TRY(sn_cfg_int(c, "filters", true, 1, INT32_MAX, &filters));
    sn_conv2d_layer_opts o = sn_conv2d_layer_defaults(filters, 1, 1);
    SN_TRY(window(c, &o.kernel_h, &o.kernel_w, &o.stride_h, &o.stride_w, &o.padding));
    SN_TRY(sn_cfg_must(c, "output_padding", NULL, "only null (Keras's default output size)"));
    SN_TRY(sn_cfg_activation(c, "activation", &o.activation));
    SN_TRY(sn_cfg_bool(c, "use_bias", false, &o.use_bias));
    SN_TRY(sn_cfg_kernel_bias(c, &o.kernel_initializer, &o.bias_initializer,
                              &o.kernel_regularizer, &o.bias_regularizer));
    SN_TRY(sn_cfg_nulls(c, nk));
    sn_status st;
    *out = made(sn_layer_conv2d_transpose_ex(&o), &st);
    return st;
}

void sn_cfg_write_conv_transpose(const sn_layer *l, json_t *c) {
    const sn_conv2d_layer_opts *o = &l->conv;
    set(c, "filters", json_integer(o->filters));
    set(c, "kernel_size", pair(o->kernel_h, o->kernel_w));
    set(c, "strides", pair(o->stride_h, o->stride_w));
    set(c, "padding", json_string(o->padding == SN_PAD_SAME ? "same" : "valid"));
    set(c, "output_padding", json_null());
    set(c, "data_format", json_string("channels_last"));
    set(c, "dilation_rate", pair(1, 1));
    set(c, "activation", json_string(sn_activation_name(o->activation)));
    set(c, "use_bias", json_boolean(o->use_bias));
    sn_cfg_write_kernel_bias(c, &o->kernel_initializer, &o->bias_initializer,
                             &o->kernel_regularizer, &o->bias_regularizer);
    set(c, "activity_regularizer", json_null());
    set(c, "kernel_constraint", json_null());
    set(c, "bias_constraint", json_null());
}

/* ---- UpSampling2D, Cropping2D ----------------------------------------------------------- */

sn_status sn_cfg_read_upsampling(const json_t *c, sn_layer **out) {
    int64_t s[2] = {2, 2};
    SN_TRY(sn_cfg_ints(c, "size", false, 2, 1, s));
    SN_TRY(sn_cfg_channels_last(c));
    const char *interp = "nearest";
    SN_TRY(sn_cfg_str(c, "interpolation", false, &interp));
    if (strcmp(interp, "nearest"))
        return sn_errorf(SN_ERR_UNSUPPORTED, "field 'interpolation' is \"%s\"; sinter supports "
                         "only \"nearest\"", interp);
    sn_status st;
    *out = made(sn_layer_upsampling2d((int)s[0], (int)s[1]), &st);
    return st;
}

void sn_cfg_write_upsampling(const sn_layer *l, json_t *c) {
    set(c, "size", pair(l->pad[0], l->pad[1]));
    set(c, "data_format", json_string("channels_last"));
    set(c, "interpolation", json_string("nearest"));
}

sn_status sn_cfg_read_cropping(const json_t *c, sn_layer **out) {
    SN_TRY(sn_cfg_channels_last(c));
    int64_t p[4] = {0, 0, 0, 0};
    SN_TRY(sn_cfg_sides_2d(c, "cropping", p));
    sn_status st;
    *out = made(sn_layer_cropping2d((int)p[0], (int)p[1], (int)p[2], (int)p[3]), &st);
    return st;
}

void sn_cfg_write_cropping(const sn_layer *l, json_t *c) {
    set(c, "cropping", json_pack("[[i, i], [i, i]]", l->pad[0], l->pad[1], l->pad[2], l->pad[3]));
    set(c, "data_format", json_string("channels_last"));
}
