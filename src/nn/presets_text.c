/* Character-model presets (sn_model_preset_text): their sizes follow the vocabulary, which is
 * known only once the text is read, so they take it as an argument. */
#include <string.h>

#include "nn/nn_impl.h"

sn_status sn_model_preset_text(const char *name, int64_t vocab_size, sn_model **out) {
    if (!out) return sn_errorf(SN_ERR_INVALID, "sn_model_preset_text: out is NULL");
    *out = NULL;
    static const char *accepted = "'char_lstm', 'char_lstm_small'";
    int64_t emb, units;
    if (name && strcmp(name, "char_lstm") == 0) {
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
