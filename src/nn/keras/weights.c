/* sn_model_save_weights / sn_model_load_weights: the Sequential model described to the
 * HDF5 layer of sinter/io.h (Keras class and layer names, variables in Keras order), with
 * tensors that are views on the model's variable buffer, so loading writes straight into
 * the variables (io checks the whole file before writing anything). */
#include <string.h>

#include "nn/nn_impl.h"
#include "nn/keras/model_config.h"
#include "sinter/io.h"

typedef struct weights_desc {
    sn_weight_layer *layers;
    sn_weight_var *vars;
    struct sn_tensor *tensors;
    int n_layers;
    char (*paths)[256]; /* a nested model's layers: "functional/layers/dense" */
    const char **path_of; /* per layer: paths[i] or NULL (sn_weights_h5_options.paths) */
} weights_desc;

static void desc_free(weights_desc *d) {
    free(d->layers);
    free(d->vars);
    free(d->tensors);
    free(d->paths);
    free(d->path_of);
}

/* Keras's numbered name of entry `at` among entries[0 .. at-1] of the same class
 * ("dense", "dense_1"). */
static void numbered(const char *cls, int seen, char *buf, size_t cap) {
    char snake[200];
    if (!sn_keras_snake_case(cls, snake, sizeof snake)) snake[0] = '\0';
    if (seen) snprintf(buf, cap, "%s_%d", snake, seen);
    else snprintf(buf, cap, "%s", snake);
}

static int seen_class(const char *const *classes, int n, const char *cls) {
    int c = 0;
    for (int i = 0; i < n; i++) c += !strcmp(classes[i], cls);
    return c;
}

/* l's variables as views into d (from d->vars[k] on); returns the next k. */
static int add_vars(sn_model *m, const sn_layer *l, weights_desc *d, int k, sn_weight_layer *L) {
    L->n_vars = l->n_vars;
    L->vars = d->vars + k;
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
    return k;
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
    int cap = n; /* plus, per nested model, its own entry and its inputs */
    for (int s = 0; m->fn && s < m->fn->n_subs; s++) cap += 1 + m->fn->subs[s].model->fn->n_inputs;
    d->layers = sn_calloc((size_t)(cap ? cap : 1), sizeof *d->layers);
    d->paths = sn_calloc((size_t)(cap ? cap : 1), sizeof *d->paths);
    d->path_of = sn_calloc((size_t)(cap ? cap : 1), sizeof *d->path_of);
    d->vars = sn_calloc((size_t)(nv ? nv : 1), sizeof *d->vars);
    d->tensors = sn_calloc((size_t)(nv ? nv : 1), sizeof *d->tensors);
    if (!d->layers || !d->vars || !d->tensors || !d->paths || !d->path_of) {
        desc_free(d);
        return SN_ERR_NOMEM;
    }
    int k = 0, w = 0, n_fn = 0, n_seq = 0;
    const sn_fsub *done_subs[64];
    int n_done = 0;
    for (int r = 0; r < n; r++) {
        int i = m->fn ? m->fn->ops[r] : r;
        if (i < 0) {
            d->layers[w++] = (sn_weight_layer){.class_name = "InputLayer",
                                               .name = m->fn->nodes[-1 - i].input_name};
            continue;
        }
        const sn_layer *l = m->layers[i];
        if (sn_layer_is_not_equal(l)) continue; /* an op layer: Keras writes no group */
        const sn_fsub *sub = m->fn ? sn_functional_sub_of(m, l) : NULL;
        if (sub) {
            /* The nested model once, where its first layer comes: its own group
             * ("functional", numbered among the outer Functional entries), then its inputs
             * and layers in its own order under "<group>/layers/". */
            bool seen = false;
            for (int q = 0; q < n_done; q++) seen |= done_subs[q] == sub;
            if (seen) continue;
            if (n_done == 64)
                return sn_errorf(SN_ERR_UNSUPPORTED, "%s: model '%s' nests more than 64 models",
                                 what, m->name);
            done_subs[n_done++] = sub;
            char grp[104];
            const sn_fgraph *sf = sub->model->fn;
            /* a nested Sequential is numbered among the Sequential entries ("sequential_1")
             * and, as Keras's model.layers of a Sequential, lists no InputLayer */
            const char *kind = sf->sequential ? "Sequential" : "Functional";
            numbered(kind, sf->sequential ? n_seq++ : n_fn++, grp, sizeof grp);
            d->layers[w++] = (sn_weight_layer){.class_name = kind, .name = sub->model->name};
            const char *classes[512];
            for (int q = 0; q < sf->n_ops && q < 512; q++) {
                int op = sf->ops[q];
                if (op < 0 && sf->sequential) {
                    classes[q] = "";
                    continue;
                }
                const sn_layer *sl = op >= 0 ? sub->layers[op] : NULL;
                if (sn_layer_is_not_equal(sl)) {
                    classes[q] = "";
                    continue;
                }
                const char *cls = sl ? sl->vt->class_name : "InputLayer";
                char own[128];
                numbered(cls, seen_class(classes, q, cls), own, sizeof own);
                classes[q] = cls;
                snprintf(d->paths[w], sizeof d->paths[w], "%.100s/layers/%.100s", grp, own);
                d->path_of[w] = d->paths[w];
                d->layers[w] = (sn_weight_layer){.class_name = cls,
                                                 .name = sl ? sl->name
                                                            : sf->nodes[-1 - op].input_name};
                if (sl) k = add_vars(m, sl, d, k, &d->layers[w]);
                w++;
            }
            continue;
        }
        d->layers[w] = (sn_weight_layer){.class_name = l->vt->class_name, .name = l->name};
        k = add_vars(m, l, d, k, &d->layers[w]);
        w++;
    }
    n = w;
    d->n_layers = n;
    return SN_OK;
}

sn_status sn_model_save_weights(sn_model *m, const char *path) {
    weights_desc d;
    SN_TRY(describe(m, "saving weights", &d));
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.model_name = m->name;
    o.paths = d.path_of;
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
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.paths = d.path_of;
    sn_status st = sn_weights_load_h5(path, d.n_layers, d.layers, &o);
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
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.paths = d.path_of;
    sn_status st = sn_weights_load_h5_image(image, size, shown, d.n_layers, d.layers, &o);
    desc_free(&d);
    if (st != SN_OK) return sn_error_context(st, "loading weights into model '%s'", m->name);
    return SN_OK;
}

sn_status sn_model_save_weights_image(sn_model *m, void **image, size_t *size) {
    weights_desc d;
    SN_TRY(describe(m, "saving weights", &d));
    sn_weights_h5_options o = sn_weights_h5_defaults();
    o.model_name = m->name;
    o.paths = d.path_of;
    sn_status st = sn_weights_save_h5_image(d.n_layers, d.layers, &o, image, size);
    desc_free(&d);
    if (st != SN_OK) return sn_error_context(st, "saving weights of model '%s'", m->name);
    return SN_OK;
}
