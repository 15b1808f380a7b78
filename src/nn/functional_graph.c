/* A Functional model's graph of layer calls (sn_fgraph in nn_impl.h): its build (each
 * layer's variables at its first call, in node order), the summary's question whether Keras
 * would print it as a chain, and freeing it. Below model.c, which calls these; the builder
 * (functional.c) and the forward pass (model_forward.c) are above. */
#include <string.h>

#include "nn/layers_impl.h"

static int layer_index(const sn_model *m, const sn_layer *l) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i] == l) return i;
    return -1;
}

void sn_fgraph_free(sn_fgraph *f) {
    if (!f) return;
    for (int i = 0; i < f->n_nodes; i++) {
        free(f->nodes[i].in);
        free(f->nodes[i].input_name);
    }
    free(f->nodes);
    free(f->inputs);
    free(f->outputs);
    free(f->ops);
    free(f);
}

/* "layer 'add' (Add) is called at call 1 on (None, 4) and at call 0 on (None, 5)". */
static sn_status call_shape_error(const sn_layer *l, int call, const sn_shape *now,
                                  const sn_shape *first) {
    char a[160], b[160];
    return sn_errorf(SN_ERR_SHAPE, "layer '%s' (%s) is called on %s at its call %d but was "
                     "built for %s at its first call; a shared layer's calls take one shape",
                     l->name, l->vt->class_name, sn_layer_kshape(now, a, sizeof a), call,
                     sn_layer_kshape(first, b, sizeof b));
}

static uint64_t mix64(uint64_t x) { /* as model.c's: the same streams as a Sequential model */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

sn_status sn_functional_build(sn_model *m, sn_graph *g, uint64_t seed, bool init) {
    sn_fgraph *f = m->fn;
    if (f->n_inputs == 0)
        return sn_errorf(SN_ERR_STATE, "model '%s' has no inputs (sn_functional_input)", m->name);
    if (f->n_outputs == 0)
        return sn_errorf(SN_ERR_STATE, "model '%s' has no outputs (sn_functional_set_outputs)",
                         m->name);
    /* Every call must lead to an output: Keras keeps only those layers (and a weights file
     * then has none of the others), so a dangling call is a mistake in the graph. */
    bool *used = sn_calloc((size_t)f->n_nodes, sizeof *used);
    if (!used) return SN_ERR_NOMEM;
    for (int k = 0; k < f->n_outputs; k++) used[f->outputs[k]] = true;
    for (int i = f->n_nodes - 1; i >= 0; i--)
        for (int k = 0; used[i] && k < f->nodes[i].n_in; k++) used[f->nodes[i].in[k]] = true;
    int dangling = -1;
    for (int i = 0; i < f->n_nodes && dangling < 0; i++)
        if (!used[i]) dangling = i;
    free(used);
    if (dangling >= 0) {
        const sn_fnode *d = &f->nodes[dangling];
        return sn_errorf(SN_ERR_INVALID, "%s '%s'%s%s%s (call %d) leads to none of model '%s''s "
                         "outputs; a Functional model's calls must each lead to an output",
                         d->layer ? "layer" : "input", d->layer ? d->layer->name : d->input_name,
                         d->layer ? " (" : "", d->layer ? d->layer->vt->class_name : "",
                         d->layer ? ")" : "", d->call_index, m->name);
    }
    sn_shape shapes[64];
    for (int i = 0; i < f->n_nodes; i++) {
        sn_fnode *nd = &f->nodes[i];
        sn_layer *l = nd->layer;
        if (!l) continue;
        if (nd->n_in > 64)
            return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' is called on %d tensors; sinter "
                             "takes at most 64", l->name, nd->n_in);
        for (int k = 0; k < nd->n_in; k++) shapes[k] = f->nodes[nd->in[k]].shape;
        sn_status st = SN_OK;
        const sn_layer_vtable_n *vn = sn_layer_vt_n(l);
        if (nd->call_index == 0 || vn) {
            /* Merge layers have no variables: each call builds (checks) its own shapes. */
            int li = layer_index(m, l);
            sn_rng rng;
            sn_rng_init(&rng, seed, (uint64_t)li);
            if (nd->call_index == 0) {
                l->dtype = m->dtype;
                l->seed = mix64(seed ^ mix64((uint64_t)li + 1));
                l->n_vars = 0;
                l->n_regs = 0;
                l->in_shape = shapes[0];
            }
            st = vn ? vn->build_n(l, g, nd->n_in, shapes, init ? &rng : NULL)
                                : l->vt->build(l, g, &shapes[0], init ? &rng : NULL);
            if (st == SN_OK && sn_graph_status(g) != SN_OK) st = sn_graph_status(g);
            if (st == SN_OK && sn_shape_numel(&l->out_shape) <= 0)
                st = sn_errorf(SN_ERR_SHAPE, "empty output shape");
        } else if (!sn_shape_equal(&shapes[0], &l->in_shape)) {
            return call_shape_error(l, nd->call_index, &shapes[0], &l->in_shape);
        }
        if (st != SN_OK)
            return sn_error_context(st, "layer '%s' (%s)", l->name, l->vt->class_name);
        nd->shape = l->out_shape;
    }
    m->input_shape = f->nodes[f->inputs[0]].shape;
    return SN_OK;
}

bool sn_functional_is_chain(const sn_model *m) {
    const sn_fgraph *f = m->fn;
    if (!f || f->n_inputs != 1 || f->n_outputs != 1) return false;
    for (int i = 0; i < f->n_nodes; i++) {
        const sn_fnode *nd = &f->nodes[i];
        if (nd->layer && (nd->n_in != 1 || nd->call_index > 0)) return false;
        int consumers = 0;
        for (int j = i + 1; j < f->n_nodes; j++)
            for (int k = 0; k < f->nodes[j].n_in; k++) consumers += f->nodes[j].in[k] == i;
        if (consumers > 1) return false;
    }
    return true;
}

