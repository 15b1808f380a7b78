/* Keras layers behind the vtable of nn_impl.h: Dense, Conv2D, MaxPooling2D, AveragePooling2D,
 * Flatten, Dropout, BatchNormalization, Activation (Reshape and GlobalAveragePooling2D in
 * layers_shape.c).
 *
 * Each layer's build creates its variables ("<layer>/<var>", in Keras order) in the model's
 * graph, initialises them as Keras does and computes its output shape, checking the input
 * shape so that a mistake is reported at build with the layer's name rather than as an op
 * error deep in the graph. forward adds the layer's nodes for a batch. Variables take the
 * layer's dtype (f32; f64 only for the gradient checks of tests/test_layers.c), and every
 * constant a forward adds takes the dtype of its input, so the same code runs in both. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/layers/layers_impl.h"

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

sn_status sn_layer_set_trainable(sn_layer *l, bool trainable) {
    if (!l) return sn_errorf(SN_ERR_INVALID, "sn_layer_set_trainable: layer is NULL");
    l->frozen = !trainable;
    /* Keras sets a wrapper's sublayers too (Bidirectional's halves) */
    for (int k = 0; k < 2; k++)
        if (l->inner[k]) l->inner[k]->frozen = !trainable;
    return SN_OK;
}

bool sn_layer_trainable(const sn_layer *l) { return l && !l->frozen; }

/* ---- Dense ------------------------------------------------------------------------------ */
/* Keras applies Dense to the last axis of an input of any rank: [B, ..., in] -> [B, ...,
 * units]. */
static sn_status dense_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_dense_layer_opts *o = &l->dense;
    if (in->ndim < 1) return sn_layer_shape_error(l, in, "at least (None, features)");
    int64_t fin = in->dim[in->ndim - 1];
    sn_shape ks = {.ndim = 2, .dim = {fin, o->units}};
    SN_TRY(sn_layer_add_kernel_bias(l, g, &ks, o->units, o->use_bias, &o->kernel_initializer,
                                    &o->bias_initializer, &o->kernel_regularizer,
                                    &o->bias_regularizer, rng));
    l->out_shape = *in;
    l->out_shape.dim[in->ndim - 1] = o->units;
    return SN_OK;
}

/* Ranks above [B, in] go through a [B * ..., in] matrix: one GEMM, and a kernel gradient that
 * is one GEMM too (a batched matmul would make one [in, units] gradient per leading index and
 * sum them). */
static sn_node dense_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                             sn_updates *u) {
    sn_shape xs = sn_node_shape(g, x);
    sn_node x2 = x;
    if (xs.ndim > 2)
        x2 = sn_reshape(g, x, &(sn_shape){.ndim = 2, .dim = {-1, xs.dim[xs.ndim - 1]}});
    sn_node y = sn_matmul(g, x2, l->vars[0], false, false);
    if (l->dense.use_bias) y = sn_bias_add(g, y, l->vars[1]);
    if (xs.ndim > 2) {
        sn_shape ys = xs;
        ys.dim[ys.ndim - 1] = l->dense.units;
        y = sn_reshape(g, y, &ys);
    }
    return sn_apply_activation(g, y, l->dense.activation);
}

static const sn_layer_vtable dense_vt = {"Dense", "dense", dense_build, dense_forward, NULL};

sn_dense_layer_opts sn_dense_layer_defaults(int64_t units) {
    return (sn_dense_layer_opts){.units = units, .activation = SN_ACT_NONE, .use_bias = true};
}

sn_layer *sn_layer_dense_ex(const sn_dense_layer_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "Dense: options are NULL");
        return NULL;
    }
    if (o->units <= 0) return sn_layer_bad_arg("Dense: %s is %g, expected > 0", "units", (double)o->units);
    if (!sn_activation_valid(o->activation))
        return sn_layer_bad_arg("Dense: %s %g is not an sn_activation", "activation", o->activation);
    if (sn_check_kernel_bias("Dense", &o->kernel_initializer, &o->bias_initializer,
                             &o->kernel_regularizer, &o->bias_regularizer) != SN_OK)
        return NULL;
    sn_layer *l = sn_layer_alloc(&dense_vt);
    if (l) l->dense = *o;
    return l;
}

sn_layer *sn_layer_dense(int64_t units, sn_activation act) {
    sn_dense_layer_opts o = sn_dense_layer_defaults(units);
    o.activation = act;
    return sn_layer_dense_ex(&o);
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
    if (in->ndim != 3) return sn_layer_shape_error(l, in, "(None, height, width, channels)");
    *oh = window_out(in->dim[0], kh, sh, pad);
    *ow = window_out(in->dim[1], kw, sw, pad);
    if (*oh <= 0 || *ow <= 0) {
        char e[160];
        snprintf(e, sizeof e, "height >= %d and width >= %d for a %dx%d %s with valid padding",
                 kh, kw, kh, kw, what);
        return sn_layer_shape_error(l, in, e);
    }
    return SN_OK;
}

static sn_status conv_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_conv2d_layer_opts *o = &l->conv;
    int64_t oh = 0, ow = 0;
    SN_TRY(window_check(l, in, o->kernel_h, o->kernel_w, o->stride_h, o->stride_w, o->padding,
                        "kernel", &oh, &ow));
    int64_t cin = in->dim[2];
    /* fans from the shape as Keras: receptive field (kh * kw) times the channels */
    sn_shape ks = {.ndim = 4, .dim = {o->kernel_h, o->kernel_w, cin, o->filters}};
    SN_TRY(sn_layer_add_kernel_bias(l, g, &ks, o->filters, o->use_bias, &o->kernel_initializer,
                                    &o->bias_initializer, &o->kernel_regularizer,
                                    &o->bias_regularizer, rng));
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
    if (o->filters <= 0) return sn_layer_bad_arg("Conv2D: %s is %g, expected > 0", "filters", (double)o->filters);
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
        return sn_layer_bad_arg("Conv2D: %s %g is not an sn_padding", "padding", o->padding);
    if (!sn_activation_valid(o->activation))
        return sn_layer_bad_arg("Conv2D: %s %g is not an sn_activation", "activation", o->activation);
    if (sn_check_kernel_bias("Conv2D", &o->kernel_initializer, &o->bias_initializer,
                             &o->kernel_regularizer, &o->bias_regularizer) != SN_OK)
        return NULL;
    sn_layer *l = sn_layer_alloc(&conv_vt);
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
    sn_layer *l = sn_layer_alloc(vt);
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
    if (in->ndim < 1) return sn_layer_shape_error(l, in, "at least (None, features)");
    l->out_shape = (sn_shape){.ndim = 1, .dim = {sn_shape_numel(in)}};
    return SN_OK;
}

static sn_node flatten_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                               sn_updates *u) {
    return sn_flatten(g, x);
}

static const sn_layer_vtable flatten_vt = {"Flatten", "flatten", flatten_build,
                                           flatten_forward, NULL};

sn_layer *sn_layer_flatten(void) { return sn_layer_alloc(&flatten_vt); }

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
    if (!(rate >= 0.0 && rate < 1.0)) return sn_layer_bad_arg("Dropout: %s %g is outside [0, 1)", "rate", rate);
    sn_layer *l = sn_layer_alloc(&dropout_vt);
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
    if (!sn_activation_valid(act)) return sn_layer_bad_arg("Activation: %s %g is not an sn_activation", "activation", act);
    sn_layer *l = sn_layer_alloc(&activation_vt);
    if (l) l->act = act;
    return l;
}

/* ---- BatchNormalization ----------------------------------------------------------------- */
/* Over the last axis (Keras axis=-1): gamma and beta trainable (each only when scale / center
 * is on, as Keras creates them), moving_mean and moving_variance not. The slots of l->vars
 * follow Keras's order of the variables that exist; bn_vars finds them. */
typedef struct bn_vars {
    sn_node gamma, beta, mm, mv; /* SN_NONE when absent */
} bn_vars;

static bn_vars bn_find(const sn_layer *l) {
    bn_vars v = {SN_NONE, SN_NONE, SN_NONE, SN_NONE};
    int j = 0;
    if (l->bn.scale) v.gamma = l->vars[j++];
    if (l->bn.center) v.beta = l->vars[j++];
    v.mm = l->vars[j++];
    v.mv = l->vars[j];
    return v;
}

static sn_status bn_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_batch_norm_layer_opts *o = &l->bn;
    if (in->ndim < 1) return sn_layer_shape_error(l, in, "at least (None, features)");
    SN_TRY(sn_layer_add_scale_center(l, g, in->dim[in->ndim - 1], o->scale, o->center,
                                     &o->gamma_initializer, &o->beta_initializer,
                                     &o->gamma_regularizer, &o->beta_regularizer, rng));
    sn_shape cs = {.ndim = 1, .dim = {in->dim[in->ndim - 1]}};
    sn_node v;
    SN_TRY(sn_layer_add_var(l, g, "moving_mean", &cs, false, &o->moving_mean_initializer,
                            SN_INIT_ZEROS, rng, &v));
    SN_TRY(sn_layer_add_var(l, g, "moving_variance", &cs, false,
                            &o->moving_variance_initializer, SN_INIT_ONES, rng, &v));
    l->out_shape = *in;
    return SN_OK;
}

/* A [C] constant of dtype dt filled with v: gamma or beta where the layer has none. */
static sn_node bn_fill(sn_graph *g, sn_dtype dt, int64_t C, double v) {
    size_t es = dt == SN_F64 ? sizeof(double) : sizeof(float);
    void *d = malloc(es * (size_t)(C ? C : 1));
    if (!d) return sn_graph_fail(g, SN_ERR_NOMEM, "BatchNormalization: no memory for %lld "
                                 "constants", (long long)C);
    for (int64_t j = 0; j < C; j++)
        if (dt == SN_F64) ((double *)d)[j] = v;
        else ((float *)d)[j] = (float)v;
    sn_node n = sn_const(g, dt == SN_F64 ? SN_F64 : SN_F32,
                         &(sn_shape){.ndim = 1, .dim = {C}}, d);
    free(d);
    return dt == SN_F64 || dt == SN_F32 ? n : sn_cast(g, n, dt);
}

/* Row r of the [2, C] statistics as [C] */
static sn_node bn_row(sn_graph *g, sn_node st, int64_t C, int r) {
    sn_node s = sn_slice(g, st, (int64_t[]){r, 0}, (int64_t[]){1, C});
    return sn_reshape(g, s, &(sn_shape){.ndim = 1, .dim = {C}});
}

/* Training: y = (x - mean) * gamma / sqrt(var + eps) + beta with the batch mean and the biased
 * batch variance over every axis but the last, one fused op (sn_batch_norm_train, whose
 * gradient includes the statistics'; it replaced a dozen graph ops and their autodiff, issue
 * 23), and moving = moving * momentum + batch * (1 - momentum) pushed into `updates`. Keras 3
 * (keras/src/layers/normalization/batch_normalization.py) also feeds the biased variance of
 * ops.moments to the moving average, unlike Keras 2's fused kernel (unbiased); we follow
 * Keras 3. Inference: the moving statistics, as graph ops. Without gamma the scale is 1,
 * without beta the shift 0. Under mixed_bfloat16 the graph stays f32 (only matmul and
 * convolution kernels compute in bf16), so BatchNorm runs in f32 as under Keras's policy. */
static sn_node bn_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    sn_dtype dt = sn_node_dtype(g, x);
    sn_shape xs = sn_node_shape(g, x);
    bn_vars bv = bn_find(l);
    sn_node mm = bv.mm, mv = bv.mv;
    /* Keras 3: a frozen BatchNormalization (trainable=False) runs in inference mode */
    if (training && !l->frozen) {
        int64_t C = xs.ndim ? xs.dim[xs.ndim - 1] : 0;
        sn_node gamma = bv.gamma != SN_NONE ? bv.gamma : bn_fill(g, dt, C, 1.0);
        sn_node beta = bv.beta != SN_NONE ? bv.beta : bn_fill(g, dt, C, 0.0);
        sn_node st = SN_NONE;
        sn_node y = sn_batch_norm_train(g, x, gamma, beta, l->bn.epsilon, &st);
        if (y == SN_NONE) return SN_NONE;
        if (u) {
            double mo = l->bn.momentum;
            sn_node mean = bn_row(g, st, C, 0), var = bn_row(g, st, C, 1);
            sn_node mom = sn_scalar(g, dt, mo), rest = sn_scalar(g, dt, 1.0 - mo);
            sn_node nm = sn_add(g, sn_mul(g, mm, mom), sn_mul(g, mean, rest));
            sn_node nv = sn_add(g, sn_mul(g, mv, mom), sn_mul(g, var, rest));
            sn_node a1 = sn_assign(g, mm, nm), a2 = sn_assign(g, mv, nv);
            if (a1 == SN_NONE || a2 == SN_NONE) return SN_NONE;
            if (sn_updates_push(u, a1) != SN_OK || sn_updates_push(u, a2) != SN_OK)
                return sn_graph_fail(g, SN_ERR_NOMEM, "layer '%s': %s", l->name, sn_last_error());
        }
        return y;
    }
    sn_node xc = sn_sub(g, x, mm);
    sn_node inv = sn_sqrt(g, sn_add(g, mv, sn_scalar(g, dt, l->bn.epsilon)));
    sn_node scale = bv.gamma != SN_NONE ? sn_div(g, bv.gamma, inv)
                                        : sn_div(g, sn_scalar(g, dt, 1.0), inv);
    sn_node y = sn_mul(g, xc, scale);
    return bv.beta != SN_NONE ? sn_add(g, y, bv.beta) : y;
}

static const sn_layer_vtable bn_vt = {"BatchNormalization", "batch_normalization", bn_build,
                                      bn_forward, NULL};

sn_batch_norm_layer_opts sn_batch_norm_layer_defaults(void) {
    return (sn_batch_norm_layer_opts){.momentum = 0.99, .epsilon = 1e-3, .center = true,
                                      .scale = true};
}

sn_layer *sn_layer_batch_norm_ex(const sn_batch_norm_layer_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "BatchNormalization: options are NULL");
        return NULL;
    }
    if (!(o->momentum >= 0.0 && o->momentum <= 1.0))
        return sn_layer_bad_arg("BatchNormalization: %s %g is outside [0, 1]", "momentum", o->momentum);
    if (!(o->epsilon > 0.0) || !isfinite(o->epsilon))
        return sn_layer_bad_arg("BatchNormalization: %s %g, expected a finite value > 0", "epsilon",
                       o->epsilon);
    static const char *cls = "BatchNormalization";
    if (sn_check_initializer(cls, "gamma_initializer", &o->gamma_initializer) != SN_OK ||
        sn_check_initializer(cls, "beta_initializer", &o->beta_initializer) != SN_OK ||
        sn_check_initializer(cls, "moving_mean_initializer", &o->moving_mean_initializer) != SN_OK ||
        sn_check_initializer(cls, "moving_variance_initializer",
                             &o->moving_variance_initializer) != SN_OK ||
        sn_check_regularizer(cls, "gamma_regularizer", &o->gamma_regularizer) != SN_OK ||
        sn_check_regularizer(cls, "beta_regularizer", &o->beta_regularizer) != SN_OK)
        return NULL;
    sn_layer *l = sn_layer_alloc(&bn_vt);
    if (l) l->bn = *o;
    return l;
}

sn_layer *sn_layer_batch_norm(void) {
    sn_batch_norm_layer_opts o = sn_batch_norm_layer_defaults();
    return sn_layer_batch_norm_ex(&o);
}
