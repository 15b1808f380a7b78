/* A Functional model's graph of layer calls (sn_fgraph in nn_impl.h): its build (each
 * layer's variables at its first call, in node order), the summary's question whether Keras
 * would print it as a chain, and freeing it. Below model.c, which calls these; the builder
 * (functional.c) and the forward pass (model_forward.c) are above. */
#include <string.h>

#include "nn/layers/layers_attention.h"
#include "nn/layers/layers_impl.h"

static int layer_index(const sn_model *m, const sn_layer *l) {
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i] == l) return i;
    return -1;
}

void sn_fsub_model_free(sn_model *sub) {
    if (!sub) return;
    free(sub->layers); /* the layers themselves are the outer model's */
    sn_fgraph_free(sub->fn);
    sn_graph_free(sub->g);
    free(sub->name);
    free(sub);
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
    for (int i = 0; i < f->n_subs; i++) {
        sn_fsub_model_free(f->subs[i].model);
        free(f->subs[i].layers);
        free(f->subs[i].call_in);
        free(f->subs[i].call_out);
        free(f->subs[i].call_training);
        free(f->subs[i].map0);
    }
    free(f->subs);
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

/* ---- Keras's layer order ------------------------------------------------------------------
 * keras.Model's layers (and so its config, summary and the names of its weights, "dense",
 * "dense_1", ... counted in that order) come from keras/src/ops/function.py's map_graph: a
 * depth-first walk from the outputs numbers each operation when first seen; each node's depth
 * is the longest path to an output (an operation takes its deepest node's); operations then go
 * by depth, deepest first, ties in walk order. The same here, so that a model made with the
 * builder names its weights as Keras would. */
typedef struct korder {
    const sn_fgraph *f;
    int *op_index;   /* per node: walk index of its operation (layer or input), -1 unseen */
    int *post;       /* nodes in walk post-order (inputs -> outputs) */
    int n_post, next_index;
    bool *done;
} korder;

static int op_key(const sn_fgraph *f, int node) { /* nodes of one layer share an operation */
    const sn_layer *l = f->nodes[node].layer;
    if (!l) return node;
    for (int i = 0; i < f->n_nodes; i++)
        if (f->nodes[i].layer == l) return i;
    return node;
}

static void walk(korder *k, int node) {
    if (k->done[node]) return;
    int key = op_key(k->f, node);
    if (k->op_index[key] < 0) k->op_index[key] = k->next_index++;
    const sn_fnode *nd = &k->f->nodes[node];
    for (int a = 0; a < nd->n_in; a++) /* in the order Keras lists the call's tensors */
        walk(k, nd->in[sn_layer_keras_arg(nd->layer, nd->n_in, a)]);
    k->done[node] = true;
    k->post[k->n_post++] = node;
}

sn_status sn_functional_keras_order(sn_model *m) {
    sn_fgraph *f = m->fn;
    int n = f->n_nodes;
    korder k = {.f = f, .op_index = sn_calloc((size_t)n, sizeof(int)),
                .post = sn_calloc((size_t)n, sizeof(int)), .done = sn_calloc((size_t)n, 1)};
    int *depth = sn_calloc((size_t)n, sizeof(int)), *op_depth = sn_calloc((size_t)n, sizeof(int));
    int *order = sn_calloc((size_t)n, sizeof(int));
    sn_layer **layers = sn_calloc((size_t)(m->n_layers ? m->n_layers : 1), sizeof *layers);
    sn_status st = k.op_index && k.post && k.done && depth && op_depth && order && layers
                       ? SN_OK : SN_ERR_NOMEM;
    if (st == SN_OK) {
        for (int i = 0; i < n; i++) k.op_index[i] = op_depth[i] = -1;
        for (int o = 0; o < f->n_outputs; o++) walk(&k, f->outputs[o]);
        for (int i = 0; i < n; i++) depth[i] = -1;
        for (int r = k.n_post - 1; r >= 0; r--) {
            int node = k.post[r], key = op_key(f, node);
            int d = depth[node] < 0 ? 0 : depth[node];
            if (op_depth[key] > d) d = op_depth[key];
            op_depth[key] = d;
            depth[node] = d;
            for (int a = 0; a < f->nodes[node].n_in; a++) {
                int p = f->nodes[node].in[a];
                if (depth[p] < d + 1) depth[p] = d + 1;
            }
        }
        /* the operations (first node of each), by depth descending, then walk index */
        int no = 0;
        for (int i = 0; i < n; i++)
            if (op_key(f, i) == i && k.op_index[i] >= 0) order[no++] = i;
        for (int a = 1; a < no; a++) { /* insertion sort: a few hundred at most */
            int v = order[a], b = a - 1;
            while (b >= 0 && (op_depth[order[b]] < op_depth[v] ||
                              (op_depth[order[b]] == op_depth[v] &&
                               k.op_index[order[b]] > k.op_index[v]))) {
                order[b + 1] = order[b];
                b--;
            }
            order[b + 1] = v;
        }
        int nl = 0;
        for (int r = 0; r < no && st == SN_OK; r++)
            if (f->nodes[order[r]].layer) layers[nl++] = f->nodes[order[r]].layer;
        /* Calls that reach no output are not in Keras's model (sn_functional_build refuses
         * them); the order is only applied when every layer and input is in it. */
        if (nl == m->n_layers && no - nl == f->n_inputs) {
            memcpy(m->layers, layers, sizeof *layers * (size_t)nl);
            f->n_ops = 0;
            for (int r = 0, li = 0; r < no; r++)
                f->ops[f->n_ops++] = f->nodes[order[r]].layer ? li++ : -1 - order[r];
        }
    }
    free(k.op_index);
    free(k.post);
    free(k.done);
    free(depth);
    free(op_depth);
    free(order);
    free(layers);
    return st;
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
    SN_TRY(sn_functional_keras_order(m));
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

