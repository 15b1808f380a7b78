/* A Functional model config (Keras 3's get_config of keras.Model(inputs, outputs)) -> an
 * unbuilt Functional sn_model (model_config.h). Keras lists every layer once with the
 * arguments of each of its calls ("inbound_nodes": args holding __keras_tensor__ objects whose
 * keras_history is [layer, call, tensor]); a call may name a layer listed later (a shared
 * layer's second call), so the calls are made as their arguments become available, as
 * Keras's from_config does; the model's layer order is then Keras's (functional_graph.c).
 * A call whose arguments never become available names a cycle or an unknown layer. */
#include <string.h>

#include "nn/keras/model_config.h"
#include "nn/layers/layers_attention.h"

typedef struct entry {
    const json_t *e;
    const char *name, *cls;
    sn_layer *layer; /* NULL for an InputLayer */
    sn_model *sub;   /* a nested Functional model (functional_nested.c), else NULL */
    int n_out;       /* tensors per call: 1, or a nested model's outputs */
    bool owned;      /* called at least once: the model owns the layer */
    int n_calls, done;
    int *node_of_call; /* node id of each call made so far: [call * n_out + tensor] */
    int input_node;    /* InputLayer: its node */
} entry;

static entry *find(entry *es, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(es[i].name, name)) return &es[i];
    return NULL;
}

/* The __keras_tensor__ objects of one call's args: [t] or [[t1, t2, ...]] or [t1, t2]. A
 * MultiHeadAttention's key and attention_mask, given as keyword tensors, come after them
 * (query, value, key, mask: sn_layer_mha_set_call's order); *key and *mask say which came. */
static sn_status call_tensors(const entry *en, int call, const json_t *node, const json_t **ts,
                              int cap, int *n, bool *key, bool *mask,
                              const json_t **mask_t, sn_training_kw *training) {
    char b[128];
    *mask_t = NULL;
    *training = SN_TRAINING_KW_ABSENT;
    const json_t *args = json_object_get(node, "args"), *kwargs = json_object_get(node, "kwargs");
    if (kwargs && !json_is_object(kwargs))
        return sn_errorf(SN_ERR_FORMAT, "layer '%s' call %d: kwargs is %s, expected an object",
                         en->name, call, sn_cfg_type(kwargs));
    const char *kw;
    const json_t *v, *kw_key = NULL, *kw_mask = NULL;
    bool mha = sn_cfg_mha_causal(en->layer) >= 0;
    *key = *mask = false;
    char order[4] = "";
    size_t no = 0;
    json_object_foreach((json_t *)kwargs, kw, v) {
        if (mha && json_is_object(v) && (!strcmp(kw, "key") || !strcmp(kw, "attention_mask"))) {
            *(strcmp(kw, "key") ? &kw_mask : &kw_key) = v;
            if (no < 3) order[no++] = strcmp(kw, "key") ? 'm' : 'k';
            continue;
        }
        if (mha && !strcmp(kw, "use_causal_mask") && json_is_true(v) && no < 3)
            order[no++] = 'c';
        /* mask: Keras passes the previous layer's mask (null: none), which sinter's layers
         * do not carry. training: Keras 3's fit, evaluate and predict override it with their
         * own mode (sn_training_kw), true or false; kept for the writer. */
        bool ok = !strcmp(kw, "mask") && json_is_null(v);
        if (!strcmp(kw, "training") && (json_is_null(v) || json_is_boolean(v))) {
            *training = json_is_null(v)   ? SN_TRAINING_KW_NULL
                        : json_is_true(v) ? SN_TRAINING_KW_TRUE
                                          : SN_TRAINING_KW_FALSE;
            continue;
        }
        /* mask=<tensor>: Keras 3's NotEqual(ids, 0) of an Embedding(mask_zero=True), checked
         * to be one where the call is made */
        const char *mc = json_string_value(json_object_get(v, "class_name"));
        if (!strcmp(kw, "mask") && mc && !strcmp(mc, "__keras_tensor__") &&
            json_is_object(json_object_get(v, "config"))) {
            *mask_t = json_object_get(v, "config");
            continue;
        }
        if (!ok && sn_cfg_mha_causal(en->layer) >= 0) {
            SN_TRY(sn_cfg_mha_kwarg(en->layer, call, kw, v));
            continue;
        }
        if (!ok)
            return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' is called with keyword argument "
                             "%s=%s; sinter supports mask=null and training=null/true/false",
                             en->name, kw, sn_cfg_show(v, b, sizeof b));
    }
    /* Keras writes the call's keywords in the order they were given: kept for the writer */
    if (mha && call == 0) sn_layer_mha_set_kw_order(en->layer, order);
    if (!json_is_array(args) || json_array_size(args) == 0)
        return sn_errorf(SN_ERR_FORMAT, "layer '%s' call %d: args is %s, expected a list of "
                         "tensors", en->name, call, sn_cfg_show(args, b, sizeof b));
    const json_t *list = args;
    if (json_array_size(args) == 1 && json_is_array(json_array_get(args, 0)))
        list = json_array_get(args, 0);
    *n = 0;
    size_t i;
    json_array_foreach(list, i, v) {
        /* NotEqual(ids, 0): its second argument is the integer 0 */
        if (sn_layer_is_not_equal(en->layer) && i == 1 && json_is_integer(v) &&
            json_integer_value(v) == 0 && json_array_size(list) == 2)
            continue;
        const json_t *c = json_object_get(v, "config");
        const char *tc = json_string_value(json_object_get(v, "class_name"));
        if (!tc || strcmp(tc, "__keras_tensor__") || !json_is_object(c))
            return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' call %d: argument %zu is %s; sinter "
                             "supports calls on tensors only", en->name, call, i,
                             sn_cfg_show(v, b, sizeof b));
        if (*n == cap)
            return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' call %d takes over %d tensors",
                             en->name, call, cap);
        ts[(*n)++] = c;
    }
    if (mha && *n > 3)
        return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' (MultiHeadAttention) call %d has %d "
                         "positional tensors; sinter reads query, value and key", en->name,
                         call, *n);
    *key = mha && *n == 3;
    const json_t *extra[2] = {kw_key, kw_mask};
    for (int e = 0; e < 2; e++) {
        if (!extra[e]) continue;
        const json_t *c = json_object_get(extra[e], "config");
        const char *tc = json_string_value(json_object_get(extra[e], "class_name"));
        if (!tc || strcmp(tc, "__keras_tensor__") || !json_is_object(c))
            return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' call %d: %s is %s; sinter supports "
                             "a tensor", en->name, call, e ? "attention_mask" : "key",
                             sn_cfg_show(extra[e], b, sizeof b));
        if (e == 0 && *key)
            return sn_errorf(SN_ERR_FORMAT, "layer '%s' call %d: key is given twice", en->name,
                             call);
        if (*n == cap)
            return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' call %d takes over %d tensors",
                             en->name, call, cap);
        ts[(*n)++] = c;
        *(e ? mask : key) = true;
    }
    return SN_OK;
}

static bool is_call(const entry *e) { return e->layer || e->sub; }

/* The node of tensor t of call c of e (an InputLayer: its node). */
static int node_of(const entry *e, int c, int t) {
    return is_call(e) ? e->node_of_call[c * e->n_out + t] : e->input_node;
}

/* A tensor's keras_history [layer, call, tensor] -> the producing entry, call and tensor. */
static sn_status history(entry *es, size_t n, const entry *user, const json_t *tc, entry **from,
                         int *call, int *tensor) {
    char b[128];
    const json_t *h = json_object_get(tc, "keras_history");
    if (!json_is_array(h) || json_array_size(h) != 3 || !json_is_string(json_array_get(h, 0)) ||
        !json_is_integer(json_array_get(h, 1)) || !json_is_integer(json_array_get(h, 2)))
        return sn_errorf(SN_ERR_FORMAT, "layer '%s': an argument's keras_history is %s, expected "
                         "[layer, call, tensor]", user->name, sn_cfg_show(h, b, sizeof b));
    const char *ln = json_string_value(json_array_get(h, 0));
    *from = find(es, n, ln);
    if (!*from)
        return sn_errorf(SN_ERR_FORMAT, "layer '%s' is called on the output of layer '%s', which "
                         "the model does not have", user->name, ln);
    long long t = json_integer_value(json_array_get(h, 2));
    if (t < 0 || t >= (*from)->n_out)
        return sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' takes output %lld of layer '%s', which "
                         "has %d", user->name, t, ln, (*from)->n_out);
    *tensor = (int)t;
    *call = (int)json_integer_value(json_array_get(h, 1));
    if (*call < 0 || *call >= (is_call(*from) ? (*from)->n_calls : 1))
        return sn_errorf(SN_ERR_FORMAT, "layer '%s' takes call %d of layer '%s', which has %d",
                         user->name, *call, ln, is_call(*from) ? (*from)->n_calls : 1);
    return SN_OK;
}

/* ["name", call, 0] or a list of them -> node ids. */
static sn_status endpoints(const json_t *cfg, const char *key, entry *es, size_t n, int **out,
                           int *count) {
    char b[128];
    const json_t *v = json_object_get(cfg, key);
    json_t *one = NULL;
    if (json_is_array(v) && json_array_size(v) == 3 && json_is_string(json_array_get(v, 0)))
        v = one = json_pack("[O]", v);
    if (!json_is_array(v) || json_array_size(v) == 0) {
        json_decref(one);
        return sn_errorf(SN_ERR_FORMAT, "field '%s' is %s, expected [[\"layer\", 0, 0], ...]", key,
                         sn_cfg_show(v, b, sizeof b));
    }
    *count = (int)json_array_size(v);
    *out = sn_calloc((size_t)*count, sizeof **out);
    sn_status st = *out ? SN_OK : SN_ERR_NOMEM;
    for (int k = 0; st == SN_OK && k < *count; k++) {
        const json_t *t = json_array_get(v, (size_t)k);
        const char *ln = json_string_value(json_array_get(t, 0));
        entry *e = ln ? find(es, n, ln) : NULL;
        int call = (int)json_integer_value(json_array_get(t, 1));
        int ti = (int)json_integer_value(json_array_get(t, 2));
        if (!e)
            st = sn_errorf(SN_ERR_FORMAT, "field '%s' names %s, which is no layer of the model",
                           key, sn_cfg_show(t, b, sizeof b));
        else if (call < 0 || call >= (is_call(e) ? e->done : 1) || ti < 0 || ti >= e->n_out)
            st = sn_errorf(SN_ERR_FORMAT, "field '%s' names call %d, output %d of layer '%s', "
                           "which has %d calls of %d outputs", key, call, ti, ln,
                           is_call(e) ? e->done : 1, e->n_out);
        else
            (*out)[k] = node_of(e, call, ti);
    }
    json_decref(one);
    return st;
}

/* A Sequential config nested in a Functional one ({name, trainable, dtype, layers,
 * build_input_shape}; layers an InputLayer, then the chain) -> an unbuilt Functional model of
 * one input and one output, marked sequential so that it is written back as Keras's. */
static sn_status read_nested_sequential(const json_t *lc, const char *dflt, sn_cfg_state *cs,
                                        sn_model **out, int64_t *batch) {
    static const char *const keys[] = {"name", "trainable", "dtype", "layers",
                                       "build_input_shape", NULL};
    SN_TRY(sn_cfg_known_keys(lc, "Sequential", keys));
    const char *name = dflt;
    bool trainable = true;
    SN_TRY(sn_cfg_str(lc, "name", false, &name));
    SN_TRY(sn_cfg_bool(lc, "trainable", false, &trainable));
    SN_TRY(sn_cfg_policy(lc, cs));
    const json_t *layers = json_object_get(lc, "layers");
    if (!json_is_array(layers) || json_array_size(layers) == 0)
        return sn_errorf(SN_ERR_FORMAT, "the nested Sequential's field 'layers' is %s, expected "
                         "a list of layers", sn_cfg_type(layers));
    sn_model *m = sn_functional_new(name);
    if (!m) return SN_ERR_NOMEM;
    m->fn->sequential = true;
    sn_status st = SN_OK;
    sn_ftensor x = {-1};
    size_t i = 0;
    const json_t *e;
    json_array_foreach(layers, i, e) {
        const char *cls = NULL, *lname = NULL;
        const json_t *c = NULL;
        char what[64];
        snprintf(what, sizeof what, "layer %zu", i);
        static const char *const seq_keys[] = {"module", "class_name", "config",
                                               "registered_name", "build_config", NULL};
        st = sn_cfg_object(e, what, "layers", &cls, &c);
        if (st == SN_OK) st = sn_cfg_known_keys(e, "a layer entry", seq_keys);
        if (st == SN_OK && c) sn_cfg_str(c, "name", false, &lname);
        if (st == SN_OK && !strcmp(cls, "InputLayer")) {
            sn_functional_input_opts io = sn_functional_input_defaults(NULL);
            io.name = lname;
            int64_t b = 0;
            if (x.id >= 0)
                st = sn_errorf(SN_ERR_UNSUPPORTED, "an InputLayer after other layers; a "
                               "Sequential has one input, first");
            if (st == SN_OK) st = sn_cfg_read_input(c, &io.shape, &io.int_ids, &b);
            if (b > 0) *batch = b;
            if (st == SN_OK) st = sn_functional_input(m, &io, &x);
        } else if (st == SN_OK) {
            if (x.id < 0) { /* no InputLayer: the shape Keras built it for */
                sn_functional_input_opts io = sn_functional_input_defaults(NULL);
                st = sn_cfg_batch_shape(json_object_get(lc, "build_input_shape"),
                                        "build_input_shape", &io.shape);
                if (st == SN_OK) st = sn_functional_input(m, &io, &x);
            }
            sn_layer *l = NULL;
            if (st == SN_OK) st = sn_cfg_read_layer(cls, c, cs, &l);
            sn_ftensor y = {-1};
            if (st == SN_OK) st = sn_layer_call(m, l, &x, 1, &y);
            x = y;
        }
        if (st != SN_OK) {
            st = sn_error_context(st, "nested Sequential '%s', layer %zu '%s' (%s)", name, i,
                                  lname ? lname : "?", cls ? cls : "?");
            break;
        }
    }
    if (st == SN_OK && m->n_layers == 0)
        st = sn_errorf(SN_ERR_FORMAT, "the nested Sequential '%s' has no layers besides its "
                       "input", name);
    if (st == SN_OK) st = sn_functional_set_outputs(m, &x, 1);
    if (st == SN_OK && !trainable) st = sn_model_set_trainable(m, false);
    if (st != SN_OK) {
        sn_model_free(m);
        return st;
    }
    *out = m;
    return SN_OK;
}

sn_status sn_cfg_read_functional(const json_t *cfg, const char *name, sn_cfg_state *cs,
                                 sn_model **out, int64_t *batch) {
    const json_t *layers = json_object_get(cfg, "layers");
    if (!json_is_array(layers))
        return sn_errorf(SN_ERR_FORMAT, "the model's field 'layers' is %s, expected a list",
                         sn_cfg_type(layers));
    size_t n = json_array_size(layers);
    entry *es = sn_calloc(n ? n : 1, sizeof *es);
    sn_model *m = sn_functional_new(name);
    sn_status st = es && m ? SN_OK : SN_ERR_NOMEM;
    int *outs = NULL, n_outs = 0, *ins = NULL, n_ins = 0;
    /* Pass 1: every entry's layer (or input). */
    for (size_t i = 0; st == SN_OK && i < n; i++) {
        entry *en = &es[i];
        en->e = json_array_get(layers, i);
        const json_t *lc = NULL;
        char what[64];
        snprintf(what, sizeof what, "layer %zu", i);
        st = sn_cfg_object(en->e, what, "", &en->cls, &lc);
        /* compile_config: a nested model's own ({} unless it was compiled; the outer
         * model's compile settings are what training uses, as in Keras) */
        static const char *const fn_keys[] = {"module", "class_name", "config", "registered_name",
                                              "build_config", "name", "inbound_nodes",
                                              "compile_config", NULL};
        if (st == SN_OK) st = sn_cfg_known_keys(en->e, "a layer entry", fn_keys);
        en->name = json_string_value(json_object_get(en->e, "name"));
        if (st == SN_OK && !en->name)
            st = sn_errorf(SN_ERR_FORMAT, "layer %zu (%s) has no 'name'", i, en->cls);
        if (st == SN_OK && find(es, i, en->name))
            st = sn_errorf(SN_ERR_FORMAT, "two layers are named '%s'", en->name);
        const json_t *nodes = json_object_get(en->e, "inbound_nodes");
        if (st == SN_OK && !json_is_array(nodes))
            st = sn_errorf(SN_ERR_FORMAT, "layer '%s': field 'inbound_nodes' is %s, expected a "
                           "list", en->name, sn_cfg_type(nodes));
        if (st != SN_OK) break;
        en->n_calls = (int)json_array_size(nodes);
        en->n_out = 1;
        if (!strcmp(en->cls, "InputLayer")) {
            sn_functional_input_opts io = sn_functional_input_defaults(NULL);
            io.name = en->name;
            int64_t b = 0;
            st = sn_cfg_read_input(lc, &io.shape, &io.int_ids, &b);
            if (b > 0) *batch = b;
            sn_ftensor t = {-1};
            if (st == SN_OK) st = sn_functional_input(m, &io, &t);
            en->input_node = t.id;
        } else if (!strcmp(en->cls, "Functional") || !strcmp(en->cls, "Model")) {
            /* A nested model: read as a model of its own, inlined at each call. */
            const char *sub_name = en->name;
            if (!json_is_object(lc))
                st = sn_errorf(SN_ERR_FORMAT, "the nested model has no config");
            if (st == SN_OK) st = sn_cfg_str(lc, "name", false, &sub_name);
            if (st == SN_OK) st = sn_cfg_read_functional(lc, sub_name, cs, &en->sub, batch);
            bool trainable = true; /* false: Keras's base_model.trainable = False */
            if (st == SN_OK) st = sn_cfg_bool(lc, "trainable", false, &trainable);
            if (st == SN_OK && !trainable) st = sn_model_set_trainable(en->sub, false);
            if (st == SN_OK && en->sub->fn->n_subs > 0)
                st = sn_errorf(SN_ERR_UNSUPPORTED, "the nested model nests a model itself; sinter "
                               "reads models nested one level deep");
            if (st == SN_OK) en->n_out = en->sub->fn->n_outputs;
            if (st == SN_OK && en->n_calls == 0)
                st = sn_errorf(SN_ERR_FORMAT, "the model is never called (no inbound_nodes)");
            if (st == SN_OK && !(en->node_of_call = sn_calloc((size_t)(en->n_calls * en->n_out),
                                                              sizeof(int))))
                st = SN_ERR_NOMEM;
        } else if (!strcmp(en->cls, "NotEqual")) {
            /* Keras 3's op layer for an Embedding(mask_zero=True)'s mask (module
             * keras.src.ops.numpy): read as that mask, NotEqual(ids, 0) */
            static const char *const ne_keys[] = {"name", NULL};
            st = json_is_object(lc) ? sn_cfg_known_keys(lc, "NotEqual", ne_keys)
                                    : sn_errorf(SN_ERR_FORMAT, "NotEqual has no config");
            if (st == SN_OK && !(en->layer = sn_layer_not_equal_zero())) st = SN_ERR_NOMEM;
            if (st == SN_OK) st = sn_layer_set_name(en->layer, en->name);
            if (st == SN_OK && en->n_calls == 0)
                st = sn_errorf(SN_ERR_FORMAT, "the layer is never called (no inbound_nodes)");
            if (st == SN_OK && !(en->node_of_call = sn_calloc((size_t)en->n_calls, sizeof(int))))
                st = SN_ERR_NOMEM;
        } else if (!strcmp(en->cls, "Sequential")) {
            /* A nested Sequential: read as a Functional chain of one input, inlined as a
             * nested Functional model is. */
            if (!json_is_object(lc))
                st = sn_errorf(SN_ERR_FORMAT, "the nested model has no config");
            if (st == SN_OK) st = read_nested_sequential(lc, en->name, cs, &en->sub, batch);
            if (st == SN_OK && en->n_calls == 0)
                st = sn_errorf(SN_ERR_FORMAT, "the model is never called (no inbound_nodes)");
            if (st == SN_OK && !(en->node_of_call = sn_calloc((size_t)en->n_calls, sizeof(int))))
                st = SN_ERR_NOMEM;
        } else {
            st = sn_cfg_read_layer(en->cls, lc, cs, &en->layer);
            if (st == SN_OK && en->n_calls == 0)
                st = sn_errorf(SN_ERR_FORMAT, "the layer is never called (no inbound_nodes)");
            if (st == SN_OK && !(en->node_of_call = sn_calloc((size_t)en->n_calls, sizeof(int))))
                st = SN_ERR_NOMEM;
        }
        if (st != SN_OK) st = sn_error_context(st, "layer %zu '%s' (%s)", i, en->name ? en->name
                                               : "?", en->cls ? en->cls : "?");
    }
    /* Pass 2: the calls, each once its arguments exist, until none is left or none can go. */
    for (bool progress = true; st == SN_OK && progress;) {
        progress = false;
        for (size_t i = 0; st == SN_OK && i < n; i++) {
            entry *en = &es[i];
            if (!is_call(en) || en->done == en->n_calls) continue;
            const json_t *node = json_array_get(json_object_get(en->e, "inbound_nodes"),
                                                (size_t)en->done);
            const json_t *ts[64];
            sn_ftensor args[64];
            int nt = 0;
            bool ready = true, key = false, mask = false;
            const json_t *mask_t = NULL;
            sn_training_kw training;
            st = call_tensors(en, en->done, node, ts, 64, &nt, &key, &mask, &mask_t, &training);
            if (st == SN_OK && mask_t) { /* the mask keyword argument: resolved as a tensor */
                if (en->sub || sn_layer_vt_n(en->layer) || nt != 1)
                    st = sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' (%s) is called with a mask "
                                   "tensor; sinter takes masks into one-input layers only",
                                   en->name, en->cls);
                else
                    ts[nt++] = mask_t;
            }
            for (int k = 0; st == SN_OK && ready && k < nt; k++) {
                entry *from = NULL;
                int call = 0, tensor = 0;
                st = history(es, n, en, ts[k], &from, &call, &tensor);
                if (st != SN_OK) break;
                if (is_call(from) && call >= from->done) ready = false;
                else args[k].id = node_of(from, call, tensor);
            }
            if (st != SN_OK || !ready) continue;
            if (en->sub) {
                int ids[64];
                for (int k = 0; k < nt; k++) ids[k] = args[k].id;
                st = sn_functional_call_model(m, en->sub, ids, nt,
                                              en->node_of_call + en->done * en->n_out, en->n_out);
                en->owned = true;
                if (st != SN_OK) st = sn_error_context(st, "nested model '%s'", en->name);
                else {
                    for (int r = 0; r < m->fn->n_subs; r++) /* the call just recorded */
                        if (m->fn->subs[r].model == en->sub)
                            m->fn->subs[r].call_training[m->fn->subs[r].n_calls - 1] =
                                (unsigned char)training;
                    en->done++;
                    progress = true;
                }
                continue;
            }
            /* MultiHeadAttention is called (query, value[, key][, attention_mask]): the
             * same tensor throughout and no mask is self-attention, mha(x); anything else
             * the general call. */
            if (sn_cfg_mha_causal(en->layer) >= 0 && nt > 1) {
                bool self = !mask;
                for (int k = 1; k < nt; k++) self = self && args[k].id == args[0].id;
                if (self) nt = 1;
                else st = sn_layer_mha_set_call(en->layer, key && args[2].id != args[1].id, mask);
                if (st == SN_OK && !self && key && args[2].id == args[1].id) {
                    /* mha(q, v, v): key is value, as Keras's default */
                    if (mask) args[2] = args[3];
                    nt--;
                }
                if (st != SN_OK) break;
            }
            int mask_node = -1;
            if (mask_t) { /* the mask must be a NotEqual's output */
                mask_node = args[--nt].id;
                const sn_layer *ml = m->fn->nodes[mask_node].layer;
                if (!sn_layer_is_not_equal(ml))
                    st = sn_errorf(SN_ERR_UNSUPPORTED, "layer '%s' (%s) is called with mask= the "
                                   "output of '%s' (%s); sinter takes the mask of an "
                                   "Embedding(mask_zero=True), Keras's NotEqual(ids, 0)",
                                   en->name, en->cls, ml ? ml->name : "an input",
                                   ml ? ml->vt->class_name : "InputLayer");
                if (st != SN_OK) break;
            }
            sn_ftensor o;
            st = sn_layer_call(m, en->layer, args, nt, &o);
            en->owned = true;
            if (st == SN_OK && mask_node >= 0) { /* the mask as the node's last input */
                sn_fnode *nd = &m->fn->nodes[o.id];
                int *in = sn_realloc(nd->in, sizeof *in * (size_t)(nd->n_in + 1));
                if (!in) st = SN_ERR_NOMEM;
                else {
                    nd->in = in;
                    nd->in[nd->n_in++] = mask_node;
                    nd->mask_arg = true;
                }
            }
            if (st == SN_OK) {
                m->fn->nodes[o.id].training_kw = (unsigned char)training;
                en->node_of_call[en->done++] = o.id;
                progress = true;
            }
        }
    }
    for (size_t i = 0; st == SN_OK && i < n; i++)
        if (is_call(&es[i]) && es[i].done < es[i].n_calls)
            st = sn_errorf(SN_ERR_FORMAT, "layer '%s' (%s): its call %d waits on a layer that "
                           "never produces its argument (the graph has a cycle)", es[i].name,
                           es[i].cls, es[i].done);
    if (st == SN_OK) st = endpoints(cfg, "input_layers", es, n, &ins, &n_ins);
    if (st == SN_OK) st = endpoints(cfg, "output_layers", es, n, &outs, &n_outs);
    /* The model's inputs in input_layers' order (not the config's). */
    for (int k = 0; st == SN_OK && k < n_ins; k++) {
        if (m->fn->nodes[ins[k]].layer)
            st = sn_errorf(SN_ERR_UNSUPPORTED, "field 'input_layers' names layer '%s', which is "
                           "no InputLayer", m->fn->nodes[ins[k]].layer->name);
    }
    if (st == SN_OK && n_ins != m->fn->n_inputs)
        st = sn_errorf(SN_ERR_UNSUPPORTED, "the model has %d InputLayers but %d in "
                       "'input_layers'", m->fn->n_inputs, n_ins);
    if (st == SN_OK) memcpy(m->fn->inputs, ins, (size_t)n_ins * sizeof *ins);
    if (st == SN_OK) {
        sn_ftensor *o = sn_calloc((size_t)n_outs, sizeof *o);
        if (!o) st = SN_ERR_NOMEM;
        for (int k = 0; o && k < n_outs; k++) o[k].id = outs[k];
        if (st == SN_OK) st = sn_functional_set_outputs(m, o, n_outs);
        free(o);
    }
    /* The model's layer order is Keras's (sn_functional_build: map_graph's), which is the
     * config's when Keras wrote it. */
    for (size_t i = 0; es && i < n; i++) {
        if (es[i].layer && !es[i].owned) sn_layer_destroy(es[i].layer);
        if (es[i].sub && !es[i].owned) sn_model_free(es[i].sub);
        free(es[i].node_of_call);
    }
    free(es);
    free(ins);
    free(outs);
    if (st != SN_OK) {
        sn_model_free(m);
        return st;
    }
    *out = m;
    return SN_OK;
}
