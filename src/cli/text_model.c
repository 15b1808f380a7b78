/* The character model presets (char_lstm_small, char_lstm) for every command that opens one:
 * generate, evaluate, predict, summary and export. Such a preset's Embedding and last Dense
 * are as wide as the vocabulary of the text it was trained on, so the vocabulary has to be
 * found before the model can be built: sinter train --save writes it beside the weights
 * (W.vocab.json), and the text itself (--data TEXT) gives it again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/flags.h"

const char *const sn_cli_text_models[] = {"char_lstm_small", "char_lstm",
                                          "char_transformer_small", "char_transformer", NULL};

bool sn_cli_is_text_model(const char *name) {
    for (int i = 0; sn_cli_text_models[i]; i++)
        if (!strcmp(name, sn_cli_text_models[i])) return true;
    return false;
}

int sn_cli_read_file(const char *prog, const char *what, const char *path, char **text,
                     size_t *len) {
    *text = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    while (f) {
        if (n == cap) {
            char *nb = realloc(buf, cap = cap ? 2 * cap : 1 << 16);
            if (!nb) {
                fprintf(stderr, "%s: %s: out of memory reading '%s'\n", prog, what, path);
                free(buf);
                fclose(f);
                return 1;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (!f || ferror(f)) {
        fprintf(stderr, "%s: %s: cannot read '%s': %s\n", prog, what, path, strerror(errno));
        free(buf);
        if (f) fclose(f);
        return 1;
    }
    fclose(f);
    *text = buf;
    *len = n;
    return 0;
}

int sn_cli_text_vocab(const char *prog, const sn_cli_text_model_opts *o, sn_vocab **out) {
    *out = NULL;
    const char *vocab_path = o->vocab, *text = o->text;
    char *beside = NULL;
    if (!vocab_path && o->weights) {
        if (!(beside = sn_vocab_path_for(o->weights))) return sn_cli_fail(prog);
        if (access(beside, R_OK) == 0 || !text) vocab_path = beside;
    }
    int rc = 0;
    if (vocab_path) {
        if (access(vocab_path, R_OK) != 0) {
            fprintf(stderr, "%s: no vocabulary at %s: sinter train --save writes it beside the "
                    "weights (or pass --vocab PATH%s)\n", prog, vocab_path,
                    o->takes_text ? ", or --data TEXT: the text the model was trained on" : "");
            rc = 1;
        } else if (sn_vocab_load(out, vocab_path) != SN_OK) {
            rc = sn_cli_fail(prog);
        }
    } else if (text) {
        /* The characters of the text, as sinter train found them (UTF-8; a model trained
         * with --bytes has its vocabulary file). */
        char *buf = NULL;
        size_t len = 0;
        if ((rc = sn_cli_read_file(prog, "--data", text, &buf, &len)) == 0 &&
            sn_vocab_build(out, buf, len, false) != SN_OK) {
            fprintf(stderr, "%s: --data %s: %s\n", prog, text, sn_last_error());
            rc = 1;
        }
        free(buf);
    } else {
        fprintf(stderr, "%s: model preset '%s' is a character model, sized by the vocabulary of "
                "the text it was trained on: give --weights W with its W.vocab.json beside it "
                "(sinter train --data TEXT --save W writes both)%s\n", prog, o->name,
                o->takes_text ? ", or --data TEXT" : "");
        rc = 2;
    }
    free(beside);
    return rc;
}

int sn_cli_open_text_model(const char *prog, const sn_cli_text_model_opts *o,
                           const sn_vocab *vocab, sn_model **out) {
    *out = NULL;
    sn_model *m = NULL;
    sn_shape in = {.ndim = 1, .dim = {o->seq_length}};
    sn_status s = sn_model_preset_text(o->name, sn_vocab_size(vocab), &m);
    if (s == SN_OK)
        s = o->weights ? sn_model_build_for_loading(m, &in) : sn_model_build(m, &in, o->seed);
    /* A model placed on a device is compiled, so its plans (the stepper's too) go there. */
    sn_compile_opts co = o->compile ? *o->compile : sn_compile_defaults();
    sn_cli_apply_device(&co);
    if (s == SN_OK && (o->compile || co.device[0])) s = sn_model_compile(m, &co);
    if (s == SN_OK && o->weights) s = sn_model_load_weights(m, o->weights);
    if (s != SN_OK) {
        sn_model_free(m);
        return sn_cli_fail(prog);
    }
    *out = m;
    return 0;
}
