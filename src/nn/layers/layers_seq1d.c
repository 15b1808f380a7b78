/* Keras's 1D layers over [B, steps, channels] and two small layer-form ops, each composed of
 * existing graph ops (so their gradients are those ops'):
 * - Conv1D: the input as a one-row image [B, 1, steps, C] through conv2d with the kernel
 *   [k, C, F] (Keras's layout, kept as the variable) viewed as [1, k, C, F];
 * - MaxPooling1D / AveragePooling1D: the same view through the 2D pools with a 1 x k window;
 * - GlobalMaxPooling1D / GlobalAveragePooling1D: reductions over the steps; the average with a
 *   mask (Embedding(mask_zero)) is Keras's sum(x * m) / sum(m);
 * - ELU (alpha), Permute (Keras's 1-based dims of the non-batch axes) and PReLU. */
#include <stdio.h>
#include <string.h>

#include "nn/layers/layers_impl.h"

static int64_t window_out(int64_t n, int k, int s, sn_padding p) {
    return p == SN_PAD_SAME ? (n + s - 1) / s : n < k ? 0 : (n - k) / s + 1;
}

static sn_node as_row_image(sn_graph *g, sn_node x) {
    sn_shape s = sn_node_shape(g, x);
    return sn_reshape(g, x, &(sn_shape){.ndim = 4, .dim = {s.dim[0], 1, s.dim[1], s.dim[2]}});
}

static sn_node from_row_image(sn_graph *g, sn_node y) {
    sn_shape s = sn_node_shape(g, y);
    return sn_reshape(g, y, &(sn_shape){.ndim = 3, .dim = {s.dim[0], s.dim[2], s.dim[3]}});
}

/* ---- Conv1D ------------------------------------------------------------------------------ */
static sn_status conv1d_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_conv1d_layer_opts *o = &l->conv1d;
    if (in->ndim != 2) return sn_layer_shape_error(l, in, "(None, steps, channels)");
    int64_t t = window_out(in->dim[0], o->kernel_size, o->stride, o->padding);
    if (t <= 0) {
        char e[96];
        snprintf(e, sizeof e, "steps >= %d (kernel_size %d, padding valid)", o->kernel_size,
                 o->kernel_size);
        return sn_layer_shape_error(l, in, e);
    }
    sn_shape ks = {.ndim = 3, .dim = {o->kernel_size, in->dim[1], o->filters}};
    SN_TRY(sn_layer_add_kernel_bias(l, g, &ks, o->filters, o->use_bias, &o->kernel_initializer,
                                    &o->bias_initializer, &o->kernel_regularizer,
                                    &o->bias_regularizer, rng));
    l->out_shape = (sn_shape){.ndim = 2, .dim = {t, o->filters}};
    return SN_OK;
}

static sn_node conv1d_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                              sn_updates *u) {
    const sn_conv1d_layer_opts *o = &l->conv1d;
    sn_shape ks = sn_node_shape(g, l->vars[0]);
    sn_node k = sn_reshape(g, l->vars[0],
                           &(sn_shape){.ndim = 4, .dim = {1, ks.dim[0], ks.dim[1], ks.dim[2]}});
    sn_conv2d_opts co = {.stride_h = 1, .stride_w = o->stride, .padding = o->padding};
    sn_node y = from_row_image(g, sn_conv2d(g, as_row_image(g, x), k, &co));
    if (o->use_bias) y = sn_bias_add(g, y, l->vars[1]);
    return sn_apply_activation(g, y, o->activation);
}

static const sn_layer_vtable conv1d_vt = {"Conv1D", "conv1d", conv1d_build, conv1d_forward,
                                          NULL};

sn_conv1d_layer_opts sn_conv1d_layer_defaults(int64_t filters, int kernel_size) {
    return (sn_conv1d_layer_opts){.filters = filters, .kernel_size = kernel_size, .stride = 1,
                                  .padding = SN_PAD_VALID, .activation = SN_ACT_NONE,
                                  .use_bias = true};
}

sn_layer *sn_layer_conv1d_ex(const sn_conv1d_layer_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "Conv1D: options are NULL");
        return NULL;
    }
    if (o->filters <= 0 || o->kernel_size <= 0 || o->stride <= 0) {
        sn_errorf(SN_ERR_INVALID, "Conv1D: filters %lld, kernel_size %d, strides %d; expected "
                  "positive values", (long long)o->filters, o->kernel_size, o->stride);
        return NULL;
    }
    if (o->padding != SN_PAD_VALID && o->padding != SN_PAD_SAME)
        return sn_layer_bad_arg("Conv1D: %s %g is not an sn_padding", "padding", o->padding);
    if (!sn_activation_valid(o->activation))
        return sn_layer_bad_arg("Conv1D: %s %g is not an sn_activation", "activation", o->activation);
    if (sn_check_kernel_bias("Conv1D", &o->kernel_initializer, &o->bias_initializer,
                             &o->kernel_regularizer, &o->bias_regularizer) != SN_OK)
        return NULL;
    sn_layer *l = sn_layer_alloc(&conv1d_vt);
    if (l) l->conv1d = *o;
    return l;
}

/* ---- MaxPooling1D, AveragePooling1D (l->pool: pool_h = stride_h = 1) --------------------- */
static sn_status pool1d_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim != 2) return sn_layer_shape_error(l, in, "(None, steps, channels)");
    int64_t t = window_out(in->dim[0], l->pool.pool_w, l->pool.stride_w, l->pool.padding);
    if (t <= 0) return sn_layer_shape_error(l, in, "steps >= pool_size (padding valid)");
    l->out_shape = (sn_shape){.ndim = 2, .dim = {t, in->dim[1]}};
    return SN_OK;
}

static sn_node max_pool1d_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                                  sn_updates *u) {
    return from_row_image(g, sn_max_pool2d(g, as_row_image(g, x), &l->pool));
}

static sn_node avg_pool1d_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                                  sn_updates *u) {
    return from_row_image(g, sn_avg_pool2d(g, as_row_image(g, x), &l->pool));
}

static const sn_layer_vtable max_pool1d_vt = {"MaxPooling1D", "max_pooling1d", pool1d_build,
                                              max_pool1d_forward, NULL};
static const sn_layer_vtable avg_pool1d_vt = {"AveragePooling1D", "average_pooling1d",
                                              pool1d_build, avg_pool1d_forward, NULL};

sn_layer *sn_layer_pool1d(bool max, int pool, int stride, sn_padding padding) {
    const char *cls = max ? "MaxPooling1D" : "AveragePooling1D";
    if (stride == 0) stride = pool; /* Keras: strides=None means the pool size */
    if (pool <= 0 || stride <= 0) {
        sn_errorf(SN_ERR_INVALID, "%s: pool_size %d, strides %d; expected positive sizes", cls,
                  pool, stride);
        return NULL;
    }
    if (padding != SN_PAD_VALID && padding != SN_PAD_SAME) {
        sn_errorf(SN_ERR_INVALID, "%s: padding %d is not an sn_padding", cls, (int)padding);
        return NULL;
    }
    sn_layer *l = sn_layer_alloc(max ? &max_pool1d_vt : &avg_pool1d_vt);
    if (l)
        l->pool = (sn_pool2d_opts){.pool_h = 1, .pool_w = pool, .stride_h = 1,
                                   .stride_w = stride, .padding = padding};
    return l;
}

/* ---- GlobalMaxPooling1D, GlobalAveragePooling1D -------------------------------------------- */
static sn_status gpool1d_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim != 2) return sn_layer_shape_error(l, in, "(None, steps, channels)");
    l->out_shape = l->keepdims ? (sn_shape){.ndim = 2, .dim = {1, in->dim[1]}}
                               : (sn_shape){.ndim = 1, .dim = {in->dim[1]}};
    return SN_OK;
}

static sn_node gmp1d_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    return sn_reduce_max(g, x, 1, (int[]){1}, l->keepdims);
}

static sn_node gap1d_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    if (!l->has_mask) return sn_reduce_mean(g, x, 1, (int[]){1}, l->keepdims);
    /* Keras: where(mask, x, 0) summed over the steps, over the mask's sum */
    sn_shape ms = sn_node_shape(g, l->mask);
    sn_node m3 = sn_reshape(g, l->mask, &(sn_shape){.ndim = 3, .dim = {ms.dim[0], ms.dim[1], 1}});
    sn_node num = sn_reduce_sum(g, sn_mul(g, x, m3), 1, (int[]){1}, l->keepdims);
    return sn_div(g, num, sn_reduce_sum(g, m3, 1, (int[]){1}, l->keepdims));
}

static const sn_layer_vtable gmp1d_vt = {"GlobalMaxPooling1D", "global_max_pooling1d",
                                         gpool1d_build, gmp1d_forward, NULL};
static const sn_layer_vtable gap1d_vt = {"GlobalAveragePooling1D", "global_average_pooling1d",
                                         gpool1d_build, gap1d_forward, NULL};

bool sn_layer_is_global_avg_pool1d(const sn_layer *l) { return l && l->vt == &gap1d_vt; }

sn_layer *sn_layer_global_pool1d(bool max, bool keepdims) {
    sn_layer *l = sn_layer_alloc(max ? &gmp1d_vt : &gap1d_vt);
    if (l) l->keepdims = keepdims;
    return l;
}

/* ---- ELU, Permute --------------------------------------------------------------------------- */
static sn_status same_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    l->out_shape = *in;
    return SN_OK;
}

static sn_node elu_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    return sn_elu(g, x, l->alpha);
}

static const sn_layer_vtable elu_vt = {"ELU", "elu", same_build, elu_forward, NULL};

sn_layer *sn_layer_elu(double alpha) {
    sn_layer *l = sn_layer_alloc(&elu_vt);
    if (l) l->alpha = alpha;
    return l;
}

static sn_status permute_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim != l->n_perm) {
        char e[96];
        snprintf(e, sizeof e, "%d axes besides the batch (dims has %d)", l->n_perm, l->n_perm);
        return sn_layer_shape_error(l, in, e);
    }
    l->out_shape = (sn_shape){.ndim = in->ndim};
    for (int i = 0; i < in->ndim; i++) l->out_shape.dim[i] = in->dim[l->perm[i] - 1];
    return SN_OK;
}

static sn_node permute_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                               sn_updates *u) {
    int p[SN_MAX_DIMS] = {0};
    for (int i = 0; i < l->n_perm; i++) p[i + 1] = l->perm[i];
    return sn_transpose(g, x, p);
}

static const sn_layer_vtable permute_vt = {"Permute", "permute", permute_build,
                                           permute_forward, NULL};

sn_layer *sn_layer_permute(int n, const int *dims) {
    bool ok = dims && n >= 1 && n < SN_MAX_DIMS;
    int seen = 0;
    for (int i = 0; ok && i < n; i++) {
        ok = dims[i] >= 1 && dims[i] <= n && !(seen & (1 << dims[i]));
        if (ok) seen |= 1 << dims[i];
    }
    if (!ok) {
        sn_errorf(SN_ERR_INVALID, "Permute: dims must be a permutation of 1..%d (Keras's "
                  "axes after the batch)", n);
        return NULL;
    }
    sn_layer *l = sn_layer_alloc(&permute_vt);
    if (l) {
        l->n_perm = n;
        memcpy(l->perm, dims, sizeof(int) * (size_t)n);
    }
    return l;
}

/* ---- PReLU ----------------------------------------------------------------------------------- */
static sn_status prelu_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_prelu_layer_opts *o = &l->prelu;
    sn_shape as = *in;
    for (int i = 0; i < o->n_shared_axes; i++) {
        int a = o->shared_axes[i];
        if (a < 1 || a > in->ndim) {
            char e[96];
            snprintf(e, sizeof e, "an axis %d for shared_axes (1-based, after the batch)", a);
            return sn_layer_shape_error(l, in, e);
        }
        as.dim[a - 1] = 1;
    }
    sn_node a;
    SN_TRY(sn_layer_add_var(l, g, "alpha", &as, true, &o->alpha_initializer, SN_INIT_ZEROS, rng,
                            &a));
    SN_TRY(sn_layer_add_regularizer(l, a, &o->alpha_regularizer, "alpha_regularizer"));
    l->out_shape = *in;
    return SN_OK;
}

/* Keras's relu(x) + (-alpha) * relu(-x), which is relu(x) - alpha * relu(-x) exactly (a
 * negation is exact). */
static sn_node prelu_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                             sn_updates *u) {
    return sn_sub(g, sn_relu(g, x), sn_mul(g, l->vars[0], sn_relu(g, sn_neg(g, x))));
}

static const sn_layer_vtable prelu_vt = {"PReLU", "p_re_lu", prelu_build, prelu_forward, NULL};

sn_layer *sn_layer_prelu_ex(const sn_prelu_layer_opts *o) {
    if (!o || o->n_shared_axes < 0 || o->n_shared_axes >= SN_MAX_DIMS) {
        sn_errorf(SN_ERR_INVALID, "PReLU: options are NULL or n_shared_axes is out of range");
        return NULL;
    }
    if (sn_check_initializer("PReLU", "alpha_initializer", &o->alpha_initializer) != SN_OK ||
        sn_check_regularizer("PReLU", "alpha_regularizer", &o->alpha_regularizer) != SN_OK)
        return NULL;
    sn_layer *l = sn_layer_alloc(&prelu_vt);
    if (l) l->prelu = *o;
    return l;
}
