/* sinter — Keras-style models: layers, Sequential, compile, fit, evaluate, predict.
 *
 *     sn_model *m = sn_sequential_new("small_cnn");
 *     sn_model_add(m, sn_layer_conv2d(32, 3, 3, SN_ACT_RELU));
 *     sn_model_add(m, sn_layer_max_pool2d(2, 2));
 *     sn_model_add(m, sn_layer_flatten());
 *     sn_model_add(m, sn_layer_dense(10, SN_ACT_NONE));
 *     sn_model_build(m, &(sn_shape){.ndim = 3, .dim = {28, 28, 1}}, seed);
 *     sn_compile_opts c = sn_compile_defaults();        // Adam, sparse CCE from logits
 *     c.steps_per_execution = 50;
 *     sn_model_compile(m, &c);
 *     sn_fit_opts f = sn_fit_defaults();
 *     f.epochs = 3; f.validation = test_ds;
 *     sn_history *h; sn_model_fit(m, train_ds, &f, &h);
 *
 * Datasets are those of sinter/data.h, already batched, yielding (x f32 [B, ...], y int32 [B])
 * for sparse losses (y f32 [B, classes] for categorical, f32 [B, ...] for MSE / binary).
 * The model owns its layers, its graph (variables in one buffer) and its plans. */
#ifndef SINTER_NN_H
#define SINTER_NN_H

#include <stdio.h>

#include "sinter/data.h"
#include "sinter/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sn_activation {
    SN_ACT_NONE = 0, /* "linear" */
    SN_ACT_RELU,
    SN_ACT_SIGMOID,
    SN_ACT_TANH,
    SN_ACT_SOFTMAX,
    SN_ACT_GELU,       /* "gelu": Keras's default approximate=false (erf form) */
    SN_ACT_SILU,       /* "silu", also spelled "swish" */
    SN_ACT_ELU,        /* "elu", alpha 1 */
    SN_ACT_LEAKY_RELU, /* "leaky_relu", negative_slope 0.2 (keras.activations.leaky_relu) */
    SN_ACT_RELU6,      /* "relu6" */
} sn_activation;
/* Keras's spelling ("linear", "relu", ..., "swish" for silu) -> the enum; SN_ERR_INVALID names
 * the accepted names. */
sn_status sn_activation_from_name(const char *name, sn_activation *out);
/* The Keras name ("linear" for SN_ACT_NONE). */
const char *sn_activation_name(sn_activation a);

/* Initializers as Keras names them. SN_INIT_DEFAULT means "the layer's Keras default"
 * (glorot_uniform kernels, zero biases, orthogonal recurrent kernels, ...). A seed makes the
 * draw reproducible in sinter (the values differ from Keras's own RNG; weights files carry the
 * values). */
typedef enum sn_initializer_type {
    SN_INIT_DEFAULT = 0,
    SN_INIT_ZEROS, SN_INIT_ONES, SN_INIT_CONSTANT,
    SN_INIT_GLOROT_UNIFORM, SN_INIT_GLOROT_NORMAL,
    SN_INIT_HE_UNIFORM, SN_INIT_HE_NORMAL,
    SN_INIT_LECUN_UNIFORM, SN_INIT_LECUN_NORMAL,
    SN_INIT_RANDOM_UNIFORM, SN_INIT_RANDOM_NORMAL, SN_INIT_TRUNCATED_NORMAL,
    SN_INIT_ORTHOGONAL,
} sn_initializer_type;
typedef struct sn_initializer {
    sn_initializer_type type;
    double value;          /* constant */
    double minval, maxval; /* random_uniform (Keras default -0.05, 0.05) */
    double mean, stddev;   /* random_normal, truncated_normal (0, 0.05) */
    double gain;           /* orthogonal (1) */
    bool has_seed;
    uint64_t seed;
} sn_initializer;
/* `type` with Keras's default arguments (random_uniform -0.05..0.05, random_normal and
 * truncated_normal 0, 0.05, orthogonal gain 1, constant 0), no seed. */
sn_initializer sn_initializer_defaults(sn_initializer_type type);
/* "glorot_uniform", ... (Keras's function names); "default" for SN_INIT_DEFAULT; NULL when
 * not a type. */
const char *sn_initializer_type_name(sn_initializer_type type);
/* "GlorotUniform", ... (the class_name Keras writes in configs); NULL for SN_INIT_DEFAULT. */
const char *sn_initializer_class_name(sn_initializer_type type);
/* A Keras name (snake_case or class name) -> sn_initializer_defaults of it; SN_ERR_NOT_FOUND
 * names the accepted names. */
sn_status sn_initializer_from_name(const char *name, sn_initializer *out);

/* kernel_regularizer / bias_regularizer: L1 (l1 > 0), L2 (l2 > 0) or L1L2; both 0 = none.
 * The penalty l1 * sum|w| + l2 * sum(w^2) is added to the training loss, as Keras does. */
typedef struct sn_regularizer {
    double l1, l2;
} sn_regularizer;

/* ---- layers (Keras names, arguments and defaults) -------------------------------------- */
typedef struct sn_layer sn_layer;

/* Each constructor returns a new layer (NULL with sn_last_error() set on a bad argument or out
 * of memory). sn_model_add takes ownership. `name` may be NULL: Keras-style automatic names
 * ("dense", "dense_1", ...) are given at sn_model_add. */
sn_layer *sn_layer_dense(int64_t units, sn_activation act);
/* Dense on inputs of any rank >= 1 applies to the last axis, as Keras does ([B, T, D] ->
 * [B, T, units]). */
typedef struct sn_dense_layer_opts {
    int64_t units;
    sn_activation activation;
    bool use_bias;          /* default true */
    sn_initializer kernel_initializer, bias_initializer;
    sn_regularizer kernel_regularizer, bias_regularizer;
} sn_dense_layer_opts;
sn_dense_layer_opts sn_dense_layer_defaults(int64_t units);
sn_layer *sn_layer_dense_ex(const sn_dense_layer_opts *o);
typedef struct sn_conv2d_layer_opts {
    int64_t filters;
    int kernel_h, kernel_w;
    int stride_h, stride_w; /* default 1 */
    sn_padding padding;     /* default valid */
    sn_activation activation;
    bool use_bias;          /* default true */
    sn_initializer kernel_initializer, bias_initializer;
    sn_regularizer kernel_regularizer, bias_regularizer;
} sn_conv2d_layer_opts;
sn_conv2d_layer_opts sn_conv2d_layer_defaults(int64_t filters, int kernel_h, int kernel_w);
sn_layer *sn_layer_conv2d(int64_t filters, int kernel_h, int kernel_w, sn_activation act);
sn_layer *sn_layer_conv2d_ex(const sn_conv2d_layer_opts *o);
/* pool size; strides default to the pool size; padding valid (use the _ex forms for more) */
sn_layer *sn_layer_max_pool2d(int pool_h, int pool_w);
sn_layer *sn_layer_max_pool2d_ex(const sn_pool2d_opts *o);
sn_layer *sn_layer_avg_pool2d(int pool_h, int pool_w);
sn_layer *sn_layer_avg_pool2d_ex(const sn_pool2d_opts *o);
sn_layer *sn_layer_flatten(void);
sn_layer *sn_layer_dropout(double rate);
/* momentum 0.99, epsilon 1e-3, over the last axis (Keras defaults) */
sn_layer *sn_layer_batch_norm(void);
typedef struct sn_batch_norm_layer_opts {
    double momentum, epsilon; /* 0.99, 1e-3 */
    bool center, scale;       /* true, true: beta and gamma exist */
    sn_initializer beta_initializer, gamma_initializer,
                   moving_mean_initializer, moving_variance_initializer;
    sn_regularizer beta_regularizer, gamma_regularizer;
} sn_batch_norm_layer_opts;
sn_batch_norm_layer_opts sn_batch_norm_layer_defaults(void);
sn_layer *sn_layer_batch_norm_ex(const sn_batch_norm_layer_opts *o);
sn_layer *sn_layer_activation(sn_activation act);
/* Reshape to `target` (without the batch); one dimension may be -1. */
sn_layer *sn_layer_reshape(const sn_shape *target);
/* GlobalAveragePooling2D: [B, H, W, C] -> [B, C] (keepdims false). */
sn_layer *sn_layer_global_avg_pool2d(void);

/* ---- attention layers (Keras names, weight layout and defaults; nn/layers/layers_attention.c) -- */
/* LayerNormalization over the last axis: variables gamma, beta [C] (Keras order), epsilon
 * 1e-3, center and scale true. rms_scaling and other axes are not implemented. */
typedef struct sn_layer_norm_opts {
    double epsilon;     /* 1e-3 */
    bool center, scale; /* true, true: beta and gamma exist */
    sn_initializer beta_initializer, gamma_initializer; /* zeros, ones */
    sn_regularizer beta_regularizer, gamma_regularizer;
} sn_layer_norm_opts;
sn_layer_norm_opts sn_layer_norm_defaults(void);
sn_layer *sn_layer_layer_norm(void);
sn_layer *sn_layer_layer_norm_ex(const sn_layer_norm_opts *o);
/* MultiHeadAttention as self-attention, mha(x, x): [B, T, d] -> [B, T, output_dim or d].
 * Variables in Keras's order and layout: query and key kernels [d, num_heads, key_dim] and
 * biases [num_heads, key_dim], value kernel [d, num_heads, value_dim] and bias [num_heads,
 * value_dim], output kernel [num_heads, value_dim, out] and bias [out]. Scores scaled by
 * 1/sqrt(key_dim). use_causal_mask is Keras's call argument, held by the layer here. With
 * value_dim = key_dim and no dropout in training the fused kernel runs (it never forms the
 * scores); otherwise the probabilities are materialised ([B, H, Tq, Tk]), and dropout applies
 * to them in training only. attention_axes and return_attention_scores are refused. */
typedef struct sn_mha_layer_opts {
    int num_heads;
    int64_t key_dim;
    int64_t value_dim;     /* 0 (Keras's None): key_dim */
    double dropout;        /* on the attention probabilities, in training; [0, 1) */
    bool use_bias;         /* true */
    bool use_causal_mask;  /* false */
    sn_initializer kernel_initializer, bias_initializer; /* glorot_uniform, zeros */
    sn_regularizer kernel_regularizer, bias_regularizer;
    int64_t output_dim;    /* Keras's output_shape (an int or a 1-tuple); 0 (None): the query's */
} sn_mha_layer_opts;
sn_mha_layer_opts sn_mha_layer_defaults(int num_heads, int64_t key_dim);
sn_layer *sn_layer_mha_ex(const sn_mha_layer_opts *o);

/* ---- sequence layers (Keras names, weight layout and defaults) ------------------------- */
/* Embedding(input_dim, output_dim): integer ids [B, T] (int32, or f32 holding integers, cast
 * as Keras does) -> [B, T, output_dim]; the gradient is a scatter-add into the rows used.
 * Default initializer random_uniform(-0.05, 0.05). An id outside [0, input_dim) is an error
 * at run time naming the id. */
typedef struct sn_embedding_layer_opts {
    int64_t input_dim, output_dim;
    sn_initializer embeddings_initializer;
    sn_regularizer embeddings_regularizer;
    /* Keras's mask_zero: id 0 is padding; the mask (id != 0) is carried to the LSTM, GRU and
     * Bidirectional layers after it, through Dense, Dropout and Activation (as Keras); any
     * other layer that receives it is an error naming it. */
    bool mask_zero;
} sn_embedding_layer_opts;
sn_embedding_layer_opts sn_embedding_layer_defaults(int64_t input_dim, int64_t output_dim);
sn_layer *sn_layer_embedding(int64_t input_dim, int64_t output_dim);
sn_layer *sn_layer_embedding_ex(const sn_embedding_layer_opts *o);

/* LSTM and GRU over [B, T, D] -> [B, units] (or [B, T, units] with return_sequences).
 * Variables as Keras writes them: kernel [D, G*units], recurrent_kernel [units, G*units],
 * bias [G*units] (GRU with reset_after: [2, 3*units]); LSTM gate order i, f, c, o; GRU z, r, h.
 * GRU reset_after=true (Keras's default) applies the reset gate after the recurrent product,
 * r * (h @ R_h + b_rh); reset_after=false before it, (r * h) @ R_h (Keras's older variant). */
typedef struct sn_rnn_layer_opts {
    int64_t units;
    sn_activation activation;           /* tanh */
    sn_activation recurrent_activation; /* sigmoid */
    bool use_bias;                      /* true */
    bool return_sequences;              /* false */
    bool return_state;                  /* false */
    bool stateful;                      /* false; true needs batch_size */
    int64_t batch_size;                 /* stateful: the fixed batch (Keras's Input(batch_size)) */
    bool unit_forget_bias;              /* LSTM: true */
    bool reset_after;                   /* GRU: true */
    sn_initializer kernel_initializer, recurrent_initializer, bias_initializer;
    sn_regularizer kernel_regularizer, recurrent_regularizer, bias_regularizer;
    /* Keras's go_backwards: the sequence is read last step first, and with return_sequences
     * the outputs come in that reversed order (as Keras). With a mask (mask_zero), masked steps
     * keep the previous state and output (zero_output_for_mask: their output is zero). */
    bool go_backwards;
    bool zero_output_for_mask;
} sn_rnn_layer_opts;
sn_rnn_layer_opts sn_lstm_layer_defaults(int64_t units);
sn_rnn_layer_opts sn_gru_layer_defaults(int64_t units);
sn_layer *sn_layer_lstm(int64_t units, bool return_sequences);
sn_layer *sn_layer_lstm_ex(const sn_rnn_layer_opts *o);
sn_layer *sn_layer_gru(int64_t units, bool return_sequences);
sn_layer *sn_layer_gru_ex(const sn_rnn_layer_opts *o);
/* Stateful LSTM/GRU layers (stateful = true) keep their final states [batch_size, units] in
 * the model and start the next batch from them, in fit, evaluate and predict alike, as Keras 3
 * does: across batches and epochs (fit does not reset them; shuffling is allowed and makes the
 * carried state meaningless, as in Keras), until sn_model_reset_states zeroes them (Keras's
 * reset_state). A batch of another size fails with both sizes named. Not under a strategy. */
/* Keras's Bidirectional over an LSTM or GRU: `layer` reads forwards, a copy with go_backwards
 * flipped (named "backward_<name>", Keras's) reads backwards; with return_sequences the
 * backward outputs are put back in time order; the two are merged (concat on the last axis,
 * sum, mul or ave). Takes ownership of `layer` (also on failure). Variables: the forward
 * layer's, then the backward layer's, as Keras's weights. The _ex form takes both layers
 * (Keras's backward_layer), which must differ in go_backwards and agree in return_sequences. */
typedef enum sn_bidir_merge {
    SN_BIDIR_CONCAT = 0, SN_BIDIR_SUM, SN_BIDIR_MUL, SN_BIDIR_AVE
} sn_bidir_merge;
sn_layer *sn_layer_bidirectional(sn_layer *layer, sn_bidir_merge merge_mode);
sn_layer *sn_layer_bidirectional_ex(sn_layer *forward, sn_layer *backward,
                                    sn_bidir_merge merge_mode);
/* Keras's 1D layers over [B, steps, channels] (channels_last): Conv1D (kernel [k, C, filters],
 * Keras's layout; padding valid/same), MaxPooling1D and AveragePooling1D (stride 0: the pool
 * size), GlobalMaxPooling1D and GlobalAveragePooling1D (keepdims; the average skips masked
 * steps, as Keras's, 0/0 for a row of only masked steps as there); the ELU layer (alpha) and
 * Permute (dims of the non-batch axes, 1-based, as Keras's). */
typedef struct sn_conv1d_layer_opts {
    int64_t filters;
    int kernel_size, stride; /* stride default 1 */
    sn_padding padding;      /* default valid */
    sn_activation activation;
    bool use_bias; /* default true */
    sn_initializer kernel_initializer, bias_initializer;
    sn_regularizer kernel_regularizer, bias_regularizer;
} sn_conv1d_layer_opts;
sn_conv1d_layer_opts sn_conv1d_layer_defaults(int64_t filters, int kernel_size);
sn_layer *sn_layer_conv1d_ex(const sn_conv1d_layer_opts *o);
sn_layer *sn_layer_pool1d(bool max, int pool, int stride, sn_padding padding);
sn_layer *sn_layer_global_pool1d(bool max, bool keepdims);
sn_layer *sn_layer_elu(double alpha);
sn_layer *sn_layer_permute(int n, const int *dims);
/* Keras's PReLU: max(x, 0) - alpha * max(-x, 0) with a learned alpha of the input's shape
 * (without the batch; 1 along shared_axes, Keras's 1-based axes), default initializer zeros. */
typedef struct sn_prelu_layer_opts {
    sn_initializer alpha_initializer;
    sn_regularizer alpha_regularizer;
    int n_shared_axes;
    int shared_axes[SN_MAX_DIMS];
} sn_prelu_layer_opts;
sn_layer *sn_layer_prelu_ex(const sn_prelu_layer_opts *o);
/* Sets a layer's name before it is added (copied). */
sn_status sn_layer_set_name(sn_layer *l, const char *name);
/* Keras's layer.trainable: a frozen layer's (trainable = false) weights get no gradients or
 * optimizer updates but are saved, loaded and counted as non-trainable, and its
 * BatchNormalization runs in inference mode in training too (Keras 3). Takes effect at the next
 * sn_model_compile; Bidirectional's halves follow. */
sn_status sn_layer_set_trainable(sn_layer *l, bool trainable);
bool sn_layer_trainable(const sn_layer *l);

/* ---- merge layers and layer-form activations (Keras names, configs and semantics) ------ */
/* Add, Subtract (two inputs), Multiply, Average, Maximum, Minimum: elementwise over inputs
 * of one shape, in Keras's order of operations (Average: the sum, then / n; at a tie of
 * Maximum/Minimum the gradient goes to the first input, as TensorFlow's); Concatenate along `axis` (of the batched tensor: -1 last, 0 refused), the
 * other dimensions equal. A shape that does not meet is an error at build naming the layer. */
typedef enum sn_merge_op {
    SN_MERGE_ADD = 0, SN_MERGE_SUBTRACT, SN_MERGE_MULTIPLY, SN_MERGE_AVERAGE,
    SN_MERGE_CONCATENATE, SN_MERGE_MAXIMUM, SN_MERGE_MINIMUM
} sn_merge_op;
typedef struct sn_merge_layer_opts {
    sn_merge_op op;
    int axis; /* Concatenate: -1 */
} sn_merge_layer_opts;
sn_layer *sn_layer_merge(sn_merge_op op);
sn_layer *sn_layer_concatenate(int axis);
/* ReLU(max_value, negative_slope, threshold) as keras.activations.relu; sinter runs the
 * forms its ops compute exactly: plain relu, max_value 6 (relu6), or a negative_slope in
 * (0, 1) (leaky relu), with threshold 0; others are refused naming the field. LeakyReLU is
 * negative_slope alone (Keras's default 0.3), Softmax a softmax over `axis` (-1). */
typedef struct sn_relu_layer_opts {
    double max_value;      /* < 0: none (Keras's null) */
    double negative_slope; /* 0 */
    double threshold;      /* 0 */
    int axis;              /* Softmax: -1 */
} sn_relu_layer_opts;
sn_relu_layer_opts sn_relu_layer_defaults(void);
sn_layer *sn_layer_relu_ex(const sn_relu_layer_opts *o);
sn_layer *sn_layer_leaky_relu(double negative_slope);
sn_layer *sn_layer_softmax(int axis);
/* Rescaling: x * scale + offset. */
sn_layer *sn_layer_rescaling(double scale, double offset);
/* Normalization (Keras's, axis=-1): (x - mean) / max(sqrt(variance), 1e-7) with mean and
 * variance [C] (C the last axis) and Keras's count as non-trainable variables, which load
 * from a Keras file (mean 0, variance 1 until then). adapt() is not implemented. */
sn_layer *sn_layer_normalization(void);
/* ZeroPadding2D ((top, bottom), (left, right)) of [B, H, W, C]: zeros around H and W. */
sn_layer *sn_layer_zero_padding2d(int top, int bottom, int left, int right);
/* GlobalAveragePooling2D / GlobalMaxPooling2D: [B, H, W, C] -> [B, C] ([B, 1, 1, C] with
 * keepdims). */
sn_layer *sn_layer_global_pool2d(bool max, bool keepdims);

/* ---- convolution family (layers_conv.c): Keras's names, defaults and weight layouts ---- */
/* DepthwiseConv2D (filters unused): depthwise_kernel [KH, KW, C, depth_multiplier], bias
 * [C * depth_multiplier]. SeparableConv2D: that depthwise convolution, then a 1x1 pointwise
 * convolution to `filters` (pointwise_kernel [1, 1, C * depth_multiplier, filters]), bias
 * [filters]. Defaults: strides 1, valid, depth_multiplier 1, linear, use_bias, glorot_uniform
 * kernels, zero bias. */
typedef struct sn_sepconv2d_layer_opts {
    int64_t filters;
    int kernel_h, kernel_w;
    int stride_h, stride_w;
    sn_padding padding;
    int depth_multiplier;
    sn_activation activation;
    bool use_bias;
    sn_initializer depthwise_initializer, pointwise_initializer, bias_initializer;
    sn_regularizer depthwise_regularizer, pointwise_regularizer, bias_regularizer;
} sn_sepconv2d_layer_opts;
sn_sepconv2d_layer_opts sn_sepconv2d_layer_defaults(int64_t filters, int kernel_h, int kernel_w);
sn_layer *sn_layer_depthwise_conv2d_ex(const sn_sepconv2d_layer_opts *o);
sn_layer *sn_layer_separable_conv2d_ex(const sn_sepconv2d_layer_opts *o);
/* Conv2DTranspose with output_padding None and dilation 1: kernel [KH, KW, filters, C]; the
 * fields as Conv2D's. */
sn_layer *sn_layer_conv2d_transpose_ex(const sn_conv2d_layer_opts *o);
/* UpSampling2D, interpolation "nearest": each pixel repeated size_h x size_w times. */
sn_layer *sn_layer_upsampling2d(int size_h, int size_w);
/* Cropping2D ((top, bottom), (left, right)) of [B, H, W, C]. */
sn_layer *sn_layer_cropping2d(int top, int bottom, int left, int right);

/* ---- the Sequential model -------------------------------------------------------------- */
typedef struct sn_model sn_model;

sn_model *sn_sequential_new(const char *name);
void sn_model_free(sn_model *m);
/* Appends a layer; the model owns it from here on, also when this fails. */
sn_status sn_model_add(sn_model *m, sn_layer *layer);
/* Creates the variables for inputs of `input_shape` (without the batch dimension) and
 * initialises them as Keras does (glorot_uniform kernels, zero biases, BN gamma 1 and
 * moving variance 1) from `seed`. */
sn_status sn_model_build(sn_model *m, const sn_shape *input_shape, uint64_t seed);
/* sn_model_build for a model whose weights are loaded next (sn_model_load_weights, which
 * fails unless the file has every variable): the variables start at zero and no initialiser
 * runs - for a large LSTM the orthogonal recurrent kernel alone is a QR of [U, 4U]. */
sn_status sn_model_build_for_loading(sn_model *m, const sn_shape *input_shape);
/* Prints the Keras-like table (layer (type), output shape, params) with the totals; after the
 * first training step also the optimizer's variables, as Keras 3 does. */
sn_status sn_model_summary(const sn_model *m, FILE *out);
int64_t sn_model_param_count(const sn_model *m, bool trainable_only);
/* Keras's model.trainable = false: every layer of m (nested models' included) frozen as
 * sn_layer_set_trainable does, and the model written as "trainable": false; true thaws them
 * all. Layer i (sn_model_layer_count's order, nested models' layers inlined) alone. Both
 * apply to sn_graph_variables at once; a compiled model trains its compile-time set until it
 * is compiled again, as Keras. */
sn_status sn_model_set_trainable(sn_model *m, bool trainable);
sn_status sn_model_set_layer_trainable(sn_model *m, int i, bool trainable);
bool sn_model_layer_trainable(const sn_model *m, int i);
/* A nested model of m by name (Keras's base_model.trainable): it and all its layers. */
sn_status sn_model_set_nested_trainable(sn_model *m, const char *name, bool trainable);

/* ---- Functional models: keras.Model(inputs, outputs) over a graph of layer calls --------- */
/* A tensor of a Functional model being built: an input or the output of a layer call. */
typedef struct sn_ftensor {
    int id;
} sn_ftensor;
typedef struct sn_functional_input_opts {
    const char *name; /* NULL: Keras's automatic "input_layer", "input_layer_1", ... */
    sn_shape shape;   /* without the batch */
    bool int_ids;     /* Keras's Input(dtype="int32"): ids for an Embedding (fed as f32) */
} sn_functional_input_opts;
sn_functional_input_opts sn_functional_input_defaults(const sn_shape *shape);
/* An empty Functional model ("functional" when name is NULL): add inputs, call layers on
 * tensors, name the outputs, then sn_model_build(m, NULL, seed) (the shapes come from the
 * inputs). */
sn_model *sn_functional_new(const char *name);
sn_status sn_functional_input(sn_model *m, const sn_functional_input_opts *o, sn_ftensor *out);
/* layer(in[0], ..., in[n-1]) -> *out. The model owns the layer from its first call on (also
 * when that call fails); calling the same layer again shares its weights (the call must take
 * the same shapes). A merge layer takes n >= 2 tensors, any other layer one. */
sn_status sn_layer_call(sn_model *m, sn_layer *layer, const sn_ftensor *in, int n,
                        sn_ftensor *out);
/* Keras's nested models: inner (a Functional model with its inputs and outputs set, not
 * built) called as a layer of m on in[0 .. n-1] (one per input of inner); out[k] receives its
 * output k (n_out = its output count). m owns inner from the first call on (also when it
 * fails); calling inner again shares its weights. Its weights are saved in Keras's nested
 * layout (layers/functional/layers/dense/...); the summary and the .keras writer refuse
 * nested models so far. */
sn_status sn_model_call(sn_model *m, sn_model *inner, const sn_ftensor *in, int n,
                        sn_ftensor *out, int n_out);
/* The model's outputs, in order (each once). */
sn_status sn_functional_set_outputs(sn_model *m, const sn_ftensor *outputs, int n);
/* Inputs and outputs of a model (1 and 1 for Sequential), and their shapes without batch. */
int sn_model_input_count(const sn_model *m);
int sn_model_output_count(const sn_model *m);
sn_shape sn_model_output_shape_at(const sn_model *m, int i);
/* Zeroes the carried states of every stateful LSTM/GRU layer (Keras's model.reset_states()). */
void sn_model_reset_states(sn_model *m);
sn_graph *sn_model_graph(sn_model *m);
int sn_model_layer_count(const sn_model *m);
/* Layer i's name, Keras class name, output shape (without the batch) and variables. */
const char *sn_model_layer_name(const sn_model *m, int i);
const char *sn_model_layer_class(const sn_model *m, int i);
sn_shape sn_model_layer_output_shape(const sn_model *m, int i);
int sn_model_layer_variables(const sn_model *m, int i, sn_node *vars, int cap);

/* ---- compile ---------------------------------------------------------------------------- */
typedef enum sn_optimizer_type { SN_SGD = 0, SN_ADAM, SN_ADAMW, SN_RMSPROP } sn_optimizer_type;
typedef struct sn_optimizer_opts {
    sn_optimizer_type type;
    double learning_rate;
    double beta_1, beta_2, epsilon; /* Adam, AdamW; epsilon also RMSprop */
    double weight_decay;            /* AdamW */
    double momentum;                /* SGD, RMSprop */
    double rho;                     /* RMSprop */
    bool nesterov;                  /* SGD */
} sn_optimizer_opts;
/* Keras's defaults for each optimizer (SGD lr 0.01; Adam lr 1e-3, 0.9, 0.999, 1e-7; AdamW
 * also weight_decay 0.004; RMSprop lr 1e-3, rho 0.9, epsilon 1e-7). */
sn_optimizer_opts sn_optimizer_defaults(sn_optimizer_type type);
/* "sgd", "adam", "adamw", "rmsprop" -> defaults; SN_ERR_INVALID naming the accepted names. */
sn_status sn_optimizer_from_name(const char *name, sn_optimizer_opts *out);
/* The slot variables o keeps per variable (SGD with momentum 1, Adam and AdamW 2, RMSprop 1
 * or 2 with momentum; 0 without any) and Keras's name of each ("momentum", "velocity"), in
 * the order sn_optimizer_update reads them; NULL out of range. */
int sn_optimizer_slot_count(const sn_optimizer_opts *o);
const char *sn_optimizer_slot_name(const sn_optimizer_opts *o, int slot);
/* Adds to g optimizer o's update of one variable by its gradient, with fit's kernel and
 * Keras's formulas: *out is one side-effect node (a plan target) that writes var and its
 * slots (sn_optimizer_slot_count of them, f32 variables shaped like var, zero at first).
 * iterations is an int32 variable holding the updates applied before this step (Adam's bias
 * correction reads it); this node does not advance it: add 1 once per step yourself
 * (sn_assign_add), after every update of the step. For programs that build their own
 * training step (the Python package's apply_gradients in a traced function). */
sn_status sn_optimizer_update(sn_graph *g, const sn_optimizer_opts *o, sn_node var, sn_node grad,
                              sn_node iterations, const sn_node *slots, sn_node *out);

typedef enum sn_loss_type {
    SN_LOSS_SPARSE_CATEGORICAL_CROSSENTROPY = 0,
    SN_LOSS_CATEGORICAL_CROSSENTROPY,
    SN_LOSS_BINARY_CROSSENTROPY,
    SN_LOSS_MEAN_SQUARED_ERROR,
    SN_LOSS_MEAN_ABSOLUTE_ERROR, /* Keras's mean_absolute_error (mae) */
    SN_LOSS_HUBER,               /* Keras's huber (Huber): sn_compile_opts.huber_delta */
} sn_loss_type;

typedef enum sn_metric_type {
    SN_METRIC_SPARSE_CATEGORICAL_ACCURACY = 0,
    SN_METRIC_ACCURACY, /* resolved by the loss, as Keras's "accuracy" */
    SN_METRIC_BINARY_ACCURACY,      /* y == (p > accuracy_threshold), Keras's binary_accuracy */
    SN_METRIC_CATEGORICAL_ACCURACY, /* argmax(y) == argmax(p), one-hot labels */
} sn_metric_type;

#define SN_MAX_METRICS 4
#define SN_MAX_OUTPUTS 4
/* One output's loss and metrics in a model of several outputs: Keras's compile(loss=[...],
 * loss_weights=[...], metrics=[[...], ...]). The training loss is the sum over the outputs of
 * loss_weight times the output's mean loss; fit logs each output's unweighted mean as
 * "<output layer>_loss" and its metrics as "<output layer>_<metric>", as Keras 3 does. */
typedef struct sn_output_loss {
    sn_loss_type loss;
    bool from_logits;
    double loss_weight; /* 1 in sn_output_loss_defaults */
    int n_metrics;
    sn_metric_type metrics[SN_MAX_METRICS];
} sn_output_loss;
sn_output_loss sn_output_loss_defaults(sn_loss_type loss);
typedef struct sn_compile_opts {
    sn_optimizer_opts optimizer;
    sn_loss_type loss;
    bool from_logits;           /* default true */
    int n_metrics;
    sn_metric_type metrics[SN_MAX_METRICS];
    int steps_per_execution;    /* default 1 */
    /* Keras's mixed_bfloat16 policy: the training, evaluation and prediction plans compute
     * matmuls and convolutions in bfloat16 (float32 accumulation) where the CPU has
     * AVX512-BF16 and bfloat16 arithmetic is faster than float32 there (not on Intel without
     * AMX: sn_plan_opts.bf16_compute); variables, optimizer state, every other op and the
     * loss stay float32. Default false. */
    bool mixed_bfloat16;
    /* Keras's predict: the model's output as it is. Default false: sinter's predict turns a
     * from_logits model's output into probabilities (sn_model_predict); the Python package
     * sets it, because Keras users add the Softmax themselves. */
    bool predict_raw;
    /* The device the model's plans run on: "gpu:0", "cpu:0" or a TensorFlow-style name
     * ("/job:localhost/replica:0/task:0/device:GPU:0"); "" = device 0 (the CPU). A plan there
     * that needs an op the device's kernel table lacks is refused when it is made, naming the
     * op (no host fallback). A strategy's devices take precedence. */
    char device[96];
    /* f32 matmuls and convolutions on a GPU use TF32 tensor cores by default (as TensorFlow);
     * true computes them in full f32 (--precision fp32-strict). No effect on the CPU. */
    bool fp32_strict;
    double huber_delta;        /* SN_LOSS_HUBER's delta (Keras's default 1.0) */
    double accuracy_threshold; /* SN_METRIC_BINARY_ACCURACY's threshold (0.5) on probabilities */
    /* 0: a model of one output takes loss, from_logits and metrics above; a model of several
     * takes loss and from_logits for every output, weight 1, and no metrics (Keras asks for
     * metrics per output). n > 0: outputs[k] for the model's output k (n must equal the model's
     * output count). Datasets then yield the inputs, in the model's order, then one label per
     * output. */
    int n_outputs;
    sn_output_loss outputs[SN_MAX_OUTPUTS];
} sn_compile_opts;
/* Adam, sparse categorical cross-entropy from logits, sparse_categorical_accuracy, 1 step. */
sn_compile_opts sn_compile_defaults(void);
sn_status sn_model_compile(sn_model *m, const sn_compile_opts *o);

/* ---- fit / evaluate / predict ----------------------------------------------------------- */
typedef struct sn_history sn_history;

/* Entries of sn_logs: loss and metrics, their val_ forms, and "learning_rate". */
#define SN_LOGS_MAX (2 * (1 + SN_MAX_OUTPUTS + SN_MAX_OUTPUTS * SN_MAX_METRICS) + 1)
/* What a callback sees at the end of each epoch and batch (logs like Keras's). */
typedef struct sn_logs {
    int epoch;                 /* 0-based */
    int64_t step;              /* steps done in this epoch */
    int64_t steps;             /* steps in the epoch, -1 when unknown */
    int n;                     /* entries below */
    /* "loss", "sparse_categorical_accuracy", "val_loss", ..., and at an epoch's end
     * "learning_rate" (the rate the epoch ran with) when a learning-rate callback is in use,
     * as Keras 3's ReduceLROnPlateau and LearningRateScheduler add it */
    const char *names[SN_LOGS_MAX];
    double values[SN_LOGS_MAX];
    double seconds;            /* since the epoch began */
} sn_logs;

typedef struct sn_callback {
    void *user;
    /* Any of these may be NULL. Returning a non-SN_OK status stops training with it;
     * setting *stop = true stops it cleanly after this epoch/batch. */
    sn_status (*on_epoch_begin)(void *user, int epoch, int epochs);
    sn_status (*on_batch_end)(void *user, const sn_logs *logs, bool *stop);
    sn_status (*on_epoch_end)(void *user, const sn_logs *logs, bool *stop);
    void (*on_train_end)(void *user);
    /* Optional: once before the first epoch, with the model (Keras's set_model +
     * on_train_begin); learning-rate callbacks read and set the rate through it. */
    sn_status (*on_train_begin)(void *user, sn_model *m);
    /* Optional: state that a checkpoint keeps (early stopping's best and wait, ...). get
     * writes up to cap values and returns how many; set restores them on resume, before
     * on_epoch_begin. state_name identifies the callback in the file. */
    const char *state_name;
    int (*get_state)(void *user, double *values, int cap);
    sn_status (*set_state)(void *user, const double *values, int n);
    /* Optional: before each execution (Keras's on_train_batch_begin, once per
     * steps_per_execution steps), with the epoch and the 0-based index of the execution's
     * first step in it. */
    sn_status (*on_batch_begin)(void *user, int epoch, int64_t step);
    /* Optional: Keras's on_test_begin, on_test_batch_begin/end and on_test_end, around every
     * evaluation pass: fit's validation (after an epoch's training, before on_epoch_end) and
     * sn_model_evaluate_cb. Batch begin gets the 0-based index of the execution's first
     * step; batch end and test end the evaluation's logs so far (running means, Keras's names
     * without "val_"; logs->step = the steps done). */
    sn_status (*on_test_begin)(void *user);
    sn_status (*on_test_batch_begin)(void *user, int64_t step);
    sn_status (*on_test_batch_end)(void *user, const sn_logs *logs);
    sn_status (*on_test_end)(void *user, const sn_logs *logs);
} sn_callback;

/* Built-in callbacks; each returns a callback the caller frees with sn_callback_free. */
/* Keras's progress bar: redrawn in place with an ETA on a terminal, one line per epoch
 * otherwise. */
sn_callback *sn_callback_progress_bar(FILE *out, int verbose);
/* Writes one row per epoch to a CSV file, as Keras's CSVLogger(append=False): the file is
 * created anew at the start of each fit; the header is "epoch" then the log names sorted
 * ("epoch,loss,sparse_categorical_accuracy,val_loss,..."); epochs count from 0. A fit resumed
 * from a checkpoint (sn_backup_opts) is the same run: the file is first rewritten (temporary
 * file, rename) with the restored history's rows, then the resumed epochs are appended. */
sn_callback *sn_callback_csv_logger(const char *path);
/* Stops when `monitor` ("val_loss" by default) has not improved by min_delta for patience
 * epochs. */
sn_callback *sn_callback_early_stopping(const char *monitor, double min_delta, int patience);
/* Stops with SN_ERR_NUMERIC naming the epoch and step (1-based; the range of steps when
 * steps_per_execution ran several in one call) when the loss becomes NaN or Inf. */
sn_callback *sn_callback_terminate_on_nan(void);
/* Keras's TensorBoard callback: event files (sinter/events.h) under log_dir/train and
 * log_dir/validation; the model comes from on_train_begin, as Keras's set_model (called
 * without fit, the callback writes no learning rate and no histograms). A resumed fit
 * (sn_backup_opts) opens new files and counts batch steps from the checkpoint's global step.
 * Per epoch (step = the 0-based epoch) train gets "epoch_loss",
 * "epoch_<metric>" and "epoch_learning_rate", validation gets the val_* logs without their
 * prefix ("epoch_loss", ...). With update_freq N > 0, train also gets "batch_loss",
 * "batch_<metric>" (the epoch's running means, as Keras logs them) whenever the global step
 * passes a multiple of N, at that step; batch callbacks see steps in units of
 * steps_per_execution, so N is effectively rounded up to them. With histogram_freq N > 0,
 * every N-th epoch writes a histogram of each weight ("<layer>/<variable>/histogram").
 * The files are flushed at the end of every epoch and closed at the end of training. */
typedef struct sn_tensorboard_opts {
    const char *log_dir;   /* required; copied */
    int64_t update_freq;   /* 0 = Keras's "epoch" (default): no batch scalars */
    int histogram_freq;    /* 0 (default): no histograms */
} sn_tensorboard_opts;
sn_tensorboard_opts sn_tensorboard_defaults(void);
sn_callback *sn_callback_tensorboard(const sn_tensorboard_opts *o);
void sn_callback_free(sn_callback *cb);

/* keras.callbacks.ModelCheckpoint, saving at each epoch's end to a path made from `filepath`
 * as Python's str.format with the logs: "{epoch}" (1-based, as Keras), "{epoch:02d}",
 * "{val_loss:.2f}", any log name; "{{" and "}}" are braces. */
typedef struct sn_model_checkpoint_opts {
    const char *filepath;
    const char *monitor;     /* "val_loss" */
    const char *mode;        /* "auto" (max for names with "acc", else min), "min", "max" */
    bool save_best_only;     /* false: every epoch; true: when monitor improved */
    /* true: Keras 3 .weights.h5 (sn_model_save_weights); false (Keras's default): the whole
     * training state (docs/checkpoints.md), which sn_backup_opts.resume_path resumes from */
    bool save_weights_only;
} sn_model_checkpoint_opts;
sn_model_checkpoint_opts sn_model_checkpoint_defaults(const char *filepath);
sn_callback *sn_callback_model_checkpoint(const sn_model_checkpoint_opts *o);

/* keras.callbacks.ReduceLROnPlateau: the rate times `factor` when `monitor` has not improved
 * by min_delta for `patience` epochs, then `cooldown` epochs of rest, never below min_lr. */
typedef struct sn_reduce_lr_opts {
    const char *monitor; /* "val_loss" */
    double factor;       /* 0.1, in (0, 1) */
    int patience;        /* 10 */
    const char *mode;    /* "auto", "min", "max" */
    double min_delta;    /* 1e-4 */
    int cooldown;        /* 0 */
    double min_lr;       /* 0 */
} sn_reduce_lr_opts;
sn_reduce_lr_opts sn_reduce_lr_defaults(void);
sn_callback *sn_callback_reduce_lr_on_plateau(const sn_reduce_lr_opts *o);

/* keras.callbacks.LearningRateScheduler: at each epoch's start the rate becomes
 * schedule(user, epoch (0-based), current rate); it must return a finite rate > 0. */
typedef double (*sn_lr_schedule_fn)(void *user, int epoch, double lr);
sn_callback *sn_callback_lr_scheduler(sn_lr_schedule_fn schedule, void *user);

/* keras.optimizers.schedules, as functions of the optimizer's iteration count (the steps
 * done), with Keras's formulas:
 *   exponential: lr0 * rate^(step / decay_steps) (the exponent floored when staircase)
 *   piecewise:   values[0] while step <= boundaries[0], values[i] while step <= boundaries[i],
 *                values[n] after the last boundary
 *   cosine:      a linear warmup from lr0 to warmup_target over warmup_steps (when set), then
 *                target * ((1 - alpha) * 0.5 * (1 + cos(pi * min(s, decay_steps) /
 *                decay_steps)) + alpha), s counted from the warmup's end */
typedef enum sn_lr_schedule_type {
    SN_LR_EXPONENTIAL_DECAY = 0,
    SN_LR_PIECEWISE_CONSTANT_DECAY,
    SN_LR_COSINE_DECAY,
} sn_lr_schedule_type;
#define SN_LR_MAX_BOUNDARIES 16
typedef struct sn_lr_schedule {
    sn_lr_schedule_type type;
    double initial_learning_rate;
    int64_t decay_steps;
    double decay_rate;      /* exponential */
    bool staircase;         /* exponential */
    int n_boundaries;       /* piecewise: values has n_boundaries + 1 entries */
    int64_t boundaries[SN_LR_MAX_BOUNDARIES];
    double values[SN_LR_MAX_BOUNDARIES + 1];
    double alpha;           /* cosine: the floor, a fraction of the rate */
    int64_t warmup_steps;   /* cosine */
    double warmup_target;   /* cosine, with warmup_steps > 0 */
} sn_lr_schedule;
/* SN_ERR_INVALID naming the field when a schedule is malformed. */
sn_status sn_lr_schedule_check(const sn_lr_schedule *s);
double sn_lr_schedule_value(const sn_lr_schedule *s, int64_t step);
/* Applies a schedule during fit: the rate is set from the iteration count before the first
 * execution and after each one, so it follows Keras step by step with steps_per_execution
 * 1; with S > 1 it changes every S steps (the value at each execution's first step). The
 * schedule is copied. */
sn_callback *sn_callback_lr_schedule(const sn_lr_schedule *s);

/* BackupAndRestore, built into fit (docs/checkpoints.md): checkpoints of the whole training
 * state in `dir`, and resuming from the newest valid one. A resumed fit ends with weights
 * bit-identical to an uninterrupted one with the same options. */
typedef struct sn_backup_opts {
    const char *dir;          /* the folder (created when missing); files ckpt-<step>.h5 */
    /* > 0: after the first execution that reaches each multiple of N global steps (every N
     * steps exactly when steps_per_execution divides N and the steps per epoch); 0: at the
     * end of every epoch (Keras's save_freq="epoch") */
    int64_t every_steps;
    int keep;                 /* newest checkpoints kept (default 3, >= 1) */
    bool resume;              /* default true: start from the newest valid checkpoint of dir */
    const char *resume_path;  /* resume from this file instead (it must be valid) */
    /* Where "Resuming from ..." and the warning about a corrupt checkpoint (the previous one
     * is used) are written; NULL: nowhere. */
    FILE *log;
} sn_backup_opts;
sn_backup_opts sn_backup_defaults(void);

typedef struct sn_fit_opts {
    int epochs;                 /* default 1 */
    int initial_epoch;          /* default 0 */
    int64_t steps_per_epoch;    /* 0 = one pass over the dataset */
    sn_dataset *validation;     /* optional, batched; evaluated after each epoch */
    int64_t validation_steps;   /* 0 = one pass */
    int n_callbacks;
    sn_callback **callbacks;
    const sn_backup_opts *backup; /* NULL: no checkpoints */
} sn_fit_opts;
sn_fit_opts sn_fit_defaults(void);

/* Trains; *history (optional) receives per-epoch logs, freed with sn_history_free (also when
 * training stops with an error: the epochs completed). Every epoch starts from the dataset's
 * beginning (sn_dataset_reset). The loop runs steps_per_execution steps per plan call; batch
 * callbacks run between executions.
 * The dataset yields the inputs, then one label per output, then optionally Keras's
 * sample_weight: f32 [B] (or [B, 1]), one weight per example. Each example's loss is then
 * multiplied by its weight before the batch mean, which still divides by B (Keras 3's
 * "sum_over_batch_size", not by the sum of the weights); every output's loss takes the same
 * weights; metrics stay unweighted (Keras's `metrics`, not `weighted_metrics`). The same holds
 * for sn_model_evaluate and fit's validation data. */
sn_status sn_model_fit(sn_model *m, sn_dataset *train, const sn_fit_opts *o, sn_history **history);
/* Mean loss and metrics over `steps` batches (0 = the whole dataset). values[0] is the loss,
 * then each metric in compile order; n_values receives how many were written. */
sn_status sn_model_evaluate(sn_model *m, sn_dataset *data, int64_t steps, double *values, int cap,
                            int *n_values);
/* The same, calling the callbacks' on_test_* hooks (Keras's evaluate(callbacks=)). */
sn_status sn_model_evaluate_cb(sn_model *m, sn_dataset *data, int64_t steps, int n_callbacks,
                               sn_callback *const *callbacks, double *values, int cap,
                               int *n_values);
/* Predicts one batch x [B, ...] f32 -> *out [B, classes]. When the model is compiled with a
 * from_logits loss, the output is turned into probabilities as Keras's predict on a model that
 * ends in softmax/sigmoid would give: softmax for the categorical losses, sigmoid for binary
 * cross-entropy. Otherwise (MSE, from_logits false, not compiled) the raw output. Works on a
 * built model before compile too. The caller frees *out. */
sn_status sn_model_predict(sn_model *m, const sn_tensor *x, sn_tensor **out);
/* The same for a model of any number of inputs and outputs: x[i] [B, input i...] f32 for
 * each of the model's n_x inputs (same B), out[j] for each of its n_out outputs (each turned
 * into probabilities as above by its own output's loss). The caller frees out[j]. */
sn_status sn_model_predict_n(sn_model *m, int n_x, const sn_tensor *const *x, int n_out,
                             sn_tensor **out);
/* The model's input shape and predict's output shape, without the batch dimension. */
sn_shape sn_model_input_shape(const sn_model *m);
sn_shape sn_model_output_shape(const sn_model *m);
/* For servers (src/serve): builds the prediction plan for batches of exactly `batch` rows,
 * which sn_model_predict and sn_model_predict_into then reuse. Neither is thread-safe: one
 * thread at a time per model. */
sn_status sn_model_predict_prepare(sn_model *m, int64_t batch);
/* What sn_model_predict gives, for `batch` contiguous f32 rows x [batch, input...] into
 * out [batch, output...] (the caller's buffers). Allocates nothing once the plan for `batch`
 * is prepared. */
sn_status sn_model_predict_into(sn_model *m, int64_t batch, const float *x, float *out);

int sn_history_epochs(const sn_history *h);
/* The value of `name` ("loss", "val_sparse_categorical_accuracy", ...) after epoch i; NaN when
 * absent. */
double sn_history_get(const sn_history *h, const char *name, int epoch);
void sn_history_free(sn_history *h);

/* The optimizer's learning rate now; setting it takes effect at the next execution, without
 * re-planning (the update kernels read it at every step). SN_ERR_STATE before compile. */
sn_status sn_model_set_learning_rate(sn_model *m, double lr);
double sn_model_get_learning_rate(const sn_model *m);

/* ---- weights ----------------------------------------------------------------------------- */
/* Keras 3 ".weights.h5" (saving), Keras 3 or legacy Keras 2 ".h5" (loading). */
sn_status sn_model_save_weights(sn_model *m, const char *path);
sn_status sn_model_load_weights(sn_model *m, const char *path);

/* ---- model files: Keras 3 `.keras` archives and model JSON (docs/models.md) ------------ */
/* What a model file held besides the architecture. */
typedef struct sn_model_file_info {
    bool has_compile;         /* the file had a compile_config (a compiled Keras model) */
    sn_compile_opts compile;  /* its settings when has_compile; else sn_compile_defaults()
                               * with from_logits false when the last layer ends in softmax
                               * or sigmoid (its outputs are probabilities already);
                               * mixed_bfloat16 reflects the layers' dtype policy either way */
    bool has_weights;         /* weights were read from the file (.keras); else initialised */
    char keras_version[32];   /* metadata.json's keras_version; "" when absent */
    sn_shape input_shape;     /* the model's input, without the batch */
} sn_model_file_info;
/* Reads a Keras 3 `.keras` archive (architecture, compile settings, weights) or a model JSON
 * file as model.to_json() writes it (architecture only; variables initialised from `seed`).
 * The kind is told by the contents, not the name. *out is a new built model (not compiled:
 * compile it with info->compile or your own settings); info may be NULL. Anything sinter
 * does not support (a layer class, a config value, a custom object, a newer format, a
 * Functional graph that is not a chain) is an error naming the layer, the field and the
 * value, and what is supported. */
sn_status sn_model_load(const char *path, uint64_t seed, sn_model **out, sn_model_file_info *info);
/* The same from JSON text in memory. */
sn_status sn_model_from_json(const char *json, size_t len, uint64_t seed, sn_model **out,
                             sn_model_file_info *info);
/* Writes a built model: PATH.keras (config.json with compile_config when compiled,
 * metadata.json, model.weights.h5; Keras 3's keras.models.load_model opens it) or PATH.json
 * (the architecture, as model.to_json()). Atomic: the old file stays until the new one is
 * complete. */
sn_status sn_model_save(sn_model *m, const char *path);
/* The model's config as model.to_json() gives it; *json is malloc'd, the caller frees it. */
sn_status sn_model_to_json(sn_model *m, char **json);

/* ---- presets ------------------------------------------------------------------------------ */
/* "tpu_guide_cnn", "small_cnn", "mlp": new unbuilt Sequential models. SN_ERR_NOT_FOUND names
 * the accepted presets. */
sn_status sn_model_preset(const char *name, sn_model **out);
/* Character models, whose sizes follow the vocabulary (known once the text is read):
 * "char_lstm"       Embedding(vocab, 256) -> LSTM(1024, return_sequences) -> Dense(vocab),
 *                   TensorFlow's text-generation tutorial;
 * "char_lstm_small" Embedding(vocab, 64) -> LSTM(256, return_sequences) -> Dense(vocab), the
 *                   size of ../shared/bench/char_lstm.py (one-hot -> LSTM(256) -> Linear),
 *                   which trains in minutes on 2 cores.
 * "char_transformer_small", "char_transformer": decoder-only Transformers at nanoGPT's
 *                   shakespeare_char CPU size (4 layers, 4 heads, 128 wide, context 64) and
 *                   GPU size (6, 6, 384, context 256): token + learned position embedding,
 *                   pre-LayerNorm blocks (causal attention, 4x GELU feed-forward), final
 *                   LayerNormalization, Dense(vocab).
 * Build them with input shape (seq_length,) (a Transformer's seq_length at most its context).
 * SN_ERR_NOT_FOUND names the accepted presets; SN_ERR_INVALID when vocab_size < 2. */
sn_status sn_model_preset_text(const char *name, int64_t vocab_size, sn_model **out);
/* The context (longest input) of a Transformer text preset; 0 for other names. */
int64_t sn_model_preset_text_context(const char *name);

/* ---- stateful stepping (generation) --------------------------------------------------------- */
/* Runs a built sequence model (input shape (steps,), e.g. a character model) on [batch, steps]
 * inputs call after call, carrying the final state of every LSTM/GRU layer into the next call
 * (Keras's stateful=True with reset_states): feeding a prefix once and then one character per
 * call never recomputes the prefix. The stepper borrows the model (free the stepper first) and
 * adds its own nodes to the model's graph, one plan per distinct `steps`. Models with attention
 * (the char_transformer presets) carry a cache of keys and values instead: each call computes
 * only its new positions; when the context is full the newest half is run again from
 * position 0 (positions are learned and absolute), and a call of more tokens than the context
 * keeps the last context-many. */
typedef struct sn_stepper sn_stepper;
sn_status sn_stepper_new(sn_model *m, int64_t batch, sn_stepper **out);
/* x: [batch, steps] inputs as the model takes them (f32 ids). *out: the model's raw output
 * (logits) at the last step, [batch, classes], valid until the next call; *classes its width. */
sn_status sn_stepper_run(sn_stepper *s, const float *x, int64_t steps, const float **out,
                         int64_t *classes);
/* Zeroes the carried states (Keras's reset_states). The stepper also caches, per Embedding
 * feeding an LSTM/GRU, each vocabulary row projected through the recurrent layer's input
 * kernel; the next run recomputes that cache, so call this after changing the weights. */
void sn_stepper_reset(sn_stepper *s);
void sn_stepper_free(sn_stepper *s);
/* The precision of the weights the steps read: SN_F32 (the default, the model's own) or
 * SN_BF16, for Embedding -> LSTM -> Dense(linear) models at batch 1 on CPUs with AVX512-BF16:
 * a bf16 copy of the recurrent kernel, made at the next run (again after sn_stepper_reset),
 * halves the bytes a step reads; the next-character probabilities stay within 1e-2 of f32
 * (tests/test_stepper_bf16.c, docs/kernels.md). Results do not depend on the thread count.
 * SN_ERR_UNSUPPORTED says why when the CPU or the model does not allow bf16. */
sn_status sn_stepper_set_precision(sn_stepper *s, sn_dtype dtype);
sn_dtype sn_stepper_precision(const sn_stepper *s);
/* Draws an index from softmax(logits / temperature) with the Philox counter RNG: the same
 * (seed, index) always gives the same draw. temperature must be > 0 (SN_ERR_INVALID). */
sn_status sn_sample_logits(const float *logits, int64_t n, double temperature, uint64_t seed,
                           uint64_t index, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif
