/* sinter train for character models (--model char_lstm / char_lstm_small, --data FILE): the
 * pipeline of TensorFlow's text-generation tutorial (sequences of 100 + 1 characters, shuffle
 * 10,000, batch 64), the last 10 % of the sequences held out as validation data, Keras's
 * progress log (loss per character), and with --save the weights plus the vocabulary beside
 * them ("<weights>.vocab.json"), which `sinter generate` reads back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "sinter/device.h"

const char *const sn_cli_text_models[] = {"char_lstm_small", "char_lstm", NULL};

bool sn_cli_is_text_train(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--data") || !strncmp(a, "--data=", 7)) return true;
        if (!strncmp(a, "--model=char_", 13)) return true;
        if (!strcmp(a, "--model") && i + 1 < argc && !strncmp(argv[i + 1], "char_", 5)) return true;
    }
    return false;
}

/* --report: seconds of training per epoch (validation excluded). */
typedef struct text_timer {
    int64_t steps;
    double seconds;
} text_timer;

static sn_status text_timer_batch(void *user, const sn_logs *logs, bool *stop) {
    text_timer *t = user;
    t->seconds = logs->seconds;
    t->steps = logs->step;
    return SN_OK;
}

int sn_cmd_train_text(int argc, char **argv) {
    const char *prog = "sinter train";
    const char *model_name = "char_lstm_small", *data = NULL, *save = NULL, *optimizer = "adam";
    static const char *const optimizers[] = {"sgd", "adam", "adamw", "rmsprop", NULL};
    int64_t epochs = 3, batch = 64, seq = 100, buffer = 10000, steps_per_epoch = 0;
    int64_t validation_steps = 0, spe = 1, seed = 1, threads = 0;
    double lr = 2e-3, split = 0.1;
    bool bytes = false, quiet = false, report = false;
    sn_flag flags[] = {
        {.name = "model", .kind = SN_FLAG_ENUM, .value = &model_name,
         .choices = sn_cli_text_models, .help = "character model preset"},
        {.name = "data", .kind = SN_FLAG_STRING, .value = &data, .metavar = "FILE",
         .required = true, .help = "text file (UTF-8, or any bytes with --bytes)"},
        {.name = "bytes", .kind = SN_FLAG_BOOL, .value = &bytes,
         .help = "one id per byte instead of per UTF-8 character"},
        {.name = "epochs", .kind = SN_FLAG_INT, .value = &epochs, .imin = 1, .imax = 100000,
         .help = "passes over the training sequences"},
        {.name = "batch-size", .kind = SN_FLAG_INT, .value = &batch, .imin = 1, .imax = 65536,
         .help = "sequences per step"},
        {.name = "seq-length", .kind = SN_FLAG_INT, .value = &seq, .imin = 1, .imax = 100000,
         .help = "characters per training sequence"},
        {.name = "shuffle-buffer", .kind = SN_FLAG_INT, .value = &buffer, .imin = 0,
         .imax = 100000000, .help = "shuffle buffer in sequences, 0 = no shuffle"},
        {.name = "validation-split", .kind = SN_FLAG_FLOAT, .value = &split, .fmin = 0,
         .fmax = 0.9, .help = "fraction of the sequences (the last ones) held out for validation"},
        {.name = "steps-per-epoch", .kind = SN_FLAG_INT, .value = &steps_per_epoch, .imin = 0,
         .imax = 1000000000, .help = "training steps per epoch, 0 = one pass"},
        {.name = "validation-steps", .kind = SN_FLAG_INT, .value = &validation_steps, .imin = 0,
         .imax = 1000000000, .help = "validation batches per epoch, 0 = all"},
        {.name = "steps-per-execution", .kind = SN_FLAG_INT, .value = &spe, .imin = 1,
         .imax = 1000000, .help = "training steps run per call into the executor"},
        {.name = "optimizer", .kind = SN_FLAG_ENUM, .value = &optimizer, .choices = optimizers,
         .help = "optimizer"},
        {.name = "learning-rate", .kind = SN_FLAG_FLOAT, .value = &lr, .fmin = 0, .fmax = 10,
         .fmin_exclusive = true, .help = "learning rate (2e-3 as ../shared/bench/char_lstm.py)"},
        {.name = "seed", .kind = SN_FLAG_INT, .value = &seed, .imin = 0, .imax = INT64_MAX,
         .help = "seed of the initial weights and the shuffle order"},
        {.name = "threads", .kind = SN_FLAG_INT, .value = &threads, .imin = 0, .imax = 4096,
         .help = "threads, 0 = $SN_NUM_THREADS or all cores"},
        {.name = "save", .kind = SN_FLAG_STRING, .value = &save, .metavar = "PATH",
         .help = "write the weights to PATH (.weights.h5) and the vocabulary to "
                 "PATH.vocab.json"},
        {.name = "quiet", .kind = SN_FLAG_BOOL, .value = &quiet, .help = "no progress log"},
        {.name = "report", .kind = SN_FLAG_BOOL, .value = &report,
         .help = "end with one key=value line (ms_per_step, tokens_per_s, val_loss)"},
    };
    sn_flag_set fs = {prog,
                      "Trains a character model on a text file: sequences of --seq-length + 1 "
                      "characters,\ninput the first --seq-length, target the next character of "
                      "each; the loss is per character.",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;
    sn_cli_set_threads(threads);

    sn_vocab *vocab = NULL;
    sn_dataset *train = NULL, *val = NULL;
    sn_model *m = NULL;
    sn_history *hist = NULL;
    sn_callback *cbs[2] = {NULL, NULL};
    int ncb = 0;
    text_timer timer = {0};
    sn_callback timer_cb = {.user = &timer, .on_batch_end = text_timer_batch};
    sn_text_info info = {0};
    rc = 1;

    sn_text_opts to = sn_text_defaults();
    to.seq_length = seq;
    to.batch_size = batch;
    to.shuffle_buffer = buffer;
    to.seed = (uint64_t)seed;
    to.bytes = bytes;
    to.validation_split = split;
    if (sn_text_dataset(data, &to, &vocab, &train, split > 0 ? &val : NULL, &info) != SN_OK)
        goto fail;
    /* Models take f32 inputs; the Embedding casts the ids back (exact below 2^24). */
    if (sn_dataset_map_cast(&train, 0, SN_F32) != SN_OK) goto fail;
    if (val && sn_dataset_map_cast(&val, 0, SN_F32) != SN_OK) goto fail;
    if (info.n_train < batch) {
        fprintf(stderr, "%s: --data %s: %lld training sequences of %lld + 1 characters, fewer "
                "than one batch of %lld\n", prog, data, (long long)info.n_train, (long long)seq,
                (long long)batch);
        rc = 2;
        goto done;
    }
    if (sn_model_preset_text(model_name, sn_vocab_size(vocab), &m) != SN_OK ||
        sn_model_build(m, &(sn_shape){.ndim = 1, .dim = {seq}}, (uint64_t)seed) != SN_OK)
        goto fail;
    sn_compile_opts co = sn_compile_defaults();
    if (sn_optimizer_from_name(optimizer, &co.optimizer) != SN_OK) goto fail;
    co.optimizer.learning_rate = lr;
    co.steps_per_execution = (int)spe;
    if (sn_model_compile(m, &co) != SN_OK) goto fail;
    if (!quiet) {
        if (!(cbs[ncb++] = sn_callback_progress_bar(stdout, 1))) goto fail;
        printf("Training %s on %s: %lld characters, vocabulary %d, %lld training and %lld "
               "validation sequences of %lld, batch %lld, %s %g\n", model_name, data,
               (long long)info.n_units, sn_vocab_size(vocab), (long long)info.n_train,
               (long long)info.n_validation, (long long)seq, (long long)batch, optimizer, lr);
        fflush(stdout);
    }
    if (report) cbs[ncb++] = &timer_cb;
    sn_fit_opts fo = sn_fit_defaults();
    fo.epochs = (int)epochs;
    fo.steps_per_epoch = steps_per_epoch;
    fo.validation = val;
    fo.validation_steps = validation_steps;
    fo.n_callbacks = ncb;
    fo.callbacks = cbs;
    if (sn_model_fit(m, train, &fo, &hist) != SN_OK) goto fail;
    int last = sn_history_epochs(hist) - 1;
    double vl = sn_history_get(hist, "val_loss", last);
    if (!isnan(vl)) printf("Validation loss per character: %.4f\n", vl);
    if (report) {
        double per = timer.steps ? timer.seconds / (double)timer.steps : 0;
        printf("framework=sinter workload=%s threads=%d batch=%lld seq=%lld vocab=%d "
               "steps=%lld ms_per_step=%.4g tokens_per_s=%.6g loss=%.4f val_loss=%.4f\n",
               model_name, sn_num_threads(), (long long)batch, (long long)seq,
               sn_vocab_size(vocab), (long long)timer.steps, 1e3 * per,
               per > 0 ? (double)(batch * seq) / per : 0, sn_history_get(hist, "loss", last), vl);
    }
    if (save) {
        char *vp = sn_vocab_path_for(save);
        if (!vp) goto fail;
        sn_status s = sn_model_save_weights(m, save);
        if (s == SN_OK) s = sn_vocab_save(vocab, vp);
        if (s == SN_OK && !quiet) printf("Saved weights to %s and the vocabulary to %s\n", save, vp);
        free(vp);
        if (s != SN_OK) goto fail;
    }
    rc = 0;
    goto done;
fail:
    rc = sn_cli_fail(prog);
done:
    sn_history_free(hist);
    for (int i = 0; i < ncb; i++)
        if (cbs[i] != &timer_cb) sn_callback_free(cbs[i]);
    sn_model_free(m);
    sn_dataset_free(train);
    sn_dataset_free(val);
    sn_vocab_free(vocab);
    return rc;
}
