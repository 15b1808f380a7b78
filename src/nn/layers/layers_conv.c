/* Keras's convolution-family layers beyond Conv2D: DepthwiseConv2D, SeparableConv2D,
 * Conv2DTranspose, UpSampling2D (nearest) and Cropping2D, behind the vtable of nn_impl.h.
 * Variables in Keras's order and layouts (DepthwiseConv2D: kernel [KH, KW, C, M], bias;
 * SeparableConv2D: depthwise_kernel, pointwise_kernel [1, 1, C*M, F], bias; Conv2DTranspose:
 * kernel [KH, KW, F, C], bias), so weight files load with no transposes; the operations in
 * Keras's order (convolution, bias, activation). */
#include <string.h>

#include "nn/layers/layers_impl.h"

/* ---- shared checks ---------------------------------------------------------------------- */

static sn_status image_input(sn_layer *l, const sn_shape *in) {
    if (in->ndim != 3) return sn_layer_shape_error(l, in, "(None, height, width, channels)");
    return SN_OK;
}

static int64_t window_out(int64_t in, int k, int s, sn_padding pad) {
    return pad == SN_PAD_SAME ? (in + s - 1) / s : (in < k ? 0 : (in - k) / s + 1);
}

/* Kernel, strides, padding and activation of a layer constructor, SN_ERR_INVALID naming the
 * class and the field. */
static bool check_window(const char *cls, int kh, int kw, int sh, int sw, sn_padding pad,
                         sn_activation act) {
    if (kh <= 0 || kw <= 0) {
        sn_errorf(SN_ERR_INVALID, "%s: kernel size %dx%d, expected positive sizes", cls, kh, kw);
        return false;
    }
    if (sh <= 0 || sw <= 0) {
        sn_errorf(SN_ERR_INVALID, "%s: strides %dx%d, expected positive strides", cls, sh, sw);
        return false;
    }
    if (pad != SN_PAD_VALID && pad != SN_PAD_SAME) {
        sn_errorf(SN_ERR_INVALID, "%s: padding %d is not an sn_padding", cls, (int)pad);
        return false;
    }
    if (!sn_activation_valid(act)) {
        sn_errorf(SN_ERR_INVALID, "%s: activation %d is not an sn_activation", cls, (int)act);
        return false;
    }
    return true;
}

/* ---- DepthwiseConv2D and SeparableConv2D ------------------------------------------------ */

static sn_status sep_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_sepconv2d_layer_opts *o = &l->sep;
    const bool separable = !strcmp(l->vt->class_name, "SeparableConv2D");
    SN_TRY(image_input(l, in));
    int64_t oh = window_out(in->dim[0], o->kernel_h, o->stride_h, o->padding);
    int64_t ow = window_out(in->dim[1], o->kernel_w, o->stride_w, o->padding);
    if (oh <= 0 || ow <= 0) {
        char e[160];
        snprintf(e, sizeof e, "height >= %d and width >= %d for a %dx%d kernel with valid "
                 "padding", o->kernel_h, o->kernel_w, o->kernel_h, o->kernel_w);
        return sn_layer_shape_error(l, in, e);
    }
    int64_t cin = in->dim[2], cm = cin * o->depth_multiplier;
    sn_shape ds = {.ndim = 4, .dim = {o->kernel_h, o->kernel_w, cin, o->depth_multiplier}};
    sn_node dk, pk, b;
    /* Keras 3 names the DepthwiseConv2D variable "kernel", SeparableConv2D's
     * "depthwise_kernel" */
    SN_TRY(sn_layer_add_var(l, g, separable ? "depthwise_kernel" : "kernel", &ds, true,
                            &o->depthwise_initializer, SN_INIT_GLOROT_UNIFORM, rng, &dk));
    SN_TRY(sn_layer_add_regularizer(l, dk, &o->depthwise_regularizer, "depthwise_regularizer"));
    int64_t f = cm;
    if (separable) {
        f = o->filters;
        sn_shape ps = {.ndim = 4, .dim = {1, 1, cm, f}};
        SN_TRY(sn_layer_add_var(l, g, "pointwise_kernel", &ps, true, &o->pointwise_initializer,
                                SN_INIT_GLOROT_UNIFORM, rng, &pk));
        SN_TRY(sn_layer_add_regularizer(l, pk, &o->pointwise_regularizer,
                                        "pointwise_regularizer"));
    }
    if (o->use_bias) {
        sn_shape bs = {.ndim = 1, .dim = {f}};
        SN_TRY(sn_layer_add_var(l, g, "bias", &bs, true, &o->bias_initializer, SN_INIT_ZEROS,
                                rng, &b));
        SN_TRY(sn_layer_add_regularizer(l, b, &o->bias_regularizer, "bias_regularizer"));
    }
    l->out_shape = (sn_shape){.ndim = 3, .dim = {oh, ow, f}};
    return SN_OK;
}

static sn_node sep_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    (void)training;
    (void)u;
    const sn_sepconv2d_layer_opts *o = &l->sep;
    sn_conv2d_opts co = {.stride_h = o->stride_h, .stride_w = o->stride_w, .padding = o->padding};
    sn_node y = sn_depthwise_conv2d(g, x, l->vars[0], &co);
    int next = 1;
    if (!strcmp(l->vt->class_name, "SeparableConv2D"))
        y = sn_conv2d(g, y, l->vars[next++], NULL); /* 1x1, stride 1, valid */
    if (o->use_bias) y = sn_bias_add(g, y, l->vars[next]);
    return sn_apply_activation(g, y, o->activation);
}

static const sn_layer_vtable depthwise_vt = {"DepthwiseConv2D", "depthwise_conv2d", sep_build,
                                             sep_forward, NULL};
static const sn_layer_vtable separable_vt = {"SeparableConv2D", "separable_conv2d", sep_build,
                                             sep_forward, NULL};

sn_sepconv2d_layer_opts sn_sepconv2d_layer_defaults(int64_t filters, int kernel_h, int kernel_w) {
    return (sn_sepconv2d_layer_opts){.filters = filters, .kernel_h = kernel_h,
                                     .kernel_w = kernel_w, .stride_h = 1, .stride_w = 1,
                                     .padding = SN_PAD_VALID, .depth_multiplier = 1,
                                     .activation = SN_ACT_NONE, .use_bias = true};
}

static sn_layer *sep_new(const sn_layer_vtable *vt, const sn_sepconv2d_layer_opts *o) {
    const char *cls = vt->class_name;
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "%s: options are NULL", cls);
        return NULL;
    }
    if (vt == &separable_vt && o->filters <= 0) {
        sn_errorf(SN_ERR_INVALID, "SeparableConv2D: filters is %lld, expected > 0",
                  (long long)o->filters);
        return NULL;
    }
    if (o->depth_multiplier <= 0) {
        sn_errorf(SN_ERR_INVALID, "%s: depth_multiplier is %d, expected > 0", cls,
                  o->depth_multiplier);
        return NULL;
    }
    if (!check_window(cls, o->kernel_h, o->kernel_w, o->stride_h, o->stride_w, o->padding,
                      o->activation))
        return NULL;
    if (sn_check_initializer(cls, "depthwise_initializer", &o->depthwise_initializer) != SN_OK ||
        sn_check_initializer(cls, "pointwise_initializer", &o->pointwise_initializer) != SN_OK ||
        sn_check_initializer(cls, "bias_initializer", &o->bias_initializer) != SN_OK ||
        sn_check_regularizer(cls, "depthwise_regularizer", &o->depthwise_regularizer) != SN_OK ||
        sn_check_regularizer(cls, "pointwise_regularizer", &o->pointwise_regularizer) != SN_OK ||
        sn_check_regularizer(cls, "bias_regularizer", &o->bias_regularizer) != SN_OK)
        return NULL;
    sn_layer *l = sn_layer_alloc(vt);
    if (l) l->sep = *o;
    return l;
}

sn_layer *sn_layer_depthwise_conv2d_ex(const sn_sepconv2d_layer_opts *o) {
    return sep_new(&depthwise_vt, o);
}
sn_layer *sn_layer_separable_conv2d_ex(const sn_sepconv2d_layer_opts *o) {
    return sep_new(&separable_vt, o);
}

/* ---- Conv2DTranspose -------------------------------------------------------------------- */

static sn_status convt_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_conv2d_layer_opts *o = &l->conv;
    SN_TRY(image_input(l, in));
    int64_t cin = in->dim[2];
    /* Keras's deconv_output_length, output_padding None */
    int64_t oh = o->padding == SN_PAD_SAME ? in->dim[0] * o->stride_h
                 : in->dim[0] * o->stride_h + (o->kernel_h > o->stride_h ? o->kernel_h - o->stride_h : 0);
    int64_t ow = o->padding == SN_PAD_SAME ? in->dim[1] * o->stride_w
                 : in->dim[1] * o->stride_w + (o->kernel_w > o->stride_w ? o->kernel_w - o->stride_w : 0);
    sn_shape ks = {.ndim = 4, .dim = {o->kernel_h, o->kernel_w, o->filters, cin}};
    SN_TRY(sn_layer_add_kernel_bias(l, g, &ks, o->filters, o->use_bias, &o->kernel_initializer,
                                    &o->bias_initializer, &o->kernel_regularizer,
                                    &o->bias_regularizer, rng));
    l->out_shape = (sn_shape){.ndim = 3, .dim = {oh, ow, o->filters}};
    return SN_OK;
}

static sn_node convt_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    (void)training;
    (void)u;
    sn_conv2d_opts co = {.stride_h = l->conv.stride_h, .stride_w = l->conv.stride_w,
                         .padding = l->conv.padding};
    sn_node y = sn_conv2d_transpose(g, x, l->vars[0], &co);
    if (l->conv.use_bias) y = sn_bias_add(g, y, l->vars[1]);
    return sn_apply_activation(g, y, l->conv.activation);
}

static const sn_layer_vtable convt_vt = {"Conv2DTranspose", "conv2d_transpose", convt_build,
                                         convt_forward, NULL};

sn_layer *sn_layer_conv2d_transpose_ex(const sn_conv2d_layer_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "Conv2DTranspose: options are NULL");
        return NULL;
    }
    if (o->filters <= 0)
        return sn_layer_bad_arg("Conv2DTranspose: %s is %g, expected > 0", "filters",
                                (double)o->filters);
    if (!check_window("Conv2DTranspose", o->kernel_h, o->kernel_w, o->stride_h, o->stride_w,
                      o->padding, o->activation))
        return NULL;
    if (sn_check_kernel_bias("Conv2DTranspose", &o->kernel_initializer, &o->bias_initializer,
                             &o->kernel_regularizer, &o->bias_regularizer) != SN_OK)
        return NULL;
    sn_layer *l = sn_layer_alloc(&convt_vt);
    if (l) l->conv = *o;
    return l;
}

/* ---- UpSampling2D (nearest) ------------------------------------------------------------- */

static sn_status up_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    (void)g;
    (void)rng;
    SN_TRY(image_input(l, in));
    l->out_shape = *in;
    l->out_shape.dim[0] *= l->pad[0];
    l->out_shape.dim[1] *= l->pad[1];
    return SN_OK;
}

/* [B, H, W, C] -> [B, H, 1, W, 1, C] -> broadcast [B, H, sh, W, sw, C] -> [B, H*sh, W*sw, C]:
 * the values copied exactly, the gradient the sum over each block. */
static sn_node up_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    (void)training;
    (void)u;
    sn_shape s = sn_node_shape(g, x);
    int64_t b = s.dim[0], h = s.dim[1], w = s.dim[2], c = s.dim[3];
    sn_shape s6 = {.ndim = 6, .dim = {b, h, 1, w, 1, c}};
    sn_shape t6 = {.ndim = 6, .dim = {b, h, l->pad[0], w, l->pad[1], c}};
    sn_shape s4 = {.ndim = 4, .dim = {b, h * l->pad[0], w * l->pad[1], c}};
    return sn_reshape(g, sn_broadcast_to(g, sn_reshape(g, x, &s6), &t6), &s4);
}

static const sn_layer_vtable up_vt = {"UpSampling2D", "up_sampling2d", up_build, up_forward,
                                      NULL};

sn_layer *sn_layer_upsampling2d(int size_h, int size_w) {
    if (size_h <= 0 || size_w <= 0) {
        sn_errorf(SN_ERR_INVALID, "UpSampling2D: size %dx%d, expected positive sizes", size_h,
                  size_w);
        return NULL;
    }
    sn_layer *l = sn_layer_alloc(&up_vt);
    if (l) l->pad[0] = size_h, l->pad[1] = size_w;
    return l;
}

/* ---- Cropping2D ------------------------------------------------------------------------- */

static sn_status crop_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    (void)g;
    (void)rng;
    SN_TRY(image_input(l, in));
    if (l->pad[0] + l->pad[1] >= in->dim[0] || l->pad[2] + l->pad[3] >= in->dim[1]) {
        char e[160];
        snprintf(e, sizeof e, "height > %d and width > %d (the cropping ((%d, %d), (%d, %d)))",
                 l->pad[0] + l->pad[1], l->pad[2] + l->pad[3], l->pad[0], l->pad[1], l->pad[2],
                 l->pad[3]);
        return sn_layer_shape_error(l, in, e);
    }
    l->out_shape = *in;
    l->out_shape.dim[0] -= l->pad[0] + l->pad[1];
    l->out_shape.dim[1] -= l->pad[2] + l->pad[3];
    return SN_OK;
}

static sn_node crop_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    (void)training;
    (void)u;
    sn_shape s = sn_node_shape(g, x);
    int64_t begin[4] = {0, l->pad[0], l->pad[2], 0};
    int64_t size[4] = {s.dim[0], s.dim[1] - l->pad[0] - l->pad[1],
                       s.dim[2] - l->pad[2] - l->pad[3], s.dim[3]};
    return sn_slice(g, x, begin, size);
}

static const sn_layer_vtable crop_vt = {"Cropping2D", "cropping2d", crop_build, crop_forward,
                                        NULL};

sn_layer *sn_layer_cropping2d(int top, int bottom, int left, int right) {
    const int p[4] = {top, bottom, left, right};
    static const char *const names[4] = {"top", "bottom", "left", "right"};
    for (int k = 0; k < 4; k++)
        if (p[k] < 0)
            return sn_layer_bad_arg("Cropping2D: %s cropping is %g, expected >= 0", names[k],
                                    p[k]);
    sn_layer *l = sn_layer_alloc(&crop_vt);
    if (l) memcpy(l->pad, p, sizeof p);
    return l;
}
