/* Keras's merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate),
 * which take several tensors (sn_layer_vtable_n), and the layer forms of activations and
 * scalings (ReLU, LeakyReLU, Softmax, Rescaling, GlobalMaxPooling2D, GlobalAveragePooling2D
 * with keepdims, ZeroPadding2D). Each is composed of existing graph ops in Keras's order of
 * operations (ZeroPadding2D: sn_zero_pad, the slice's gradient op), so
 * the results are the same floats as Keras's and the gradients are those ops' (checked by
 * tests/test_gradcheck.c); no new kernel. */
#include <math.h>
#include <string.h>

#include "nn/layers/layers_impl.h"

/* ---- merges ----------------------------------------------------------------------------- */
static const char *merge_what(const sn_layer *l) { return l->vt->class_name; }

/* Elementwise merges need equal shapes (Keras broadcasts only a missing batch; sinter's
 * shapes are all batched). */
static sn_status merge_build(sn_layer *l, sn_graph *g, int n, const sn_shape *in, sn_rng *rng) {
    (void)g;
    (void)rng;
    char a[160], b[160];
    if (n > 64)
        return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' (%s) merges %d tensors; sinter takes "
                         "at most 64", l->name, merge_what(l), n);
    if (l->merge.op == SN_MERGE_SUBTRACT && n != 2)
        return sn_errorf(SN_ERR_INVALID, "layer '%s' (Subtract) is called on %d tensors, "
                         "expected exactly 2", l->name, n);
    if (l->merge.op == SN_MERGE_CONCATENATE) {
        int r = in[0].ndim + 1, ax = l->merge.axis < 0 ? l->merge.axis + r : l->merge.axis;
        if (ax < 1 || ax >= r)
            return sn_errorf(SN_ERR_SHAPE, "layer '%s' (Concatenate): axis %d is out of range "
                             "for inputs of shape %s (the batch axis 0 cannot be joined)",
                             l->name, l->merge.axis, sn_layer_kshape(&in[0], a, sizeof a));
        sn_shape o = in[0];
        for (int k = 1; k < n; k++) {
            bool ok = in[k].ndim == in[0].ndim;
            for (int d = 0; ok && d < in[0].ndim; d++) ok = d == ax - 1 || in[k].dim[d] == in[0].dim[d];
            if (!ok)
                return sn_errorf(SN_ERR_SHAPE, "layer '%s' (Concatenate): input %d has shape %s "
                                 "and input 0 %s; they must match outside axis %d", l->name, k,
                                 sn_layer_kshape(&in[k], a, sizeof a),
                                 sn_layer_kshape(&in[0], b, sizeof b), l->merge.axis);
            o.dim[ax - 1] += in[k].dim[ax - 1];
        }
        l->out_shape = o;
        return SN_OK;
    }
    for (int k = 1; k < n; k++)
        if (!sn_shape_equal(&in[k], &in[0]))
            return sn_errorf(SN_ERR_SHAPE, "layer '%s' (%s): input %d has shape %s and input 0 "
                             "%s; a merge takes inputs of one shape", l->name, merge_what(l), k,
                             sn_layer_kshape(&in[k], a, sizeof a),
                             sn_layer_kshape(&in[0], b, sizeof b));
    l->out_shape = in[0];
    return SN_OK;
}

static sn_node merge_forward(sn_layer *l, sn_graph *g, int n, const sn_node *x, bool training,
                             sn_updates *u) {
    (void)training;
    (void)u;
    if (l->merge.op == SN_MERGE_CONCATENATE) return sn_concat(g, n, x, l->merge.axis);
    if (l->merge.op == SN_MERGE_SUBTRACT) return sn_sub(g, x[0], x[1]);
    if (l->merge.op == SN_MERGE_MAXIMUM || l->merge.op == SN_MERGE_MINIMUM) {
        /* The inputs stacked on a new last axis and reduced by max there: the exact maximum,
         * and reduce_max's gradient goes to the first input at a tie, as TensorFlow's
         * maximum does; Minimum is -max(-x). */
        bool min = l->merge.op == SN_MERGE_MINIMUM;
        sn_node parts[64];
        sn_shape s = sn_node_shape(g, x[0]);
        s.dim[s.ndim++] = 1;
        for (int k = 0; k < n && k < 64; k++)
            parts[k] = sn_reshape(g, min ? sn_neg(g, x[k]) : x[k], &s);
        int axis = s.ndim - 1;
        sn_node y = sn_reduce_max(g, n > 1 ? sn_concat(g, n, parts, axis) : parts[0], 1, &axis,
                                  false);
        return min ? sn_neg(g, y) : y;
    }
    sn_node y = x[0];
    for (int k = 1; k < n; k++)
        y = l->merge.op == SN_MERGE_MULTIPLY ? sn_mul(g, y, x[k]) : sn_add(g, y, x[k]);
    if (l->merge.op == SN_MERGE_AVERAGE) y = sn_div(g, y, sn_scalar(g, sn_node_dtype(g, y), n));
    return y;
}

#define MERGE_VT(var, cls, base) \
    static const sn_layer_vtable_n var = {{cls, base, NULL, NULL, NULL}, merge_build, \
                                          merge_forward}
MERGE_VT(add_vt, "Add", "add");
MERGE_VT(subtract_vt, "Subtract", "subtract");
MERGE_VT(multiply_vt, "Multiply", "multiply");
MERGE_VT(average_vt, "Average", "average");
MERGE_VT(concatenate_vt, "Concatenate", "concatenate");
MERGE_VT(maximum_vt, "Maximum", "maximum");
MERGE_VT(minimum_vt, "Minimum", "minimum");

sn_layer *sn_layer_merge(sn_merge_op op) {
    static const sn_layer_vtable_n *const vts[] = {&add_vt, &subtract_vt, &multiply_vt,
                                                 &average_vt, &concatenate_vt, &maximum_vt,
                                                 &minimum_vt};
    if ((int)op < 0 || (int)op > SN_MERGE_MINIMUM)
        return sn_layer_bad_arg("merge layer: %s %g is not an sn_merge_op", "op", (double)op);
    sn_layer *l = sn_layer_alloc(&vts[op]->base);
    if (l) l->merge = (sn_merge_layer_opts){.op = op, .axis = -1};
    return l;
}

sn_layer *sn_layer_concatenate(int axis) {
    if (axis == 0)
        return sn_layer_bad_arg("Concatenate: %s is %g; the batch axis cannot be joined",
                                "axis", 0);
    sn_layer *l = sn_layer_merge(SN_MERGE_CONCATENATE);
    if (l) l->merge.axis = axis;
    return l;
}

/* ---- layer-form activations -------------------------------------------------------------- */
static sn_status same_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    (void)g;
    (void)rng;
    l->out_shape = *in;
    return SN_OK;
}

static sn_node relu_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    (void)training;
    (void)u;
    const sn_relu_layer_opts *o = &l->relu;
    if (o->max_value == 6) return sn_relu6(g, x);
    if (o->negative_slope > 0) return sn_leaky_relu(g, x, o->negative_slope);
    return sn_relu(g, x);
}

static sn_node softmax_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                               sn_updates *u) {
    (void)training;
    (void)u;
    return sn_softmax(g, x, l->relu.axis);
}

static const sn_layer_vtable relu_vt = {"ReLU", "re_lu", same_build, relu_forward, NULL};
static const sn_layer_vtable leaky_vt = {"LeakyReLU", "leaky_re_lu", same_build, relu_forward,
                                         NULL};
static const sn_layer_vtable softmax_vt = {"Softmax", "softmax", same_build, softmax_forward,
                                           NULL};

sn_relu_layer_opts sn_relu_layer_defaults(void) {
    return (sn_relu_layer_opts){.max_value = -1, .negative_slope = 0, .threshold = 0, .axis = -1};
}

sn_layer *sn_layer_relu_ex(const sn_relu_layer_opts *o) {
    if (!o) {
        sn_errorf(SN_ERR_INVALID, "ReLU: options are NULL");
        return NULL;
    }
    if (o->threshold != 0)
        return sn_layer_bad_arg("ReLU: %s is %g; sinter supports 0", "threshold", o->threshold);
    if (!(o->negative_slope >= 0 && o->negative_slope < 1))
        return sn_layer_bad_arg("ReLU: %s is %g; sinter supports [0, 1)", "negative_slope",
                                o->negative_slope);
    if (o->max_value >= 0 && o->max_value != 6)
        return sn_layer_bad_arg("ReLU: %s is %g; sinter supports none (null) and 6",
                                "max_value", o->max_value);
    if (o->max_value == 6 && o->negative_slope != 0)
        return sn_layer_bad_arg("ReLU: max_value 6 with %s %g; sinter supports 0 there",
                                "negative_slope", o->negative_slope);
    sn_layer *l = sn_layer_alloc(&relu_vt);
    if (l) l->relu = *o;
    return l;
}

sn_layer *sn_layer_leaky_relu(double negative_slope) {
    if (!(negative_slope >= 0 && negative_slope < 1))
        return sn_layer_bad_arg("LeakyReLU: %s is %g; sinter supports [0, 1)", "negative_slope",
                                negative_slope);
    sn_layer *l = sn_layer_alloc(&leaky_vt);
    if (l) {
        l->relu = sn_relu_layer_defaults();
        l->relu.negative_slope = negative_slope;
    }
    return l;
}

sn_layer *sn_layer_softmax(int axis) {
    sn_layer *l = sn_layer_alloc(&softmax_vt);
    if (l) {
        l->relu = sn_relu_layer_defaults();
        l->relu.axis = axis;
    }
    return l;
}

/* ---- Rescaling ---------------------------------------------------------------------------- */
static sn_node rescaling_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                                 sn_updates *u) {
    (void)training;
    (void)u;
    sn_dtype dt = sn_node_dtype(g, x);
    return sn_add(g, sn_mul(g, x, sn_scalar(g, dt, l->scale)), sn_scalar(g, dt, l->offset));
}

static const sn_layer_vtable rescaling_vt = {"Rescaling", "rescaling", same_build,
                                             rescaling_forward, NULL};

/* ---- Normalization ------------------------------------------------------------------------ */
/* Keras's variables: mean [C], variance [C] and count (), all non-trainable; count is Keras's
 * int64 sample count of adapt(), kept here as a float for the weights file (weights.c writes
 * it as int64) and unused by the forward pass. */
static sn_status normalization_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    sn_shape cs = {.ndim = 1, .dim = {in->dim[in->ndim - 1]}}, scalar = {.ndim = 0};
    sn_initializer dflt = {.type = SN_INIT_DEFAULT};
    SN_TRY(sn_layer_add_var(l, g, "mean", &cs, false, &dflt, SN_INIT_ZEROS, rng, NULL));
    SN_TRY(sn_layer_add_var(l, g, "variance", &cs, false, &dflt, SN_INIT_ONES, rng, NULL));
    SN_TRY(sn_layer_add_var(l, g, "count", &scalar, false, &dflt, SN_INIT_ZEROS, rng, NULL));
    l->out_shape = *in;
    return SN_OK;
}

static sn_node normalization_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                                     sn_updates *u) {
    (void)training;
    (void)u;
    sn_dtype dt = sn_node_dtype(g, x);
    /* max(sqrt(variance), eps) = eps + relu(sqrt(variance) - eps), Keras's backend.epsilon() */
    sn_node eps = sn_scalar(g, dt, 1e-7);
    sn_node sd = sn_add(g, eps, sn_relu(g, sn_sub(g, sn_sqrt(g, l->vars[1]), eps)));
    return sn_div(g, sn_sub(g, x, l->vars[0]), sd);
}

static const sn_layer_vtable normalization_vt = {"Normalization", "normalization",
                                                 normalization_build, normalization_forward,
                                                 NULL};

sn_layer *sn_layer_normalization(void) { return sn_layer_alloc(&normalization_vt); }

bool sn_layer_is_normalization(const sn_layer *l) { return l && l->vt == &normalization_vt; }

sn_layer *sn_layer_rescaling(double scale, double offset) {
    if (!isfinite(scale) || !isfinite(offset))
        return sn_layer_bad_arg("Rescaling: %s is %g, expected a finite number",
                                isfinite(scale) ? "offset" : "scale",
                                isfinite(scale) ? offset : scale);
    sn_layer *l = sn_layer_alloc(&rescaling_vt);
    if (l) {
        l->scale = scale;
        l->offset = offset;
    }
    return l;
}

/* ---- global pooling ---------------------------------------------------------------------- */
static sn_status gpool_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    (void)g;
    (void)rng;
    if (in->ndim != 3) return sn_layer_shape_error(l, in, "(None, height, width, channels)");
    l->out_shape = l->keepdims ? (sn_shape){.ndim = 3, .dim = {1, 1, in->dim[2]}}
                               : (sn_shape){.ndim = 1, .dim = {in->dim[2]}};
    return SN_OK;
}

static sn_node gpool_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    (void)training;
    (void)u;
    const int axes[] = {1, 2};
    return strcmp(l->vt->class_name, "GlobalMaxPooling2D")
               ? sn_reduce_mean(g, x, 2, axes, l->keepdims)
               : sn_reduce_max(g, x, 2, axes, l->keepdims);
}

static const sn_layer_vtable gmp_vt = {"GlobalMaxPooling2D", "global_max_pooling2d",
                                       gpool_build, gpool_forward, NULL};
static const sn_layer_vtable gap_k_vt = {"GlobalAveragePooling2D", "global_average_pooling2d",
                                         gpool_build, gpool_forward, NULL};

sn_layer *sn_layer_global_pool2d(bool max, bool keepdims) {
    sn_layer *l = max || keepdims ? sn_layer_alloc(max ? &gmp_vt : &gap_k_vt)
                                  : sn_layer_global_avg_pool2d();
    if (l) l->keepdims = keepdims;
    return l;
}

/* ---- ZeroPadding2D ------------------------------------------------------------------------ */
static sn_status zpad_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    (void)g;
    (void)rng;
    if (in->ndim != 3) return sn_layer_shape_error(l, in, "(None, height, width, channels)");
    l->out_shape = *in;
    l->out_shape.dim[0] += l->pad[0] + l->pad[1];
    l->out_shape.dim[1] += l->pad[2] + l->pad[3];
    return SN_OK;
}

/* One zero padding of H and W (the gradient a slice of dy): the values exact. It was two
 * concatenations with constant zeros, each a pass over the tensor forward and back (~14 % of
 * MobileNetV2's fp32 step, whose stride-2 blocks pad first). */
static sn_node zpad_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    (void)training;
    (void)u;
    if (!l->pad[0] && !l->pad[1] && !l->pad[2] && !l->pad[3]) return x;
    int64_t before[SN_MAX_DIMS] = {0, l->pad[0], l->pad[2], 0};
    int64_t after[SN_MAX_DIMS] = {0, l->pad[1], l->pad[3], 0};
    return sn_zero_pad(g, x, before, after);
}

static const sn_layer_vtable zpad_vt = {"ZeroPadding2D", "zero_padding2d", zpad_build,
                                        zpad_forward, NULL};

sn_layer *sn_layer_zero_padding2d(int top, int bottom, int left, int right) {
    const int p[4] = {top, bottom, left, right};
    static const char *const names[4] = {"top", "bottom", "left", "right"};
    for (int k = 0; k < 4; k++)
        if (p[k] < 0)
            return sn_layer_bad_arg("ZeroPadding2D: %s padding is %g, expected >= 0", names[k],
                                    p[k]);
    sn_layer *l = sn_layer_alloc(&zpad_vt);
    if (l) memcpy(l->pad, p, sizeof p);
    return l;
}
