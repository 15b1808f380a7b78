/* Internal to src/nn/: the attention layers' extras (layers_attention.c) and the two
 * composite layers the char_transformer presets are made of until Functional models can wire
 * residual branches from Keras's own layers. The composites are sinter-internal: they have no
 * Keras config (writing one is refused, naming the class); their variables follow the Keras
 * layers they stand for. */
#ifndef SN_NN_LAYERS_ATTENTION_H
#define SN_NN_LAYERS_ATTENTION_H

#include "nn/nn_impl.h"

typedef struct sn_attn_layer_ext {
    sn_layer_norm_opts ln;  /* LayerNormalization */
    sn_mha_layer_opts mha;  /* MultiHeadAttention; the block's attention */
    int64_t vocab, seq_len, dim, ff_dim; /* the composites */
    double epsilon;                      /* the block's LayerNormalizations */
} sn_attn_layer_ext;

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

#endif
