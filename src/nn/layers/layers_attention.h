/* Internal to src/nn/: the attention layers' extras (layers_attention.c) and the two
 * composite layers the char_transformer presets are made of (training and the generation
 * stepper are built on them). The composites are sinter-internal: they have no Keras config
 * of their own (writing one is refused, naming the class); sn_model_save writes a model of
 * them as its Keras twin of built-in layers (nn/keras/keras_twin.c). Their variables follow
 * the Keras layers they stand for. */
#ifndef SN_NN_LAYERS_ATTENTION_H
#define SN_NN_LAYERS_ATTENTION_H

#include "nn/nn_impl.h"

typedef struct sn_attn_layer_ext {
    sn_layer_norm_opts ln;  /* LayerNormalization */
    sn_mha_layer_opts mha;  /* MultiHeadAttention; the block's attention */
    int64_t vocab, seq_len, dim, ff_dim; /* the composites */
    double epsilon;                      /* the block's LayerNormalizations */
    bool mha_key, mha_mask; /* MultiHeadAttention's general call: a key, an attention_mask */
    char mha_kw[4]; /* the keywords of the call as read, in order ('k' key=, 'm' attention_mask=,
                     * 'c' use_causal_mask=); "" (made in C): key positional, then m, c */
} sn_attn_layer_ext;

/* Makes MultiHeadAttention l a layer of the general call mha(query, value[, key]
 * [, attention_mask]) (inputs in that order; key defaults to value; the mask [Tq, Tk],
 * [1, Tk] or [Tk] without batch, nonzero = visible, ANDed with use_causal_mask) instead of
 * self-attention mha(x). Query and value may differ in steps and features. Refused once
 * built in another form. */
sn_status sn_layer_mha_set_call(sn_layer *l, bool key, bool mask);
/* MultiHeadAttention l (either form) on its n inputs x with the Keras masks of each
 * (masks[i] [B, T] 0/1 or SN_NONE, as Embedding(mask_zero) makes them): the query's mask
 * over the queries, the value's (and a distinct key's) over the keys, ANDed with the causal
 * mask and the attention_mask input, as Keras 3's _compute_attention_mask does. The output's
 * mask is the query's (the caller carries it). */
sn_node sn_layer_mha_forward_masked(sn_layer *l, sn_graph *g, int n, const sn_node *x,
                                    const sn_node *masks, bool training);
bool sn_layer_is_mha(const sn_layer *l);
/* The keyword order of MultiHeadAttention l's call as a Functional config gave it (ext's
 * mha_kw; at most 3 of "kmc"), so that the writer gives back what Keras wrote. */
void sn_layer_mha_set_kw_order(sn_layer *l, const char *order);
const char *sn_layer_mha_kw_order(const sn_layer *l);
/* Which of the n inputs of a node of layer l Keras lists a-th (args, then the keywords in
 * the order read): differs from a only for a MultiHeadAttention whose config gave key= or
 * attention_mask= out of sinter's order. Keras's model.layers and "Connected to" follow it. */
int sn_layer_keras_arg(const sn_layer *l, int n, int a);
/* Whether l is a MultiHeadAttention of the general call, and its form. */
bool sn_layer_mha_call_form(const sn_layer *l, bool *key, bool *mask);

/* keras_hub's TokenAndPositionEmbedding(vocabulary_size, sequence_length, embedding_dim):
 * ids [B, T] (T <= sequence_length) -> token embedding + position embedding [B, T, dim].
 * Variables token_embeddings [vocab, dim], position_embeddings [seq_len, dim], both
 * random_uniform(-0.05, 0.05) (keras_hub's "uniform"). */
sn_layer *sn_layer_token_pos_embedding(int64_t vocab, int64_t seq_len, int64_t dim);
/* A pre-LayerNorm decoder block (GPT-2, nanoGPT): x + MHA(LN(x)), then h + W2 gelu(W1 LN(h)),
 * [B, T, d] -> [B, T, d]. Variables (16, each as the Keras layer it stands for): ln_1 gamma,
 * beta; attention query/key/value/output kernels and biases; ln_2 gamma, beta; ffn_1 kernel
 * [d, ff], bias; ffn_2 kernel [ff, d], bias. gelu: Keras's "gelu" (erf form). */
sn_layer *sn_layer_transformer_block(int num_heads, int64_t dim, int64_t ff_dim, bool causal,
                                     double epsilon);
/* Whether l's output at a position depends on the positions before it or on the position
 * itself (MultiHeadAttention and the two composites): a stepper cannot carry it as a vector
 * state. */
bool sn_layer_needs_context(const sn_layer *l);

/* ---- generation with a cache of keys and values (nn/model/stepper.c) ---------------------------- */
typedef struct sn_attn_step_io {
    sn_node pos;              /* int32 [1]: the position of the first new token */
    sn_node pos_ids;          /* int32 [s]: pos .. pos + s - 1 */
    sn_node k_cache, v_cache; /* blocks: [B, C, H, D] inputs, valid below pos */
    sn_node k_new, v_new;     /* blocks, out: the new tokens' keys and values [B, s, H, D] */
} sn_attn_step_io;
/* Layer l's inference forward for s new tokens x [B, s, ...] at positions pos.. (io); layers
 * without context run their plain forward. SN_NONE (graph error set) for a layer that cannot
 * step: a MultiHeadAttention of its own, or a non-causal block. */
sn_node sn_attn_layer_step(sn_layer *l, sn_graph *g, sn_node x, sn_attn_step_io *io);
/* A block's cache geometry: heads and head size (returns false for other layers). */
bool sn_attn_layer_cache_dims(const sn_layer *l, int64_t *heads, int64_t *head_dim);
/* TokenAndPositionEmbedding's sequence_length (the longest context), 0 for other layers. */
int64_t sn_attn_layer_context(const sn_layer *l);

#endif
