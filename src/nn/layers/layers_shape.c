/* Keras's Reshape and GlobalAveragePooling2D (behind the vtable of nn_impl.h). */
#include <string.h>

#include "nn/layers/layers_impl.h"

/* ---- Reshape ---------------------------------------------------------------------------- */
/* The target without the batch; one -1 is inferred from the input's size at build. */
static sn_status reshape_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    const sn_shape *t = &l->reshape_target;
    int64_t known = 1, numel = sn_shape_numel(in);
    int infer = -1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->dim[i] == -1) infer = i;
        else known *= t->dim[i];
    }
    sn_shape out = *t;
    if (infer >= 0 && known > 0 && numel % known == 0) out.dim[infer] = numel / known;
    if (sn_shape_numel(&out) != numel || (infer >= 0 && known <= 0)) {
        char tb[160], e[320];
        snprintf(e, sizeof e, "a size (%lld elements per example) that target shape %s, "
                 "%lld elements%s, can hold", (long long)numel,
                 sn_layer_kshape(t, tb, sizeof tb), (long long)known,
                 infer >= 0 ? " besides the -1" : "");
        return sn_layer_shape_error(l, in, e);
    }
    l->out_shape = out;
    return SN_OK;
}

static sn_node reshape_forward(sn_layer *l, sn_graph *g, sn_node x, bool training,
                               sn_updates *u) {
    sn_shape xs = sn_node_shape(g, x), s = {.ndim = l->out_shape.ndim + 1, .dim = {xs.dim[0]}};
    for (int i = 0; i < l->out_shape.ndim; i++) s.dim[i + 1] = l->out_shape.dim[i];
    return sn_reshape(g, x, &s);
}

static const sn_layer_vtable reshape_vt = {"Reshape", "reshape", reshape_build,
                                           reshape_forward, NULL};

sn_layer *sn_layer_reshape(const sn_shape *target) {
    if (!target) {
        sn_errorf(SN_ERR_INVALID, "Reshape: target shape is NULL");
        return NULL;
    }
    if (target->ndim < 1 || target->ndim >= SN_MAX_DIMS) {
        sn_errorf(SN_ERR_INVALID, "Reshape: target shape has rank %d (without the batch), "
                  "expected 1 to %d", target->ndim, SN_MAX_DIMS - 1);
        return NULL;
    }
    int n_infer = 0;
    for (int i = 0; i < target->ndim; i++) {
        if (target->dim[i] == -1) {
            n_infer++;
        } else if (target->dim[i] <= 0) {
            char b[160];
            sn_errorf(SN_ERR_INVALID, "Reshape: target shape %s has dimension %d = %lld, "
                      "expected > 0 or -1", sn_layer_kshape(target, b, sizeof b), i,
                      (long long)target->dim[i]);
            return NULL;
        }
    }
    if (n_infer > 1) {
        char b[160];
        sn_errorf(SN_ERR_INVALID, "Reshape: target shape %s has %d dimensions of -1, at most "
                  "one may be inferred", sn_layer_kshape(target, b, sizeof b), n_infer);
        return NULL;
    }
    sn_layer *l = sn_layer_alloc(&reshape_vt);
    if (l) l->reshape_target = *target;
    return l;
}

/* ---- GlobalAveragePooling2D --------------------------------------------------------------- */
static sn_status gap_build(sn_layer *l, sn_graph *g, const sn_shape *in, sn_rng *rng) {
    if (in->ndim != 3) return sn_layer_shape_error(l, in, "(None, height, width, channels)");
    l->out_shape = (sn_shape){.ndim = 1, .dim = {in->dim[2]}};
    return SN_OK;
}

static sn_node gap_forward(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *u) {
    return sn_reduce_mean(g, x, 2, (const int[]){1, 2}, false);
}

static const sn_layer_vtable gap_vt = {"GlobalAveragePooling2D", "global_average_pooling2d",
                                       gap_build, gap_forward, NULL};

sn_layer *sn_layer_global_avg_pool2d(void) { return sn_layer_alloc(&gap_vt); }
