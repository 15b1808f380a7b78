/* Keras layers behind the vtable of nn_impl.h: Dense, Conv2D, MaxPooling2D, AveragePooling2D,
 * Flatten, Dropout, BatchNormalization, Activation.
 *
 * Each layer's build creates its variables ("<layer>/<var>", in Keras order) in the model's
 * graph, initialises them as Keras does and computes its output shape, checking the input
 * shape so that a mistake is reported at build with the layer's name rather than as an op
 * error deep in the graph. forward adds the layer's nodes for a batch. Variables take the
 * layer's dtype (f32; f64 only for the gradient checks of tests/test_layers.c), and every
 * constant a forward adds takes the dtype of its input, so the same code runs in both. */
#include <math.h>
#include <string.h>

#include "nn/nn_impl.h"

/* ---- helpers --------------------------------------------------------------------------- */

/* "(None, 28, 28, 1)": a shape without its batch, shown as Keras shows it. */
static const char *kshape(const sn_shape *s, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "(None");
    for (int i = 0; i < s->ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, ", %lld", (long long)s->dim[i]);
    if (n < cap) snprintf(buf + n, cap - n, ")");
    return buf;
}

static sn_status shape_error(const sn_layer *l, const sn_shape *in, const char *expected) {
    char b[160];
    return sn_errorf(SN_ERR_SHAPE, "layer '%s' (%s): got input of shape %s, expected %s",
                     l->name ? l->name : "?", l->vt->class_name, kshape(in, b, sizeof b),
                     expected);
}

static void set_value(void *data, sn_dtype dt, int64_t i, double v) {
    if (dt == SN_F64) ((double *)data)[i] = v;
    else ((float *)data)[i] = (float)v;
}

/* Creates variable "<layer>/<var>" (slot l->n_vars) of l->dtype; fills it with `fill` (a
 * constant) or, when glorot_fan_in > 0, with Keras's glorot_uniform: U(-lim, lim),
 * lim = sqrt(6 / (fan_in + fan_out)), drawn in row-major order from rng. The data pointer is
 * only valid until the next sn_variable call, so initialisation happens here, at once. */
static sn_status add_var(sn_layer *l, sn_graph *g, const char *var, const sn_shape *shape,
                         bool trainable, double fill, int64_t fan_in, int64_t fan_out,
                         sn_rng *rng) {
    SN_ASSERT(l->n_vars < SN_LAYER_MAX_VARS);
    char name[256];
    snprintf(name, sizeof name, "%s/%s", l->name, var);
    sn_node v = sn_variable(g, name, l->dtype, shape, trainable);
    if (v == SN_NONE)
        return sn_error_context(sn_graph_status(g), "layer '%s' (%s): creating '%s'", l->name,
                                l->vt->class_name, name);
    void *data = sn_variable_data(g, v);
    int64_t n = sn_shape_numel(shape);
    if (fan_in > 0) {
        double lim = sqrt(6.0 / (double)(fan_in + fan_out));
        for (int64_t i = 0; i < n; i++) set_value(data, l->dtype, i, lim * (2.0 * sn_rng_uniform(rng) - 1.0));
    } else if (fill != 0.0) {
        for (int64_t i = 0; i < n; i++) set_value(data, l->dtype, i, fill);
    } /* else: sn_variable zero-fills */
    l->vars[l->n_vars] = v;
    l->var_names[l->n_vars] = var;
    l->n_vars++;
    return SN_OK;
}

static sn_layer *layer_new(const sn_layer_vtable *vt) {
    sn_layer *l = sn_calloc(1, sizeof *l);
    if (!l) return NULL;
    l->vt = vt;
    l->dtype = SN_F32;
    return l;
}

static bool act_valid(sn_activation a) { return a >= SN_ACT_NONE && a <= SN_ACT_SOFTMAX; }

static sn_layer *bad_arg(const char *fmt, const char *what, double v) {
    sn_errorf(SN_ERR_INVALID, fmt, what, v);
    return NULL;
}

sn_node sn_apply_activation(sn_graph *g, sn_node x, sn_activation act) {
    switch (act) {
    case SN_ACT_NONE: return x;
    case SN_ACT_RELU: return sn_relu(g, x);
    case SN_ACT_SIGMOID: return sn_sigmoid(g, x);
    case SN_ACT_TANH: return sn_tanh(g, x);
    case SN_ACT_SOFTMAX: return sn_softmax(g, x, -1);
    case SN_ACT_GELU: case SN_ACT_SILU: case SN_ACT_ELU: case SN_ACT_LEAKY_RELU:
    case SN_ACT_RELU6: break; /* declared for the activations issue; act_valid rejects them */
    }
    return sn_graph_fail(g, SN_ERR_INVALID, "unknown activation %d", (int)act);
}

sn_status sn_updates_push(sn_updates *u, sn_node n) {
    if (!u) return sn_errorf(SN_ERR_INVALID, "sn_updates_push: updates is NULL");
    if (u->n == u->cap) {
        int cap = u->cap ? 2 * u->cap : 8;
        sn_node *p = sn_realloc(u->nodes, sizeof *p * (size_t)cap);
        if (!p) return SN_ERR_NOMEM;
        u->nodes = p;
        u->cap = cap;
    }
    u->nodes[u->n++] = n;
    return SN_OK;
}

void sn_updates_free(sn_updates *u) {
    if (!u) return;
    free(u->nodes);
    *u = (sn_updates){0};
}

sn_status sn_layer_set_name(sn_layer *l, const char *name) {
    if (!l || !name || !*name)
        return sn_errorf(SN_ERR_INVALID, "sn_layer_set_name: %s", !l ? "layer is NULL"
                                                                     : "name is NULL or empty");
    if (strchr(name, '/'))
        return sn_errorf(SN_ERR_INVALID, "layer name '%s' contains '/', which separates layer "
                         "and variable names", name);
    char *c = sn_strdup(name);
    if (!c) return SN_ERR_NOMEM;
    free(l->name);
    l->name = c;
    return SN_OK;
}

/* ---- Dense ------------------------------------------------------------------------------ */
/* Keras applies Dense to the last axis; here inputs are [B, in] or [B, T, in] (the
 * sequence outputs of a recurrent layer). Higher ranks are almost always a missing Flatten
 * after a convolution, so they are refused with that hint. */
static sn_status dense_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim < 1 || in->ndim > 2)
        return shape_error(l, in, "(None, features) or (None, steps, features) "
                                  "(add a Flatten layer before it for images)");
    int64_t fin = in->dim[in->ndim - 1];
    sn_shape ks = {.ndim = 2, .dim = {fin, l->units}}, bs = {.ndim = 1, .dim = {l->units}};
    SN_TRY(add_var(l, g, "kernel", &ks, true, 0, fin, l->units, rng));
    SN_TRY(add_var(l, g, "bias", &bs, true, 0, 0, 0, rng));
    l->out_shape = *in;
    l->out_shape.dim[in->ndim - 1] = l->units;
    return SN_OK;
}

static sn_node dense_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                             sn_updates *u) {
    sn_node y = sn_bias_add(g, sn_matmul(g, x, l->vars[0], false, false), l->vars[1]);
    return sn_apply_activation(g, y, l->act);
}

static const sn_layer_vtable dense_vt = {"Dense", "dense", dense_build, dense_forward, NULL};

sn_layer *sn_layer_dense(int64_t units, sn_activation act) {
    if (units <= 0) return bad_arg("Dense: %s is %g, expected > 0", "units", (double)units);
    if (!act_valid(act)) return bad_arg("Dense: %s %g is not an sn_activation", "activation", act);
    sn_layer *l = layer_new(&dense_vt);
    if (l) {
        l->units = units;
        l->act = act;
    }
    return l;
}

/* ---- Conv2D ----------------------------------------------------------------------------- */
/* Output size of a window op along one axis, as Keras: valid floor((n - k) / s) + 1 (0 when
 * the window does not fit), same ceil(n / s). */
static int64_t window_out(int64_t n, int k, int s, sn_padding p) {
    if (p == SN_PAD_SAME) return (n + s - 1) / s;
    return n < k ? 0 : (n - k) / s + 1;
}

static sn_status window_check(const sn_layer *l, const sn_shape *in, int kh, int kw, int sh,
                              int sw, sn_padding pad, const char *what, int64_t *oh,
                              int64_t *ow) {
    if (in->ndim != 3) return shape_error(l, in, "(None, height, width, channels)");
    *oh = window_out(in->dim[0], kh, sh, pad);
    *ow = window_out(in->dim[1], kw, sw, pad);
    if (*oh <= 0 || *ow <= 0) {
        char e[160];
        snprintf(e, sizeof e, "height >= %d and width >= %d for a %dx%d %s with valid padding",
                 kh, kw, kh, kw, what);
        return shape_error(l, in, e);
    }
    return SN_OK;
}

static sn_status conv_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_conv2d_layer_opts *o = &l->conv;
    int64_t oh = 0, ow = 0;
    SN_TRY(window_check(l, in, o->kernel_h, o->kernel_w, o->stride_h, o->stride_w, o->padding,
                        "kernel", &oh, &ow));
    int64_t cin = in->dim[2], rf = (int64_t)o->kernel_h * o->kernel_w;
    sn_shape ks = {.ndim = 4, .dim = {o->kernel_h, o->kernel_w, cin, o->filters}};
    SN_TRY(add_var(l, g, "kernel", &ks, true, 0, rf * cin, rf * o->filters, rng));
    if (o->use_bias) {
        sn_shape bs = {.ndim = 1, .dim = {o->filters}};
        SN_TRY(add_var(l, g, "bias", &bs, true, 0, 0, 0, rng));
    }
    l->out_shape = (sn_shape){.ndim = 3, .dim = {oh, ow, o->filters}};
    return SN_OK;
}

static sn_node conv_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    sn_conv2d_opts co = {.stride_h = l->conv.stride_h, .stride_w = l->conv.stride_w,
                         .padding = l->conv.padding};
    sn_node y = sn_conv2d(g, x, l->vars[0], &co);
    if (l->conv.use_bias) y = sn_bias_add(g, y, l->vars[1]);
    return sn_apply_activation(g, y, l->conv.activation);
}

static const sn_layer_vtable conv_vt = {"Conv2D", "conv2d", conv_build, conv_forward, NULL};

sn_conv2d_layer_opts sn_conv2d_layer_defaults(int64_t filters, int kernel_h, int kernel_w) {
    return (sn_conv2d_layer_opts){.filters = filters, .kernel_h = kernel_h, .kernel_w = kernel_w,
                                  .stride_h = 1, .stride_w = 1, .padding = SN_PAD_VALID,
                                  .activation = SN_ACT_NONE, .use_bias = true};
}

sn_layer *sn_layer_conv2d_ex(const sn_conv2d_layer_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "Conv2D: options are NULL");
        return NULL;
    }
    if (o->filters <= 0) return bad_arg("Conv2D: %s is %g, expected > 0", "filters", (double)o->filters);
    if (o->kernel_h <= 0 || o->kernel_w <= 0) {
        sn_errorf(SN_ERR_INVALID, "Conv2D: kernel size %dx%d, expected positive sizes",
                  o->kernel_h, o->kernel_w);
        return NULL;
    }
    if (o->stride_h <= 0 || o->stride_w <= 0) {
        sn_errorf(SN_ERR_INVALID, "Conv2D: strides %dx%d, expected positive strides",
                  o->stride_h, o->stride_w);
        return NULL;
    }
    if (o->padding != SN_PAD_VALID && o->padding != SN_PAD_SAME)
        return bad_arg("Conv2D: %s %g is not an sn_padding", "padding", o->padding);
    if (!act_valid(o->activation))
        return bad_arg("Conv2D: %s %g is not an sn_activation", "activation", o->activation);
    sn_layer *l = layer_new(&conv_vt);
    if (l) l->conv = *o;
    return l;
}

sn_layer *sn_layer_conv2d(int64_t filters, int kernel_h, int kernel_w, sn_activation act) {
    sn_conv2d_layer_opts o = sn_conv2d_layer_defaults(filters, kernel_h, kernel_w);
    o.activation = act;
    return sn_layer_conv2d_ex(&o);
}

/* ---- MaxPooling2D, AveragePooling2D ------------------------------------------------------ */
static sn_status pool_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_pool2d_opts *p = &l->pool;
    int64_t oh = 0, ow = 0;
    SN_TRY(window_check(l, in, p->pool_h, p->pool_w, p->stride_h, p->stride_w, p->padding,
                        "pool", &oh, &ow));
    l->out_shape = (sn_shape){.ndim = 3, .dim = {oh, ow, in->dim[2]}};
    return SN_OK;
}

static sn_node max_pool_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                                sn_updates *u) {
    return sn_max_pool2d(g, x, &l->pool);
}

static sn_node avg_pool_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                                sn_updates *u) {
    return sn_avg_pool2d(g, x, &l->pool);
}

static const sn_layer_vtable max_pool_vt = {"MaxPooling2D", "max_pooling2d", pool_build,
                                            max_pool_forward, NULL};
static const sn_layer_vtable avg_pool_vt = {"AveragePooling2D", "average_pooling2d",
                                            pool_build, avg_pool_forward, NULL};

static sn_layer *pool_new(const sn_layer_vtable *vt, const sn_pool2d_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "%s: options are NULL", vt->class_name);
        return NULL;
    }
    sn_pool2d_opts p = *o;
    if (p.stride_h == 0) p.stride_h = p.pool_h; /* Keras: strides=None means the pool size */
    if (p.stride_w == 0) p.stride_w = p.pool_w;
    if (p.pool_h <= 0 || p.pool_w <= 0 || p.stride_h <= 0 || p.stride_w <= 0) {
        sn_errorf(SN_ERR_INVALID, "%s: pool %dx%d stride %dx%d, expected positive sizes",
                  vt->class_name, p.pool_h, p.pool_w, p.stride_h, p.stride_w);
        return NULL;
    }
    if (p.padding != SN_PAD_VALID && p.padding != SN_PAD_SAME) {
        sn_errorf(SN_ERR_INVALID, "%s: padding %d is not an sn_padding", vt->class_name,
                  (int)p.padding);
        return NULL;
    }
    sn_layer *l = layer_new(vt);
    if (l) l->pool = p;
    return l;
}

sn_layer *sn_layer_max_pool2d(int pool_h, int pool_w) {
    return pool_new(&max_pool_vt, &(sn_pool2d_opts){.pool_h = pool_h, .pool_w = pool_w});
}
sn_layer *sn_layer_max_pool2d_ex(const sn_pool2d_opts *o) { return pool_new(&max_pool_vt, o); }
sn_layer *sn_layer_avg_pool2d(int pool_h, int pool_w) {
    return pool_new(&avg_pool_vt, &(sn_pool2d_opts){.pool_h = pool_h, .pool_w = pool_w});
}
sn_layer *sn_layer_avg_pool2d_ex(const sn_pool2d_opts *o) { return pool_new(&avg_pool_vt, o); }

/* ---- Flatten ---------------------------------------------------------------------------- */
static sn_status flatten_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim < 1) return shape_error(l, in, "at least (None, features)");
    l->out_shape = (sn_shape){.ndim = 1, .dim = {sn_shape_numel(in)}};
    return SN_OK;
}

static sn_node flatten_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                               sn_updates *u) {
    return sn_flatten(g, x);
}

static const sn_layer_vtable flatten_vt = {"Flatten", "flatten", flatten_build,
                                           flatten_forward, NULL};

sn_layer *sn_layer_flatten(void) { return layer_new(&flatten_vt); }

/* ---- shape-preserving layers: Dropout, Activation ---------------------------------------- */
static sn_status same_shape_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    l->out_shape = *in;
    return SN_OK;
}

/* Inverted dropout in training (the mask is keyed by l->seed, which the model derives from
 * its seed and the layer's index, and by the plan step); identity at inference. Not by the
 * node: plans for other batch shapes add their own dropout nodes, in an order that depends on
 * the run's history (a run resumed from a checkpoint builds them in another order), and the
 * masks must not. */
static sn_node dropout_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                               sn_updates *u) {
    if (!training || l->rate <= 0) return x;
    sn_node d = sn_dropout(g, x, l->rate, l->seed);
    if (d != SN_NONE) g->nodes[d].attr.dropout.mask_node = 0;
    return d;
}

static const sn_layer_vtable dropout_vt = {"Dropout", "dropout", same_shape_build,
                                           dropout_forward, NULL};

sn_layer *sn_layer_dropout(double rate) {
    if (!(rate >= 0.0 && rate < 1.0)) return bad_arg("Dropout: %s %g is outside [0, 1)", "rate", rate);
    sn_layer *l = layer_new(&dropout_vt);
    if (l) l->rate = rate;
    return l;
}

static sn_node activation_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                                  sn_updates *u) {
    return sn_apply_activation(g, x, l->act);
}

static const sn_layer_vtable activation_vt = {"Activation", "activation", same_shape_build,
                                              activation_forward, NULL};

sn_layer *sn_layer_activation(sn_activation act) {
    if (!act_valid(act)) return bad_arg("Activation: %s %g is not an sn_activation", "activation", act);
    sn_layer *l = layer_new(&activation_vt);
    if (l) l->act = act;
    return l;
}

/* ---- BatchNormalization ----------------------------------------------------------------- */
/* Over the last axis (Keras axis=-1): gamma, beta trainable; moving_mean, moving_variance
 * not. */
static sn_status bn_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim < 1) return shape_error(l, in, "at least (None, features)");
    sn_shape cs = {.ndim = 1, .dim = {in->dim[in->ndim - 1]}};
    SN_TRY(add_var(l, g, "gamma", &cs, true, 1.0, 0, 0, rng));
    SN_TRY(add_var(l, g, "beta", &cs, true, 0.0, 0, 0, rng));
    SN_TRY(add_var(l, g, "moving_mean", &cs, false, 0.0, 0, 0, rng));
    SN_TRY(add_var(l, g, "moving_variance", &cs, false, 1.0, 0, 0, rng));
    l->out_shape = *in;
    return SN_OK;
}

/* Training: y = (x - mean) * gamma / sqrt(var + eps) + beta with the batch mean and the biased
 * batch variance over every axis but the last (autodiff differentiates through both), and
 * moving = moving * momentum + batch * (1 - momentum) pushed into `updates`. Keras 3
 * (keras/src/layers/normalization/batch_normalization.py) also feeds the biased variance of
 * ops.moments to the moving average, unlike Keras 2's fused kernel (unbiased); we follow
 * Keras 3. Inference: the moving statistics. */
static sn_node bn_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    sn_dtype dt = sn_node_dtype(g, x);
    sn_shape xs = sn_node_shape(g, x);
    sn_node gamma = l->vars[0], beta = l->vars[1], mm = l->vars[2], mv = l->vars[3];
    sn_node mean = mm, var = mv, xc;
    if (training) {
        int axes[SN_MAX_DIMS], na = 0;
        for (int i = 0; i + 1 < xs.ndim; i++) axes[na++] = i;
        mean = sn_reduce_mean(g, x, na, axes, false);
        xc = sn_sub(g, x, mean);
        var = sn_reduce_mean(g, sn_mul(g, xc, xc), na, axes, false);
        if (u) {
            sn_node mom = sn_scalar(g, dt, l->momentum), rest = sn_scalar(g, dt, 1.0 - l->momentum);
            sn_node nm = sn_add(g, sn_mul(g, mm, mom), sn_mul(g, mean, rest));
            sn_node nv = sn_add(g, sn_mul(g, mv, mom), sn_mul(g, var, rest));
            sn_node a1 = sn_assign(g, mm, nm), a2 = sn_assign(g, mv, nv);
            if (a1 == SN_NONE || a2 == SN_NONE) return SN_NONE;
            if (sn_updates_push(u, a1) != SN_OK || sn_updates_push(u, a2) != SN_OK)
                return sn_graph_fail(g, SN_ERR_NOMEM, "layer '%s': %s", l->name, sn_last_error());
        }
    } else {
        xc = sn_sub(g, x, mean);
    }
    sn_node scale = sn_div(g, gamma, sn_sqrt(g, sn_add(g, var, sn_scalar(g, dt, l->epsilon))));
    return sn_add(g, sn_mul(g, xc, scale), beta);
}

static const sn_layer_vtable bn_vt = {"BatchNormalization", "batch_normalization", bn_build,
                                      bn_forward, NULL};

sn_layer *sn_layer_batch_norm(void) {
    sn_layer *l = layer_new(&bn_vt);
    if (l) {
        l->momentum = 0.99;
        l->epsilon = 1e-3;
    }
    return l;
}
