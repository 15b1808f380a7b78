/* sinter evaluate: loss and accuracy of saved weights on the test split; a character model's
 * on the held-out sequences of a text (the last 10 %, as sinter train holds them out). */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/flags.h"

/* A character model on the text's held-out split: the same sequences, ids and loss as the
 * "Validation loss" sinter train prints for that text and --seq-length. */
static int evaluate_text(const char *prog, const char *model_name, const char *weights,
                         const char *vocab_path, const sn_cli_data_opts *dopt, int64_t seq_length,
                         int64_t batch) {
    if (!sn_cli_data_is_text(dopt)) {
        fprintf(stderr, "%s: %s is a character model: give the text to evaluate it on with "
                "--data TEXT (its last 10 %% of sequences, held out as sinter train holds them "
                "out)\n", prog, model_name);
        return 2;
    }
    sn_compile_opts co = sn_compile_defaults();
    sn_cli_text_model_opts to = {.name = model_name, .weights = weights, .vocab = vocab_path,
                                 .text = dopt->data, .takes_text = true,
                                 .seq_length = seq_length, .compile = &co};
    sn_model *m = NULL;
    sn_vocab *vocab = NULL, *v2 = NULL;
    sn_dataset *train = NULL, *val = NULL;
    int rc = sn_cli_text_vocab(prog, &to, &vocab);
    if (rc == 0 && (rc = sn_cli_open_text_model(prog, &to, vocab, &m)) != 0) sn_vocab_free(vocab);
    if (rc) return rc;
    sn_text_opts o = sn_text_defaults();
    o.seq_length = seq_length;
    o.batch_size = batch;
    o.shuffle_buffer = 0;
    o.prefetch = 0;
    o.bytes = sn_vocab_is_bytes(vocab);
    o.vocab = vocab;
    sn_text_info info;
    double vals[SN_MAX_METRICS + 1];
    int nv = 0;
    rc = 1;
    if (sn_text_dataset(dopt->data, &o, &v2, &train, &val, &info) != SN_OK) {
        rc = sn_cli_fail(prog);
    } else if (info.n_validation == 0) {
        fprintf(stderr, "%s: %s holds %lld sequences of %lld + 1 characters: too few to hold any "
                "out (a smaller --seq-length gives more)\n", prog, dopt->data,
                (long long)info.n_sequences, (long long)seq_length);
    } else if (sn_dataset_map_cast(&val, 0, SN_F32) != SN_OK ||
               sn_model_evaluate(m, val, 0, vals, SN_MAX_METRICS + 1, &nv) != SN_OK) {
        rc = sn_cli_fail(prog);
    } else {
        printf("Evaluated %s (%s) on %lld held-out sequences of %lld characters of %s\n",
               model_name, weights, (long long)info.n_validation, (long long)seq_length,
               dopt->data);
        printf("Validation loss: %.4f\n", vals[0]);
        if (nv > 1) printf("Validation accuracy: %.4f\n", vals[1]);
        rc = 0;
    }
    sn_dataset_free(train);
    sn_dataset_free(val);
    sn_vocab_free(v2);
    sn_vocab_free(vocab);
    sn_model_free(m);
    return rc;
}

int sn_cmd_evaluate(int argc, char **argv) {
    const char *prog = "sinter evaluate";
    const char *model_name = "small_cnn";
    sn_cli_data_opts dopt = sn_cli_data_defaults();
    const char *weights = NULL, *misclassified = NULL, *confusion = NULL, *vocab_path = NULL;
    int64_t batch = 128, threads = 0, max_images = 36, seq_length = 100;
    const char *device = NULL;
    sn_flag flags[] = {
        SN_CLI_WEIGHTS_FLAGS(&model_name, &weights, &dopt.dataset, &dopt.data_dir),
        SN_CLI_DATA_FLAGS(&dopt),
        {.name = "batch-size", .kind = SN_FLAG_INT, .value = &batch, .imin = 1, .imax = 65536,
         .default_text = "128; 64 for text", .help = "images (or sequences) per step"},
        SN_CLI_VOCAB_FLAG(&vocab_path),
        SN_CLI_SEQ_LENGTH_FLAG(&seq_length),
        {.name = "threads", .kind = SN_FLAG_INT, .value = &threads, .imin = 0, .imax = 4096,
         .help = "threads, 0 = $SN_NUM_THREADS or all cores"},
        SN_CLI_DEVICE_FLAG(&device),
        {.name = "misclassified", .kind = SN_FLAG_STRING, .value = &misclassified,
         .metavar = "PNG", .help = "draw the first wrong test images, each labelled \"true \u2192 "
                                   "predicted\", and print how many are wrong"},
        {.name = "max-images", .kind = SN_FLAG_INT, .value = &max_images, .imin = 1, .imax = 1000,
         .help = "images in the --misclassified grid"},
        {.name = "confusion", .kind = SN_FLAG_STRING, .value = &confusion, .metavar = "PNG",
         .help = "draw the confusion matrix (true class by predicted class, with counts)"},
    };
    sn_flag_set fs = {prog, "Prints the loss and accuracy of a model's saved weights on the test split.",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    int rc = sn_flags_parse(&fs, argc, argv);
    if (rc >= 0) return rc;
    if (sn_cli_weights_missing(prog, model_name, weights)) return 2;
    sn_cli_set_threads(threads);
    if ((rc = sn_cli_set_device(prog, device)) >= 0) return rc;
    if (sn_cli_is_text_model(model_name)) {
        if (misclassified || confusion) {
            fprintf(stderr, "%s: --misclassified and --confusion draw images; %s is a character "
                    "model\n", prog, model_name);
            return 2;
        }
        /* sinter train's batch for text, so that the defaults give its number. */
        if (!sn_flags_find(&fs, "batch-size")->set) batch = 64;
        return evaluate_text(prog, model_name, weights, vocab_path, &dopt, seq_length, batch);
    }

    sn_tensor *x = NULL, *y = NULL;
    sn_dataset *test = NULL;
    sn_model *m = NULL;
    rc = 1;
    if ((rc = sn_cli_load_data(prog, &dopt, "test", true, &x, &y)) != 0) goto done;
    rc = 1;
    const int64_t n = sn_tensor_shape(x)->dim[0];
    if (batch > n) batch = n;
    if (sn_cli_load_model(model_name, x, weights, &m) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    /* Every image counts here, so the last batch keeps its remainder. */
    if (sn_cli_pipeline(x, y, -1, batch, false, 0, false, &test) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    double vals[SN_MAX_METRICS + 1];
    int nv = 0;
    if (sn_model_evaluate(m, test, 0, vals, SN_MAX_METRICS + 1, &nv) != SN_OK) {
        rc = sn_cli_fail(prog);
        goto done;
    }
    printf("Evaluated %s (%s) on %lld test images\n", model_name, weights, (long long)n);
    printf("Test loss: %.4f\n", vals[0]);
    if (nv > 1) printf("Test accuracy: %.4f\n", vals[1]);
    if (misclassified || confusion) {
        sn_cli_eval_plot_opts po = {.misclassified = misclassified, .max_images = max_images,
                                    .confusion = confusion};
        rc = sn_cli_eval_plots(prog, m, test, x, y, sn_cli_is_fashion_mnist(&dopt), &po);
        goto done;
    }
    rc = 0;
done:
    sn_model_free(m);
    sn_dataset_free(test);
    sn_tensor_free(x);
    sn_tensor_free(y);
    return rc;
}
