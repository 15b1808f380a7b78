/* A Functional model called as a layer of another (Keras's nested models, such as the U-Net's
 * MobileNetV2 encoder of several outputs): its calls are inlined into the outer graph, so the
 * forward pass, the gradients (fanning in over every call) and training are the outer graph's
 * with nothing new; the outer model owns the nested model's layers, and a record (sn_fsub in
 * nn_impl.h) keeps the nested model's name and its own Keras layer order, which Keras's
 * weights layout (layers/functional/layers/dense/vars) needs. Calling the same nested model
 * again reuses its layers: shared weights, as Keras's. */
#include <string.h>

#include "nn/layers/layers_impl.h"

const sn_fsub *sn_functional_sub_of(const sn_model *m, const sn_layer *l) {
    for (int s = 0; m->fn && s < m->fn->n_subs; s++)
        for (int i = 0; i < m->fn->subs[s].n_layers; i++)
            if (m->fn->subs[s].layers[i] == l) return &m->fn->subs[s];
    return NULL;
}

/* The record of sub in m, made (taking sub and its layers) at its first call. */
static sn_status record(sn_model *m, sn_model *sub, sn_fsub **out) {
    sn_fgraph *f = m->fn;
    for (int s = 0; s < f->n_subs; s++)
        if (f->subs[s].model == sub) {
            *out = &f->subs[s];
            return SN_OK;
        }
    sn_fsub *p = sn_realloc(f->subs, sizeof *p * (size_t)(f->n_subs + 1));
    if (!p) {
        sn_model_free(sub);
        return SN_ERR_NOMEM;
    }
    f->subs = p;
    /* The nested model's own order (its config's, and its weights' numbering). */
    sn_status st = sn_functional_keras_order(sub);
    if (st != SN_OK) {
        sn_model_free(sub); /* it still owns its layers */
        return st;
    }
    sn_fsub *r = &f->subs[f->n_subs++];
    *r = (sn_fsub){.model = sub};
    r->layers = sn_calloc((size_t)(sub->n_layers ? sub->n_layers : 1), sizeof *r->layers);
    /* Never below the capacity sn_model_add counts on: a second nested model after outer
     * layers (the U-Net's decoder blocks between Concatenates) would shrink the array. */
    int need = m->n_layers + sub->n_layers;
    int cap = m->cap_layers > need ? m->cap_layers : need;
    sn_layer **grown = sn_realloc(m->layers, sizeof *grown * (size_t)(cap ? cap : 1));
    if (grown) m->layers = grown;
    if (!r->layers || !grown) return SN_ERR_NOMEM;
    m->cap_layers = cap;
    /* The outer model owns them from now on (freed with it, also after an error). */
    for (int i = 0; i < sub->n_layers; i++) {
        r->layers[i] = sub->layers[i];
        m->layers[m->n_layers++] = sub->layers[i];
    }
    r->n_layers = sub->n_layers;
    sub->n_layers = 0;
    *out = r;
    return SN_OK;
}

sn_status sn_functional_call_model(sn_model *m, sn_model *sub, const int *in, int n, int *out,
                                   int n_out) {
    if (!m || !m->fn || !sub) {
        sn_model_free(sub);
        return sn_errorf(SN_ERR_INVALID, "calling a nested model: %s", !sub ? "the model is NULL"
                         : "the outer model is not Functional");
    }
    if (!sub->fn || sub->built || (sub->fn->n_subs > 0)) {
        sn_status st = sn_errorf(SN_ERR_UNSUPPORTED, "model '%s' is nested in model '%s' but is "
                                 "%s; sinter nests unbuilt Functional models one level deep",
                                 sub->name, m->name, !sub->fn ? "Sequential" : sub->built
                                 ? "already built" : "itself nesting a model");
        bool known = false;
        for (int s = 0; s < m->fn->n_subs; s++) known |= m->fn->subs[s].model == sub;
        if (!known) sn_model_free(sub);
        return st;
    }
    sn_fsub *r = NULL;
    SN_TRY(record(m, sub, &r));
    const sn_fgraph *sf = sub->fn;
    if (n != sf->n_inputs || n_out != sf->n_outputs)
        return sn_errorf(SN_ERR_INVALID, "nested model '%s' has %d inputs and %d outputs; it is "
                         "called on %d and gives %d", sub->name, sf->n_inputs, sf->n_outputs, n,
                         n_out);
    for (int k = 0; k < n; k++)
        if (in[k] < 0 || in[k] >= m->fn->n_nodes)
            return sn_errorf(SN_ERR_INVALID, "nested model '%s': argument %d is tensor %d, which "
                             "model '%s' does not have", sub->name, k, in[k], m->name);
    int *map = sn_calloc((size_t)sf->n_nodes + 1, sizeof *map);
    int *args = sn_calloc((size_t)sf->n_nodes + 1, sizeof *args);
    sn_status st = map && args ? SN_OK : SN_ERR_NOMEM;
    for (int i = 0; st == SN_OK && i < sf->n_nodes; i++) {
        const sn_fnode *nd = &sf->nodes[i];
        if (!nd->layer) {
            int k = 0;
            while (k < sf->n_inputs && sf->inputs[k] != i) k++;
            map[i] = k < sf->n_inputs ? in[k] : -1;
            continue;
        }
        for (int a = 0; a < nd->n_in; a++) args[a] = map[nd->in[a]];
        st = sn_layer_call_adopt(m, nd->layer, args, nd->n_in, &map[i]);
        if (st == SN_OK) {
            m->fn->nodes[map[i]].mask_arg = nd->mask_arg;
            m->fn->nodes[map[i]].training_kw = nd->training_kw;
        }
    }
    for (int k = 0; st == SN_OK && k < n_out; k++) out[k] = map[sf->outputs[k]];
    if (st == SN_OK && r->n_calls == 0 && !r->map0) {
        r->map0 = map; /* kept: the config writer's shapes of the nested model's tensors */
        map = NULL;
    }
    free(map);
    free(args);
    if (st == SN_OK) { /* the call, for the summary */
        int *ci = sn_realloc(r->call_in, sizeof *ci * (size_t)((r->n_calls + 1) * (n ? n : 1)));
        if (ci) r->call_in = ci;
        int *co = sn_realloc(r->call_out, sizeof *co * (size_t)((r->n_calls + 1) * n_out));
        if (co) r->call_out = co;
        unsigned char *tk = sn_realloc(r->call_training, (size_t)r->n_calls + 1);
        if (tk) r->call_training = tk;
        if (!ci || !co || !tk) return SN_ERR_NOMEM;
        tk[r->n_calls] = SN_TRAINING_KW_ABSENT; /* the config reader sets a written one */
        r->n_in = n;
        r->n_out = n_out;
        memcpy(r->call_in + r->n_calls * n, in, sizeof *in * (size_t)n);
        memcpy(r->call_out + r->n_calls * n_out, out, sizeof *out * (size_t)n_out);
        r->n_calls++;
    }
    return st;
}

sn_status sn_model_call(sn_model *m, sn_model *inner, const sn_ftensor *in, int n,
                        sn_ftensor *out, int n_out) {
    if (!m || !m->fn || m->built || (n > 0 && !in) || (n_out > 0 && !out) || n < 0 || n > 64 ||
        n_out < 0 || n_out > 64) {
        bool known = false;
        for (int s = 0; m && m->fn && s < m->fn->n_subs; s++) known |= m->fn->subs[s].model == inner;
        if (!known) sn_model_free(inner);
        return sn_errorf(SN_ERR_INVALID, "sn_model_call: %s", !m ? "model is NULL"
                         : !m->fn ? "the outer model is Sequential (sn_functional_new)"
                         : m->built ? "the outer model is already built"
                         : "in/out NULL or more than 64 tensors");
    }
    int ids[64], outs[64];
    for (int k = 0; k < n; k++) ids[k] = in[k].id;
    SN_TRY(sn_functional_call_model(m, inner, ids, n, outs, n_out));
    for (int k = 0; k < n_out; k++) out[k].id = outs[k];
    return SN_OK;
}
