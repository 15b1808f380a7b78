/* Functional models (keras.Model(inputs, outputs)): the builder of sinter/nn.h. A model's
 * graph of layer calls (sn_fgraph in nn_impl.h) keeps its nodes in an order where each comes
 * after its arguments, which a builder gets for free: a call can only name tensors that
 * exist. The graph's build and free are functional_graph.c's (below model.c), the forward
 * pass model_forward.c's.
 *
 * Weight sharing is by construction: a layer called twice has two nodes but one set of
 * variables, and the graph's autodiff sums the gradients of both uses into them (a variable
 * read by two nodes gets the sum of their contributions, as for any fan-out). */
#include <string.h>

#include "nn/layers/layers_impl.h"

sn_model *sn_functional_new(const char *name) {
    sn_model *m = sn_sequential_new(name && *name ? name : "functional");
    if (!m) return NULL;
    if (!(m->fn = sn_calloc(1, sizeof *m->fn))) {
        sn_model_free(m);
        return NULL;
    }
    return m;
}

sn_functional_input_opts sn_functional_input_defaults(const sn_shape *shape) {
    return (sn_functional_input_opts){.name = NULL, .shape = shape ? *shape : (sn_shape){0}};
}

static sn_status open_graph(sn_model *m, const char *what) {
    if (!m) return sn_errorf(SN_ERR_INVALID, "%s: model is NULL", what);
    if (!m->fn)
        return sn_errorf(SN_ERR_INVALID, "%s: model '%s' is Sequential (make a Functional "
                         "model with sn_functional_new)", what, m->name);
    if (m->built)
        return sn_errorf(SN_ERR_STATE, "%s: model '%s' is already built", what, m->name);
    return SN_OK;
}

static sn_status grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return SN_OK;
    int c = *cap ? 2 * *cap : 8;
    while (c < need) c *= 2;
    void *q = sn_realloc(*p, elem * (size_t)c);
    if (!q) return SN_ERR_NOMEM;
    memset((char *)q + elem * (size_t)*cap, 0, elem * (size_t)(c - *cap));
    *p = q;
    *cap = c;
    return SN_OK;
}

/* Appends node n (taking its arrays) and, when it is an input or a layer's first call, an
 * entry of the model's operation order. */
static sn_status push_node(sn_fgraph *f, sn_fnode n, int op, sn_ftensor *out) {
    sn_status st = grow((void **)&f->nodes, &f->cap_nodes, f->n_nodes + 1, sizeof *f->nodes);
    if (st == SN_OK && op != INT32_MIN)
        st = grow((void **)&f->ops, &f->cap_ops, f->n_ops + 1, sizeof *f->ops);
    if (st != SN_OK) {
        free(n.in);
        free(n.input_name);
        return st;
    }
    if (op != INT32_MIN) f->ops[f->n_ops++] = op;
    f->nodes[f->n_nodes] = n;
    if (out) out->id = f->n_nodes;
    f->n_nodes++;
    return SN_OK;
}

sn_status sn_functional_input(sn_model *m, const sn_functional_input_opts *o, sn_ftensor *out) {
    SN_TRY(open_graph(m, "sn_functional_input"));
    if (!o || !out) return sn_errorf(SN_ERR_INVALID, "sn_functional_input: %s is NULL",
                                     !o ? "options" : "out");
    char b[160];
    bool ok = o->shape.ndim >= 1 && o->shape.ndim < SN_MAX_DIMS;
    for (int i = 0; ok && i < o->shape.ndim; i++) ok = o->shape.dim[i] > 0;
    if (!ok)
        return sn_errorf(SN_ERR_SHAPE, "model '%s': input shape %s, expected 1 to %d positive "
                         "dimensions (without the batch)", m->name,
                         sn_shape_str(&o->shape, b, sizeof b), SN_MAX_DIMS - 1);
    char auto_name[64];
    const char *name = o->name;
    if (!name || !*name) {
        snprintf(auto_name, sizeof auto_name, "input_layer");
        for (int k = 1; sn_model_name_taken(m, auto_name); k++)
            snprintf(auto_name, sizeof auto_name, "input_layer_%d", k);
        name = auto_name;
    } else if (sn_model_name_taken(m, name)) {
        return sn_errorf(SN_ERR_INVALID, "model '%s': a layer named '%s' already exists; layer "
                         "names must be unique", m->name, name);
    }
    sn_fgraph *f = m->fn;
    SN_TRY(grow((void **)&f->inputs, &f->cap_inputs, f->n_inputs + 1, sizeof *f->inputs));
    sn_fnode n = {.input_name = sn_strdup(name), .int_ids = o->int_ids, .shape = o->shape};
    if (!n.input_name) return SN_ERR_NOMEM;
    SN_TRY(push_node(f, n, -1 - f->n_nodes, out));
    f->inputs[f->n_inputs++] = out->id;
    return SN_OK;
}

static int layer_index(const sn_model *m, const sn_layer *l) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i] == l) return i;
    return -1;
}

sn_status sn_layer_call(sn_model *m, sn_layer *l, const sn_ftensor *in, int n, sn_ftensor *out) {
    sn_status st = open_graph(m, "sn_layer_call");
    int li = m && st == SN_OK ? layer_index(m, l) : -1;
    const char *ln = l && l->name ? l->name : l ? l->vt->base_name : "?";
    if (st == SN_OK && (!l || !out || (n > 0 && !in)))
        st = sn_errorf(SN_ERR_INVALID, "sn_layer_call: %s is NULL%s", !l ? "layer" : !out ? "out"
                       : "in", !l ? " (its constructor failed: see the previous error)" : "");
    if (st == SN_OK && (sn_layer_vt_n(l) ? n < 1 : n != 1))
        st = sn_errorf(SN_ERR_INVALID, "layer '%s' (%s) is called on %d tensors, expected %s",
                       ln, l->vt->class_name, n, sn_layer_vt_n(l) ? "at least 1" : "1");
    for (int k = 0; st == SN_OK && k < n; k++)
        if (in[k].id < 0 || in[k].id >= m->fn->n_nodes)
            st = sn_errorf(SN_ERR_INVALID, "layer '%s' (%s): argument %d is tensor %d, which "
                           "model '%s' does not have (%d tensors)", ln, l->vt->class_name, k,
                           in[k].id, m->name, m->fn->n_nodes);
    if (st != SN_OK) {
        if (l && li < 0) sn_layer_destroy(l); /* owned from the first call on, as documented */
        return st;
    }
    if (li < 0) { /* first call: the model takes the layer (and names it) */
        m->fn->adding = true;
        st = sn_model_add(m, l);
        m->fn->adding = false;
        SN_TRY(st);
        li = m->n_layers - 1;
    }
    sn_fnode node = {.layer = l, .n_in = n, .in = sn_calloc((size_t)n, sizeof(int))};
    if (!node.in) return SN_ERR_NOMEM;
    for (int k = 0; k < n; k++) node.in[k] = in[k].id;
    for (int i = 0; i < m->fn->n_nodes; i++) node.call_index += m->fn->nodes[i].layer == l;
    return push_node(m->fn, node, node.call_index == 0 ? li : INT32_MIN, out);
}

sn_status sn_layer_call_adopt(sn_model *m, sn_layer *l, const int *in, int n, int *out) {
    int li = layer_index(m, l);
    if (li < 0) {
        if (m->n_layers == m->cap_layers) {
            int cap = m->cap_layers ? 2 * m->cap_layers : 8;
            sn_layer **p = sn_realloc(m->layers, sizeof *p * (size_t)cap);
            if (!p) return SN_ERR_NOMEM;
            m->layers = p;
            m->cap_layers = cap;
        }
        m->layers[m->n_layers++] = l;
        li = m->n_layers - 1;
    }
    sn_fnode node = {.layer = l, .n_in = n, .in = sn_calloc((size_t)n, sizeof(int))};
    if (!node.in) return SN_ERR_NOMEM;
    for (int k = 0; k < n; k++) node.in[k] = in[k];
    for (int i = 0; i < m->fn->n_nodes; i++) node.call_index += m->fn->nodes[i].layer == l;
    sn_ftensor o = {-1};
    SN_TRY(push_node(m->fn, node, node.call_index == 0 ? li : INT32_MIN, &o));
    *out = o.id;
    return SN_OK;
}

sn_status sn_functional_set_outputs(sn_model *m, const sn_ftensor *outputs, int n) {
    SN_TRY(open_graph(m, "sn_functional_set_outputs"));
    if (n < 1 || !outputs)
        return sn_errorf(SN_ERR_INVALID, "model '%s': %d outputs, expected at least 1", m->name, n);
    sn_fgraph *f = m->fn;
    for (int k = 0; k < n; k++) {
        if (outputs[k].id < 0 || outputs[k].id >= f->n_nodes)
            return sn_errorf(SN_ERR_INVALID, "model '%s': output %d is tensor %d, which the model "
                             "does not have (%d tensors)", m->name, k, outputs[k].id, f->n_nodes);
        for (int j = 0; j < k; j++)
            if (outputs[j].id == outputs[k].id)
                return sn_errorf(SN_ERR_INVALID, "model '%s': outputs %d and %d are the same "
                                 "tensor", m->name, j, k);
    }
    int *o = sn_calloc((size_t)n, sizeof *o);
    if (!o) return SN_ERR_NOMEM;
    for (int k = 0; k < n; k++) o[k] = outputs[k].id;
    free(f->outputs);
    f->outputs = o;
    f->n_outputs = n;
    return SN_OK;
}

int sn_model_input_count(const sn_model *m) { return !m ? 0 : m->fn ? m->fn->n_inputs : 1; }
int sn_model_output_count(const sn_model *m) { return !m ? 0 : m->fn ? m->fn->n_outputs : 1; }

sn_shape sn_model_output_shape_at(const sn_model *m, int i) {
    if (!m || !m->built || i < 0 || i >= sn_model_output_count(m)) return (sn_shape){.ndim = -1};
    if (!m->fn) return m->n_layers ? m->layers[m->n_layers - 1]->out_shape : m->input_shape;
    return m->fn->nodes[m->fn->outputs[i]].shape;
}

