/* Character-model presets (sn_model_preset_text): their sizes follow the vocabulary, which is
 * known only once the text is read, so they take it as an argument. */
#include <string.h>

#include "nn/layers/layers_attention.h"
#include "nn/nn_impl.h"

/* Decoder-only character Transformers, nanoGPT's shakespeare_char configurations:
 * char_transformer_small its CPU size (4 layers, 4 heads, 128 wide, context 64),
 * char_transformer its GPU size (6, 6, 384, context 256). Token and learned position
 * embeddings, pre-LayerNorm blocks with a causal MultiHeadAttention and a 4x GELU
 * feed-forward, a final LayerNormalization and a Dense to the vocabulary. The blocks are
 * layers_attention.h's internal composite (the generation stepper steps it with a cache); a
 * saved .keras holds the Keras twin of built-in layers (nn/keras/keras_twin.c). */
static sn_status preset_transformer(const char *name, int64_t vocab_size, int n_layer,
                                    int n_head, int64_t width, int64_t context, sn_model **out) {
    sn_model *m = sn_sequential_new(name);
    if (!m) return SN_ERR_NOMEM;
    sn_status st = sn_model_add(m, sn_layer_token_pos_embedding(vocab_size, context, width));
    for (int i = 0; i < n_layer && st == SN_OK; i++)
        st = sn_model_add(m, sn_layer_transformer_block(n_head, width, 4 * width, true, 1e-5));
    /* nanoGPT's LayerNorm epsilon is PyTorch's 1e-5; Keras's default is 1e-3 */
    sn_layer_norm_opts lo = sn_layer_norm_defaults();
    lo.epsilon = 1e-5;
    if (st == SN_OK) st = sn_model_add(m, sn_layer_layer_norm_ex(&lo));
    if (st == SN_OK) st = sn_model_add(m, sn_layer_dense(vocab_size, SN_ACT_NONE));
    if (st != SN_OK) {
        sn_model_free(m);
        return st;
    }
    *out = m;
    return SN_OK;
}

int64_t sn_model_preset_text_context(const char *name) {
    if (name && strcmp(name, "char_transformer_small") == 0) return 64;
    if (name && strcmp(name, "char_transformer") == 0) return 256;
    return 0;
}

sn_status sn_model_preset_text(const char *name, int64_t vocab_size, sn_model **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_model_preset_text: out is NULL");
    *out = NULL;
    static const char *accepted = "'char_lstm', 'char_lstm_small', 'char_transformer', "
                                  "'char_transformer_small'";
    int64_t emb, units;
    bool transformer = name && (strcmp(name, "char_transformer") == 0 ||
                                strcmp(name, "char_transformer_small") == 0);
    if (transformer && vocab_size >= 2) {
        bool small = strcmp(name, "char_transformer_small") == 0;
        return preset_transformer(name, vocab_size, small ? 4 : 6, small ? 4 : 6,
                                  small ? 128 : 384, sn_model_preset_text_context(name), out);
    }
    if (transformer) {
        emb = units = 0;
    } else if (name && strcmp(name, "char_lstm") == 0) {
        emb = 256;
        units = 1024;
    } else if (name && strcmp(name, "char_lstm_small") == 0) {
        emb = 64;
        units = 256;
    } else {
        return sn_errorf(SN_ERR_NOT_FOUND, "unknown character model preset '%s'; accepted: %s",
                         name ? name : "(null)", accepted);
    }
    if (vocab_size < 2)
        return sn_errorf(SN_ERR_INVALID, "model preset '%s': vocabulary size %lld, expected >= 2",
                         name, (long long)vocab_size);
    sn_model *m = sn_sequential_new(name);
    if (!m) return SN_ERR_NOMEM;
    sn_rnn_layer_opts lo = sn_lstm_layer_defaults(units);
    lo.return_sequences = true;
    sn_layer *layers[3] = {sn_layer_embedding(vocab_size, emb), sn_layer_lstm_ex(&lo),
                           sn_layer_dense(vocab_size, SN_ACT_NONE)};
    sn_status st = SN_OK;
    for (int i = 0; i < 3; i++) {
        sn_status s = sn_model_add(m, layers[i]); /* owns the layer, NULL included */
        if (st == SN_OK) st = s;
    }
    if (st != SN_OK) {
        sn_model_free(m);
        return st;
    }
    *out = m;
    return SN_OK;
}
