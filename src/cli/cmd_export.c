/* sinter export: a model (preset or Keras file) with its weights, written as a Keras 3
 * `.keras` archive or as model JSON, e.g. to take weights trained with
 * `sinter train --save w.weights.h5` to Keras. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"

int sn_cmd_export(int argc, char **argv) {
    const char *prog = "sinter export";
    const char *model_name = "small_cnn", *weights = NULL, *to = NULL, *vocab_path = NULL;
    const char *text = NULL;
    int64_t rows = 28, cols = 28, seed = 0, seq_length = 100;
    sn_flag flags[] = {
        {.name = "model", .kind = SN_FLAG_STRING, .value = &model_name, .metavar = "NAME|PATH",
         .help = SN_CLI_MODEL_HELP},
        {.name = "weights", .kind = SN_FLAG_STRING, .value = &weights, .metavar = "PATH",
         .help = "weights to put in the model (.weights.h5 or Keras .h5); default: the .keras "
                 "file's own, or fresh ones from --seed"},
        {.name = "to", .kind = SN_FLAG_STRING, .value = &to, .metavar = "PATH", .required = true,
         .help = "output: PATH.keras (architecture, compile settings, weights) or PATH.json "
                 "(architecture)"},
        {.name = "rows", .kind = SN_FLAG_INT, .value = &rows, .imin = 1, .imax = 4096,
         .help = "image height a preset is built for"},
        {.name = "cols", .kind = SN_FLAG_INT, .value = &cols, .imin = 1, .imax = 4096,
         .help = "image width a preset is built for"},
        {.name = "seed", .kind = SN_FLAG_INT, .value = &seed, .imin = 0, .imax = INT64_MAX,
         .help = "seed of the initial weights when neither --weights nor the file has any"},
        SN_CLI_VOCAB_FLAG(&vocab_path),
        {.name = "data", .kind = SN_FLAG_STRING, .value = &text, .metavar = "TEXT",
         .help = "character models: the text whose characters size the model"},
        SN_CLI_SEQ_LENGTH_FLAG(&seq_length),
    };
    sn_flag_set fs = {prog,
                      "Writes a model and its weights as a Keras 3 .keras archive (which "
                      "keras.models.load_model opens)\nor as model JSON (model.to_json()). A "
                      "preset is exported compiled with sinter train's defaults.",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;

    sn_model *m = NULL;
    sn_model_file_info info;
    /* As sinter train: a char_transformer's sequences default to its context. */
    if (!sn_flags_find(&fs, "seq-length")->set && sn_model_preset_text_context(model_name))
        seq_length = sn_model_preset_text_context(model_name);
    if (sn_cli_is_text_model(model_name)) {
        /* Weights are loaded below, once, as for every model. */
        sn_cli_text_model_opts o = {.name = model_name, .vocab = vocab_path, .text = text,
                                    .takes_text = true, .seq_length = seq_length,
                                    .seed = (uint64_t)seed};
        sn_vocab *vocab = NULL;
        o.weights = weights; /* where the vocabulary is */
        rc = sn_cli_text_vocab(prog, &o, &vocab);
        o.weights = NULL;
        if (rc == 0) rc = sn_cli_open_text_model(prog, &o, vocab, &m);
        sn_vocab_free(vocab);
        if (rc) return rc;
        info = (sn_model_file_info){.has_compile = true, .compile = sn_compile_defaults()};
    } else if (vocab_path || text) {
        fprintf(stderr, "%s: --vocab and --data size a character model; %s is not one\n", prog,
                model_name);
        return 2;
    } else if (sn_cli_model_is_preset(model_name)) {
        sn_shape in = {.ndim = 3, .dim = {rows, cols, 1}};
        info = (sn_model_file_info){.has_compile = true, .compile = sn_compile_defaults()};
        if (sn_model_preset(model_name, &m) != SN_OK || sn_model_build(m, &in, (uint64_t)seed) != SN_OK) {
            sn_model_free(m);
            return sn_cli_fail(prog);
        }
    } else if (sn_cli_open_model(model_name, NULL, (uint64_t)seed, &m, &info) != SN_OK) {
        return sn_cli_fail(prog);
    }
    /* Compiled only when there are settings to carry: Keras then recompiles on load. */
    if ((info.has_compile && sn_model_compile(m, &info.compile) != SN_OK) ||
        (weights && sn_model_load_weights(m, weights) != SN_OK) || sn_model_save(m, to) != SN_OK) {
        sn_model_free(m);
        return sn_cli_fail(prog);
    }
    printf("Exported %s%s%s to %s\n", model_name, weights ? " with weights " : "",
           weights ? weights : "", to);
    sn_model_free(m);
    return 0;
}
