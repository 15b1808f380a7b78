/* Internal to src/nn/: the layer vtable and the model's fields, shared by the model-building
 * half (layers.c, model.c, presets.c, weights glue) and the training half (compile.c, fit.c,
 * optimizer.c, losses.c, callbacks.c). Depends on graph and data. */
#ifndef SN_NN_IMPL_H
#define SN_NN_IMPL_H

#include "graph/graph_impl.h"
#include "sinter/nn.h"

#define SN_LAYER_MAX_VARS 16 /* a Transformer block (layers_attention.c) has 16 */

/* Side-effect nodes a forward pass in training mode adds (BatchNormalization's moving
 * averages); the training plan runs them with the optimizer updates. */
typedef struct sn_updates {
    int n, cap;
    sn_node *nodes;
} sn_updates;

typedef struct sn_layer_vtable {
    const char *class_name; /* Keras class name: "Dense", "Conv2D", ... */
    const char *base_name;  /* automatic names: "dense", "conv2d", ... */
    /* Creates the layer's variables for an input of in_shape (without batch), initialised from
     * rng (NULL: left zero, the weights are loaded next; only sn_layer_add_var uses rng), and
     * sets l->out_shape. */
    sn_status (*build)(sn_layer *l, sn_graph *g, const sn_shape *in_shape, sn_rng *rng);
    /* Adds the layer's nodes for a batch x [B, in_shape...]; training selects dropout and
     * batch statistics; updates collects side effects (may be NULL when !training). */
    sn_node (*forward)(sn_layer *l, sn_graph *g, sn_node x, bool training, sn_updates *updates);
    void (*destroy)(sn_layer *l); /* optional: free per-layer extras */
} sn_layer_vtable;

/* Layers of several inputs (Keras's merge layers: Add, Concatenate, ...): their vtable is the
 * `base` of this one with base.build and base.forward NULL, which is how they are told apart
 * (every one-input layer has both); n input shapes / nodes, in the call's order. */
typedef struct sn_layer_vtable_n {
    sn_layer_vtable base;
    sn_status (*build_n)(sn_layer *l, sn_graph *g, int n, const sn_shape *in, sn_rng *rng);
    sn_node (*forward_n)(sn_layer *l, sn_graph *g, int n, const sn_node *x, bool training,
                         sn_updates *updates);
} sn_layer_vtable_n;

/* l's multi-input vtable, or NULL for a one-input layer. */
static inline const sn_layer_vtable_n *sn_layer_vt_n(const sn_layer *l);

struct sn_layer {
    const sn_layer_vtable *vt;
    char *name;
    sn_shape in_shape, out_shape; /* without batch, set at build */
    int n_vars;
    sn_node vars[SN_LAYER_MAX_VARS];   /* in Keras order: kernel, bias / gamma, beta, mean, var */
    const char *var_names[SN_LAYER_MAX_VARS];
    /* Options, each layer its own, as given to its constructor (a writer of Keras configs
     * reads them back from here). */
    sn_activation act;               /* Activation */
    sn_dense_layer_opts dense;       /* Dense */
    sn_conv2d_layer_opts conv;       /* Conv2D */
    sn_pool2d_opts pool;             /* MaxPooling2D, AveragePooling2D (strides resolved) */
    sn_batch_norm_layer_opts bn;     /* BatchNormalization */
    sn_shape reshape_target;         /* Reshape, as given (may hold one -1) */
    double rate;                     /* Dropout */
    uint64_t seed; /* dropout */
    sn_embedding_layer_opts embedding; /* Embedding (layers_seq.c) */
    sn_rnn_layer_opts rnn;             /* LSTM, GRU (layers_seq.c) */
    struct sn_attn_layer_ext *attn;    /* attention layers (layers_attention.c): owned */
    sn_merge_layer_opts merge;         /* Add ... Concatenate (layers_merge.c) */
    sn_relu_layer_opts relu;           /* ReLU, LeakyReLU (negative_slope), Softmax (axis) */
    double scale, offset;              /* Rescaling */
    int pad[4];                        /* ZeroPadding2D, Cropping2D: top, bottom, left, right;
                                          UpSampling2D: size_h, size_w */
    sn_sepconv2d_layer_opts sep;       /* DepthwiseConv2D, SeparableConv2D (layers_conv.c) */
    bool keepdims;                     /* GlobalAveragePooling2D, GlobalMaxPooling2D */
    sn_conv1d_layer_opts conv1d;       /* Conv1D (layers_seq1d.c) */
    double alpha;                      /* ELU */
    sn_prelu_layer_opts prelu;         /* PReLU */
    int n_perm, perm[SN_MAX_DIMS];     /* Permute: Keras's dims (1-based) */
    struct sn_layer *inner[2];         /* Bidirectional: forward, backward (owned) */
    sn_bidir_merge merge_mode;         /* Bidirectional */
    /* The input mask [B, T] (1 keep, 0 masked) of the call being added, set by the model's
     * forward pass around an LSTM/GRU/Bidirectional call (layers_seq.c, layers_bidir.c); has_mask false:
     * none. */
    bool has_mask;
    sn_node mask;
    /* A stateful LSTM/GRU's carried states h (, c), [batch_size, units] non-trainable
     * variables outside vars[] (Keras saves no state in weights files either). */
    int n_carried;
    sn_node carried[2];
    sn_dtype dtype; /* of the variables: SN_F32 (set from the model at build) */
    /* Keras's trainable = false (sn_layer_set_trainable); thawed: bit j set where vars[j] was
     * made trainable and sn_model_sync_trainable cleared its flag for the freeze. */
    bool frozen;
    uint32_t thawed;
    /* Weight penalties this layer adds to the training loss (set at build, see
     * sn_layer_add_regularizer). */
    int n_regs;
    struct sn_layer_reg { sn_node var; sn_regularizer r; } regs[SN_LAYER_MAX_VARS];
};

static inline const sn_layer_vtable_n *sn_layer_vt_n(const sn_layer *l) {
    return l->vt->build ? NULL : (const sn_layer_vtable_n *)(const void *)l->vt;
}

/* Registers `r` on variable `var` of layer l (at build, after creating the variable): compile
 * adds l1 * sum|var| + l2 * sum(var^2) to the training loss. A regularizer with l1 = l2 = 0
 * is ignored; a negative or non-finite factor is SN_ERR_INVALID naming the layer and `what`
 * ("kernel_regularizer"). */
sn_status sn_layer_add_regularizer(sn_layer *l, sn_node var, const sn_regularizer *r,
                                   const char *what);
/* The sum of every layer's penalties on the graph (a scalar of the model's dtype), or SN_NONE
 * with *none = true when the model has no regularizers. */
sn_status sn_model_regularization(sn_model *m, sn_node *penalty, bool *none);

sn_status sn_updates_push(sn_updates *u, sn_node n);
void sn_updates_free(sn_updates *u);

/* Recurrent layers (layers_seq.c): how many state tensors ([B, units] each) layer l carries
 * (LSTM 2: h, c; GRU 1: h; other layers 0), and its forward pass from given initial states
 * state_in[] that also returns the final states in state_out[] (for sn_stepper). */
int sn_layer_state_count(const sn_layer *l);
sn_node sn_rnn_forward_states(sn_layer *l, sn_graph *g, sn_node x, const sn_node *state_in,
                              sn_node *state_out);
/* The same in two halves: the input projection x [B, T, D] -> x @ kernel + input bias
 * [B, T, G*U], and the recurrence from such a projection. The stepper uses them to project
 * every row of an Embedding table once ([1, V, D] -> [1, V, G*U]) and gather from that. */
sn_node sn_rnn_input_projection(sn_layer *l, sn_graph *g, sn_node x);
sn_node sn_rnn_forward_projected(sn_layer *l, sn_graph *g, sn_node xw, const sn_node *state_in,
                                 sn_node *state_out);
/* Masks (layers_seq.c, layers_bidir.c). Calls l on x as the model's forward pass does, with the mask of x
 * in *mask (SN_NONE: none), and sets *mask to the output's mask: Embedding(mask_zero) makes
 * one, LSTM/GRU/Bidirectional consume it (passing it on with return_sequences), Dense,
 * Dropout and Activation pass it on; any other layer receiving one is an error naming it. */
sn_node sn_layer_call_masked(sn_layer *l, sn_graph *g, sn_node x, sn_node *mask, bool training,
                             sn_updates *updates);
/* An LSTM/GRU over x [B, T, D] from zero states, with mask m [B, T] (SN_NONE: none), read
 * backwards when `reverse`; return_sequences outputs in time order (Bidirectional's
 * backward half) unless keras_order (a go_backwards layer's own output, reversed).
 * zero_out: masked steps output zero (zero_output_for_mask). */
sn_node sn_rnn_forward_masked(sn_layer *l, sn_graph *g, sn_node x, sn_node m, bool reverse,
                              bool keras_order, bool zero_out);
/* The LSTM/GRU forward from zero states giving the whole sequence (seq) or the last output,
 * whatever l's return_sequences (layers_seq.c). */
sn_node sn_rnn_run_zero(sn_layer *l, sn_graph *g, sn_node x, bool seq);
bool sn_layer_is_rnn(const sn_layer *l);
/* GlobalAveragePooling1D, which averages over unmasked steps only (layers_seq1d.c). */
bool sn_layer_is_global_avg_pool1d(const sn_layer *l);
bool sn_layer_is_bidirectional(const sn_layer *l);
/* Whether l is an Embedding (its table is l->vars[0], [input_dim, output_dim]). */
bool sn_layer_is_embedding(const sn_layer *l);
/* Keras 3's NotEqual(ids, 0) op layer, which a Keras-saved Functional model holds for an
 * Embedding(mask_zero=True)'s mask and passes to the masked layers as their mask keyword
 * argument (layers_bidir.c): its output is that mask, 1 where the id is not 0. */
sn_layer *sn_layer_not_equal_zero(void);
/* Normalization, whose third variable (count) Keras stores as int64 (layers_merge.c). */
bool sn_layer_is_normalization(const sn_layer *l);
bool sn_layer_is_not_equal(const sn_layer *l);

/* Adds `act` on x (identity for SN_ACT_NONE). (activations.c) */
sn_node sn_apply_activation(sn_graph *g, sn_node x, sn_activation act);
bool sn_activation_valid(sn_activation a);

typedef struct sn_train_state sn_train_state; /* compile/fit's own (compile.c) */

/* A Functional model's graph of layer calls (functional.c). Node i is an input (layer NULL)
 * or a call of a layer on the outputs of earlier nodes: nodes are kept in an order where
 * every node comes after its inputs (a builder can only name tensors that exist, and the
 * config reader sorts), so one pass in order is the forward pass. A layer called k times
 * has k nodes; its variables are made at its first call. */
/* A call's training= keyword as the model file wrote it. Keras 3 replaces it with fit's,
 * evaluate's and predict's own mode (keras/src/models/functional.py, operation_fn: the outer
 * call's training, when not None, overrides every inner call's), so in those it changes
 * nothing, in Keras as here; it is kept so that a written file calls as Keras's did. */
typedef enum {
    SN_TRAINING_KW_ABSENT = 0,
    SN_TRAINING_KW_NULL,
    SN_TRAINING_KW_FALSE,
    SN_TRAINING_KW_TRUE,
} sn_training_kw;

typedef struct sn_fnode {
    sn_layer *layer;   /* NULL: an input of the model */
    char *input_name;  /* inputs: the InputLayer's name */
    bool int_ids;      /* inputs: Keras's dtype int32 (ids for an Embedding), carried in f32 */
    int n_in;
    int *in;           /* node indices of the call's arguments */
    int call_index;    /* which call of its layer this is (Keras's node_index) */
    sn_shape shape;    /* output shape without the batch (inputs: as given) */
    /* The last of in[] is the call's mask keyword argument (a NotEqual layer's output), not
     * an argument of the layer: Keras's layer(x, mask=m) of a saved Functional model. */
    bool mask_arg;
    unsigned char training_kw; /* sn_training_kw */
} sn_fnode;

/* A model nested as a layer (Keras's Functional inside a Functional): its layers are called
 * inline in the outer graph (owned by the outer model, so its forward pass, gradients and
 * training are the outer graph's), and this record keeps what Keras's layout needs: the
 * nested model's name, its layers and inputs in its own Keras order (weights paths
 * "functional/layers/dense"). `model` holds the nested graph of calls (its layers not
 * owned). */
typedef struct sn_fsub {
    struct sn_model *model;
    int n_layers;
    sn_layer **layers; /* in the nested model's Keras order */
    /* Its calls: the outer nodes of call c's arguments, call_in[c * n_in + k], and of its
     * outputs, call_out[c * n_out + k] (the summary's "Connected to": "enc[c][k]"). */
    int n_calls, n_in, n_out;
    int *call_in, *call_out;
    unsigned char *call_training; /* per call: its training= keyword (sn_training_kw) */
    int *map0; /* per node of model->fn: the outer node of its first call (the writer's shapes) */
} sn_fsub;

typedef struct sn_fgraph {
    int n_subs;
    sn_fsub *subs;
    int n_nodes, cap_nodes;
    sn_fnode *nodes;
    int n_inputs, cap_inputs, n_outputs;
    int *inputs, *outputs; /* node indices, in the model's order */
    /* Keras's model.layers order, InputLayers included: ops[k] >= 0 is layers[ops[k]], < 0
     * the input node -1 - ops[k]. */
    int n_ops, cap_ops;
    int *ops;
    bool adding; /* sn_layer_call is adding a layer (sn_model_add refuses others) */
    /* A Keras Sequential nested in a Functional model (the U-Net's pix2pix upsample blocks),
     * read as a one-input chain: shown, numbered in weight paths and written as Sequential. */
    bool sequential;
} sn_fgraph;

void sn_fgraph_free(sn_fgraph *f);
/* Frees a nested model whose layers the outer model took (sn_fsub.model): not its layers. */
void sn_fsub_model_free(struct sn_model *sub);
/* Nested models (functional_nested.c): calls `sub` (an unbuilt Functional model, taken over
 * whether this succeeds or not) on the outer tensors in[0 .. n-1] (one per input of sub),
 * inlining its calls; out[k] receives the node of its output k (n_out of them). */
sn_status sn_functional_call_model(sn_model *m, sn_model *sub, const int *in, int n, int *out,
                                   int n_out);
/* The sub record a layer of m belongs to, or NULL for a layer of m itself. */
const sn_fsub *sn_functional_sub_of(const sn_model *m, const sn_layer *l);
/* A layer call that adopts l without the outer model's name check (a nested model's layer
 * names live in its own namespace, as Keras's). */
sn_status sn_layer_call_adopt(sn_model *m, sn_layer *l, const int *in, int n, int *out);
/* Keras's layer order (map_graph) for m's graph, applied to m->layers and m->fn->ops. */
sn_status sn_functional_keras_order(sn_model *m);
/* Whether a layer or input of m is called `name` (model.c); frees a layer no model owns. */
bool sn_model_name_taken(const sn_model *m, const char *name);
void sn_layer_destroy(sn_layer *l);
/* Builds a Functional model's layers in node order (model.c's build for m->fn != NULL):
 * variables at each layer's first call, a later call checked to take the same shapes. */
sn_status sn_functional_build(sn_model *m, sn_graph *g, uint64_t seed, bool init);
/* Whether Keras prints the model's summary as a chain (3 columns): one node per depth with
 * one input each and no shared layer. */
bool sn_functional_is_chain(const sn_model *m);

struct sn_model {
    char *name;
    sn_graph *g;
    sn_layer **layers;
    int n_layers, cap_layers;
    sn_shape input_shape; /* without batch */
    bool built;
    uint64_t seed;
    sn_train_state *train; /* NULL until compile */
    /* Variables' dtype: SN_F32; SN_F64 only for the gradient checks of tests/test_layers.c
     * (set before sn_model_build). */
    sn_dtype dtype;
    /* Distribution: the attached strategy (NULL: none); training steps run under it since it
     * was attached or since the last compile; whether rank 0's variables were broadcast. */
    struct sn_strategy *strategy;
    int64_t dist_steps;
    bool dist_synced;
    /* A Functional model's graph (NULL: Sequential, layers[] in order). layers[] then holds
     * each layer once, in Keras's model.layers order without the InputLayers. */
    sn_fgraph *fn;
    /* Keras's model.trainable = false (sn_model_set_trainable): written so in configs. */
    bool frozen;
};
/* Sets every variable's trainable flag from its layer's `frozen` (compile.c: compile calls it
 * before it lists the trainable variables). */
void sn_model_sync_trainable(sn_model *m);

/* Forward pass of all layers for a batch input node x [B, input_shape...]. */
sn_status sn_model_forward(sn_model *m, sn_node x, bool training, sn_updates *updates,
                           sn_node *out);
/* The same for a model of any number of inputs and outputs (x[i] for input i, out[j] for
 * output j); a Sequential model has one of each. */
sn_status sn_model_forward_n(sn_model *m, const sn_node *x, bool training, sn_updates *updates,
                             sn_node *out);
/* Frees the training state (compile.c). */
void sn_train_state_free(sn_train_state *t);

#endif
