/* sinter summary: Keras's model.summary() for a preset, built for 28x28 one-channel images
 * (a character model for sequences of --seq-length, sized by its vocabulary). */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/flags.h"

int sn_cmd_summary(int argc, char **argv) {
    const char *prog = "sinter summary";
    const char *model_name = "small_cnn", *weights = NULL, *vocab_path = NULL, *text = NULL;
    int64_t rows = 28, cols = 28, seq_length = 100;
    sn_flag flags[] = {
        {.name = "model", .kind = SN_FLAG_STRING, .value = &model_name, .metavar = "NAME|PATH",
         .help = SN_CLI_MODEL_HELP},
        {.name = "rows", .kind = SN_FLAG_INT, .value = &rows, .imin = 1, .imax = 4096,
         .help = "image height a preset is built for (a model file has its own input)"},
        {.name = "cols", .kind = SN_FLAG_INT, .value = &cols, .imin = 1, .imax = 4096,
         .help = "image width the model is built for"},
        {.name = "weights", .kind = SN_FLAG_STRING, .value = &weights, .metavar = "PATH",
         .help = "character models: weights from sinter train --save, whose vocabulary "
                 "(PATH.vocab.json) sizes the model"},
        SN_CLI_VOCAB_FLAG(&vocab_path),
        {.name = "data", .kind = SN_FLAG_STRING, .value = &text, .metavar = "TEXT",
         .help = "character models: the text whose characters size the model"},
        SN_CLI_SEQ_LENGTH_FLAG(&seq_length),
    };
    sn_flag_set fs = {prog,
                      "Prints the layers of a model preset with their output shapes and parameter "
                      "counts, as Keras's\nmodel.summary(), for one-channel images (Fashion-MNIST: 28x28).",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;

    sn_model *m = NULL;
    sn_shape in = {.ndim = 3, .dim = {rows, cols, 1}};
    if (sn_cli_is_text_model(model_name)) {
        sn_cli_text_model_opts to = {.name = model_name, .weights = weights, .vocab = vocab_path,
                                     .text = text, .takes_text = true, .seq_length = seq_length};
        sn_vocab *vocab = NULL;
        rc = sn_cli_text_vocab(prog, &to, &vocab);
        if (rc == 0) rc = sn_cli_open_text_model(prog, &to, vocab, &m);
        sn_vocab_free(vocab);
        if (rc) return rc;
    } else if (weights || vocab_path || text) {
        fprintf(stderr, "%s: --weights, --vocab and --data size a character model; %s is built "
                "for --rows x --cols images\n", prog, model_name);
        return 2;
    } else if (sn_cli_model_is_preset(model_name)) {
        if (sn_model_preset(model_name, &m) != SN_OK) return sn_cli_fail(prog);
        if (sn_model_build(m, &in, 0) != SN_OK) {
            sn_model_free(m);
            return sn_cli_fail(prog);
        }
    } else if (sn_cli_open_model(model_name, NULL, 0, &m, NULL) != SN_OK) {
        return sn_cli_fail(prog);
    }
    if (sn_model_summary(m, stdout) != SN_OK) {
        sn_model_free(m);
        return sn_cli_fail(prog);
    }
    sn_model_free(m);
    return 0;
}
