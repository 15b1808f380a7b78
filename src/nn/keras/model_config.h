/* Internal to nn: Keras model configs (jansson documents) <-> Sequential and Functional models.
 *
 * model_config.c reads what Keras 3 writes (config.json of a .keras archive, model.to_json())
 * through the layer constructors of sinter/nn.h; model_config_layers.c holds the per-class
 * readers and writers; model_config_write.c writes the config Keras would write;
 * model_file.c ties them to the files of src/io/. Anything the reader does not support is an
 * error naming the layer, the field and the value, and what is supported: never an
 * approximation. */
#ifndef SN_NN_MODEL_CONFIG_H
#define SN_NN_MODEL_CONFIG_H

#include <jansson.h>

#include "nn/nn_impl.h"

/* ---- reading helpers shared by the config readers (model_config_util.c) ------------------ */
/* "a string", "an integer", "null", ... for messages. */
const char *sn_cfg_type(const json_t *v);
/* The value as compact JSON, cut to fit `cap` (for messages). */
const char *sn_cfg_show(const json_t *v, char *buf, size_t cap);
/* Every key of `obj` must be in the NULL-terminated `known`; else SN_ERR_UNSUPPORTED naming
 * the key and, via `what` ("Dense"), the known fields. */
sn_status sn_cfg_known_keys(const json_t *obj, const char *what, const char *const *known);
/* Field readers: `required` false keeps *out when the key is absent (or null, where said).
 * Errors name the field, its value and what was expected. */
sn_status sn_cfg_int(const json_t *obj, const char *key, bool required, int64_t min,
                     int64_t max, int64_t *out);
sn_status sn_cfg_num(const json_t *obj, const char *key, bool required, double min,
                     double max, double *out);
sn_status sn_cfg_bool(const json_t *obj, const char *key, bool required, bool *out);
/* A string field (absent or null: *out untouched); the pointer lives as long as obj. */
sn_status sn_cfg_str(const json_t *obj, const char *key, bool required, const char **out);
/* The field, when present, must be null (or the listed JSON-equal value, when `allowed` is
 * non-NULL): what sinter does not implement (constraints, quantization, masks). */
/* The normalisation layers' 'axis' (absent, -1 or [-1]) names the last axis; otherwise
 * SN_ERR_UNSUPPORTED showing the value and `supported` (e.g. "axis -1"). */
sn_status sn_cfg_axis_is_last(const json_t *obj, const char *supported);
sn_status sn_cfg_must(const json_t *obj, const char *key, const json_t *allowed,
                      const char *supported);
/* Each of the NULL-ended keys, when present, must be null: constraints, activity
 * regularizers, quantization and LoRA, which sinter does not implement. */
sn_status sn_cfg_nulls(const json_t *obj, const char *const *keys);
/* 'data_format' absent or "channels_last"; anything else refused showing the value. */
sn_status sn_cfg_channels_last(const json_t *obj);
/* 'padding' "valid" (also when absent) or "same"; "causal" and anything else refused. */
sn_status sn_cfg_padding(const json_t *obj, sn_padding *out);
/* An int or a list of `n` ints (kernel_size, strides, pool_size), each >= min. */
sn_status sn_cfg_ints(const json_t *obj, const char *key, bool required, int n, int64_t min,
                      int64_t *out);
/* ZeroPadding2D's padding, Cropping2D's cropping: an int, a pair (symmetric per axis) or
 * [[top, bottom], [left, right]] of ints >= 0, into {top, bottom, left, right}. */
sn_status sn_cfg_sides_2d(const json_t *obj, const char *key, int64_t out[4]);
/* activation (a Keras name), initializer (null: SN_INIT_DEFAULT), regularizer (null: none). */
sn_status sn_cfg_activation(const json_t *obj, const char *key, sn_activation *out);
sn_status sn_cfg_initializer(const json_t *obj, const char *key, sn_initializer *out);
sn_status sn_cfg_regularizer(const json_t *obj, const char *key, sn_regularizer *out);
/* A serialised Keras object {"module", "class_name", "config", "registered_name"}: checks
 * that it is Keras's own (module "keras" or "keras.<expected_module>...", no custom
 * registered_name); *cls and *cfg point into obj. */
sn_status sn_cfg_object(const json_t *obj, const char *what, const char *expected_module,
                        const char **cls, const json_t **cfg);

/* ---- per-class readers and writers (model_config_layers.c) -------------------------------- */
/* What the layers of one model have in common and the reader checks across them. */
typedef struct sn_cfg_state {
    bool mixed_bfloat16; /* the dtype policy of the layers */
    bool policy_seen;
} sn_cfg_state;

/* The dtype policy field of a layer or Sequential config ("dtype"): float32 or
 * mixed_bfloat16, the same for every layer. */
sn_status sn_cfg_policy(const json_t *c, sn_cfg_state *s);
/* Reads the `config` object of a layer of class `cls` into a new layer (its name set).
 * SN_ERR_UNSUPPORTED for a class without a reader, naming the supported ones. */
sn_status sn_cfg_read_layer(const char *cls, const json_t *cfg, sn_cfg_state *st,
                            sn_layer **out);
/* The config object of layer l (built), as Keras writes it. NULL with the error set. */
json_t *sn_cfg_write_layer(const sn_layer *l, bool mixed_bfloat16);
/* The serialised DTypePolicy Keras writes in every layer. */
json_t *sn_cfg_dtype_policy(bool mixed_bfloat16);
/* A serialised Keras object {"module", "class_name", "config", "registered_name": null};
 * steals cfg. */
json_t *sn_cfg_keras_object(const char *module, const char *cls, json_t *cfg);

/* An initializer / regularizer as Keras serialises it (null: no regularizer). */
json_t *sn_cfg_init_json(const sn_initializer *in, sn_initializer_type dflt);
json_t *sn_cfg_reg_json(const sn_regularizer *r);
/* The kernel_initializer, bias_initializer, kernel_regularizer and bias_regularizer fields of
 * Dense, Conv1D, Conv2D, Conv2DTranspose and MultiHeadAttention: read in that order, and
 * written in that order with Keras's defaults (glorot_uniform kernel, zeros bias). */
sn_status sn_cfg_kernel_bias(const json_t *obj, sn_initializer *kernel_init,
                             sn_initializer *bias_init, sn_regularizer *kernel_reg,
                             sn_regularizer *bias_reg);
void sn_cfg_write_kernel_bias(json_t *obj, const sn_initializer *kernel_init,
                              const sn_initializer *bias_init, const sn_regularizer *kernel_reg,
                              const sn_regularizer *bias_reg);

/* ---- the attention layers (model_config_attention.c) ------------------------------------ */
#define SN_CFG_LAYER_NORM_KEYS "axis", "epsilon", "center", "scale", "rms_scaling", \
    "beta_initializer", "gamma_initializer", "beta_regularizer", "gamma_regularizer", \
    "beta_constraint", "gamma_constraint"
#define SN_CFG_MHA_KEYS "num_heads", "key_dim", "value_dim", "dropout", "use_bias", \
    "use_gate", "output_shape", "attention_axes", "sliding_window", "flash_attention", \
    "kernel_initializer", \
    "bias_initializer", "kernel_regularizer", "bias_regularizer", "activity_regularizer", \
    "kernel_constraint", "bias_constraint", "seed"
sn_status sn_cfg_read_layer_norm(const json_t *cfg, sn_layer **out);
void sn_cfg_write_layer_norm(const sn_layer *l, json_t *cfg);
sn_status sn_cfg_read_mha(const json_t *cfg, sn_layer **out);
void sn_cfg_write_mha(const sn_layer *l, json_t *cfg);
/* MultiHeadAttention's call in a Functional config: Keras writes args [query, value] (and key)
 * and kwargs such as use_causal_mask. sn_cfg_mha_kwarg takes one kwarg of call `call` onto the
 * layer (use_causal_mask: the same in every call, as sinter's layer holds one; attention_mask
 * null); sn_cfg_mha_causal is the layer's flag (-1: not a MultiHeadAttention). */
sn_status sn_cfg_mha_kwarg(sn_layer *l, int call, const char *key, const json_t *v);
int sn_cfg_mha_causal(const sn_layer *l);

/* ---- the convolution family (model_config_conv.c) ---------------------------------------- */
#define SN_CFG_DEPTHWISE_KEYS "depth_multiplier", "kernel_size", "strides", "padding", \
    "data_format", "dilation_rate", "activation", "use_bias", "depthwise_initializer", \
    "bias_initializer", "depthwise_regularizer", "bias_regularizer", "activity_regularizer", \
    "depthwise_constraint", "bias_constraint"
#define SN_CFG_SEPARABLE_KEYS SN_CFG_DEPTHWISE_KEYS, "filters", "pointwise_initializer", \
    "pointwise_regularizer", "pointwise_constraint"
#define SN_CFG_CONV_TRANSPOSE_KEYS "filters", "kernel_size", "strides", "padding", \
    "output_padding", "data_format", "dilation_rate", "activation", "use_bias", \
    "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer", \
    "activity_regularizer", "kernel_constraint", "bias_constraint"
#define SN_CFG_UPSAMPLING_KEYS "size", "data_format", "interpolation"
#define SN_CFG_CROPPING_KEYS "cropping", "data_format"
sn_status sn_cfg_read_depthwise(const json_t *cfg, sn_layer **out);
sn_status sn_cfg_read_separable(const json_t *cfg, sn_layer **out);
void sn_cfg_write_sepconv(const sn_layer *l, json_t *cfg);
sn_status sn_cfg_read_conv_transpose(const json_t *cfg, sn_layer **out);
void sn_cfg_write_conv_transpose(const sn_layer *l, json_t *cfg);
sn_status sn_cfg_read_upsampling(const json_t *cfg, sn_layer **out);
void sn_cfg_write_upsampling(const sn_layer *l, json_t *cfg);
sn_status sn_cfg_read_cropping(const json_t *cfg, sn_layer **out);
void sn_cfg_write_cropping(const sn_layer *l, json_t *cfg);

/* ---- Bidirectional (model_config_layers.c): its halves are LSTM/GRU configs ------------- */
#define SN_CFG_BIDIRECTIONAL_KEYS "merge_mode", "layer", "backward_layer"
sn_status sn_cfg_read_bidirectional(const json_t *cfg, sn_layer **out);
void sn_cfg_write_bidirectional(const sn_layer *l, json_t *cfg);

/* ---- 1D layers, ELU, Permute (model_config_seq.c) ---------------------------------------- */
#define SN_CFG_CONV1D_KEYS "filters", "kernel_size", "strides", "padding", "data_format", \
    "dilation_rate", "groups", "activation", "use_bias", "kernel_initializer", \
    "bias_initializer", "kernel_regularizer", "bias_regularizer", "activity_regularizer", \
    "kernel_constraint", "bias_constraint", "lora_rank", "lora_alpha"
sn_status sn_cfg_read_conv1d(const json_t *cfg, sn_layer **out);
void sn_cfg_write_conv1d(const sn_layer *l, json_t *cfg);
sn_status sn_cfg_read_max_pool1d(const json_t *cfg, sn_layer **out);
sn_status sn_cfg_read_avg_pool1d(const json_t *cfg, sn_layer **out);
void sn_cfg_write_pool1d(const sn_layer *l, json_t *cfg);
sn_status sn_cfg_read_gmp1d(const json_t *cfg, sn_layer **out);
sn_status sn_cfg_read_gap1d(const json_t *cfg, sn_layer **out);
void sn_cfg_write_gpool1d(const sn_layer *l, json_t *cfg);
sn_status sn_cfg_read_elu(const json_t *cfg, sn_layer **out);
void sn_cfg_write_elu(const sn_layer *l, json_t *cfg);
sn_status sn_cfg_read_permute(const json_t *cfg, sn_layer **out);
void sn_cfg_write_permute(const sn_layer *l, json_t *cfg);
sn_status sn_cfg_read_prelu(const json_t *cfg, sn_layer **out);
void sn_cfg_write_prelu(const sn_layer *l, json_t *cfg);

/* ---- whole models (model_config.c, model_config_write.c) -------------------------------- */
/* keras_twin.c: for a Sequential model of sinter's attention composites (the char_transformer
 * presets), the Functional model of Keras's built-in layers with the same weights, built and
 * compiled as m is: two int inputs (tokens, positions), Embeddings, Add, LayerNormalization,
 * MultiHeadAttention, Dense. *out NULL (SN_OK) for any other model. sn_model_save writes it
 * in m's place. */
sn_status sn_model_keras_twin(sn_model *m, sn_model **out);
/* [null, d1, ...] (field `field`) -> (d1, ...) without the batch; every d a positive int. */
sn_status sn_cfg_batch_shape(const json_t *v, const char *field, sn_shape *out);
/* An InputLayer's config (model_config_util.c): its shape without the batch, whether it takes integer ids (dtype
 * int32/int64) and its fixed batch size (0: null). */
sn_status sn_cfg_read_input(const json_t *c, sn_shape *shape, bool *int_ids, int64_t *batch);
/* A Functional model's config (model_config_functional.c) -> an unbuilt Functional model;
 * *batch receives an InputLayer's fixed batch size when one has it. */
sn_status sn_cfg_read_functional(const json_t *cfg, const char *name, sn_cfg_state *cs,
                                 sn_model **out, int64_t *batch);
/* A new built model from a Keras model config (Sequential or Functional), initialised from `seed`; info receives the compile settings when the
 * config has them. for_loading: no initialiser runs (sn_model_build_for_loading), for a model
 * whose weights are loaded next (a .keras archive's). */
sn_status sn_model_from_config(const json_t *root, uint64_t seed, bool for_loading,
                               sn_model **out, sn_model_file_info *info);
/* The config Keras writes for m (with compile_config when m is compiled). NULL with the
 * error set. */
json_t *sn_model_to_config(sn_model *m);

/* ---- weights glue (weights.c) ------------------------------------------------------------ */
sn_status sn_model_load_weights_image(sn_model *m, const void *image, size_t size,
                                      const char *shown);
sn_status sn_model_save_weights_image(sn_model *m, void **image, size_t *size);

#endif
