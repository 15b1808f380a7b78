/* Built Sequential model -> the config Keras 3 writes (model_config.h): module, class_name,
 * config (with an InputLayer first and every layer's full config), registered_name,
 * build_config, and compile_config when the model is compiled, so that
 * keras.models.load_model rebuilds and recompiles the same model. */
#include <string.h>

#include "nn/keras/model_config.h"
#include "nn/layers/layers_attention.h"
#include "nn/train/train_impl.h"

/* [batch, d1, ...]: batch null, or the fixed batch a stateful RNN needs (> 0). */
static json_t *shape_json(const sn_shape *s, int64_t batch) {
    json_t *a = json_array();
    json_array_append_new(a, batch > 0 ? json_integer(batch) : json_null());
    for (int i = 0; i < s->ndim; i++) json_array_append_new(a, json_integer(s->dim[i]));
    return a;
}

static json_t *optimizer_json(const sn_optimizer_opts *o) {
    static const char *cls[] = {"SGD", "Adam", "AdamW", "RMSprop"};
    static const char *name[] = {"sgd", "adam", "adamw", "rmsprop"};
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(name[o->type]));
    json_object_set_new(c, "learning_rate", json_real(o->learning_rate));
    json_object_set_new(c, "weight_decay",
                        o->type == SN_ADAMW ? json_real(o->weight_decay) : json_null());
    json_object_set_new(c, "clipnorm", json_null());
    json_object_set_new(c, "global_clipnorm", json_null());
    json_object_set_new(c, "clipvalue", json_null());
    json_object_set_new(c, "use_ema", json_false());
    json_object_set_new(c, "ema_momentum", json_real(0.99));
    json_object_set_new(c, "ema_overwrite_frequency", json_null());
    json_object_set_new(c, "loss_scale_factor", json_null());
    json_object_set_new(c, "gradient_accumulation_steps", json_null());
    switch (o->type) {
    case SN_SGD:
        json_object_set_new(c, "momentum", json_real(o->momentum));
        json_object_set_new(c, "nesterov", json_boolean(o->nesterov));
        break;
    case SN_ADAM: case SN_ADAMW:
        json_object_set_new(c, "beta_1", json_real(o->beta_1));
        json_object_set_new(c, "beta_2", json_real(o->beta_2));
        json_object_set_new(c, "epsilon", json_real(o->epsilon));
        json_object_set_new(c, "amsgrad", json_false());
        break;
    case SN_RMSPROP:
        json_object_set_new(c, "rho", json_real(o->rho));
        json_object_set_new(c, "momentum", json_real(o->momentum));
        json_object_set_new(c, "epsilon", json_real(o->epsilon));
        json_object_set_new(c, "centered", json_false());
        break;
    }
    return sn_cfg_keras_object("keras.optimizers", cls[o->type], c);
}

static json_t *loss_json(sn_loss_type t, bool from_logits, double delta) {
    static const char *cls[] = {"SparseCategoricalCrossentropy", "CategoricalCrossentropy",
                                "BinaryCrossentropy", "MeanSquaredError", "MeanAbsoluteError",
                                "Huber"};
    /* Keras 3's default names (Huber's is "huber_loss"; its get_config has no delta) */
    static const char *name[] = {"sparse_categorical_crossentropy", "categorical_crossentropy",
                                 "binary_crossentropy", "mean_squared_error",
                                 "mean_absolute_error", "huber_loss"};
    bool regression = t >= SN_LOSS_MEAN_SQUARED_ERROR;
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(name[t]));
    json_object_set_new(c, "reduction", json_string("sum_over_batch_size"));
    if (!regression) json_object_set_new(c, "from_logits", json_boolean(from_logits));
    if (t == SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY) {
        json_object_set_new(c, "ignore_class", json_null());
    } else if (!regression) {
        json_object_set_new(c, "label_smoothing", json_real(0.0));
        json_object_set_new(c, "axis", json_integer(-1));
    }
    /* Keras 3's Huber.get_config leaves delta out (a saved Huber reloads with 1.0); its
     * constructor takes it, so sinter writes it when it is not the default. */
    if (t == SN_LOSS_HUBER && delta != 1.0) json_object_set_new(c, "delta", json_real(delta));
    return sn_cfg_keras_object("keras.losses", cls[t], c);
}

static json_t *metrics_json(int n, const sn_metric_type *m, double threshold) {
    json_t *ms = json_array();
    for (int i = 0; i < n; i++) {
        if (m[i] == SN_METRIC_BINARY_ACCURACY && threshold != 0.5) {
            json_t *c = json_object();
            json_object_set_new(c, "name", json_string("binary_accuracy"));
            json_object_set_new(c, "dtype", json_string("float32"));
            json_object_set_new(c, "threshold", json_real(threshold));
            json_array_append_new(ms, sn_cfg_keras_object("keras.metrics", "BinaryAccuracy", c));
            continue;
        }
        json_array_append_new(ms, json_string(m[i] == SN_METRIC_ACCURACY ? "accuracy"
                                              : m[i] == SN_METRIC_BINARY_ACCURACY
                                                  ? "binary_accuracy"
                                              : m[i] == SN_METRIC_CATEGORICAL_ACCURACY
                                                  ? "categorical_accuracy"
                                                  : "sparse_categorical_accuracy"));
    }
    return ms;
}

static json_t *compile_json(const sn_compile_opts *o) {
    json_t *c = json_object();
    json_object_set_new(c, "optimizer", optimizer_json(&o->optimizer));
    if (o->n_outputs == 0) {
        json_object_set_new(c, "loss", loss_json(o->loss, o->from_logits, o->huber_delta));
        json_object_set_new(c, "loss_weights", json_null());
        json_object_set_new(c, "metrics",
                            metrics_json(o->n_metrics, o->metrics, o->accuracy_threshold));
    } else { /* Keras's lists of one entry per output */
        json_t *ls = json_array(), *ws = json_array(), *ms = json_array();
        for (int k = 0; k < o->n_outputs; k++) {
            const sn_output_loss *ol = &o->outputs[k];
            json_array_append_new(ls, loss_json(ol->loss, ol->from_logits, o->huber_delta));
            json_array_append_new(ws, json_real(ol->loss_weight));
            json_array_append_new(ms, metrics_json(ol->n_metrics, ol->metrics,
                                                   o->accuracy_threshold));
        }
        json_object_set_new(c, "loss", ls);
        json_object_set_new(c, "loss_weights", ws);
        json_object_set_new(c, "metrics", ms);
    }
    json_object_set_new(c, "weighted_metrics", json_null());
    json_object_set_new(c, "run_eagerly", json_false());
    json_object_set_new(c, "steps_per_execution", json_integer(o->steps_per_execution));
    json_object_set_new(c, "jit_compile", json_false());
    return c;
}

/* keras_history [layer, call, tensor] of node: a nested model's output is [model, call, k]. */
static json_t *history_json(const sn_fgraph *f, int node) {
    for (int s = 0; s < f->n_subs; s++) {
        const sn_fsub *r = &f->subs[s];
        for (int c = 0; c < r->n_calls; c++)
            for (int k = 0; k < r->n_out; k++)
                if (r->call_out[c * r->n_out + k] == node)
                    return json_pack("[s, i, i]", r->model->name, c, k);
    }
    const sn_fnode *p = &f->nodes[node];
    return json_pack("[s, i, i]", p->layer ? p->layer->name : p->input_name, p->call_index, 0);
}

/* A tensor argument as Keras records it: its shape (batch null), dtype and keras_history. */
static json_t *tensor_json(const sn_fgraph *f, int node) {
    const sn_fnode *p = &f->nodes[node];
    json_t *h = history_json(f, node);
    json_t *c = json_pack("{s:o, s:s, s:o}", "shape", shape_json(&p->shape, 0), "dtype",
                          p->int_ids ? "int32" : "float32", "keras_history", h);
    return json_pack("{s:s, s:o}", "class_name", "__keras_tensor__", "config", c);
}

/* [["name", call, 0], ...]; one endpoint alone as ["name", call, 0], as Keras writes it (a
 * list would make Keras's model.inputs a list of one). */
static json_t *endpoints_json(const sn_fgraph *f, const int *nodes, int n) {
    if (n == 1) return history_json(f, nodes[0]);
    json_t *a = json_array();
    for (int k = 0; k < n; k++) json_array_append_new(a, history_json(f, nodes[k]));
    return a;
}

static json_t *functional_layers(sn_model *m, bool bf16);

/* A nested Sequential (a chain of one input, sn_fgraph.sequential) as Keras writes it: its
 * InputLayer, then each layer with its build_config; f's nodes carry the first call's shapes. */
static json_t *nested_sequential_json(const sn_fgraph *f, bool bf16, const char *name,
                                      bool frozen) {
    json_t *layers = json_array();
    for (int i = 0; i < f->n_nodes; i++) {
        const sn_fnode *nd = &f->nodes[i];
        json_t *e;
        if (!nd->layer) {
            json_t *c = json_pack("{s:o, s:s, s:b, s:b, s:s, s:b}", "batch_shape",
                                  shape_json(&nd->shape, 0), "dtype",
                                  nd->int_ids ? "int32" : "float32", "sparse", 0, "ragged", 0,
                                  "name", nd->input_name, "optional", 0);
            e = sn_cfg_keras_object("keras.layers", "InputLayer", c);
        } else {
            json_t *c = sn_cfg_write_layer(nd->layer, bf16);
            if (!c) {
                json_decref(layers);
                return NULL;
            }
            e = sn_cfg_keras_object("keras.layers", nd->layer->vt->class_name, c);
            json_object_set_new(e, "build_config", json_pack("{s:o}", "input_shape",
                                shape_json(&f->nodes[nd->in[0]].shape, 0)));
        }
        json_array_append_new(layers, e);
    }
    json_t *cfg = json_object();
    json_object_set_new(cfg, "name", json_string(name));
    json_object_set_new(cfg, "trainable", json_boolean(!frozen));
    json_object_set_new(cfg, "dtype", sn_cfg_dtype_policy(bf16));
    json_object_set_new(cfg, "layers", layers);
    json_object_set_new(cfg, "build_input_shape", shape_json(&f->nodes[f->inputs[0]].shape, 0));
    return sn_cfg_keras_object("keras", "Sequential", cfg);
}

/* The call's training= keyword (sn_training_kw) into kwargs, as the file it was read from had
 * it; nothing where the call gave none. */
static void training_kw_json(json_t *kw, unsigned char t) {
    if (t != SN_TRAINING_KW_ABSENT)
        json_object_set_new(kw, "training", t == SN_TRAINING_KW_NULL ? json_null()
                                            : json_boolean(t == SN_TRAINING_KW_TRUE));
}

/* A nested model's entry: its own Functional config (its graph, with the shapes of its first
 * call) and the arguments of each of its calls. */
static json_t *nested_json(sn_model *m, const sn_fsub *r, bool bf16) {
    const sn_fgraph *sf = r->model->fn;
    sn_fgraph view = *sf;
    view.n_subs = 0;
    view.subs = NULL;
    view.nodes = sn_calloc((size_t)(sf->n_nodes ? sf->n_nodes : 1), sizeof *view.nodes);
    if (!view.nodes || !r->map0) {
        free(view.nodes);
        sn_errorf(SN_ERR_NOMEM, "writing nested model '%s'", r->model->name);
        return NULL;
    }
    for (int i = 0; i < sf->n_nodes; i++) {
        view.nodes[i] = sf->nodes[i];
        if (r->map0[i] >= 0) view.nodes[i].shape = m->fn->nodes[r->map0[i]].shape;
    }
    sn_model inner = {.name = r->model->name, .g = m->g, .layers = r->layers,
                      .n_layers = r->n_layers, .built = true, .dtype = m->dtype, .fn = &view};
    json_t *e = NULL;
    if (sf->sequential) {
        e = nested_sequential_json(&view, bf16, r->model->name, r->model->frozen);
        if (e)
            json_object_set_new(e, "build_config", json_pack("{s:o}", "input_shape",
                                shape_json(&view.nodes[view.inputs[0]].shape, 0)));
        free(view.nodes);
        if (!e) return NULL;
        goto calls;
    }
    json_t *layers = functional_layers(&inner, bf16);
    if (layers) {
        json_t *cfg = json_object();
        json_object_set_new(cfg, "name", json_string(r->model->name));
        json_object_set_new(cfg, "trainable", json_boolean(!r->model->frozen));
        json_object_set_new(cfg, "layers", layers);
        json_object_set_new(cfg, "input_layers", endpoints_json(&view, view.inputs, view.n_inputs));
        json_object_set_new(cfg, "output_layers",
                            endpoints_json(&view, view.outputs, view.n_outputs));
        e = sn_cfg_keras_object("keras.src.models.functional", "Functional", cfg);
    }
    free(view.nodes);
    if (!e) return NULL;
    json_object_set_new(e, "registered_name", json_string("Functional"));
    json_object_set_new(e, "build_config", json_pack("{s:n}", "input_shape"));
calls:
    json_object_set_new(e, "compile_config", json_object());
    json_object_set_new(e, "name", json_string(r->model->name));
    json_t *nodes = json_array();
    for (int c = 0; c < r->n_calls; c++) {
        json_t *ts = json_array(), *args = json_array();
        for (int k = 0; k < r->n_in; k++)
            json_array_append_new(ts, tensor_json(m->fn, r->call_in[c * r->n_in + k]));
        if (r->n_in > 1) {
            json_array_append_new(args, ts);
        } else {
            json_array_extend(args, ts);
            json_decref(ts);
        }
        /* Keras writes a nested model's call as {"training": ..., "mask": null} when the
         * call gave training=, else {"mask": null} */
        json_t *kw = json_object();
        if (r->call_training) training_kw_json(kw, r->call_training[c]);
        json_object_set_new(kw, "mask", json_null());
        json_array_append_new(nodes, json_pack("{s:o, s:o}", "args", args, "kwargs", kw));
    }
    json_object_set_new(e, "inbound_nodes", nodes);
    return e;
}

/* Keras 3's Functional config: every layer once (InputLayers too) in model.layers order, with
 * the arguments of each of its calls (inbound_nodes). */
static json_t *functional_layers(sn_model *m, bool bf16) {
    const sn_fgraph *f = m->fn;
    json_t *layers = json_array();
    for (int r = 0; r < f->n_ops; r++) {
        int op = f->ops[r];
        if (op < 0) {
            const sn_fnode *in = &f->nodes[-1 - op];
            json_t *c = json_pack("{s:o, s:s, s:b, s:b, s:s, s:b}", "batch_shape",
                                  shape_json(&in->shape, 0), "dtype",
                                  in->int_ids ? "int32" : "float32", "sparse", 0, "ragged", 0,
                                  "name", in->input_name, "optional", 0);
            json_t *e = sn_cfg_keras_object("keras.layers", "InputLayer", c);
            json_object_set_new(e, "name", json_string(in->input_name));
            json_object_set_new(e, "inbound_nodes", json_array());
            json_array_append_new(layers, e);
            continue;
        }
        const sn_layer *l = m->layers[op];
        const sn_fsub *sub = NULL;
        for (int s = 0; s < f->n_subs && !sub; s++)
            for (int i = 0; i < f->subs[s].n_layers && !sub; i++)
                if (f->subs[s].layers[i] == l) sub = &f->subs[s];
        if (sub) { /* a nested model: its entry once, where its first layer comes */
            bool first = true;
            for (int q = 0; q < r && first; q++)
                for (int i = 0; f->ops[q] >= 0 && i < sub->n_layers; i++)
                    if (m->layers[f->ops[q]] == sub->layers[i]) first = false;
            if (!first) continue;
            json_t *e = nested_json(m, sub, bf16);
            if (!e) {
                json_decref(layers);
                return NULL;
            }
            json_array_append_new(layers, e);
            continue;
        }
        if (sn_layer_is_not_equal(l)) { /* Keras 3's op layer: NotEqual(ids, 0), no build */
            json_t *e = sn_cfg_keras_object("keras.src.ops.numpy", "NotEqual",
                                            json_pack("{s:s}", "name", l->name));
            json_object_set_new(e, "registered_name", json_string("NotEqual"));
            json_object_set_new(e, "name", json_string(l->name));
            json_t *nodes = json_array();
            for (int i = 0; i < f->n_nodes; i++)
                if (f->nodes[i].layer == l)
                    json_array_append_new(nodes, json_pack("{s:[o, i], s:{}}", "args",
                                          tensor_json(f, f->nodes[i].in[0]), 0, "kwargs"));
            json_object_set_new(e, "inbound_nodes", nodes);
            json_array_append_new(layers, e);
            continue;
        }
        json_t *c = sn_cfg_write_layer(l, bf16);
        if (!c) {
            json_decref(layers);
            return NULL;
        }
        json_t *e = sn_cfg_keras_object("keras.layers", l->vt->class_name, c);
        json_t *nodes = json_array(), *bshape = NULL;
        for (int i = 0; i < f->n_nodes; i++) {
            const sn_fnode *nd = &f->nodes[i];
            if (nd->layer != l) continue;
            json_t *args = json_array(), *ts = json_array();
            int n_args = nd->n_in - nd->mask_arg; /* the mask is a keyword argument */
            for (int k = 0; k < n_args; k++) json_array_append_new(ts, tensor_json(f, nd->in[k]));
            if (!bshape) { /* the first call's input shapes */
                if (sn_layer_vt_n(l)) {
                    bshape = json_array();
                    for (int k = 0; k < nd->n_in; k++)
                        json_array_append_new(bshape, shape_json(&f->nodes[nd->in[k]].shape, 0));
                } else {
                    bshape = shape_json(&f->nodes[nd->in[0]].shape, 0);
                }
            }
            int causal = sn_cfg_mha_causal(l);
            bool mk = false, mm = false;
            json_t *kw = json_object();
            training_kw_json(kw, nd->training_kw); /* Keras: the call's own keywords first */
            if (sn_layer_mha_call_form(l, &mk, &mm)) {
                /* mha(query, value[, key], attention_mask=m): the mask is Keras's keyword, and
                 * so is the key when the config read gave it as key=; keywords in the order
                 * read (Keras writes the call's own) */
                const char *order = sn_layer_mha_kw_order(l);
                bool key_kw = mk && strchr(order, 'k');
                for (const char *o = *order ? order : "mc"; *o; o++) {
                    if (*o == 'm' && mm)
                        json_object_set(kw, "attention_mask", json_array_get(ts, nd->n_in - 1));
                    if (*o == 'k' && key_kw) json_object_set(kw, "key", json_array_get(ts, 2));
                    if (*o == 'c' && causal > 0)
                        json_object_set_new(kw, "use_causal_mask", json_true());
                }
                json_array_extend(args, ts);
                if (mm) json_array_remove(args, (size_t)nd->n_in - 1);
                if (key_kw) json_array_remove(args, 2);
                json_decref(ts);
            } else if (sn_layer_vt_n(l)) {
                json_array_append_new(args, ts);
            } else {
                if (causal >= 0) json_array_extend(args, ts); /* mha(x, x): query, value */
                json_array_extend(args, ts);
                json_decref(ts);
            }
            if (causal > 0 && !json_object_get(kw, "use_causal_mask"))
                json_object_set_new(kw, "use_causal_mask", json_true());
            if (nd->mask_arg) json_object_set_new(kw, "mask", tensor_json(f, nd->in[n_args]));
            json_array_append_new(nodes, json_pack("{s:o, s:o}", "args", args, "kwargs", kw));
        }
        /* Keras builds MultiHeadAttention from its query and value (and key) shapes. */
        bool mk = false, mm = false;
        if (sn_layer_mha_call_form(l, &mk, &mm)) {
            json_t *sd = json_pack("{s:O, s:O}", "query_shape", json_array_get(bshape, 0),
                                   "value_shape", json_array_get(bshape, 1));
            if (mk) json_object_set(sd, "key_shape", json_array_get(bshape, 2));
            json_decref(bshape);
            bshape = json_pack("{s:o}", "shapes_dict", sd);
        } else if (sn_cfg_mha_causal(l) >= 0)
            bshape = json_pack("{s:{s:o, s:O}}", "shapes_dict", "query_shape", bshape,
                               "value_shape", bshape);
        else
            bshape = json_pack("{s:o}", "input_shape", bshape);
        json_object_set_new(e, "build_config", bshape);
        json_object_set_new(e, "name", json_string(l->name));
        json_object_set_new(e, "inbound_nodes", nodes);
        json_array_append_new(layers, e);
    }
    return layers;
}

static json_t *functional_config(sn_model *m, bool compiled, bool bf16) {
    json_t *layers = functional_layers(m, bf16);
    if (!layers) return NULL;
    json_t *cfg = json_object();
    json_object_set_new(cfg, "name", json_string(m->name));
    json_object_set_new(cfg, "trainable", json_boolean(!m->frozen));
    json_object_set_new(cfg, "layers", layers);
    json_object_set_new(cfg, "input_layers", endpoints_json(m->fn, m->fn->inputs, m->fn->n_inputs));
    json_object_set_new(cfg, "output_layers",
                        endpoints_json(m->fn, m->fn->outputs, m->fn->n_outputs));
    json_t *root = sn_cfg_keras_object("keras.src.models.functional", "Functional", cfg);
    if (!root) return NULL;
    json_object_set_new(root, "registered_name", json_string("Functional"));
    json_object_set_new(root, "build_config", json_pack("{s:n}", "input_shape"));
    if (compiled) json_object_set_new(root, "compile_config", compile_json(&m->train->opts));
    return root;
}

json_t *sn_model_to_config(sn_model *m) {
    if (!m || !m->built) {
        sn_errorf(SN_ERR_STATE, "writing a model config: the model %s", m ? "is not built" : "is NULL");
        return NULL;
    }
    const bool compiled = m->train && m->train->compiled;
    const bool bf16 = compiled && m->train->opts.mixed_bfloat16;
    if (m->fn) return functional_config(m, compiled, bf16);
    json_t *layers = json_array();
    /* Integer ids feed an Embedding: Keras's Input then has dtype int32. */
    bool ids = m->n_layers > 0 && !strcmp(m->layers[0]->vt->class_name, "Embedding");
    int64_t batch = 0; /* a stateful layer's: Keras reads it from the shapes */
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->rnn.stateful) batch = m->layers[i]->rnn.batch_size;
    json_t *in = json_pack("{s:o, s:s, s:b, s:b, s:s, s:b}", "batch_shape",
                           shape_json(&m->input_shape, batch), "dtype", ids ? "int32" : "float32",
                           "sparse", 0, "ragged", 0, "name", "input_layer", "optional", 0);
    json_array_append_new(layers, sn_cfg_keras_object("keras.layers", "InputLayer", in));
    for (int i = 0; i < m->n_layers; i++) {
        const sn_layer *l = m->layers[i];
        json_t *c = sn_cfg_write_layer(l, bf16);
        if (!c) {
            json_decref(layers);
            return NULL;
        }
        json_t *e = sn_cfg_keras_object("keras.layers", l->vt->class_name, c);
        json_object_set_new(e, "build_config",
                            json_pack("{s:o}", "input_shape", shape_json(&l->in_shape, batch)));
        json_array_append_new(layers, e);
    }
    json_t *cfg = json_object();
    json_object_set_new(cfg, "name", json_string(m->name));
    json_object_set_new(cfg, "trainable", json_boolean(!m->frozen));
    json_object_set_new(cfg, "dtype", sn_cfg_dtype_policy(bf16));
    json_object_set_new(cfg, "layers", layers);
    json_object_set_new(cfg, "build_input_shape", shape_json(&m->input_shape, batch));
    json_t *root = sn_cfg_keras_object("keras", "Sequential", cfg);
    if (!root) return NULL;
    json_object_set_new(root, "build_config",
                        json_pack("{s:o}", "input_shape", shape_json(&m->input_shape, batch)));
    if (compiled) json_object_set_new(root, "compile_config", compile_json(&m->train->opts));
    return root;
}
