/* sn_model_save_weights / sn_model_load_weights: the Sequential model described to the
 * HDF5 layer of sinter/io.h (Keras class and layer names, variables in Keras order), with
 * tensors that are views on the model's variable buffer, so loading writes straight into
 * the variables (io checks the whole file before writing anything). */
#include "nn/nn_impl.h"
#include "nn/keras/model_config.h"
#include "sinter/io.h"

typedef struct weights_desc {
    sn_weight_layer *layers;
    sn_weight_var *vars;
    struct sn_tensor *tensors;
    int n_layers;
} weights_desc;

static void desc_free(weights_desc *d) {
    free(d->layers);
    free(d->vars);
    free(d->tensors);
}

/* Every layer is listed, with or without variables, so a Keras 3 file gets the empty groups
 * Keras writes for Flatten or MaxPooling2D. */
static sn_status describe(sn_model *m, const char *what, weights_desc *d) {
    *d = (weights_desc){0};
    if (!m) return sn_errorf(SN_ERR_INVALID, "%s: model is NULL", what);
    if (!m->built)
        return sn_errorf(SN_ERR_STATE, "%s: model '%s' is not built (call sn_model_build first)",
                         what, m->name);
    if (m->dtype != SN_F32)
        return sn_errorf(SN_ERR_UNSUPPORTED, "%s: model '%s' has %s variables; weight files hold "
                         "float32", what, m->name, sn_dtype_name(m->dtype));
    int nv = 0;
    for (int i = 0; i < m->n_layers; i++) nv += m->layers[i]->n_vars;
    /* A Functional model lists its InputLayers too, where Keras's model.layers has them:
     * Keras 3 writes an empty group for each ("input_layer", "input_layer_1"). */
    int n = m->fn ? m->fn->n_ops : m->n_layers;
    d->layers = sn_calloc((size_t)(n ? n : 1), sizeof *d->layers);
    d->vars = sn_calloc((size_t)(nv ? nv : 1), sizeof *d->vars);
    d->tensors = sn_calloc((size_t)(nv ? nv : 1), sizeof *d->tensors);
    if (!d->layers || !d->vars || !d->tensors) {
        desc_free(d);
        return SN_ERR_NOMEM;
    }
    int k = 0;
    for (int r = 0; r < n; r++) {
        int i = m->fn ? m->fn->ops[r] : r;
        if (i < 0) {
            d->layers[r] = (sn_weight_layer){.class_name = "InputLayer",
                                             .name = m->fn->nodes[-1 - i].input_name};
            continue;
        }
        const sn_layer *l = m->layers[i];
        d->layers[r] = (sn_weight_layer){.class_name = l->vt->class_name, .name = l->name,
                                         .n_vars = l->n_vars, .vars = d->vars + k};
        for (int j = 0; j < l->n_vars; j++, k++) {
            struct sn_tensor *t = &d->tensors[k];
            /* A non-owning contiguous view on the variable: nothing to free. */
            t->dtype = SN_F32;
            t->shape = sn_node_shape(m->g, l->vars[j]);
            int64_t stride = (int64_t)sizeof(float);
            for (int a = t->shape.ndim - 1; a >= 0; a--) {
                t->strides[a] = stride;
                stride *= t->shape.dim[a];
            }
            t->data = sn_variable_data(m->g, l->vars[j]);
            t->base = NULL;
            t->owns = 0;
            d->vars[k] = (sn_weight_var){.name = l->var_names[j], .value = t};
        }
    }
    d->n_layers = n;
    return SN_OK;
}

sn_status sn_model_save_weights(sn_model *m, const char *path) {
    weights_desc d;
    SN_TRY(describe(m, "saving weights", &d));
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.model_name = m->name;
    sn_status st = sn_weights_save_h5(path, d.n_layers, d.layers, &o);
    desc_free(&d);
    /* A failed write already says "cannot write weights file '<path>': <why>". */
    if (st != SN_OK && st != SN_ERR_IO)
        return sn_error_context(st, "saving weights of model '%s' to '%s'", m->name,
                                path ? path : "(null)");
    return st;
}

sn_status sn_model_load_weights(sn_model *m, const char *path) {
    weights_desc d;
    SN_TRY(describe(m, "loading weights", &d));
    sn_status st = sn_weights_load_h5(path, d.n_layers, d.layers, NULL);
    desc_free(&d);
    if (st != SN_OK)
        return sn_error_context(st, "loading weights into model '%s' from '%s'", m->name,
                                path ? path : "(null)");
    return SN_OK;
}

sn_status sn_model_load_weights_image(sn_model *m, const void *image, size_t size,
                                      const char *shown) {
    weights_desc d;
    SN_TRY(describe(m, "loading weights", &d));
    sn_status st = sn_weights_load_h5_image(image, size, shown, d.n_layers, d.layers, NULL);
    desc_free(&d);
    if (st != SN_OK) return sn_error_context(st, "loading weights into model '%s'", m->name);
    return SN_OK;
}

sn_status sn_model_save_weights_image(sn_model *m, void **image, size_t *size) {
    weights_desc d;
    SN_TRY(describe(m, "saving weights", &d));
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.model_name = m->name;
    sn_status st = sn_weights_save_h5_image(d.n_layers, d.layers, &o, image, size);
    desc_free(&d);
    if (st != SN_OK) return sn_error_context(st, "saving weights of model '%s'", m->name);
    return SN_OK;
}
