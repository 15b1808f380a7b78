/* sinter generate: text from a trained character model. The model runs statefully (sn_stepper):
 * the --start text is fed once to build the LSTM state, then one character per step, each
 * drawn from softmax(logits / temperature) with the Philox RNG keyed by --seed (the same seed
 * gives the same text on the same CPU and precision, whatever the thread count), and printed
 * as soon as it is drawn.
 *
 * --precision auto (the default) steps with a bf16 copy of the recurrent kernel where the CPU
 * has AVX512-BF16 and the model is Embedding -> LSTM -> Dense, else in f32: a step of a large
 * LSTM is bound by reading that kernel, so bf16 is nearly twice as fast, and the probabilities
 * it samples from differ from f32's by less than 1e-2 - far less than what the temperature
 * changes. --precision f32 gives the model's exact f32 arithmetic (what predict computes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "core/core.h"
#include "sinter/nn.h"
#include "sinter/device.h"

static const char *const precisions[] = {"auto", "f32", "bf16", NULL};

int sn_cmd_generate(int argc, char **argv) {
    const char *prog = "sinter generate";
    const char *model_name = "char_lstm_small", *weights = NULL, *vocab_path = NULL;
    const char *start = "ROMEO:", *precision = "auto";
    int64_t length = 1000, seed = 0, threads = 0;
    double temperature = 1.0;
    bool report = false;
    const char *device = NULL;
    sn_flag flags[] = {
        {.name = "model", .kind = SN_FLAG_ENUM, .value = &model_name,
         .choices = sn_cli_text_models, .help = "character model preset the weights belong to"},
        {.name = "weights", .kind = SN_FLAG_STRING, .value = &weights, .metavar = "PATH",
         .required = true, .help = "weights from sinter train --save"},
        {.name = "vocab", .kind = SN_FLAG_STRING, .value = &vocab_path, .metavar = "PATH",
         .default_text = "PATH.vocab.json beside --weights",
         .help = "the vocabulary saved with the weights"},
        {.name = "start", .kind = SN_FLAG_STRING, .value = &start, .metavar = "TEXT",
         .help = "text the generated characters follow (printed first)"},
        {.name = "length", .kind = SN_FLAG_INT, .value = &length, .imin = 0, .imax = 1000000000,
         .help = "characters to generate"},
        {.name = "temperature", .kind = SN_FLAG_FLOAT, .value = &temperature, .fmin = 0,
         .fmax = 1e6, .fmin_exclusive = true,
         .help = "softmax temperature: below 1 more predictable, above 1 more random"},
        {.name = "seed", .kind = SN_FLAG_INT, .value = &seed, .imin = 0, .imax = INT64_MAX,
         .help = "seed of the sampling"},
        {.name = "precision", .kind = SN_FLAG_ENUM, .value = &precision, .choices = precisions,
         .help = "weights of the steps: bf16 copy of the LSTM's recurrent kernel (AVX512-BF16, "
                 "about 2x faster) or the model's f32; auto = bf16 where the CPU and model allow"},
        {.name = "threads", .kind = SN_FLAG_INT, .value = &threads, .imin = 0, .imax = 4096,
         .help = "threads, 0 = $SN_NUM_THREADS or all cores"},
        SN_CLI_DEVICE_FLAG(&device),
        {.name = "report", .kind = SN_FLAG_BOOL, .value = &report,
         .help = "end with one key=value line on stderr: load_s (model, weights), start_s "
                 "(the --start text), chars_per_s of the sampling loop"},
    };
    sn_flag_set fs = {prog,
                      "Generates text from a character model trained with sinter train "
                      "--save,\none character per step from the model's carried state.",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;
    sn_cli_set_threads(threads);
    if ((rc = sn_cli_set_device(prog, device)) >= 0) return rc;
    double tl = sn_now();
    if (!*start) {
        fprintf(stderr, "%s: --start is empty; give at least one character to start from\n", prog);
        return 2;
    }

    sn_vocab *vocab = NULL;
    sn_model *m = NULL;
    sn_stepper *st = NULL;
    int32_t *ids = NULL;
    float *x = NULL;
    rc = 1;
    /* Built for one character: the stepper then feeds any number per call. */
    sn_cli_text_model_opts to = {.name = model_name, .weights = weights, .vocab = vocab_path,
                                 .seq_length = 1};
    if ((rc = sn_cli_text_vocab(prog, &to, &vocab)) != 0 ||
        (rc = sn_cli_open_text_model(prog, &to, vocab, &m)) != 0)
        goto done;
    rc = 1;
    int64_t n = 0;
    if (sn_vocab_encode(vocab, start, strlen(start), &ids, &n) != SN_OK) {
        fprintf(stderr, "%s: --start \"%s\": %s, the vocabulary %s %s\n", prog, start,
                sn_last_error(), vocab_path ? "in" : "beside", vocab_path ? vocab_path : weights);
        rc = 2;
        goto done;
    }
    if (sn_stepper_new(m, 1, &st) != SN_OK) goto fail;
    if (strcmp(precision, "f32") != 0 && sn_stepper_set_precision(st, SN_BF16) != SN_OK) {
        if (strcmp(precision, "bf16") == 0) {
            fprintf(stderr, "%s: --precision bf16: %s\n", prog, sn_last_error());
            rc = 2;
            goto done;
        }
        /* auto: f32 it is */
    }
    if (!(x = malloc(sizeof *x * (size_t)n))) goto fail;
    for (int64_t i = 0; i < n; i++) x[i] = (float)ids[i];
    fputs(start, stdout);
    fflush(stdout);
    const float *logits = NULL;
    int64_t classes = 0;
    double t0 = sn_now();
    if (sn_stepper_run(st, x, n, &logits, &classes) != SN_OK) goto fail;
    double t1 = sn_now();
    for (int64_t i = 0; i < length; i++) {
        int32_t id;
        if (sn_sample_logits(logits, classes, temperature, (uint64_t)seed, (uint64_t)i, &id) != SN_OK)
            goto fail;
        char buf[4];
        int len = sn_vocab_decode(vocab, id, buf);
        fwrite(buf, 1, (size_t)len, stdout);
        fflush(stdout);
        if (i + 1 == length) break; /* the last character needs no next state */
        float xi = (float)id;
        if (sn_stepper_run(st, &xi, 1, &logits, &classes) != SN_OK) goto fail;
    }
    double t2 = sn_now();
    fputc('\n', stdout);
    if (report)
        fprintf(stderr, "framework=sinter workload=generate model=%s threads=%d start_chars=%lld "
                "precision=%s load_s=%.4f start_s=%.4f chars=%lld seconds=%.4f chars_per_s=%.1f\n",
                model_name, sn_num_threads(), (long long)n,
                sn_stepper_precision(st) == SN_BF16 ? "bf16" : "f32", t0 - tl, t1 - t0, (long long)length, t2 - t1,
                t2 > t1 ? (double)length / (t2 - t1) : 0);
    rc = 0;
    goto done;
fail:
    rc = sn_cli_fail(prog);
done:
    free(x);
    free(ids);
    sn_stepper_free(st);
    sn_model_free(m);
    sn_vocab_free(vocab);
    return rc;
}
